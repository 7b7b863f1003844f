package sim

import (
	"context"
	"testing"

	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/scenarios"
)

// TestSimAffinityPinsTheClient: under ClientIP session affinity the sim
// sends every connection of its one client address at a fixed position to
// one endpoint, as the rendered rules do (before the sim took the mode's
// rendering, it drew endpoints as without affinity); without affinity the
// same run reaches every endpoint.
func TestSimAffinityPinsTheClient(t *testing.T) {
	run := func(affinity string) map[string]map[string]int {
		y := "name: a\nservices:\n  count: 20\n" + affinity + "  endpoints:\n    count: 3\nmodes: [iptables, ipvs, nftables, userspace]\nrepetitions: 1\ntraffic:\n  connections: 300\n  warmup: 0\n  positions: [first]\n"
		sc, err := scenarios.Parse([]byte(y), "a.yaml")
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(context.Background(), sc, Options{Modes: modes.All})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]map[string]int{}
		for _, m := range res.Modes {
			out[m.Mode] = m.Lookup[0].Hits
		}
		return out
	}
	reached := func(h map[string]int) int {
		n := 0
		for _, c := range h {
			if c > 0 {
				n++
			}
		}
		return n
	}
	for mode, h := range run("  sessionAffinity: ClientIP\n") {
		if reached(h) != 1 {
			t.Errorf("%s with affinity: hits %v, want one endpoint", mode, h)
		}
	}
	for mode, h := range run("") {
		if reached(h) != 3 {
			t.Errorf("%s without affinity: hits %v, want all 3 endpoints", mode, h)
		}
	}
}
