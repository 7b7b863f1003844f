//go:build linux

package runner

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/proxymodes/ipvs"
	"github.com/proxybench/proxybench/scenarios"
)

// churnScenario has 8 probe workers: the tracker spreads its probes
// evenly over the pending changes and a removal of one of 3 endpoints
// needs 18 probes in a row that miss it (observe.ConfirmMisses), so with
// the default 2 workers a loaded guest's probe rate (about 40/s seen)
// left 38 of 95 changes at 17 misses each when the grace ended.
func churnScenario(t *testing.T, modes string) *scenarios.Scenario {
	t.Helper()
	sc, err := scenarios.Parse([]byte(`
seed: 2
repetitions: 1
modes: `+modes+`
services: {count: 200, endpoints: {count: 3}}
traffic: {connections: 100, positions: [first]}
churn: {rate: 40, duration: 2s, grace: 15s, probes: 8}
iptables: {minSyncPeriod: 200ms}
nftables: {minSyncPeriod: 200ms}
ipvs: {minSyncPeriod: 200ms}
`), "churn-test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// checkChurn asserts that under churn every change became visible in the
// data plane, with a programming latency above 0 and below the phase's
// length, and that the sync loop ran incremental syncs.
func checkChurn(t *testing.T, sc *scenarios.Scenario, modes ...string) {
	t.Helper()
	res, err := Run(context.Background(), sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	limit := sc.Churn.Duration.Duration + sc.Churn.Grace.Duration
	for _, m := range res.Modes {
		if len(m.Churn) != 1 {
			t.Errorf("%s: %d churn phases, want 1", m.Mode, len(m.Churn))
			continue
		}
		c := m.Churn[0]
		if c.Changes < 40 || c.Observed != c.Changes || c.Unobserved != 0 {
			t.Errorf("%s: %d changes, %d observed, %d unobserved: every change must become visible", m.Mode, c.Changes, c.Observed, c.Unobserved)
		}
		for _, s := range c.Samples {
			if s.LatencyNs <= 0 || time.Duration(s.LatencyNs) >= limit {
				t.Errorf("%s: %s at %v: latency %v not in (0, %v); probes after it %+v", m.Mode, s.Kind, time.Duration(s.AtNs), time.Duration(s.LatencyNs), limit, s.Probes)
			}
		}
		inc := 0
		for _, s := range c.Syncs {
			if s.Kind == "incremental" {
				inc++
			}
			if s.Err != "" {
				t.Errorf("%s: sync failed: %s", m.Mode, s.Err)
			}
		}
		if inc == 0 || len(c.Syncs) > c.Changes+2 {
			t.Errorf("%s: %d syncs, %d incremental, for %d changes", m.Mode, len(c.Syncs), inc, c.Changes)
		}
		t.Logf("%s: %d changes, programming latency p50 %v p99 %v, %d syncs", m.Mode, c.Changes,
			time.Duration(c.Latency.P50), time.Duration(c.Latency.P99), len(c.Syncs))
	}
	if len(res.Modes) != len(modes) {
		t.Errorf("%d modes ran, want %v", len(res.Modes), modes)
	}
}

// TestChurnEveryChangeVisible runs the churn phase for real on the host's
// kernel modes.
func TestChurnEveryChangeVisible(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore", "nft")
	checkChurn(t, churnScenario(t, "[iptables, nftables, userspace]"), "iptables", "nftables", "userspace")
}

// TestChurnIPVS runs the churn phase for the ipvs mode, in the
// user-mode-linux guest where the host lacks IP_VS.
func TestChurnIPVS(t *testing.T) {
	testenv.RequireKernel(t, "ipset", "iptables-legacy-restore")
	_, err := os.Stat("/proc/net/ip_vs")
	if testenv.InUML(t, err == nil, ipvs.KernelModules("")...) {
		return
	}
	checkChurn(t, churnScenario(t, "[ipvs]"), "ipvs")
}
