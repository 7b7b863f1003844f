//go:build linux

package kubeproxy_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/topology/controlplane"
)

// TestKernelProxierReadBack: a kube-proxy row's full sync reports what
// kube-proxy installed, read back from the node: more objects than
// services (6 services with 1-3 endpoints: at least a service and an
// endpoint rule or element each), bytes for iptables (its saved KUBE-
// lines), none for nftables; and the back end it ran with. The old
// Proxier reported the service count, 0 bytes and no back end.
//
// PROXYBENCH_SLOW=1 (make test-slow): a control plane per mode. The
// default suite checks the same figures on the kube-proxy rows of a run
// (cmd/proxybench TestKernelRunWithKubeProxy).
func TestKernelProxierReadBack(t *testing.T) {
	bins := testenv.RequireKube(t)
	testenv.RequireSlow(t, "a control plane per mode (TestKernelRunWithKubeProxy checks the read-back figures in the default suite)")
	for _, tc := range []struct{ mode, backend, tool string }{
		{"iptables", "legacy", "iptables-legacy-save"},
		{"nftables", "knftables", "nft -j list table ip kube-proxy"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			if tc.mode == "iptables" {
				testenv.RequireKernel(t, "iptables", "iptables-legacy-save", "iptables-legacy-restore")
			} else {
				testenv.RequireKernel(t, "nft")
			}
			ctx := context.Background()
			runID := topology.NewRunID()
			svcs := services(6)
			tb := echoTestbed(ctx, t, runID)
			be := ""
			if tc.mode == "iptables" {
				be = "legacy"
			}
			p, err := kubeproxy.NewProxier(kubeproxy.ProxierSpec{Mode: tc.mode, Node: tb.Node, NodeIP: tb.NodeBackendAddr,
				ClusterCIDR: clusterCIDR, ServiceCIDR: serviceCIDR, Avoid: []netip.Prefix{serviceCIDR, podCIDR, nodeCIDR},
				KubeProxy: bins.KubeProxy, Bin: controlplane.Binaries{Etcd: bins.Etcd, APIServer: bins.APIServer}, Dir: t.TempDir(),
				IPTablesBackend: be})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := p.Cleanup(context.Background()); err != nil {
					t.Error(err)
				}
			}()
			st, err := p.Sync(ctx, svcs)
			if err != nil {
				t.Fatal(err)
			}
			endpoints := 0
			for _, s := range svcs {
				endpoints += len(s.Endpoints)
			}
			info := p.Info()
			if st.Objects < len(svcs)+endpoints {
				t.Errorf("objects %d, want at least %d (services + endpoints); ruleset %q", st.Objects, len(svcs)+endpoints, info["ruleset"])
			}
			if tc.mode == "iptables" && st.Bytes < 100*st.Objects/2 {
				t.Errorf("bytes %d for %d rules", st.Bytes, st.Objects)
			}
			if tc.mode == "nftables" && st.Bytes != 0 {
				t.Errorf("nftables bytes %d, want 0 (not seen)", st.Bytes)
			}
			if info["backend"] != tc.backend || !strings.Contains(info["ruleset"], tc.tool) {
				t.Errorf("info backend %q ruleset %q, want %q read with %s", info["backend"], info["ruleset"], tc.backend, tc.tool)
			}
		})
	}
}
