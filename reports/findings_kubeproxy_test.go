package reports

import (
	"strings"
	"testing"
)

// TestFindingsKubeProxyIPTablesPositions: kube-proxy writes KUBE-SERVICES in
// map order, so a kube-proxy iptables row's first and last services sit at
// random places in the chain; the finding must not call its lookup flat (as
// kube-proxy-10k's 25.4 / 26.7 µs did) and must point at the random position.
// A builtin row with the same figures still gets the first/last claim.
func TestFindingsKubeProxyIPTablesPositions(t *testing.T) {
	pos := func(p string, p50 int64) PositionResult {
		return PositionResult{Position: p, Latency: Summary{Count: 3000, P50: p50}}
	}
	lookup := []PositionResult{pos("first", 25400), pos("last", 26700), pos("random", 137700)}
	r := &Result{Modes: []ModeResult{
		{Mode: "iptables", Services: 10000, Lookup: lookup},
		{Mode: "iptables (kube-proxy)", Implementation: "kube-proxy", Services: 10000, Lookup: lookup},
	}}
	f := Findings(r)
	var builtin, kp string
	for _, s := range f {
		switch {
		case strings.HasPrefix(s, "iptables (kube-proxy):"):
			kp = s
		case strings.HasPrefix(s, "iptables:"):
			builtin = s
		}
	}
	if !strings.Contains(builtin, "is flat across") {
		t.Errorf("builtin finding lost its first/last claim: %q (all: %q)", builtin, f)
	}
	if kp == "" || strings.Contains(kp, "flat") || strings.Contains(kp, "rises") {
		t.Fatalf("kube-proxy iptables finding claims a first/last shape: %q (all: %q)", kp, f)
	}
	if !strings.Contains(kp, "random places") || !strings.Contains(kp, "137.7") {
		t.Errorf("kube-proxy iptables finding does not point at the random position: %q", kp)
	}
}
