//go:build linux

package kubeproxy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/proxybench/proxybench/proxymodes"
)

var _ proxymodes.Restarter = (*Proxier)(nil)

// Halt implements proxymodes.Restarter: it stops kube-proxy (SIGTERM,
// SIGKILL after 5 s) and, with cleanup, removes its rules (`kube-proxy
// --cleanup` in the node namespace, as on a node that has never run it).
// The control plane and the API objects stay. Its log is kept beside the
// next one's as LOG.<n>.
func (p *Proxier) Halt(ctx context.Context, cleanup bool) error {
	if p.kp == nil {
		return errors.New("kubeproxy: Halt with no kube-proxy running (before the first Sync, or halted already)")
	}
	old := p.kp
	p.kp, p.halted = nil, old
	if err := old.Stop(); err != nil {
		return fmt.Errorf("kubeproxy: stop kube-proxy: %w", err)
	}
	if cleanup {
		out, err := p.spec.Node.Run(ctx, nil, p.spec.KubeProxy, "--cleanup", "--config", old.ConfigPath)
		if err != nil {
			return fmt.Errorf("kubeproxy: kube-proxy --cleanup: %w: %s", err, out)
		}
	}
	p.restarts++
	return os.Rename(old.LogPath, fmt.Sprintf("%s.%d", old.LogPath, p.restarts))
}

// Resume implements proxymodes.Restarter: it starts a new kube-proxy with
// the configuration of the halted one, over the API that still holds
// every Service and EndpointSlice, and returns when its first IPv4 sync is
// done (WaitSynced). Wall is from its start, CPU its own and its
// children's, Phases["kube-proxy.metric"] that sync's duration from
// kubeproxy_sync_proxy_rules_duration_seconds.
func (p *Proxier) Resume(ctx context.Context) (proxymodes.SyncStats, error) {
	if p.halted == nil || p.kp != nil {
		return proxymodes.SyncStats{}, errors.New("kubeproxy: Resume without a Halt")
	}
	t0 := time.Now()
	kp, err := Start(ctx, p.halted.Spec)
	if err != nil {
		return proxymodes.SyncStats{}, err
	}
	p.kp, p.halted = kp, nil
	metric, err := kp.WaitSynced(ctx, 10*time.Minute)
	if err != nil {
		return proxymodes.SyncStats{}, err
	}
	u := kp.Usage()
	return proxymodes.SyncStats{Kind: "full", Wall: time.Since(t0), CPU: u.CPU + u.ChildCPU, Objects: len(p.last),
		Phases: map[string]time.Duration{"kube-proxy.metric": metric}}, nil
}
