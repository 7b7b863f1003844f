//go:build linux

package fidelity

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"time"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/topology/controlplane"
	"github.com/proxybench/proxybench/workload"
)

// Implementations of a mode: proxybench's own (builtin) and the real
// kube-proxy (the same names as run's implementation setting).
const (
	Builtin   = "builtin"
	KubeProxy = "kube-proxy"
)

// Implementations lists the valid Spec.Implementation values.
var Implementations = []string{Builtin, KubeProxy}

// KubeBinaries are the programs the kube-proxy implementation runs.
type KubeBinaries struct {
	KubeProxy, APIServer, Etcd string
}

// Spec is one Install.
type Spec struct {
	// RunID names the testbed (a new one when empty).
	RunID string
	// Scenario gives the mode's settings, the address ranges and, when
	// Services is nil, the services (workload.Services).
	Scenario *scenarios.Scenario
	// Mode is iptables, ipvs or nftables.
	Mode string
	// Implementation is Builtin or KubeProxy.
	Implementation string
	// Services overrides the scenario's services (the fidelity test builds
	// cases the scenario format cannot express: terminating endpoints).
	Services []workload.Service
	// Kube are the binaries of the kube-proxy implementation.
	Kube KubeBinaries
	// Dir keeps kube-proxy's config, kubeconfig and log (a temporary
	// folder removed afterwards when empty).
	Dir string
	// Settle bounds the wait for kube-proxy's rules to stop changing after
	// its first sync (default 30 s); kube-proxy syncs IPv4 and IPv6 one
	// after the other and may sync again when its informers catch up.
	Settle time.Duration
	// Guest says this runs inside a user-mode-linux guest
	// (kubeproxy.ProxierSpec.Guest: the control plane's guest timeouts).
	Guest bool
}

// Install builds a one-node testbed, makes spec.Implementation of
// spec.Mode program the services in the node namespace (builtin: one full
// Sync; kube-proxy: a control plane, the API objects, kube-proxy until
// /healthz and its rules stop changing), reads the node's kernel state
// back (Read), and tears everything down, on error too. The result is
// the reading, raw (Normalise it to compare).
func Install(ctx context.Context, spec Spec) (r Reading, err error) {
	sc := spec.Scenario
	if spec.RunID == "" {
		spec.RunID = topology.NewRunID()
	}
	m, err := modes.Lookup(spec.Mode)
	if err != nil {
		return r, err
	}
	services := spec.Services
	if services == nil {
		if services, err = workload.Services(sc); err != nil {
			return r, err
		}
	}
	svcNet, podNet, nodeNet, cluster := sc.Prefixes()
	tb, err := topology.Build(ctx, topology.Spec{RunID: spec.RunID, ClientPods: 1, ServiceCIDR: svcNet, PodCIDR: podNet, NodeCIDR: nodeNet})
	if err != nil {
		return r, fmt.Errorf("build testbed: %w", err)
	}
	defer func() {
		if terr := tb.Teardown(); terr != nil {
			err = errors.Join(err, fmt.Errorf("teardown: %w", terr))
		}
	}()
	var p proxymodes.Proxier
	switch spec.Implementation {
	case Builtin:
		if p, err = m.New(sc, tb.Node); err != nil {
			return r, err
		}
	case KubeProxy:
		dir := spec.Dir
		if dir == "" {
			if dir, err = os.MkdirTemp("", topology.Prefix+spec.RunID+"-dump-"); err != nil {
				return r, err
			}
			defer os.RemoveAll(dir)
		}
		avoid := []netip.Prefix{svcNet, podNet, nodeNet, cluster}
		// The scenario's mode block and kubeProxy.config, as run's
		// kube-proxy rows take them.
		pass, perr := kubeproxy.PassFromScenario(sc, spec.Mode)
		if perr != nil {
			return r, perr
		}
		p, err = kubeproxy.NewProxier(kubeproxy.ProxierSpec{Mode: spec.Mode, Node: tb.Node, NodeIP: tb.NodeBackendAddr,
			ClusterCIDR: cluster, ServiceCIDR: svcNet, Avoid: avoid, Pass: pass, KubeProxy: spec.Kube.KubeProxy,
			Bin: controlplane.Binaries{Etcd: spec.Kube.Etcd, APIServer: spec.Kube.APIServer}, Dir: dir,
			SessionAffinity: kubeproxy.SessionAffinityOf(sc), IPTablesBackend: sc.IPTables.Backend, Verbosity: sc.KubeProxy.Verbosity, Guest: spec.Guest})
		if err != nil {
			return r, err
		}
	default:
		return r, fmt.Errorf("fidelity: implementation %q: want builtin or kube-proxy", spec.Implementation)
	}
	defer func() {
		// The testbed's teardown removes whatever a failed cleanup left
		// (kube-proxy --cleanup fails on some rulesets in a guest): a
		// reading already made is kept, the failure noted.
		if cerr := p.Cleanup(context.WithoutCancel(ctx)); cerr != nil {
			if err == nil && len(r.Sections) > 0 {
				r.Notes = append(r.Notes, fmt.Sprintf("%s %s cleanup failed (the testbed's teardown removed its rules): %v", spec.Implementation, spec.Mode, cerr))
			} else {
				err = errors.Join(err, fmt.Errorf("cleanup: %w", cerr))
			}
		}
	}()
	if _, err = p.Sync(ctx, services); err != nil {
		return r, fmt.Errorf("%s %s: sync: %w", spec.Implementation, spec.Mode, err)
	}
	if spec.Implementation == Builtin {
		r, err = Read(ctx, tb.Node, spec.Mode, Backends)
		r.Implementation = Builtin
		return r, err
	}
	r, err = settle(ctx, tb.Node, spec.Mode, Backends, spec.Settle)
	r.Implementation = KubeProxy
	if kp, ok := p.(*kubeproxy.Proxier); ok {
		r.Testbed = kp.TestbedObjects()
	}
	return r, err
}

// settle reads until two readings one second apart are equal, for at most
// d (default 30 s), and returns the last.
func settle(ctx context.Context, node proxymodes.Node, mode string, backends []string, d time.Duration) (Reading, error) {
	if d <= 0 {
		d = 30 * time.Second
	}
	deadline := time.Now().Add(d)
	prev, err := Read(ctx, node, mode, backends)
	if err != nil {
		return prev, err
	}
	for {
		select {
		case <-ctx.Done():
			return prev, ctx.Err()
		case <-time.After(time.Second):
		}
		cur, err := Read(ctx, node, mode, backends)
		if err != nil {
			return cur, err
		}
		if reflect.DeepEqual(Normalise(cur), Normalise(prev)) || time.Now().After(deadline) {
			return cur, nil
		}
		prev = cur
	}
}
