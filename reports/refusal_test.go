package reports

import (
	"strings"
	"testing"
)

// TestRefusalNoteNamesTheLimitThatFired: the note on slow refusals names
// the sysctl whose counter rose (per destination: icmp_ratelimit; per
// namespace: icmp_msgs_per_sec), says when neither did, and names both
// for results without counters.
func TestRefusalNoteNamesTheLimitThatFired(t *testing.T) {
	r := &Result{NodeSysctls: map[string]string{"net.ipv4.icmp_ratelimit": "1000", "net.ipv4.icmp_msgs_per_sec": "1000", "net.ipv4.icmp_msgs_burst": "50"}}
	e := ErrorKind{Count: 3, SamplesNs: []int64{300e3, 1.02e9, 1.03e9}}
	for _, tt := range []struct {
		name      string
		icmp      *ICMPCounters
		want, not []string
	}{
		{"host", &ICMPCounters{DestUnreachSent: 3, RateLimitedHost: 2}, []string{"2 of 3 refusals", "withheld 2 by the per-destination limit net.ipv4.icmp_ratelimit = 1000 ms"}, []string{"icmp_msgs_per_sec"}},
		{"global", &ICMPCounters{DestUnreachSent: 3, RateLimitedGlobal: 5}, []string{"withheld 5 by the namespace-wide limit net.ipv4.icmp_msgs_per_sec = 1000 (net.ipv4.icmp_msgs_burst = 50)"}, []string{"icmp_ratelimit ="}},
		{"neither", &ICMPCounters{DestUnreachSent: 5, LockDropped: 5, SynRetrans: 2}, []string{"withheld none", "neither icmp_ratelimit nor icmp_msgs_per_sec"}, nil},
		{"old result", nil, []string{"icmp_ratelimit = 1000 ms", "icmp_msgs_per_sec = 1000"}, nil},
	} {
		got := refusalNote(r, ModeResult{Mode: "iptables", ICMP: tt.icmp}, "random", "refused", e)
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", tt.name, got, w)
			}
		}
		for _, n := range tt.not {
			if strings.Contains(got, n) {
				t.Errorf("%s: %q names %q", tt.name, got, n)
			}
		}
	}
	if got := refusalNote(r, ModeResult{Mode: "iptables"}, "random", "refused", ErrorKind{Count: 1, SamplesNs: []int64{300e3}}); got != "" {
		t.Errorf("fast refusals got a note: %q", got)
	}
}
