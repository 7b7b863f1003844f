//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// sweepCarry carries a kube-proxy row of sweep.services from one size to
// the next: one control plane and one kube-proxy for the row, as a
// capacity plan for kube-proxy itself needs (its sync at each size over
// the rules and API objects of the size before, its memory as the
// cluster grows), instead of a control plane per size. Run runs the
// row's sizes one after the other, with nothing else on the node
// between them (builtin rows would meet kube-proxy's chains there).
type sweepCarry struct {
	// p is the row's proxier, running (nil before the first size and
	// after the row stopped).
	p proxymodes.Proxier
	// from is the size before (0 at the first size); last says this is
	// the sweep's last size (the row's cleanup runs after it).
	from int
	last bool
	// growth is the step to this size (the sync.full phase's Grow).
	growth *kubeproxy.Growth
	// cpu and childCPU are kube-proxy's at the end of the size before.
	cpu, childCPU int64
}

// sweepsKubeProxy says whether row is a kube-proxy row of a sweep over
// several sizes: it runs them on one proxier (sweepCarry).
func sweepsKubeProxy(sc *scenarios.Scenario, row proxymodes.Mode) bool {
	return len(sc.Sizes()) > 1 && row.Implementation == scenarios.ImplKubeProxy
}

// grower is a proxier that takes a sweep's next size through its API
// while it runs (kubeproxy.Proxier).
type grower interface {
	Grow(ctx context.Context, services []workload.Service) (kubeproxy.Growth, error)
	Resources(ctx context.Context) (kubeproxy.Resources, error)
}

var _ grower = (*kubeproxy.Proxier)(nil)

// growPhase is sync.full at a later size of a kube-proxy row's sweep:
// the step from the size before through the API (Grow), its sync after
// growth recorded as the row's sync.full (the data plane's wall from the
// last write; kube-proxy's own syncs in Phases) and kept for the sweep
// phase. A step kube-proxy did not finish keeps what it measured.
func growPhase(ctx context.Context, r *Row, g grower) error {
	if ferr := r.Env.flush(0); ferr != nil {
		r.Faults.add("conntrack flush of node0 before the growth to %d services failed: %v", len(r.Services), ferr)
	}
	prog := r.Progress()
	prog.Start(fmt.Sprintf("%s: sync after growth %d → %d services (API writes)", r.Mode.Name, r.sweep.from, len(r.Services)), 1)
	gr, err := g.Grow(ctx, r.Services)
	prog.Done()
	observeSync(r.Live, "full", gr.Stats, err)
	r.sweep.growth = &gr
	var sf *proxymodes.SyncFailed
	var fl *proxymodes.Failed
	if (err == nil || errors.As(err, &sf) || errors.As(err, &fl)) && gr.Stats.Wall > 0 {
		r.Result.SyncFull = []proxymodes.SyncStats{gr.Stats}
		r.Result.SyncFullSummary = reports.Summarize([]int64{int64(gr.Stats.Wall)})
	}
	return err
}

// kubeProxySweepPhaseV records a kube-proxy row's size of
// sweep.services (reports.KubeProxySweepPoint): the step to it (or the
// first sync), the rule objects, and kube-proxy's CPU over the size's
// row and its memory at its end. It runs last among the row's phases so
// the size's CPU covers them all. A row's scenario is one size of the
// sweep (Scenario.AtSize has no sweep), so the rule wants it in every
// scenario with kube-proxy rows on the real engine, and Run does nothing
// on a row that is no size of a kube-proxy sweep (r.sweep nil).
var kubeProxySweepPhaseV = Phase{
	PhaseRule: scenarios.PhaseRule{Name: "sweep.services", Field: "sweep.services", Scope: scenarios.ScopeRow, Rules: true,
		Wants: func(s *scenarios.Scenario) bool { return s.UsesKubeProxy() && s.Engine != "sim" }},
	Report: reports.KubeProxySweepReport,
	Run: func(ctx context.Context, r *Row) error {
		g, ok := r.Proxier.(grower)
		if r.sweep == nil || !ok {
			return nil
		}
		pt := &reports.KubeProxySweepPoint{Services: len(r.Services), From: r.sweep.from}
		var st proxymodes.SyncStats
		if n := len(r.Result.SyncFull); n > 0 {
			st = r.Result.SyncFull[n-1]
		}
		if gr := r.sweep.growth; gr != nil {
			pt.Created, pt.Updated, pt.Deleted, pt.Probed = gr.Created, gr.Updated, gr.Deleted, gr.Probed
			pt.KubeProxySyncs, pt.KubeProxySyncSumNs = len(gr.Syncs), int64(gr.Metric.Sum*1e9)
			pt.LastSyncNs = int64(gr.Stats.Phases["kube-proxy.lastSync"])
			st = gr.Stats
		} else {
			pt.Created, pt.KubeProxySyncs = len(r.Services), 1
			pt.KubeProxySyncSumNs = int64(st.Phases["kube-proxy.metric"])
			pt.LastSyncNs = pt.KubeProxySyncSumNs
		}
		pt.WritesNs, pt.SyncNs, pt.Objects, pt.Bytes = int64(st.Phases["setup.api"]), int64(st.Wall), st.Objects, st.Bytes
		res, err := g.Resources(ctx)
		if err != nil {
			r.Result.KubeProxySweep = pt
			return err
		}
		pt.CPUNs, pt.ChildCPUNs = int64(res.CPU)-r.sweep.cpu, int64(res.ChildCPU)-r.sweep.childCPU
		r.sweep.cpu, r.sweep.childCPU = int64(res.CPU), int64(res.ChildCPU)
		pt.RSSBytes = res.RSS
		if rec, ok := r.Proxier.(kubeProxyRecorder); ok {
			if k := rec.KubeProxyRecord(ctx); k != nil {
				pt.PeakRSSBytes = k.PeakRSSBytes
			}
		}
		r.Result.KubeProxySweep = pt
		return nil
	},
}
