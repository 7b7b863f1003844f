//go:build linux

package runner

import (
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
)

// TestKernelChurnKubeProxy runs the churn phase on a kube-proxy row for
// real (iptables mode, legacy back end, 100 services, 10 changes/s for
// 2 s): every change goes through the API and every one is seen in the
// data plane; kube-proxy's own programming histogram grew over the phase
// and its log's per-change lines were matched to the changes (its -v
// raised for the phase); its syncs, CPU and RSS are there; both figures
// are in the report section; no process of the run is left and the root
// namespace is unchanged. About 15 s on a quiet machine (a control
// plane, kube-proxy's first sync): behind RequireSlow.
func TestKernelChurnKubeProxy(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore")
	kb := testenv.RequireKube(t)
	testenv.RequireSlow(t, "starts a control plane and kube-proxy (about 15 s)")
	res := runKubeProxyScenario(t, kb, "churn-kube-proxy.yaml", `
seed: 5
repetitions: 1
modes: [iptables]
implementation: [kube-proxy]
services: {count: 100, endpoints: {count: 3}}
traffic: {connections: 20, positions: [first]}
churn: {rate: 10, duration: 2s, grace: 15s}
iptables: {minSyncPeriod: 1s, syncPeriod: 30s}
`)
	if len(res.Modes) != 1 || len(res.Modes[0].Churn) != 1 {
		t.Fatalf("rows %+v, want one kube-proxy row with one churn phase", res.Modes)
	}
	m := res.Modes[0]
	c := m.Churn[0]
	kp := c.KubeProxy
	if m.Implementation != scenarios.ImplKubeProxy || kp == nil {
		t.Fatalf("%s: no kube-proxy account of the churn phase", m.Mode)
	}
	if c.Changes < 10 || c.Observed != c.Changes {
		t.Errorf("%d changes, %d observed, %d unobserved: want every change seen in the data plane", c.Changes, c.Observed, c.Unobserved)
	}
	if kp.Programming.Count == 0 || kp.Syncs.Count == 0 || kp.Writes != c.Changes || kp.WriteErrors != 0 {
		t.Errorf("kube-proxy's programming observations %d, syncs %d, writes %d (errors %d: %s) for %d changes",
			kp.Programming.Count, kp.Syncs.Count, kp.Writes, kp.WriteErrors, kp.WriteError, c.Changes)
	}
	if kp.Matched == 0 || kp.Logged < kp.Matched || kp.Matched > c.Changes {
		t.Errorf("per change: %d of %d log lines matched (%s)", kp.Matched, kp.Logged, kp.PerChange)
	}
	if kp.CPUNs <= 0 || kp.PeakRSSBytes <= 0 || kp.MinSyncPeriodNs != int64(time.Second) || kp.PartialSyncs == nil {
		t.Errorf("CPU %d ns, RSS %d, minSyncPeriod %v, partial syncs %v", kp.CPUNs, kp.PeakRSSBytes, time.Duration(kp.MinSyncPeriodNs), kp.PartialSyncs)
	}
	if len(c.Syncs) == 0 {
		t.Error("no kube-proxy sync recorded from its log")
	}
	var lat *reports.Section
	for i, s := range res.Sections {
		if s.Phase == reports.PhaseChurn && len(s.Rows) == 1 && s.Columns[2].Name == "data plane p50" {
			lat = &res.Sections[i]
		}
	}
	if lat == nil {
		t.Fatalf("no churn latency section in %d sections", len(res.Sections))
	}
	for _, i := range []int{2, 6} { // data plane p50, kube-proxy metric p50
		if v := lat.Rows[0].Cells[i].Value; v == nil || *v <= 0 {
			t.Errorf("%s: %+v, want a figure", lat.Columns[i].Name, lat.Rows[0].Cells[i])
		}
	}
	t.Logf("%d changes: data plane p50 %v p99 %v; kube-proxy metric n %d p50 %.3f s mean %.3f s; %d matched; %d syncs",
		c.Changes, time.Duration(c.Latency.P50), time.Duration(c.Latency.P99), kp.Programming.Count,
		kp.Programming.Quantile(0.5), kp.Programming.Mean(), kp.Matched, kp.Syncs.Count)
}
