//go:build linux

package kubeproxy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/proxybench/proxybench/proxymodes"
)

var _ proxymodes.Restarter = (*Proxier)(nil)

// Halt implements proxymodes.Restarter: it stops kube-proxy (SIGTERM,
// SIGKILL after 5 s) and, with cleanup, removes its rules (`kube-proxy
// --cleanup` in the node namespace with the PATH it ran with, so the same
// iptables back end, as on a node that has never run it). The control
// plane and the API objects stay. Its log is kept as LOG.<n>, its metrics
// and resource use in the record's Earlier processes.
func (p *Proxier) Halt(ctx context.Context, cleanup bool) error {
	if p.kp == nil {
		return errors.New("kubeproxy: Halt with no kube-proxy running (before the first Sync, or halted already)")
	}
	if err := p.exited("the wait before a halt", proxymodes.SyncStats{}, 0); err != nil {
		return err
	}
	old := p.kp
	p.kp, p.halted = nil, old
	why := "halt"
	if cleanup {
		why = "halt+cleanup"
	}
	if err := p.retire(ctx, old, why); err != nil {
		return err
	}
	if cleanup {
		t0 := time.Now()
		if err := p.cleanupRules(ctx, old); err != nil {
			return err
		}
		p.earlier[len(p.earlier)-1].Why += fmt.Sprintf(" (kube-proxy --cleanup took %v)", time.Since(t0).Round(time.Millisecond))
	}
	return nil
}

// Resume implements proxymodes.Restarter: it starts a new kube-proxy with
// the configuration of the halted one, over the control plane that still
// runs and the API that still holds every Service and EndpointSlice (as a
// node joining an existing cluster, or kube-proxy restarting), and
// returns when its first IPv4 sync is done (WaitSynced, polled every
// 100 ms, bounded as the first Sync: FirstSyncTimeout). Start is the new process's fork (after its --version check and
// config); Wall is from Start to that sync seen done; CPU is the new
// process's and its children's. Phases: "kube-proxy.metric" that sync's
// duration by kubeproxy_sync_proxy_rules_duration_seconds,
// "kube-proxy.syncEnd" from Start to the sync's end by kube-proxy's own
// kubeproxy_sync_proxy_rules_last_timestamp_seconds. Objects and Bytes
// are the ruleset read back after that sync (as sync.full's), 0 when not
// read (IPVS). A first sync that failed (FirstSyncFailed) returns a
// *proxymodes.SyncFailed, as the first Sync's does (failedSync).
func (p *Proxier) Resume(ctx context.Context) (proxymodes.SyncStats, error) {
	if p.halted == nil || p.kp != nil {
		return proxymodes.SyncStats{}, errors.New("kubeproxy: Resume without a Halt")
	}
	if err := p.keepLog(); err != nil {
		return proxymodes.SyncStats{}, err
	}
	kp, err := Start(ctx, p.halted.Spec)
	if err != nil {
		return proxymodes.SyncStats{}, err
	}
	p.kp, p.halted = kp, nil
	bound := p.spec.FirstSyncTimeout
	if bound <= 0 {
		bound = DefaultFirstSyncTimeout
	}
	metric, err := kp.WaitSynced(ctx, bound)
	var fsf *FirstSyncFailed
	if errors.As(err, &fsf) && ctx.Err() == nil {
		u := kp.Usage()
		st := proxymodes.SyncStats{Kind: "full", Start: kp.Started, Wall: fsf.At.Sub(kp.Started), CPU: u.CPU + u.ChildCPU,
			Phases: map[string]time.Duration{"kube-proxy.metric": fsf.Own}}
		return st, p.failedSync(ctx, "first sync after the restart", fsf.Own, 0, fsf.At, time.Time{}, st)
	}
	if err != nil {
		return proxymodes.SyncStats{}, p.orExited(err, "its first sync after a restart")
	}
	done := time.Now()
	st := proxymodes.SyncStats{Kind: "full", Start: kp.Started, Wall: done.Sub(kp.Started),
		Phases: map[string]time.Duration{"kube-proxy.metric": metric}}
	if v, err := p.syncView(ctx); err == nil && !v.ts.IsZero() {
		st.Phases["kube-proxy.syncEnd"] = v.ts.Sub(kp.Started)
	}
	u := kp.Usage()
	st.CPU = u.CPU + u.ChildCPU
	// Objects: what kube-proxy installed, read back after the timed sync
	// as sync.full does (builtin's rows count rules, not services); left
	// 0, shown "-", when not read (IPVS, or the read failed).
	if rs, err := p.readBack(ctx); err == nil {
		st.Objects, st.Bytes = rs.Objects, rs.Bytes
	}
	return st, nil
}
