//go:build linux

package kubeproxy_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/topology/controlplane"
	"github.com/proxybench/proxybench/workload/traffic"
)

// TestKernelSwitchMode: kube-proxy in iptables mode (legacy back end),
// then SwitchMode to nftables over the same control plane: the new
// process removes the iptables mode's service chains at start
// (platformCleanup) and programs table ip kube-proxy, every service
// answers through it; HaltCleanup (kube-proxy --cleanup) removes the
// table and leaves KUBE-FIREWALL; Resume programs the services again.
// The run's mode-switch phase does the same under probes; this checks
// the Proxier alone (PROXYBENCH_SLOW=1: a control plane).
func TestKernelSwitchMode(t *testing.T) {
	testenv.RequireSlow(t, "a control plane and three kube-proxy processes; the mode-switch run on the host covers the same path")
	testenv.RequireKernel(t, "nft", "iptables-legacy", "iptables-legacy-save", "iptables-legacy-restore")
	bins := testenv.RequireKube(t)
	ctx := context.Background()
	runID := topology.NewRunID()
	svcs := services(4)
	tb := echoTestbed(ctx, t, runID)
	p, err := kubeproxy.NewProxier(kubeproxy.ProxierSpec{Mode: "iptables", Node: tb.Node, NodeIP: tb.NodeBackendAddr,
		ClusterCIDR: clusterCIDR, ServiceCIDR: serviceCIDR, Avoid: []netip.Prefix{serviceCIDR, podCIDR, nodeCIDR},
		Pass: map[string]any{"iptables": map[string]any{"minSyncPeriod": "0s"}}, IPTablesBackend: "legacy",
		KubeProxy: bins.KubeProxy, Bin: controlplane.Binaries{Etcd: bins.Etcd, APIServer: bins.APIServer}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanupProxier(t, p, runID)
	if _, err := p.Sync(ctx, svcs); err != nil {
		t.Fatal(err)
	}
	save := func() string {
		out, err := tb.Node.Run(ctx, nil, "iptables-legacy-save")
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	if !strings.Contains(save(), ":KUBE-SVC-") {
		t.Fatal("no KUBE-SVC- chain after the iptables mode's first sync")
	}
	stopped, st, err := p.SwitchMode(ctx, "nftables", map[string]any{"nftables": map[string]any{"minSyncPeriod": "0s"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("switch: old kube-proxy stopped, the new one's first sync done %v after its start (metric %v)", st.Wall, st.Phases["kube-proxy.metric"])
	if st.Start.Before(stopped) {
		t.Errorf("the new kube-proxy started %v before the old one stopped", stopped.Sub(st.Start))
	}
	if s := save(); strings.Contains(s, ":KUBE-SVC-") || !strings.Contains(s, ":KUBE-FIREWALL") {
		t.Errorf("after the switch to nftables: want the service chains gone and KUBE-FIREWALL kept:\n%s", s)
	}
	if out, err := tb.Node.Run(ctx, nil, "nft", "list", "tables"); err != nil || !strings.Contains(string(out), "table ip kube-proxy") {
		t.Errorf("no table ip kube-proxy after the switch: %s %v", out, err)
	}
	for _, s := range svcs {
		if err := tb.Clients[0].Do(func() error { _, _, _, err := traffic.DialEcho(s.ClusterIP, 80, 2*time.Second); return err }); err != nil {
			t.Errorf("%s after the switch: %v", s.Name, err)
		}
	}
	took, cerr, err := p.HaltCleanup(ctx)
	if err != nil || cerr != nil {
		t.Fatalf("halt and cleanup: %v %v", err, cerr)
	}
	if out, _ := tb.Node.Run(ctx, nil, "nft", "list", "tables"); strings.Contains(string(out), "kube-proxy") {
		t.Errorf("kube-proxy --cleanup (%v) left the nft table: %s", took, out)
	}
	if !strings.Contains(save(), ":KUBE-FIREWALL") {
		t.Error("kube-proxy --cleanup removed KUBE-FIREWALL, which v1.37 keeps")
	}
	if _, err := p.Resume(ctx); err != nil {
		t.Fatal(err)
	}
}
