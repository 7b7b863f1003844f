package scenarios

import (
	"strings"
	"testing"
)

// TestModeSwitchProblems: each mistake a user makes in modeSwitch gets
// one error naming its field, and a pair with a bad mode is not also
// reported as "none would run".
func TestModeSwitchProblems(t *testing.T) {
	base := "modes: [iptables, nftables]\nservices: {count: 10}\nmodeSwitch:\n"
	for _, tc := range []struct {
		name, body, field, msg string
	}{
		{"missing to", "  pairs: [{from: iptables}]\n", "modeSwitch.pairs[0].to", "is missing"},
		{"unknown mode", "  pairs: [{from: iptables, to: ebpf}]\n", "modeSwitch.pairs[0].to", "is not a mode a node switches between"},
		{"more probed services than services", "  pairs: [{from: iptables, to: nftables}]\n  services: 20\n", "modeSwitch.services", "services.count is 10"},
		{"slow not below the timeout", "  pairs: [{from: iptables, to: nftables}]\n  timeout: 250ms\n  slow: 2s\n", "modeSwitch.slow", "is not below modeSwitch.timeout 250ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(base+tc.body), "s.yaml")
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.field+": ") || !strings.Contains(msg, tc.msg) {
				t.Errorf("error %q, want %s: %s", msg, tc.field, tc.msg)
			}
			if strings.Contains(msg, "none would run") {
				t.Errorf("a bad pair also reported as none would run: %q", msg)
			}
		})
	}
	// A short timeout alone lowers the default slow threshold below it.
	sc, err := Parse([]byte(base+"  pairs: [{from: iptables, to: nftables}]\n  timeout: 50ms\n"), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if sc.ModeSwitch.Slow.Duration >= sc.ModeSwitch.Timeout.Duration {
		t.Errorf("default slow %v not below the timeout %v", sc.ModeSwitch.Slow.Duration, sc.ModeSwitch.Timeout.Duration)
	}
}
