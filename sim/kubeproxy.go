package sim

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
)

// The sim's kube-proxy rows (implementation: [kube-proxy]): the same
// state machine and change stream as builtin's rows, with kube-proxy's
// own sync costs (Calibration.Implementations["kube-proxy"], fitted by
// FitKubeProxy against the service count) and its watch delivery: every
// node sees a change ImplementationCost.DeliveryNs after it (the API
// write and the watch), and every node but node 0 an exponential delay
// of mean sim.watchDelay more, which defaults to the measured
// WatchDelayNs for these rows. Lookups and endpoint choices are
// builtin's model of the same mode (kube-proxy programs the same kind
// of rules; the order of its iptables KUBE-SERVICES is its service map's,
// which the sim does not follow: the row's Traits say Unordered).

// kubeProxyRow names mr as the real runner names a kube-proxy row
// ("nftables (kube-proxy)", proxymodes/kubeproxy.RowLabel without a
// version) and says in Info which costs and delays it used.
func kubeProxyRow(mr *reports.ModeResult, m *model) {
	mr.Mode = m.mode + " (kube-proxy)"
	mr.Implementation, mr.BaseMode = scenarios.ImplKubeProxy, m.mode
	mr.Traits.Unordered = m.md.Traits.Walk != ""
	kp := m.kp
	mr.Info["implementation"] = scenarios.ImplKubeProxy
	mr.Info["calibration.implementation"] = fmt.Sprintf("kube-proxy %s, measured %s on %s, kernel %s (%s)",
		kp.Version, kp.Measured.UTC().Format(time.RFC3339), kp.Machine, kp.Kernel, kp.KernelWhere)
	mr.Info["calibration.sources"] = strings.Join(kp.Sources, "; ")
	mr.Info["sim.lookup"] = "builtin " + m.mode + "'s model and lookup costs (kube-proxy programs the same kind of rules; its KUBE-SERVICES order is not modelled)"
	mr.Info["sim.delivery"] = time.Duration(kp.DeliveryNs).Round(time.Microsecond).String() + " (every node, from the change to its kube-proxy queuing a sync: measured watch delivery of node-0)"
	if m.sc.Given("sim.watchDelay") || m.sc.Sim.WatchDelay.Duration > 0 {
		mr.Info["sim.watchDelay"] = m.sc.Sim.WatchDelay.Duration.String() + " (the scenario's)"
	} else {
		mr.Info["sim.watchDelay"] = fmt.Sprintf("%s (default for kube-proxy rows: the measured watch delivery over node-0, on %d nodes; set sim.watchDelay to override)",
			time.Duration(kp.WatchDelayNs).Round(time.Microsecond), kp.WatchNodes)
	}
}

// watchDelay is the mean per-node delay over node 0 the row's nodes get:
// the scenario's sim.watchDelay, or for a kube-proxy row without one the
// calibration's measured delay.
func (m *model) watchDelay() time.Duration {
	if m.kp == nil || m.sc.Given("sim.watchDelay") || m.sc.Sim.WatchDelay.Duration > 0 {
		return m.sc.Sim.WatchDelay.Duration
	}
	return time.Duration(m.kp.WatchDelayNs)
}

// delivery is every node's delay before it sees a change: a kube-proxy
// row's measured delivery (API write and watch), 0 for builtin rows
// (their sync loop is driven directly).
func (m *model) delivery() time.Duration {
	if m.kp == nil {
		return 0
	}
	return time.Duration(m.kp.DeliveryNs)
}

// kubeProxyChurn is a kube-proxy row's account of one simulated churn
// phase in the real row's shape (reports.ChurnKubeProxy): Programming is
// the simulated network programming latency pooled over every node (a
// real row's holds node-0's, its Nodes the others'; here Nodes is
// empty) in kube-proxy's buckets, Syncs, FullSyncs and PartialSyncs the
// simulated syncs of every node in sync_proxy_rules_duration_seconds'
// buckets.
func kubeProxyChurn(m *model, cr *ClusterResult) *reports.ChurnKubeProxy {
	hist := func(s reports.Summary, b []reports.Bucket) reports.KubeProxyHistogram {
		return reports.KubeProxyHistogram{Count: uint64(s.Count), SumSeconds: s.Mean * float64(s.Count) / 1e9, Buckets: b}
	}
	out := &reports.ChurnKubeProxy{Version: m.kp.Version + " (sim)", Programming: hist(cr.Latency, cr.Buckets),
		PerChange: "sim: no per-change log; programming pools every simulated node"}
	var parts []reports.KubeProxyHistogram
	if s, ok := cr.SyncWall["full"]; ok {
		h := hist(s, cr.SyncBuckets["full"])
		out.FullSyncs = &h
		parts = append(parts, h)
	}
	if s, ok := cr.SyncWall["incremental"]; ok {
		h := hist(s, cr.SyncBuckets["incremental"])
		out.PartialSyncs = &h
		parts = append(parts, h)
	}
	out.Syncs = reports.AddHistograms(parts...)
	return out
}

// compareKubeProxy pairs each kube-proxy row of real with the sim's row
// of the same base mode and size: sync.full as kube-proxy's own
// kubeproxy_sync_full_proxy_rules_duration_seconds for its first sync,
// the median over the real row's nodes (RealFirstFullSync, the figure
// calibrate fits) against the sim's full sync p50, and programming.p50 / programming.p99 of the first
// churn phase, both interpolated in kube-proxy's buckets as
// histogram_quantile does (reports.KubeProxyHistogram.Quantile): the real
// row's network_programming_duration_seconds summed over every node
// (reports.NodeProgramming), the sim's pooled over every simulated node.
// Nodes is the real run's topology.nodes.
func compareKubeProxy(real, sim *reports.Result) []ValidationRow {
	type key struct {
		n    int
		mode string
	}
	sims := map[key]reports.ModeResult{}
	for _, m := range sim.Modes {
		if m.Implementation == scenarios.ImplKubeProxy {
			sims[key{m.Services, m.BaseMode}] = m
		}
	}
	nodes := 1
	if real.Scenario != nil {
		nodes = real.Scenario.Topology.NodeCount()
	}
	var out []ValidationRow
	add := func(rm reports.ModeResult, fig string, r, s float64) {
		e := math.NaN()
		if r != 0 && !math.IsNaN(r) {
			e = (s - r) / r
		}
		out = append(out, ValidationRow{Services: rm.Services, Nodes: nodes, Mode: rm.Mode, Figure: fig, Real: r, Sim: s, Error: e})
	}
	for _, rm := range real.Modes {
		if rm.Implementation != scenarios.ImplKubeProxy {
			continue
		}
		sm, ok := sims[key{rm.Services, rm.BaseMode}]
		if !ok {
			continue
		}
		if own, _ := RealFirstFullSync(rm); own > 0 {
			add(rm, "sync.full", own, float64(sm.SyncFullSummary.P50))
		}
		if len(rm.Churn) == 0 || rm.Churn[0].KubeProxy == nil || len(sm.Churn) == 0 || sm.Churn[0].KubeProxy == nil {
			continue
		}
		var hs []reports.KubeProxyHistogram
		for _, h := range reports.NodeProgramming(rm.Churn[0].KubeProxy) {
			hs = append(hs, h)
		}
		rh, sh := reports.AddHistograms(hs...), sm.Churn[0].KubeProxy.Programming
		for _, q := range []float64{0.5, 0.99} {
			add(rm, fmt.Sprintf("programming.p%g", 100*q), 1e9*rh.Quantile(q), 1e9*sh.Quantile(q))
		}
	}
	return out
}

// RealFirstFullSync is a real kube-proxy row's first full sync as both
// calibrate --implementation kube-proxy and sim validate read it: kube-
// proxy's own kubeproxy_sync_full_proxy_rules_duration_seconds for its
// first sync, the rule programming alone (not the control plane's start,
// the API writes, the informers' first list or the data plane's answer,
// which the row's sync.full wall includes). On several nodes it is the
// median over the nodes that have it (measure.KubeProxyNode.
// FirstFullSyncNs, every node's kube-proxy starting at once; gonum's
// empirical quantile: the middle node, the lower of the two middle ones
// for an even count), from n of them; on one node, or for results recorded before the per-node figure,
// node-0's (sync.full's phase "kube-proxy.metric", n 1). ns 0, n 0: the
// row has neither.
func RealFirstFullSync(m reports.ModeResult) (ns float64, n int) {
	if m.KubeProxy != nil {
		var own []float64
		for _, nd := range m.KubeProxy.Nodes {
			if nd.FirstFullSyncNs > 0 {
				own = append(own, float64(nd.FirstFullSyncNs))
			}
		}
		if len(own) > 0 {
			sort.Float64s(own)
			return stat.Quantile(0.5, stat.Empirical, own, nil), len(own)
		}
	}
	if len(m.SyncFull) > 0 {
		if own := m.SyncFull[0].Phases["kube-proxy.metric"]; own > 0 {
			return float64(own), 1
		}
	}
	return 0, 0
}
