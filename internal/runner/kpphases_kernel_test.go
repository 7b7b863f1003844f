//go:build linux

package runner

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/internal/uml"
	"github.com/proxybench/proxybench/proxymodes/ipvs"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
)

// runKubeProxyRows runs scenario text (kube-proxy rows) for real and
// checks that no process of the run is left and the root namespace is
// unchanged; it returns the result.
func runKubeProxyRows(t *testing.T, kb testenv.KubeBinaries, text, name string) *reports.Result {
	t.Helper()
	t.Setenv(KubeBinEnv, filepath.Dir(kb.KubeProxy))
	sc, err := scenarios.Parse([]byte(text), name)
	if err != nil {
		t.Fatal(err)
	}
	root := testenv.RootSnapshot(t)
	o := Options{RunID: topology.NewRunID(), ArtifactDir: t.TempDir()}
	if uml.InGuest() {
		o.Where = WhereGuest // the guest's kube-proxy gets its longer bounds
	}
	t0 := time.Now()
	res, err := Run(context.Background(), sc, o)
	t.Logf("run took %v", time.Since(t0).Round(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if left := topology.ChildProcesses(o.RunID); len(left) > 0 {
		t.Errorf("processes of run %s left: %v", o.RunID, left)
	}
	testenv.CompareRoot(t, root, testenv.RootSnapshot(t))
	return res
}

// TestKernelTransitionsKubeProxy runs the transitions phase on an
// nftables kube-proxy row beside builtin (5 services; nftables: no
// xtables lock shared with whatever else runs iptables on the machine):
// every change is an API write; the run without cleanup is builtin's
// alone; each of kube-proxy's transitions carries its own cleanup
// account, its log's -v 4 lines agreeing with its counter; the removed
// endpoint's entry is deleted by kube-proxy (restart: in its sync to 0
// endpoints) and the client reaches a live endpoint; the side-by-side section pairs each
// transition with builtin's. About 25 s on a quiet machine (a control
// plane, kube-proxy's first sync, 3 s of transitions per variant):
// behind RequireSlow.
func TestKernelTransitionsKubeProxy(t *testing.T) {
	testenv.RequireKernel(t, "nft")
	kb := testenv.RequireKube(t)
	testenv.RequireSlow(t, "starts a control plane and kube-proxy (about 25 s)")
	res := runKubeProxyRows(t, kb, `
seed: 5
repetitions: 1
modes: [nftables]
implementation: [builtin, kube-proxy]
services: {count: 5, endpoints: {count: 2}}
traffic: {connections: 20, positions: [first]}
transitions: {sourcePort: 5300, interval: 20ms, timeout: 200ms, observe: 1s, withoutCleanup: true}
nftables: {minSyncPeriod: 1s, syncPeriod: 30s}
`, "transitions-kube-proxy.yaml")
	if len(res.Modes) != 2 {
		t.Fatalf("%d rows, want builtin and kube-proxy", len(res.Modes))
	}
	b, kp := res.Modes[0], res.Modes[1]
	if kp.Implementation != scenarios.ImplKubeProxy || len(b.Transitions) != 6 || len(kp.Transitions) != 3 {
		t.Fatalf("%s: %d transitions, %s: %d; want builtin's 6 (with and without cleanup), kube-proxy's 3", b.Mode, len(b.Transitions), kp.Mode, len(kp.Transitions))
	}
	for _, tr := range kp.Transitions {
		k := tr.KubeProxy
		if k == nil || !tr.Cleanup {
			t.Errorf("%s: cleanup %v, kube-proxy account %v", tr.Name, tr.Cleanup, k)
			continue
		}
		t.Logf("%s: recovery %s, %d sent %d live %d stale %d lost; kube-proxy %d cleanups, %d deleted, log %d lines %d deleted; flows %v -> %v",
			tr.Name, tr.Recovery(), tr.Sent, tr.Live, tr.Stale, tr.Lost, k.Runs, k.Deleted, k.LogRuns, k.LogDeleted, tr.FlowsBefore, tr.FlowsAfter)
		if k.LogRuns != k.Runs || k.LogDeleted != k.Deleted || len(k.Errors) > 0 {
			t.Errorf("%s: counter %d cleanups %d deleted, log %d lines %d deleted (%s), errors %q", tr.Name, k.Runs, k.Deleted, k.LogRuns, k.LogDeleted, k.Log, k.Errors)
		}
		if tr.Name != "0to1-new-service" && (k.Runs < 1 || k.Deleted < 1) {
			t.Errorf("%s: %d cleanups deleted %d entries, want the client's stale entry deleted", tr.Name, k.Runs, k.Deleted)
		}
		if tr.RecoveryNs < 0 || tr.Live == 0 {
			t.Errorf("%s: recovery %s, %d live of %d", tr.Name, tr.Recovery(), tr.Live, tr.Sent)
		}
	}
	found := false
	for _, s := range res.AllSections() {
		if s.Phase == reports.PhaseImplementations && s.Title == "UDP endpoint transitions: builtin beside kube-proxy" {
			found = len(s.Rows) == 3
		}
	}
	if !found {
		t.Error("no side-by-side transitions section with kube-proxy's 3 transitions")
	}
}

// TestKernelLifecycleKubeProxy runs the lifecycle phase on an nftables
// kube-proxy row (5 services, 6 held connections): each change is an
// EndpointSlice write with the endpoints' conditions; a removed endpoint
// takes no new connection, a serving terminating one beside ready ones
// takes none and keeps its held ones, every endpoint serving
// terminating still takes them all (kube-proxy's fallback), every one
// terminating and not serving none. About 30 s on a quiet machine:
// behind RequireSlow.
func TestKernelLifecycleKubeProxy(t *testing.T) {
	testenv.RequireKernel(t, "nft")
	kb := testenv.RequireKube(t)
	testenv.RequireSlow(t, "starts a control plane and kube-proxy (about 30 s)")
	res := runKubeProxyRows(t, kb, `
seed: 5
repetitions: 1
modes: [nftables]
implementation: [kube-proxy]
services: {count: 5, endpoints: {count: 2}}
traffic: {connections: 20, positions: [first]}
lifecycle: {held: 6, observe: 1s}
nftables: {minSyncPeriod: 1s, syncPeriod: 30s}
`, "lifecycle-kube-proxy.yaml")
	checkKubeProxyLifecycle(t, res)
}

// checkKubeProxyLifecycle checks the one kube-proxy row's lifecycle
// changes of res (see TestKernelLifecycleKubeProxy).
func checkKubeProxyLifecycle(t *testing.T, res *reports.Result) {
	t.Helper()
	if len(res.Modes) != 1 || res.Modes[0].Implementation != scenarios.ImplKubeProxy || len(res.Modes[0].Lifecycle) != 6 {
		t.Fatalf("rows %+v, want one kube-proxy row with 6 lifecycle changes", res.Modes)
	}
	for _, c := range res.Modes[0].Lifecycle {
		t.Logf("%s: held %d (%d on changed), broken %d; new %d, failed %d, to old %d", c.Name, c.Held, c.HeldOnChanged, c.Broken, c.New, c.NewFailed, c.NewToOld)
		if c.New == 0 {
			t.Errorf("%s: no new connection made", c.Name)
			continue
		}
		switch c.Name {
		case "removal", "terminating", "restart":
			if c.NewToOld != 0 || c.NewFailed != 0 {
				t.Errorf("%s: %d new connections to the old endpoint, %d failed; want none", c.Name, c.NewToOld, c.NewFailed)
			}
		case "all-serving-terminating":
			if c.NewToOld != c.New || c.Broken != 0 {
				t.Errorf("%s: %d of %d new connections reached the terminating endpoints, %d held broken; want all, none", c.Name, c.NewToOld, c.New, c.Broken)
			}
		case "all-terminating":
			if c.NewFailed != c.New {
				t.Errorf("%s: %d of %d new connections failed, want all (no serving endpoint)", c.Name, c.NewFailed, c.New)
			}
		}
		if c.Name == "terminating" && c.Broken != 0 {
			t.Errorf("terminating: %d held connections broken, want none (the endpoint still serves)", c.Broken)
		}
	}
}

// TestKernelIPVSKubeProxyPhasesInGuest runs the lifecycle and connReuse
// phases on an ipvs kube-proxy row in the user-mode-linux guest (3
// services): the lifecycle changes as TestKernelLifecycleKubeProxy
// checks them (kube-proxy's graceful termination: a removed real server
// at weight 0 keeps its held connections), then one connReuse pass per
// conn_reuse_mode with expire_nodest_conn and expire_quiescent_template
// as kube-proxy set them (1). Several minutes in the guest: behind
// RequireSlow (make test-guest-kube style).
func TestKernelIPVSKubeProxyPhasesInGuest(t *testing.T) {
	testenv.RequireKernel(t, "iptables-save", "ipset")
	testenv.RequireKube(t)
	testenv.RequireSlow(t, "a control plane and kube-proxy in a guest (several minutes)")
	if testenv.InUMLWith(t, testenv.UMLOptions{MemoryMiB: 3072, Timeout: 15 * time.Minute, Env: []string{testenv.SlowEnv + "=1"}}, false, ipvs.KernelModules("")...) {
		return
	}
	kb := testenv.RequireKube(t)
	res := runKubeProxyRows(t, kb, `
seed: 5
repetitions: 1
modes: [ipvs]
implementation: [kube-proxy]
services: {count: 3, endpoints: {count: 3}}
traffic: {connections: 20, positions: [first]}
lifecycle: {held: 6, observe: 2s}
connReuse: {connections: 100, ports: 20, reuseModes: [1, 0]}
node:
  sysctls:
    net.ipv4.vs.conn_reuse_mode: 1
    net.ipv4.vs.expire_nodest_conn: 0
    net.ipv4.vs.expire_quiescent_template: 0
ipvs: {minSyncPeriod: 0s, syncPeriod: 30s}
`, "ipvs-kube-proxy-phases.yaml")
	checkKubeProxyLifecycle(t, res)
	ps := res.Modes[0].ConnReuse
	if len(ps) != 2 {
		t.Fatalf("%d connReuse passes, want one per conn_reuse_mode", len(ps))
	}
	for _, p := range ps {
		t.Logf("conn_reuse_mode %d: %d connections, %d errors, %d slow, p50 %v, sysctls %v", p.ReuseMode, p.Connections, p.Errors, p.Slow, time.Duration(p.P50Ns), p.Sysctls)
		if p.Sysctls["net.ipv4.vs.expire_nodest_conn"] != "1" || p.Sysctls["net.ipv4.vs.expire_quiescent_template"] != "1" || p.Sysctls["net.ipv4.vs.conn_reuse_mode"] != strconv.Itoa(p.ReuseMode) {
			t.Errorf("pass %d: sysctls %v, want kube-proxy's expire_* = 1 and the pass's conn_reuse_mode", p.ReuseMode, p.Sysctls)
		}
		if p.Errors > 0 || p.Endpoints != 3 {
			t.Errorf("pass %d: %d errors (%q), %d endpoints", p.ReuseMode, p.Errors, p.ErrorSamples, p.Endpoints)
		}
	}
}
