//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/proxybench/proxybench/proxymodes"
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
	e, prog := r.Env, r.Progress()
	pool, err := e.probes(spec.Probes)
	if err != nil {
		return nil, fmt.Errorf("probes: %w", err)
	}
	defer pool.Close()
	p := r.Proxier
	cur := r.Services
	alloc := newPodAlloc(r.Sc, cur)
	idx := indexes(probeTargets(cur, spec.Services))
	backoffs := spec.Backoffs()
	prog.Start(fmt.Sprintf("%s: %d crashes (back-off %v) while %d services change", r.Mode.Name, len(backoffs), backoffs, len(idx)), len(backoffs))
	defer prog.Done()
	defer func() {
		if fs, ok := p.(proxymodes.FullSyncer); ok {
			fs.ForceFullSync()
		}
		if _, serr := p.Sync(context.WithoutCancel(ctx), r.Services); serr != nil {
			err = errors.Join(err, fmt.Errorf("sync back after the crashes: %w", serr))
		}
	}()
	for i, b := range backoffs {
		c, next, err := crashCase(ctx, r, pool, i+1, b, cur, idx, alloc)
		out = append(out, c)
		if err != nil {
			return out, fmt.Errorf("crash %d: %w", i+1, err)
		}
		cur = next
		prog.Add(1)
	}
	return out, nil
}

// crashCase is one crash (crashPhase); it returns the services as the
// proxy holds them after it.
func crashCase(ctx context.Context, r *Row, pool workerPool, n int, backoff time.Duration, cur []workload.Service, idx []int,
	alloc *podAlloc) (c reports.CrashCase, next []workload.Service, err error) {
	spec := r.Sc.Faults.Crash
	e := r.Env
	c = reports.CrashCase{Crash: n, BackoffNs: int64(backoff)}
	next, removed, added, err := replaceFirst(cur, idx, alloc)
	if err != nil {
		return c, cur, err
	}
	changed := make([]workload.Service, len(idx))
	for i, j := range idx {
		changed[i] = next[j]
	}
	time.Sleep(time.Second) // the rules settle after the last crash's sync
	api, kube := r.Proxier.(faultAPI)
	if kube {
		if err := api.Kill(ctx); err != nil {
			return c, cur, err
		}
	}
	t0 := time.Now()
	tr := startConvergence(e, pool, r.Mode.BaseName(), changed, removed, added, t0, 500*time.Millisecond, time.Second)
	defer func() { c.Conv = tr.finish() }()
	if kube {
		for _, s := range changed {
			if err := api.WriteChange(ctx, workload.Change{Kind: workload.EndpointRemove}, s, t0); err != nil {
				return c, next, fmt.Errorf("API write while kube-proxy is down: %w", err)
			}
		}
	}
	if err := sleepCtx(ctx, time.Until(t0.Add(backoff))); err != nil {
		return c, next, err
	}
	start := time.Now()
	c.StartNs = int64(start.Sub(t0))
	if kube {
		st, err := api.Resume(ctx)
		if err != nil {
			return c, next, err
		}
		c.SyncNs = int64(st.Wall)
		c.KubeProxySyncNs, c.KubeProxySyncEndNs = int64(st.Phases["kube-proxy.metric"]), int64(st.Phases["kube-proxy.syncEnd"])
		if !st.Start.IsZero() {
			c.StartNs = int64(st.Start.Sub(t0))
		}
	} else {
		q, err := e.newProxier(r.Sc, r.Mode)
		if err != nil {
			return c, next, err
		}
		if _, err := q.Sync(ctx, next); err != nil {
			return c, next, fmt.Errorf("first sync of the new proxier: %w", err)
		}
		c.SyncNs = int64(time.Since(start))
	}
	return c, next, tr.wait(ctx, spec.Settle.Duration)
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
