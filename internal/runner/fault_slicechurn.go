//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"sync"
	"time"

	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/observe"
)

// sliceRenamer is a proxier whose EndpointSlices can be deleted and
// re-created under new names (kubeproxy.Proxier).
type sliceRenamer interface {
	RenameSlice(ctx context.Context, s workload.Service, trigger time.Time) error
	RestoreSliceNames(ctx context.Context, services []workload.Service) error
}

// SliceRename is the sliceChurn phase's change kind: a service's
// EndpointSlice deleted and re-created under a new name, its endpoints
// unchanged.
const SliceRename = "slice-rename"

// sliceApplier is the sliceChurn phase's applier: each change one rename
// through the API (apiWriters writers, one service's renames on one of
// them, in order, as apiApplier's writes); kube-proxy syncs on its own.
type sliceApplier struct {
	api sliceRenamer
	q   apiQueues

	mu       sync.Mutex
	writes   int
	errs     int
	firstErr string
}

func (a *sliceApplier) begin(ctx context.Context, _ time.Time, n int, _ func() []workload.Service) error {
	a.q.start(func(j apiWrite) {
		err := a.api.RenameSlice(ctx, j.s, j.at)
		a.mu.Lock()
		defer a.mu.Unlock()
		a.writes++
		if err != nil {
			a.errs++
			if a.firstErr == "" {
				a.firstErr = fmt.Sprintf("rename of %s/%s's EndpointSlice at %s: %v", j.s.Namespace, j.s.Name, j.at.Format("15:04:05.000"), err)
			}
		}
	})
	return nil
}

func (a *sliceApplier) apply(ch workload.Change, s workload.Service, at time.Time) {
	a.q.put(apiWrite{ch: ch, s: s, at: at})
}

// end waits for the renames; a failed one is the phase's error (the
// first, with the count).
func (a *sliceApplier) end(context.Context, *reports.ChurnResult, []*observe.Observation, time.Time) error {
	a.q.close()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.errs > 0 {
		return fmt.Errorf("%d of %d EndpointSlice renames failed (first: %s)", a.errs, a.writes, a.firstErr)
	}
	return nil
}

// sliceChurnNext picks the service of each rename: any of services,
// uniformly.
func sliceChurnNext(services []workload.Service) func(rng *rand.Rand) (workload.Change, workload.Service, bool) {
	return func(rng *rand.Rand) (workload.Change, workload.Service, bool) {
		i := rng.Intn(len(services))
		s := services[i]
		return workload.Change{Kind: SliceRename, Service: i, VIP: s.ClusterIP, Port: s.Ports[0].Port}, s, true
	}
}

// sliceChurnPhaseV is the sliceChurn phase (scenario block
// faults.sliceChurn) as a Phase: the soak (soakPhase: its intervals,
// open-loop traffic, sampler, stream and verdicts) with EndpointSlice
// renames as its changes (sliceApplier), on kube-proxy rows, whose
// process is sampled (RSS, Go heap, goroutines, CPU, syncs). Its stream
// is <artifacts>/slicechurn/<row>.jsonl.
var sliceChurnPhaseV = Phase{
	PhaseRule: scenarios.PhaseRule{Name: reports.PhaseSliceChurn, Field: "faults.sliceChurn", Scope: scenarios.ScopeRow, Rules: true, TCP: true,
		Wants: func(s *scenarios.Scenario) bool { return s.Faults != nil && s.Faults.SliceChurn != nil }},
	Report: reports.SliceChurnReport,
	Run: func(ctx context.Context, r *Row) error {
		rn, ok := r.Proxier.(sliceRenamer)
		proc, hasProc := r.Proxier.(soakProcess)
		if !ok || !hasProc {
			return fmt.Errorf("slice churn: the %s row's proxier (%T) has no EndpointSlices to rename (kube-proxy rows only)", r.Mode.Name, r.Proxier)
		}
		st, err := r.Proxier.Sync(ctx, r.Services)
		if err != nil {
			return fmt.Errorf("sync before the slice churn: %w", err)
		}
		label := rowLabel(r.Mode, r.Sc)
		h := soakHeaderOf(r, label, kubeProxyCPU, kubeProxyRSS)
		h.Phase = reports.PhaseSliceChurn
		run := soakRun{sc: r.Sc, e: r.Env, services: r.Services, live: r.Live, header: h, prog: r.Progress(), faults: r.Faults,
			path: filepath.Join(r.O.ArtifactDir, "slicechurn", rowDir(label)+".jsonl"), objects: st.Objects,
			spec: r.Sc.Faults.SliceChurn, next: sliceChurnNext(r.Services), ap: &sliceApplier{api: rn}, proc: proc}
		sr, err := soakPhase(ctx, run)
		if sr != nil {
			r.Result.SliceChurn = sr
		}
		if rerr := rn.RestoreSliceNames(context.WithoutCancel(ctx), r.Services); rerr != nil {
			r.Faults.add("slice churn: %v", rerr)
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("slice churn: %w", err)
		}
		return err
	},
}
