//go:build linux

package kubeproxy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/proxybench/proxybench/proxymodes"
)

// Kill ends kube-proxy with SIGKILL, as a crash (an OOM kill, a panic's
// exit, `kill -9` on a node) ends it: no SIGTERM, nothing of it runs
// after. Its rules stay in the node namespace; the control plane and
// the API objects stay. Resume starts a new kube-proxy, as the kubelet
// restarts the DaemonSet's container. Its log is kept as LOG.<n> and
// its figures in the record's Earlier processes ("killed (SIGKILL)").
// Errors: no kube-proxy running, a kube-proxy that had exited on its own
// (*proxymodes.Failed), one that did not die.
func (p *Proxier) Kill(ctx context.Context) error {
	if p.kp == nil {
		return errors.New("kubeproxy: Kill with no kube-proxy running (before the first Sync, or halted already)")
	}
	if err := p.exited("the wait before a kill", proxymodes.SyncStats{}, 0); err != nil {
		return err
	}
	old := p.kp
	p.kp, p.halted = nil, old
	return p.retireWith(ctx, old, "killed (SIGKILL)", old.Kill)
}

// Kill ends kube-proxy with SIGKILL (topology.Process.Kill).
func (p *Proxy) Kill() error {
	if p == nil || p.Proc == nil {
		return nil
	}
	p.res.stop()
	return p.Proc.Kill()
}

// StopComponent stops one program of the row's control plane
// (controlplane.Components: kube-apiserver or etcd) and leaves kube-proxy
// running: an API server outage as kube-proxy meets it (its watches
// break; it keeps the rules it has). Errors: no control plane (before
// the first Sync), an unknown or stopped component.
func (p *Proxier) StopComponent(name string) error {
	if p.cp == nil {
		return errors.New("kubeproxy: StopComponent with no control plane")
	}
	return p.cp.StopComponent(name)
}

// StartComponent starts the component StopComponent stopped and returns
// the time until the API server answered /readyz ok again
// (controlplane.StartComponent; bounded by 3 min, 8 in a guest).
func (p *Proxier) StartComponent(ctx context.Context, name string) (time.Duration, error) {
	if p.cp == nil {
		return 0, errors.New("kubeproxy: StartComponent with no control plane")
	}
	bound := 3 * time.Minute
	if p.spec.Guest {
		bound = 8 * time.Minute
	}
	d, err := p.cp.StartComponent(ctx, name, bound)
	if err != nil {
		return d, fmt.Errorf("kubeproxy: %w", err)
	}
	return d, nil
}
