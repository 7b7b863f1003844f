package sim

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
)

// ImplementationCost is the cost model of the rows an implementation
// other than builtin programs (Calibration.Implementations; builtin's
// costs are Calibration.Modes): its own sync costs per mode, measured by
// its own metrics, and the delay with which a change written to the API
// reaches it.
type ImplementationCost struct {
	// Version is the implementation's version ("v1.37.2" for kube-proxy).
	Version string `json:"version"`
	// Measured is when the newest real run behind it finished; Machine,
	// Kernel and KernelWhere where it ran (as Calibration's).
	Measured    time.Time `json:"measured"`
	Machine     string    `json:"machine"`
	Kernel      string    `json:"kernel"`
	KernelWhere string    `json:"kernelWhere"`
	// Sizes are the service counts of the single-node runs the sync costs
	// were fitted from.
	Sizes []int `json:"sizes"`
	// Sources name the real runs fitted (result file, run ID, nodes,
	// load average when given).
	Sources []string `json:"sources"`
	// WatchDelayNs is the mean delay of a node over node-0 in seeing the
	// same EndpointSlice write (reports.WatchDelayOf, relative; the sim's
	// default sim.watchDelay for these rows), in ns; DeliveryNs node-0's
	// mean delay from the write's request to its kube-proxy queuing a sync
	// (measure.WatchDelivery: the API round trip, etcd and the watch
	// fan-out), which every node has before its own; WatchNodes the nodes
	// of the run(s) they come from (0: not measured, both 0).
	WatchDelayNs float64 `json:"watchDelayNs"`
	DeliveryNs   float64 `json:"deliveryNs"`
	WatchNodes   int     `json:"watchNodes"`
	// Modes holds the sync costs by mode (the row's base mode:
	// "iptables"); their Full and Incremental are against the service
	// count (ModeCost.Against "services").
	Modes map[string]*ModeCost `json:"modes"`
	Note  string               `json:"note,omitempty"`
}

// AgainstServices is ModeCost.Against for costs fitted against the
// service count instead of the rendered objects (the real kube-proxy's:
// its rules are not rendered by proxybench).
const AgainstServices = "services"

// Implementation returns c's costs of implementation impl for mode, or
// an error naming the fix: a calibration without that implementation's
// costs (one written before them, or by calibrate without
// --implementation) or without that mode's.
func (c *Calibration) Implementation(impl, mode string) (*ModeCost, *ImplementationCost, error) {
	ic := c.Implementations[impl]
	if ic == nil {
		return nil, nil, fmt.Errorf("calibration %q has no %s costs (its rows' sync costs and watch delivery are measured apart from builtin's); fix: run proxybench calibrate --implementation %s --output FILE (root; it adds them to FILE) and pass --calibration FILE", c.Source, impl, impl)
	}
	mc := ic.Modes[mode]
	if mc == nil {
		names := make([]string, 0, len(ic.Modes))
		for n := range ic.Modes {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, nil, fmt.Errorf("calibration %q has no %s costs for mode %q (has: %v); fix: run proxybench calibrate --implementation %s --modes %s", c.Source, impl, mode, names, impl, mode)
	}
	return mc, ic, nil
}

// KubeProxySource names one real result given to FitKubeProxy: where it
// is and the load average it ran at ("" when not known).
type KubeProxySource struct {
	Path string
	Load string
}

// FitKubeProxy fits kube-proxy's costs from real results with kube-proxy
// rows (reports.ModeResult.Implementation "kube-proxy"), per base mode:
//
//   - from single-node rows (topology.nodes 1; several nodes share this
//     machine's CPUs and stretch every sync, which the sim models apart:
//     sim.sharedCores): full sync wall against the service count from
//     kube-proxy's own kubeproxy_sync_full_proxy_rules_duration_seconds
//     for its first sync (RealFirstFullSync, the figure sim validate
//     compares) and the full syncs of its churn log; partial sync wall from the churn log's
//     partial syncs ("SyncProxyRules complete" elapsed, the values behind
//     kubeproxy_sync_partial_proxy_rules_duration_seconds), both with
//     FitCurve (the fit builtin's costs use); CPU/wall as kube-proxy's
//     CPU and its rule programs' over the churn phase divided by the
//     phase's sync wall; the spread as the coefficient of variation of
//     the partial syncs;
//   - from rows on several nodes: the watch delivery (kubeProxy.
//     watchDelivery): WatchDelayNs as reports.WatchDelayOf's mean over
//     node-0, DeliveryNs as node-0's own mean, averaged over rows; and
//     the contention (FullContention, PartialContention): the first full
//     sync (RealFirstFullSync: the median over the nodes) and node-0's
//     median partial sync over the one-node curves at the same size,
//     solved for SharedStretch's contention.
//
// A partial sync's cost does not grow with the changes it covers in
// this model (PerChangedObjectNs 0): at 10 changes/s kube-proxy's partial
// syncs cover 1..20 changes and their time is the table's. It fails when
// no result has a kube-proxy row with a sync figure.
func FitKubeProxy(results []*reports.Result, sources []KubeProxySource) (*ImplementationCost, error) {
	ic := &ImplementationCost{Modes: map[string]*ModeCost{}}
	type pt struct{ x, y float64 }
	full := map[string][]pt{}
	part := map[string][]pt{}
	cv := map[string][]float64{}
	cpu := map[string][2]float64{}
	var rel, abs []float64
	nodes := 0
	type shared struct {
		nodes, cores  int
		x             float64
		full, partial float64 // first full sync (median over nodes: RealFirstFullSync), node-0's median partial sync (ns)
	}
	multi := map[string][]shared{}
	for i, r := range results {
		if r == nil {
			continue
		}
		n := 1
		if r.Scenario != nil {
			n = r.Scenario.Topology.NodeCount()
		}
		src := fmt.Sprintf("run %s", r.RunID)
		if i < len(sources) {
			src = fmt.Sprintf("%s (run %s", sources[i].Path, r.RunID)
			if sources[i].Load != "" {
				src += ", load average " + sources[i].Load
			}
			src += ")"
		}
		used := false
		for _, m := range r.Modes {
			if m.Implementation != scenarios.ImplKubeProxy || m.BaseMode == "" || m.Failed != "" {
				continue
			}
			if m.KubeProxy != nil && ic.Version == "" {
				ic.Version = m.KubeProxy.Version
			}
			if n > 1 {
				if m.KubeProxy == nil {
					continue
				}
				sh := shared{nodes: n, cores: r.Machine.CPUs, x: float64(m.Services)}
				sh.full, _ = RealFirstFullSync(m)
				var walls []float64
				for _, c := range m.Churn {
					for _, s := range c.Syncs {
						if s.Kind != "full" && s.Wall > 0 {
							walls = append(walls, float64(s.Wall))
						}
					}
				}
				if len(walls) > 0 {
					sort.Float64s(walls)
					sh.partial = stat.Quantile(0.5, stat.LinInterp, walls, nil)
				}
				if sh.cores > 0 && (sh.full > 0 || sh.partial > 0) {
					multi[m.BaseMode] = append(multi[m.BaseMode], sh)
					used = true
				}
				if d, _, ok := reports.WatchDelayOf(m.KubeProxy.WatchDelivery); ok {
					rel = append(rel, float64(d))
					for _, w := range m.KubeProxy.WatchDelivery {
						if w.Node != "node-0" {
							continue
						}
						var own []float64
						for _, v := range w.DelayNs {
							if v >= 0 {
								own = append(own, float64(v))
							}
						}
						if len(own) > 0 {
							abs = append(abs, stat.Mean(own, nil))
						}
					}
					nodes = max(nodes, n)
					used = true
				}
				continue
			}
			x := float64(m.Services)
			mode := m.BaseMode
			if own, _ := RealFirstFullSync(m); own > 0 {
				full[mode] = append(full[mode], pt{x, own})
				used = true
			}
			var walls []float64
			var wallSum, cpuSum float64
			for _, c := range m.Churn {
				for _, s := range c.Syncs {
					if s.Wall <= 0 {
						continue
					}
					if s.Kind == "full" {
						full[mode] = append(full[mode], pt{x, float64(s.Wall)})
					} else {
						part[mode] = append(part[mode], pt{x, float64(s.Wall)})
						walls = append(walls, float64(s.Wall))
					}
					wallSum += float64(s.Wall)
					used = true
				}
				if c.KubeProxy != nil {
					cpuSum += float64(c.KubeProxy.CPUNs + c.KubeProxy.ChildCPUNs)
				}
			}
			if len(walls) > 1 {
				mean, sd := stat.MeanStdDev(walls, nil)
				cv[mode] = append(cv[mode], sd/mean)
			}
			if wallSum > 0 && cpuSum > 0 {
				cc := cpu[mode]
				cc[0] += cpuSum
				cc[1] += wallSum
				cpu[mode] = cc
			}
			if !slices.Contains(ic.Sizes, m.Services) {
				ic.Sizes = append(ic.Sizes, m.Services)
			}
		}
		if !used {
			continue
		}
		ic.Sources = append(ic.Sources, fmt.Sprintf("%s, %d node(s)", src, n))
		if r.Finished.After(ic.Measured) {
			ic.Measured = r.Finished
			ic.Machine = fmt.Sprintf("%s (%s, %d CPUs)", r.Machine.Hostname, r.Machine.CPUModel, r.Machine.CPUs)
			ic.Kernel, ic.KernelWhere = r.Machine.Kernel, r.Machine.KernelWhere
		}
	}
	sort.Ints(ic.Sizes)
	split := func(ps []pt) ([]float64, []float64) {
		xs, ys := make([]float64, len(ps)), make([]float64, len(ps))
		for i, p := range ps {
			xs[i], ys[i] = p.x, p.y
		}
		return xs, ys
	}
	for mode := range part {
		mc := &ModeCost{Measured: true, Against: AgainstServices, ObjectsPerChange: 1,
			Note: fmt.Sprintf("kube-proxy %s's own sync metrics against the service count, on %s (%s)", ic.Version, ic.Kernel, ic.KernelWhere)}
		mc.Full = FitCurve(split(full[mode]))
		mc.Incremental = FitCurve(split(part[mode]))
		if cc := cpu[mode]; cc[1] > 0 {
			mc.CPUPerWall = cc[0] / cc[1]
		}
		if len(cv[mode]) > 0 {
			mc.SyncCV = stat.Mean(cv[mode], nil)
		}
		// Contention: how much node-0's syncs stretched on several nodes
		// of this machine over the one-node curve at the same size,
		// solved for SharedStretch's contention.
		var fc, pc []float64
		for _, sh := range multi[mode] {
			per := float64(sh.cores) / float64(sh.nodes-1)
			if one := mc.Full.At(sh.x); sh.full > 0 && one > 0 {
				fc = append(fc, math.Max(0, (sh.full/one-1)*per))
			}
			if one := mc.Incremental.At(sh.x); sh.partial > 0 && one > 0 {
				pc = append(pc, math.Max(0, (sh.partial/one-1)*per))
			}
		}
		if len(fc) > 0 {
			mc.FullContention = stat.Mean(fc, nil)
		}
		if len(pc) > 0 {
			mc.PartialContention = stat.Mean(pc, nil)
		}
		ic.Modes[mode] = mc
	}
	for mode := range full {
		if ic.Modes[mode] == nil {
			ic.Modes[mode] = &ModeCost{Measured: true, Against: AgainstServices, Full: FitCurve(split(full[mode])),
				Note: "full syncs only: no churn in the runs, so no partial sync was measured"}
		}
	}
	if len(ic.Modes) == 0 {
		return nil, fmt.Errorf("calibrate --implementation kube-proxy: the results hold no single-node kube-proxy row with a sync figure (its first full sync or churn syncs); fix: run kube-proxy rows (implementation: [kube-proxy]) with churn on one node")
	}
	if len(rel) > 0 {
		ic.WatchDelayNs = math.Max(stat.Mean(rel, nil), 0)
		ic.WatchNodes = nodes
		if len(abs) > 0 {
			ic.DeliveryNs = stat.Mean(abs, nil)
		}
	} else {
		ic.Note = "no run on several nodes: the watch delivery was not measured (watchDelayNs and deliveryNs 0)"
	}
	return ic, nil
}
