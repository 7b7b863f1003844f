//go:build linux

package topology

import "testing"

func TestParseNetCounters(t *testing.T) {
	out := map[string]int64{}
	text := "Icmp: InMsgs OutRateLimitHost\nIcmp: 3 7\nTcpExt: LockDroppedIcmps\nTcpExt: 20\n"
	if err := parseNetCounters(text, out); err != nil {
		t.Fatal(err)
	}
	if out["Icmp.OutRateLimitHost"] != 7 || out["TcpExt.LockDroppedIcmps"] != 20 || out["Icmp.InMsgs"] != 3 {
		t.Errorf("got %v", out)
	}
	for _, bad := range []string{"Icmp: A B\nIcmp: 1\n", "Icmp: A\nTcp: 1\n", "Icmp: A\n", "Icmp: A\nIcmp: x\n"} {
		if err := parseNetCounters(bad, map[string]int64{}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
