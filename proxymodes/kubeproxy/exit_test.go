//go:build linux

package kubeproxy_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/topology/controlplane"
)

// TestKernelProxierFirstSyncNotDone: kube-proxy (iptables mode, 20
// services) whose first sync does not finish, two ways, through a
// wrapper whose iptables-restore (the sync's one rule write) is a shim:
//   - killed: the shim SIGKILLs kube-proxy at its first call. The first
//     Sync returns a *proxymodes.Failed (not an error that loses the
//     row) with the setup it measured, and the record keeps the setup,
//     the exit (SIGKILL, during its first sync, its log's tail) and its
//     CPU; Exited returns the same failure; Cleanup stops the rest.
//   - unfinished: the shim blocks, the bound (kubeProxy.firstSyncTimeout,
//     4 s) passes: a *proxymodes.Unfinished.
//
// Both report as objects what was read back from the node, which holds
// none of the 20 services' rules (the restore never ran), never the 20
// services asked for (the old Proxier's unfinished sync did).
func TestKernelProxierFirstSyncNotDone(t *testing.T) {
	testenv.RequireKernel(t, "iptables", "iptables-save", "iptables-restore")
	bins := testenv.RequireKube(t)
	for _, action := range []string{testenv.ShimKill, testenv.ShimBlock} {
		t.Run(action, func(t *testing.T) {
			ctx := context.Background()
			runID := topology.NewRunID()
			svcs := services(20)
			tb := echoTestbed(ctx, t, runID)
			wrapper := testenv.KubeProxyShim(t, bins.KubeProxy, "iptables-restore", 1, action)
			p, err := kubeproxy.NewProxier(kubeproxy.ProxierSpec{Mode: "iptables", Node: tb.Node, NodeIP: tb.NodeBackendAddr,
				ClusterCIDR: clusterCIDR, ServiceCIDR: serviceCIDR, Avoid: []netip.Prefix{serviceCIDR, podCIDR, nodeCIDR},
				KubeProxy: wrapper, Bin: controlplane.Binaries{Etcd: bins.Etcd, APIServer: bins.APIServer}, Dir: t.TempDir(),
				FirstSyncTimeout: 4 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer cleanupProxier(t, p, runID)
			st, err := p.Sync(ctx, svcs)
			var fl *proxymodes.Failed
			var u *proxymodes.Unfinished
			t.Logf("Sync: %v; iptables-restore calls %d", err, testenv.ShimCalls(t, wrapper))
			switch {
			case action == testenv.ShimKill && !errors.As(err, &fl):
				t.Fatalf("Sync: %v (%T), want a *proxymodes.Failed: kube-proxy was killed in its first sync", err, err)
			case action == testenv.ShimBlock && !errors.As(err, &u):
				t.Fatalf("Sync: %v (%T), want a *proxymodes.Unfinished: kube-proxy's first sync was blocked past its bound", err, err)
			}
			if n := testenv.ShimCalls(t, wrapper); action == testenv.ShimKill && n != 1 {
				t.Fatalf("iptables-restore called %d times, want once (the kill)", n)
			}
			info := p.Info()
			if st.Phases["setup.controlPlane"] <= 0 || st.Phases["setup.api"] <= 0 || st.Wall != 0 {
				t.Errorf("stats %+v: want the setup phases measured and no sync.full (no data plane probed)", st)
			}
			if st.Objects >= len(svcs) || !strings.Contains(info["ruleset"], "iptables-save") {
				t.Errorf("objects %d (ruleset %q): want what iptables-save reads back, fewer than the %d services (none of their rules was written)",
					st.Objects, info["ruleset"], len(svcs))
			}
			r := p.KubeProxyRecord(ctx)
			if r == nil || r.ControlPlaneNs <= 0 || r.APIObjects < len(svcs) || r.FirstSyncNs != 0 || r.CPUNs <= 0 {
				t.Fatalf("record %+v: want the setup, no first sync, and kube-proxy's CPU", r)
			}
			if action == testenv.ShimBlock {
				if r.Unfinished == nil || r.Exit != nil || !strings.Contains(info["ruleset"], "firstSyncTimeout") {
					t.Errorf("record unfinished %+v, exit %+v, ruleset %q: want it unfinished, kube-proxy running, the read-back at the bound", r.Unfinished, r.Exit, info["ruleset"])
				}
				return
			}
			e := r.Exit
			if e == nil || e.Signal != "SIGKILL" || e.Code != -1 || e.Status != "signal: killed" || e.During != "its first sync" || len(e.LogTail) == 0 || e.RanNs <= 0 {
				t.Fatalf("record's exit %+v: want SIGKILL during its first sync, with its log's tail", e)
			}
			if !strings.Contains(fl.Msg, "during its first sync: signal: killed") || info["exit"] != fl.Msg {
				t.Errorf("failure %q (info %q): want how and when kube-proxy exited", fl.Msg, info["exit"])
			}
			if xerr := p.Exited(); !errors.Is(xerr, fl) {
				t.Errorf("Exited: %v, want the same failure", xerr)
			}
			t.Logf("failure: %s; objects %d (%s); record: control plane %v, API %v, CPU %v + %v, last scrape %v after start",
				fl.Msg, st.Objects, info["ruleset"], time.Duration(r.ControlPlaneNs), time.Duration(r.APIObjectsNs),
				time.Duration(r.CPUNs), time.Duration(r.ChildCPUNs), time.Duration(e.LastScrapeNs))
		})
	}
}
