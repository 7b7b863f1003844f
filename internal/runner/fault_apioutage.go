//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// apiOutagePhase runs faults.apiOutage on a kube-proxy row: for each
// component in turn, it stops the component, replaces one endpoint of
// each of faults.apiOutage.services services (spread over the list) at
// that moment, writes their EndpointSlices as the EndpointSlice
// controller would (startSliceWriter: retried with its back-off until
// the API takes them), starts the component again after the outage's
// duration and follows the data plane (convTracker) until it matches
// the API or settle passes. kube-proxy keeps running throughout: its
// watches break and it relists when the API answers again. At the end
// the API holds the row's services again (p.Sync).
func apiOutagePhase(ctx context.Context, r *Row) (out []reports.APIOutageCase, err error) {
	spec := r.Sc.Faults.APIOutage
	api, ok := r.Proxier.(faultAPI)
	if !ok {
		return nil, fmt.Errorf("faults.apiOutage: the %s row has no API server (builtin is handed its services directly)", r.Mode.Name)
	}
	e, prog := r.Env, r.Progress()
	pool, err := e.probes(spec.Probes)
	if err != nil {
		return nil, fmt.Errorf("probes: %w", err)
	}
	defer pool.Close()
	cur := r.Services
	alloc := newPodAlloc(r.Sc, cur)
	idx := indexes(probeTargets(cur, spec.Services))
	prog.Start(fmt.Sprintf("%s: API outages (%v, %v each) while %d services change", r.Mode.Name, spec.Components, spec.Duration.Duration, len(idx)), len(spec.Components))
	defer prog.Done()
	defer func() {
		// Back to the row's services in the API, whatever happened.
		if _, serr := r.Proxier.Sync(context.WithoutCancel(ctx), r.Services); serr != nil {
			err = errors.Join(err, fmt.Errorf("sync back after the API outage: %w", serr))
		}
	}()
	for _, comp := range spec.Components {
		c, next, err := apiOutageCase(ctx, r, api, pool, comp, cur, idx, alloc)
		out = append(out, c)
		if err != nil {
			return out, fmt.Errorf("%s outage: %w", comp, err)
		}
		cur = next
		prog.Add(1)
	}
	return out, nil
}

// apiOutageCase is one component's outage (apiOutagePhase).
func apiOutageCase(ctx context.Context, r *Row, api faultAPI, pool workerPool, comp string, cur []workload.Service, idx []int,
	alloc *podAlloc) (c reports.APIOutageCase, next []workload.Service, err error) {
	spec := r.Sc.Faults.APIOutage
	c = reports.APIOutageCase{Component: comp, WrittenNs: -1}
	next, removed, added, err := replaceFirst(cur, idx, alloc)
	if err != nil {
		return c, cur, err
	}
	changed := make([]workload.Service, len(idx))
	for i, j := range idx {
		changed[i] = next[j]
	}
	time.Sleep(time.Second) // the rules settle after the last case's writes
	if err := api.StopComponent(comp); err != nil {
		return c, cur, err
	}
	t0 := time.Now()
	tr := startConvergence(r.Env, pool, r.Mode.BaseName(), changed, removed, added, t0, spec.Sample.Duration, time.Second)
	wctx, cancelWrites := context.WithCancel(ctx)
	defer cancelWrites()
	w := startSliceWriter(wctx, api, changed, t0)
	serr := sleepCtx(ctx, spec.Duration.Duration)
	t1 := time.Now()
	c.DownNs = int64(t1.Sub(t0))
	ready, startErr := api.StartComponent(context.WithoutCancel(ctx), comp)
	c.ReadyNs = int64(ready)
	if startErr == nil && serr == nil {
		// Convergence is bounded from the component's start: the
		// writes land on the controller's back-off, then kube-proxy's
		// informers relist and it syncs.
		serr = tr.wait(ctx, spec.Settle.Duration)
	}
	cancelWrites()
	writes, errs, done, last := w.wait()
	c.Writes, c.WriteErrors = writes, errs
	if done == len(changed) {
		c.WrittenNs = int64(last.Sub(t0))
	}
	c.Conv = tr.finish()
	if startErr != nil {
		return c, next, startErr
	}
	return c, next, serr
}

// apiOutagePhaseV is the API outage fault as a Phase.
var apiOutagePhaseV = Phase{
	PhaseRule: faultPhaseRule("apiOutage", "faults.apiOutage", func(f *scenarios.FaultsSpec) bool { return f.APIOutage != nil }),
	Report:    reports.APIOutageReport,
	Run: func(ctx context.Context, r *Row) (err error) {
		if r.Result.APIOutage, err = apiOutagePhase(ctx, r); err != nil {
			return fmt.Errorf("faults.apiOutage: %w", err)
		}
		return nil
	},
}
