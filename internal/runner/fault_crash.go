//go:build linux

package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// crashPhase runs faults.crash: faults.crash.crashes times, the proxy is
// killed (kube-proxy: SIGKILL, Kill; builtin: its proxier is dropped
// where it stands, no cleanup, as a process that died), one endpoint of
// each of faults.crash.services services is replaced right after (the
// EndpointSlice controller writes it at once: the API is up), and the
// proxy starts again after the crash's back-off (CrashSpec.Backoffs:
// the kubelet's CrashLoopBackOff); the data plane is followed
// (convTracker) until the probes reach every new endpoint or settle
// passes. At the end the row's proxier programs the row's services
// again.
func crashPhase(ctx context.Context, r *Row) (out []reports.CrashCase, err error) {
	spec := r.Sc.Faults.Crash
	backoffs := spec.Backoffs()
	err = runReplaceCases(ctx, r, spec.Probes, spec.Services, len(backoffs), fmt.Sprintf("%d crashes (back-off %v)", len(backoffs), backoffs),
		func(i int, pool workerPool, rc replaceCase) error {
			c, err := crashCase(ctx, r, pool, i+1, backoffs[i], rc)
			out = append(out, c)
			if err != nil {
				return fmt.Errorf("crash %d: %w", i+1, err)
			}
			return nil
		})
	return out, err
}

// crashCase is one crash (crashPhase).
func crashCase(ctx context.Context, r *Row, pool workerPool, n int, backoff time.Duration, rc replaceCase) (c reports.CrashCase, err error) {
	spec := r.Sc.Faults.Crash
	e := r.Env
	c = reports.CrashCase{Crash: n, BackoffNs: int64(backoff)}
	api, kube := r.Proxier.(faultAPI)
	if kube {
		if err := api.Kill(ctx); err != nil {
			return c, err
		}
	}
	t0 := time.Now()
	tr := startConvergence(e, pool, r.Mode.BaseName(), rc.changed, rc.removed, rc.added, t0, 500*time.Millisecond, time.Second)
	defer func() { c.Conv = tr.finish() }()
	if kube {
		for _, s := range rc.changed {
			if err := api.WriteChange(ctx, workload.Change{Kind: workload.EndpointRemove}, s, t0); err != nil {
				return c, fmt.Errorf("API write while kube-proxy is down: %w", err)
			}
		}
	}
	if err := sleepCtx(ctx, time.Until(t0.Add(backoff))); err != nil {
		return c, err
	}
	start := time.Now()
	c.StartNs = int64(start.Sub(t0))
	if kube {
		st, err := api.Resume(ctx)
		if err != nil {
			return c, err
		}
		c.SyncNs = int64(st.Wall)
		c.KubeProxySyncNs, c.KubeProxySyncEndNs = int64(st.Phases["kube-proxy.metric"]), int64(st.Phases["kube-proxy.syncEnd"])
		if !st.Start.IsZero() {
			c.StartNs = int64(st.Start.Sub(t0))
		}
	} else {
		q, err := e.newProxier(r.Sc, r.Mode)
		if err != nil {
			return c, err
		}
		if _, err := q.Sync(ctx, rc.next); err != nil {
			return c, fmt.Errorf("first sync of the new proxier: %w", err)
		}
		c.SyncNs = int64(time.Since(start))
	}
	return c, tr.wait(ctx, spec.Settle.Duration)
}

// crashPhaseV is the crash-and-supervisor fault as a Phase.
var crashPhaseV = Phase{
	PhaseRule: faultPhaseRule("crash", "faults.crash", func(f *scenarios.FaultsSpec) bool { return f.Crash != nil }),
	Report:    reports.CrashReport,
	Run: func(ctx context.Context, r *Row) (err error) {
		if r.Result.Crash, err = crashPhase(ctx, r); err != nil {
			return fmt.Errorf("faults.crash: %w", err)
		}
		return nil
	},
}
