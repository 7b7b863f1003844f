//go:build linux

package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/topology"
)

// TestKernelRunDualStackKubeProxy runs a small dual-stack scenario with
// builtin and kube-proxy rows of iptables and nftables: every row has
// both families synced and answering through their ClusterIPs without an
// error; a kube-proxy row's IPv6 side comes from its one kube-proxy
// (Shared, kube-proxy's own IPv6 full-sync metric, the IPv6 rules read
// back), which really programmed IPv6 services (objects beyond its
// base chains); nothing is left behind and the root namespace is
// unchanged.
func TestKernelRunDualStackKubeProxy(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore", "ip6tables-legacy-restore", "nft")
	kb := testenv.RequireKube(t)
	testenv.RequireSlow(t, "a dual-stack control plane per kube-proxy row, ~1 min under load")
	rootBefore := testenv.RootSnapshot(t)
	runID := topology.NewRunID()
	out := filepath.Join(t.TempDir(), "r.json")
	body := "services: {count: 12, ipFamilyPolicy: RequireDualStack}\nnetwork: {ipFamilies: [IPv4, IPv6]}\n" +
		"modes: [none, iptables, nftables]\nimplementation: [builtin, kube-proxy]\nrepetitions: 1\n" +
		"traffic: {connections: 60, positions: [first, last], warmup: 5}\n"
	stdout := runWatched(t, runID, kb, "run", "--quiet", "--kernel", "host", "--run-id", runID, "--output", out, writeFile(t, body))
	r, err := reports.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	var kubeRows int
	for _, m := range r.Modes {
		ds := m.DualStack
		if ds == nil || len(ds.Families) != 2 || ds.Families[0].Family != "IPv4" || ds.Families[1].Family != "IPv6" {
			t.Errorf("%s: dualStack %+v", m.Mode, ds)
			continue
		}
		for _, f := range ds.Families {
			if !f.Synced || f.LookupError != "" {
				t.Errorf("%s %s: synced %v (%s), lookup error %q", m.Mode, f.Family, f.Synced, f.SyncError, f.LookupError)
			}
			if len(f.Lookup) != 2 {
				t.Errorf("%s %s: %d positions, want 2", m.Mode, f.Family, len(f.Lookup))
			}
			for _, p := range f.Lookup {
				if p.Errors+p.Misses != 0 || p.Latency.Count != 60 {
					t.Errorf("%s %s at %s: %d errors, %d misses, n %d", m.Mode, f.Family, p.Position, p.Errors, p.Misses, p.Latency.Count)
				}
			}
		}
		v6 := ds.Families[1]
		if m.Implementation != "kube-proxy" {
			if m.Mode != "none" && (len(v6.Sync) != 1 || v6.Sync[0].CPUNs <= 0 || v6.Shared) {
				t.Errorf("%s: builtin IPv6 sync %+v shared %v", m.Mode, v6.Sync, v6.Shared)
			}
			continue
		}
		kubeRows++
		v4 := ds.Families[0]
		if !v4.Shared || !v6.Shared || len(v6.Sync) != 1 {
			t.Fatalf("%s: families not shared, or IPv6 sync %+v", m.Mode, v6.Sync)
		}
		s6 := v6.Sync[0]
		// 12 services with 3 endpoints: each mode writes rules per service
		// and endpoint, far more than its empty IPv6 base chains.
		if s6.WallNs <= 0 || s6.KubeProxyNs <= 0 || s6.Objects < 12*3 || s6.CPUNs != 0 {
			t.Errorf("%s: IPv6 sync %+v: want a wall time, kube-proxy's own metric, the IPv6 rules read back and no CPU of its own", m.Mode, s6)
		}
		if v4.Sync[0].KubeProxyNs <= 0 {
			t.Errorf("%s: IPv4 sync %+v lacks kube-proxy's own metric", m.Mode, v4.Sync[0])
		}
		if owned := m.KubeProxy.Owned["clusterCIDR"]; !strings.Contains(owned, ",2001:2::") {
			t.Errorf("%s: kube-proxy's clusterCIDR %q, want both families", m.Mode, owned)
		}
	}
	if kubeRows != 2 {
		t.Errorf("%d kube-proxy rows, want 2", kubeRows)
	}
	if !strings.Contains(stdout, "one kube-proxy programs both families") {
		t.Errorf("report lacks the kube-proxy rows' dual-stack note:\n%s", stdout)
	}
	if left := topology.ChildProcesses(runID); len(left) > 0 {
		t.Errorf("processes of run %s left: %v", runID, left)
	}
	if left, _ := topology.Leftovers(); containsRun(left, runID) {
		t.Errorf("run %s left namespaces: %v", runID, left)
	}
	testenv.CompareRoot(t, rootBefore, testenv.RootSnapshot(t))
}
