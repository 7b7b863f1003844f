//go:build linux

package kubeproxy_test

import (
	"context"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/topology/controlplane"
	"github.com/proxybench/proxybench/workload/traffic"
)

// TestKernelProxierHaltResume: the Proxier's restart (proxymodes.Restarter)
// on a one-node testbed with kube-proxy in iptables mode. Halt with cleanup
// leaves the node without kube-proxy's rules (no service answers, as on a
// node that never ran it); Resume starts a new kube-proxy over the API,
// which programs every service again; Halt without cleanup keeps the
// rules (the services keep answering while kube-proxy is down).
// In iptables mode kube-proxy runs with the legacy back end, as a run's
// kube-proxy rows do by default (iptables.backend: legacy, the same as
// builtin), and the rules are read back with iptables-legacy-save: Halt's
// kube-proxy --cleanup must use that back end too (with Debian's default
// nft tools it removed nothing). PROXYBENCH_HALT_SERVICES=N runs it with N
// services (default 4), PROXYBENCH_HALT_MODE=nftables in that mode
// (default iptables) and PROXYBENCH_HALT_BACKEND=nft with the other back
// end, logging the cold start's and the restart's first-sync times.
func TestKernelProxierHaltResume(t *testing.T) {
	mode := os.Getenv("PROXYBENCH_HALT_MODE")
	if mode == "" {
		mode = "iptables"
	}
	backend := ""
	if mode == "nftables" {
		testenv.RequireKernel(t, "nft")
	} else {
		backend = os.Getenv("PROXYBENCH_HALT_BACKEND")
		if backend == "" {
			backend = "legacy"
		}
		testenv.RequireKernel(t, "iptables-"+backend, "iptables-"+backend+"-save", "iptables-"+backend+"-restore")
	}
	bins := testenv.RequireKube(t)
	ctx := context.Background()
	runID := topology.NewRunID()
	n := 4
	if v := os.Getenv("PROXYBENCH_HALT_SERVICES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("PROXYBENCH_HALT_SERVICES=%q is not a positive count", v)
		}
	}
	svcs := services(n)
	tb := echoTestbed(ctx, t, runID)
	p, err := kubeproxy.NewProxier(kubeproxy.ProxierSpec{Mode: mode, Node: tb.Node, NodeIP: tb.NodeBackendAddr,
		ClusterCIDR: clusterCIDR, ServiceCIDR: serviceCIDR, Avoid: []netip.Prefix{serviceCIDR, podCIDR, nodeCIDR},
		Pass: map[string]any{mode: map[string]any{"minSyncPeriod": "0s"}}, IPTablesBackend: backend,
		KubeProxy: bins.KubeProxy, Bin: controlplane.Binaries{Etcd: bins.Etcd, APIServer: bins.APIServer}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanupProxier(t, p, runID)
	if _, err := p.Sync(ctx, svcs); err != nil {
		t.Fatal(err)
	}
	// answers reports whether every service answers (within timeout each).
	answers := func(timeout time.Duration) error {
		for _, s := range svcs {
			err := tb.Clients[0].Do(func() error {
				_, _, _, err := traffic.DialEcho(s.ClusterIP, 80, timeout)
				return err
			})
			if err != nil {
				return err
			}
		}
		return nil
	}
	// eventually waits up to 30 s for every service to answer.
	eventually := func(what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for err := answers(time.Second); err != nil; err = answers(time.Second) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: services do not answer: %v", what, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// svcRules counts the node's jumps to kube-proxy's service chains.
	svcRules := func() int {
		if mode == "nftables" {
			out, err := tb.Node.Run(ctx, nil, "nft", "list", "ruleset")
			if err != nil {
				t.Fatal(err)
			}
			return strings.Count(string(out), "goto service-")
		}
		nat, err := tb.Node.Run(ctx, nil, "iptables-"+backend+"-save", "-t", "nat")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(nat), "-j KUBE-SVC-")
	}
	eventually("after the first sync")

	if err := p.Halt(ctx, true); err != nil {
		t.Fatal(err)
	}
	if n := svcRules(); n != 0 {
		t.Errorf("after Halt with cleanup the node still has %d jumps to service chains", n)
	}
	if err := answers(300 * time.Millisecond); err == nil {
		t.Error("services answer on a node whose kube-proxy rules were cleaned up")
	}
	st, err := p.Resume(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Wall <= 0 || st.Phases["kube-proxy.metric"] <= 0 {
		t.Errorf("cold Resume stats %+v: want a wall time and kube-proxy's own sync duration", st)
	}
	// Objects are the rules read back (as builtin's rows count them), not
	// the service count.
	if st.Objects < 2*len(svcs) {
		t.Errorf("cold Resume objects %d, want kube-proxy's rules read back (>= %d for %d services), not the service count", st.Objects, 2*len(svcs), len(svcs))
	}
	eventually("after the cold start")

	if err := p.Halt(ctx, false); err != nil {
		t.Fatal(err)
	}
	if n := svcRules(); n < len(svcs) {
		t.Errorf("after Halt without cleanup the node has %d jumps to service chains, want >= %d", n, len(svcs))
	}
	if err := answers(2 * time.Second); err != nil {
		t.Errorf("services stop answering while kube-proxy is halted over its rules: %v", err)
	}
	rst, err := p.Resume(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eventually("after the restart")
	t.Logf("%s (%s), %d services: cold start: kube-proxy's first sync seen done %v after its start (its metric: %v, ended %v after its start; CPU %v); restart over its rules: %v (metric %v, ended %v; CPU %v)",
		mode, backend, n, st.Wall, st.Phases["kube-proxy.metric"], st.Phases["kube-proxy.syncEnd"], st.CPU,
		rst.Wall, rst.Phases["kube-proxy.metric"], rst.Phases["kube-proxy.syncEnd"], rst.CPU)
}

// cleanupProxier removes p's rules, control plane and processes (its
// error fails t), then fails t if any process of runID is left.
func cleanupProxier(t *testing.T, p *kubeproxy.Proxier, runID string) {
	t.Helper()
	if err := p.Cleanup(context.Background()); err != nil {
		t.Error(err)
	}
	if left := topology.ChildProcesses(runID); len(left) > 0 {
		t.Errorf("processes of run %s left: %v", runID, left)
	}
}
