//go:build linux

package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
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
		return nil, fmt.Errorf("the %s row has no API server (builtin is handed its services directly)", r.Mode.Name)
	}
	err = runReplaceCases(ctx, r, spec.Probes, spec.Services, len(spec.Components),
		fmt.Sprintf("API outages (%v, %v each)", spec.Components, spec.Duration.Duration),
		func(i int, pool workerPool, rc replaceCase) error {
			c, err := apiOutageCase(ctx, r, api, pool, spec.Components[i], rc)
			out = append(out, c)
			if err != nil {
				return fmt.Errorf("%s outage: %w", spec.Components[i], err)
			}
			return nil
		})
	return out, err
}

// apiOutageCase is one component's outage (apiOutagePhase).
func apiOutageCase(ctx context.Context, r *Row, api faultAPI, pool workerPool, comp string, rc replaceCase) (c reports.APIOutageCase, err error) {
	spec := r.Sc.Faults.APIOutage
	c = reports.APIOutageCase{Component: comp, WrittenNs: -1}
	if err := api.StopComponent(comp); err != nil {
		return c, err
	}
	t0 := time.Now()
	tr := startConvergence(r.Env, pool, r.Mode.BaseName(), rc.changed, rc.removed, rc.added, t0, spec.Sample.Duration, time.Second)
	wctx, cancelWrites := context.WithCancel(ctx)
	defer cancelWrites()
	w := startSliceWriter(wctx, api, rc.changed, t0)
	serr := sleepCtx(ctx, spec.Duration.Duration)
	c.DownNs = int64(time.Since(t0))
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
	c.AnswersLost, c.WriteError = w.answers()
	if done == len(rc.changed) {
		c.WrittenNs = int64(last.Sub(t0))
	}
	c.Conv = tr.finish()
	if startErr != nil {
		return c, startErr
	}
	return c, serr
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
