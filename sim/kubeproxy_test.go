package sim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
)

// kpResult is a real result with one kube-proxy row of mode at n
// services on nodes nodes: a first full sync of full by kube-proxy's own
// metric, partial syncs of the given walls in its churn log, and on
// several nodes a watch delivery where node-k sees each write k·step
// after node-0's base.
func kpResult(mode string, n, nodes int, full time.Duration, partial []time.Duration, base, step time.Duration) *reports.Result {
	sc := &scenarios.Scenario{Name: "kp"}
	sc.Topology.Nodes = nodes
	sc.Services.Count = n
	m := reports.ModeResult{Mode: mode + " (kube-proxy)", Implementation: scenarios.ImplKubeProxy, BaseMode: mode, Services: n,
		SyncFull:  []measure.SyncStats{{Kind: "full", Wall: 3 * full, Phases: map[string]time.Duration{"kube-proxy.metric": full}}},
		KubeProxy: &measure.KubeProxy{Version: "v1.37.2"}}
	c := reports.ChurnResult{KubeProxy: &reports.ChurnKubeProxy{CPUNs: int64(time.Second)}}
	for i, w := range partial {
		c.Syncs = append(c.Syncs, reports.SyncRecord{AtNs: int64(i) * 2e9, SyncStats: measure.SyncStats{Kind: "incremental", Wall: w}})
	}
	m.Churn = []reports.ChurnResult{c}
	for k := 0; k < nodes && nodes > 1; k++ {
		d := measure.WatchDelivery{Node: "node-" + string(rune('0'+k))}
		for i := 0; i < 4; i++ {
			d.DelayNs = append(d.DelayNs, int64(base+time.Duration(k)*step))
		}
		m.KubeProxy.WatchDelivery = append(m.KubeProxy.WatchDelivery, d)
	}
	return &reports.Result{RunID: "r" + mode, Scenario: sc, Machine: reports.Machine{CPUs: 2}, Modes: []reports.ModeResult{m}}
}

// TestFitKubeProxy: kube-proxy's costs are keyed by implementation and
// mode, fitted against the service count from its own metric (the
// medians of each size), the watch delay is the mean over node-0 and
// node-0's own delivery, and node-0's syncs on several nodes give the
// contention SharedStretch undoes. Builtin's entries are not touched.
func TestFitKubeProxy(t *testing.T) {
	ms := time.Millisecond
	rs := []*reports.Result{
		kpResult("iptables", 1000, 1, 700*ms, []time.Duration{500 * ms, 600 * ms, 700 * ms}, 0, 0),
		kpResult("iptables", 3000, 1, 1400*ms, []time.Duration{1200 * ms, 1300 * ms, 1400 * ms}, 0, 0),
		// 3 nodes on 2 CPUs: node-0's full sync 2x, partial 1.5x the one-node ones.
		kpResult("iptables", 1000, 3, 1400*ms, []time.Duration{900 * ms}, 20*ms, 4*ms),
	}
	ic, err := FitKubeProxy(rs, []KubeProxySource{{Path: "a.json", Load: "3"}, {Path: "b.json"}, {Path: "c.json"}})
	if err != nil {
		t.Fatal(err)
	}
	mc := ic.Modes["iptables"]
	if mc == nil || mc.Against != AgainstServices || ic.Version != "v1.37.2" {
		t.Fatalf("fit: %+v", ic)
	}
	if got := mc.Full.At(1000); got != float64(700*ms) {
		t.Errorf("full at 1000 = %v, want 700ms", time.Duration(got))
	}
	// The median of each size as FitCurve takes it (gonum's LinInterp:
	// 1.25 s of 1.2, 1.3, 1.4 s).
	if got := mc.Incremental.At(3000); got != float64(1250*ms) {
		t.Errorf("partial at 3000 = %v, want 1.25s", time.Duration(got))
	}
	// Nodes 1 and 2 see each write 4 and 8 ms after node-0: mean 6 ms.
	if ic.WatchDelayNs != float64(6*ms) || ic.DeliveryNs != float64(20*ms) || ic.WatchNodes != 3 {
		t.Errorf("watch delay %v, delivery %v, nodes %d; want 6ms, 20ms, 3", time.Duration(ic.WatchDelayNs), time.Duration(ic.DeliveryNs), ic.WatchNodes)
	}
	// stretch 2 = 1 + 2·c/2 → c 1; partial 0.9 s over the one-node 0.55 s.
	if d := mc.FullContention - 1; d*d > 1e-12 {
		t.Errorf("full contention %v, want 1", mc.FullContention)
	}
	if want := 900.0/550 - 1; (mc.PartialContention-want)*(mc.PartialContention-want) > 1e-12 {
		t.Errorf("partial contention %v, want %v", mc.PartialContention, want)
	}
	if got := SharedStretch(3, 2, mc.FullContention); got != 2 {
		t.Errorf("SharedStretch(3, 2, %v) = %v, want 2", mc.FullContention, got)
	}
	if len(ic.Sources) != 3 || !strings.Contains(ic.Sources[0], "a.json (run riptables, load average 3)") {
		t.Errorf("sources %q", ic.Sources)
	}
	if _, err := FitKubeProxy([]*reports.Result{{Scenario: &scenarios.Scenario{}}}, nil); err == nil {
		t.Error("a result without kube-proxy rows was fitted")
	}
}

// TestKubeProxyCalibrationRefused: a calibration without kube-proxy
// costs refuses a kube-proxy row with an error naming the fix, and the
// default one runs it: the row is named and tagged as the real runner's,
// says which calibration and watch delay it used, and has kube-proxy's
// programming histogram pooled over the nodes.
func TestKubeProxyCalibrationRefused(t *testing.T) {
	def, err := DefaultCalibration()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scenarios.Parse([]byte(`name: kp-sim
engine: sim
sim: {nodes: 3}
modes: [nftables]
implementation: [kube-proxy]
services: {count: 200, endpoints: {count: 3}}
traffic: {connections: 50, positions: [first]}
churn: {rate: 10, duration: 10s}
`), "kp-sim.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bare := *def
	bare.Implementations = nil
	bare.Source = "old.json"
	_, err = Run(context.Background(), sc, Options{Calibration: &bare, Modes: modes.All})
	if err == nil || !strings.Contains(err.Error(), "calibrate --implementation kube-proxy") || !strings.Contains(err.Error(), "old.json") {
		t.Fatalf("want the refusal naming the fix, got %v", err)
	}
	res, err := Run(context.Background(), sc, Options{Calibration: def, Modes: modes.All})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Modes) != 1 {
		t.Fatalf("%d rows", len(res.Modes))
	}
	m := res.Modes[0]
	if m.Mode != "nftables (kube-proxy)" || m.Implementation != scenarios.ImplKubeProxy || m.BaseMode != "nftables" {
		t.Fatalf("row %q impl %q base %q", m.Mode, m.Implementation, m.BaseMode)
	}
	if !strings.Contains(m.Info["sim.watchDelay"], "measured") || m.Info["calibration.implementation"] == "" {
		t.Errorf("info: %v", m.Info)
	}
	kp := m.Churn[0].KubeProxy
	if kp == nil || int(kp.Programming.Count) != m.Churn[0].Latency.Count || kp.Programming.Count == 0 {
		t.Fatalf("churn kube-proxy account %+v, latency %+v", kp, m.Churn[0].Latency)
	}
}

// TestRealFirstFullSync: on several nodes a row's first full sync is the
// median of the nodes' own full-sync metric (nodes without it left out),
// not node-0's; on one node, or in a result without the per-node figure,
// node-0's; none without either.
func TestRealFirstFullSync(t *testing.T) {
	ms := time.Millisecond
	r := kpResult("iptables", 1000, 4, 900*ms, nil, 0, 0)
	m := r.Modes[0]
	if got, n := RealFirstFullSync(m); got != float64(900*ms) || n != 1 {
		t.Errorf("no per-node figures: %v from %d, want node-0's 900ms from 1", time.Duration(got), n)
	}
	for i, d := range []time.Duration{900 * ms, 200 * ms, 0, 400 * ms, 300 * ms} {
		m.KubeProxy.Nodes = append(m.KubeProxy.Nodes, measure.KubeProxyNode{Node: "node-" + string(rune('0'+i)), FirstSyncNs: int64(5 * d), FirstFullSyncNs: int64(d)})
	}
	// 200, 300, 400, 900 ms: the lower middle one.
	if got, n := RealFirstFullSync(m); got != float64(300*ms) || n != 4 {
		t.Errorf("per-node figures: %v from %d nodes, want 300ms (the median) from 4", time.Duration(got), n)
	}
	m.SyncFull, m.KubeProxy = nil, nil
	if got, n := RealFirstFullSync(m); got != 0 || n != 0 {
		t.Errorf("no figure at all: %v from %d", time.Duration(got), n)
	}
}

// TestCompareKubeProxyFirstFull: sim validate's sync.full for a row on
// several nodes is the nodes' median by kube-proxy's metric, the figure
// FitKubeProxy fits, not node-0's alone.
func TestCompareKubeProxyFirstFull(t *testing.T) {
	ms := time.Millisecond
	real := kpResult("nftables", 1000, 3, 2000*ms, nil, 0, 0)
	for i, d := range []time.Duration{2000 * ms, 500 * ms, 600 * ms} {
		real.Modes[0].KubeProxy.Nodes = append(real.Modes[0].KubeProxy.Nodes, measure.KubeProxyNode{Node: "node-" + string(rune('0'+i)), FirstFullSyncNs: int64(d)})
	}
	simr := &reports.Result{Modes: []reports.ModeResult{{Mode: "nftables (kube-proxy)", Implementation: scenarios.ImplKubeProxy, BaseMode: "nftables", Services: 1000,
		SyncFullSummary: reports.Summary{P50: int64(600 * ms)}}}}
	var found bool
	for _, row := range compareKubeProxy(real, simr) {
		if row.Figure != "sync.full" {
			continue
		}
		found = true
		if row.Real != float64(600*ms) || row.Nodes != 3 || row.Error != 0 {
			t.Errorf("sync.full row %+v: want real 600ms (the median), 3 nodes, error 0", row)
		}
	}
	if !found {
		t.Error("no sync.full row")
	}
}
