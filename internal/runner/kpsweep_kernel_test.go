//go:build linux

package runner

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
)

// TestKernelSyncErrorsKubeProxy runs failure.syncErrors on kube-proxy
// rows for real (iptables with the legacy back end and nftables, beside
// builtin, 50 services, 10 changes/s for 3 s, every third rule-program
// call failing, minSyncPeriod 100 ms): the wrappers on kube-proxy's PATH
// are what it ran (they counted its calls and failed some) and
// kube-proxy's own failure counters grew by exactly the calls they
// failed (iptables: restore failures; nftables: sync plus stale-chain
// cleanup failures); its log shows failed syncs, each but a trailing
// one recovered by a full sync; every change still reached the data
// plane; builtin rows failed syncs too; the section has a row per row;
// no process is left and the root namespace is unchanged. Two control
// planes and four first syncs, about 60 s: behind RequireSlow.
func TestKernelSyncErrorsKubeProxy(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore", "nft", "flock")
	kb := testenv.RequireKube(t)
	testenv.RequireSlow(t, "starts two control planes and kube-proxies (about 60 s)")
	res := runKubeProxyScenario(t, kb, "syncerrors-kube-proxy.yaml", `
seed: 3
repetitions: 1
modes: [iptables, nftables]
implementation: [builtin, kube-proxy]
services: {count: 50, endpoints: {count: 3}}
traffic: {connections: 20, positions: [first]}
churn: {rate: 10, duration: 3s, grace: 20s, probes: 4}
failure: {syncErrors: {every: 3}}
iptables: {backend: legacy, minSyncPeriod: 100ms, syncPeriod: 5s}
nftables: {minSyncPeriod: 100ms, syncPeriod: 5s}
`)
	if len(res.Modes) != 4 {
		t.Fatalf("%d rows, want 4", len(res.Modes))
	}
	for _, m := range res.Modes {
		if len(m.Churn) != 1 || m.Churn[0].Injected == nil {
			t.Errorf("%s: no churn phase with injected errors", m.Mode)
			continue
		}
		c := m.Churn[0]
		inj := c.Injected
		t.Logf("%s: %d calls, %d failed on purpose; %d syncs, %d failed; %d/%d changes observed", m.Mode, inj.Calls, inj.Failed, len(c.Syncs), c.FailedSyncs, c.Observed, c.Changes)
		if inj.Calls < 3 || inj.Failed == 0 || c.FailedSyncs == 0 {
			t.Errorf("%s: %d wrapped calls, %d failed, %d failed syncs: want calls and failures", m.Mode, inj.Calls, inj.Failed, c.FailedSyncs)
		}
		if c.Observed != c.Changes {
			t.Errorf("%s: %d of %d changes observed", m.Mode, c.Observed, c.Changes)
		}
		for i, f := range c.Failures {
			if f.RecoveredNs < 0 && i < len(c.Failures)-1 {
				t.Errorf("%s: failure %d at %v not recovered, yet a later sync failed after it", m.Mode, i, time.Duration(f.AtNs))
			}
			if f.RecoveredNs >= 0 && f.RecoveryKind != "full" {
				t.Errorf("%s: failure %d recovered by a %s sync, want full", m.Mode, i, f.RecoveryKind)
			}
		}
		kp := c.KubeProxy
		if m.Implementation != scenarios.ImplKubeProxy {
			continue
		}
		if kp == nil {
			t.Fatalf("%s: no kube-proxy account", m.Mode)
		}
		fc := kp.FailureCounters
		t.Logf("%s: kube-proxy's counters %v", m.Mode, fc)
		var counted float64
		switch m.BaseMode {
		case "iptables":
			counted = fc["kubeproxy_sync_proxy_rules_iptables_restore_failures_total"]
			if int(counted) != c.FailedSyncs {
				t.Errorf("%s: %v restore failures, %d failed syncs in its log", m.Mode, counted, c.FailedSyncs)
			}
		case "nftables":
			counted = fc["kubeproxy_sync_proxy_rules_nftables_sync_failures_total"] + fc["kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total"]
		}
		if int(counted) != inj.Failed {
			t.Errorf("%s: kube-proxy counted %v failures, the wrappers failed %d of its calls: the wrappers are not what it ran", m.Mode, counted, inj.Failed)
		}
	}
	rows := 0
	for _, s := range res.Sections {
		if s.Title == syncErrorsSectionTitle(t, res) {
			rows += len(s.Rows)
		}
	}
	if rows != 4 {
		t.Errorf("sync errors section has %d rows, want 4", rows)
	}
}

// runKubeProxyScenario runs scenario y (named name) on the host with
// kb's control plane and kube-proxy (runChecked).
func runKubeProxyScenario(t *testing.T, kb testenv.KubeBinaries, name, y string) *reports.Result {
	t.Helper()
	t.Setenv(KubeBinEnv, filepath.Dir(kb.KubeProxy))
	return runChecked(t, name, y)
}

// runChecked runs scenario y (named name) for real, and checks
// afterwards that no process of the run is left and the root namespace
// is unchanged.
func runChecked(t *testing.T, name, y string) *reports.Result {
	t.Helper()
	sc, err := scenarios.Parse([]byte(y), name)
	if err != nil {
		t.Fatal(err)
	}
	root := testenv.RootSnapshot(t)
	o := Options{RunID: topology.NewRunID(), ArtifactDir: t.TempDir()}
	t0 := time.Now()
	res, err := Run(context.Background(), sc, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("run took %v", time.Since(t0).Round(time.Millisecond))
	if left := topology.ChildProcesses(o.RunID); len(left) > 0 {
		t.Errorf("processes of run %s left: %v", o.RunID, left)
	}
	testenv.CompareRoot(t, root, testenv.RootSnapshot(t))
	return res
}

// syncErrorsSectionTitle is the title of the sync errors section, as
// ChurnSyncErrorsReport gives it.
func syncErrorsSectionTitle(t *testing.T, res *reports.Result) string {
	t.Helper()
	for _, m := range res.Modes {
		if s := reports.ChurnSyncErrorsReport(m.Mode, &m); len(s) > 0 {
			return s[0].Title
		}
	}
	t.Fatal("no row has a sync errors section")
	return ""
}

// TestKernelSweepKubeProxy runs sweep.services on a kube-proxy row for
// real (iptables, legacy back end, 40 → 120 → 80 services, beside
// builtin): one control plane and one kube-proxy over the three sizes
// (its record holds one process, none stopped), each later size written
// through the API (created, then deleted) and programmed by the running
// kube-proxy: every probed service answers at each size, the rules read
// back follow the size, its syncs are counted in each step, and every
// size has its section row; no process is left and the root namespace is
// unchanged. One control plane, about 25 s: behind RequireSlow.
func TestKernelSweepKubeProxy(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore")
	kb := testenv.RequireKube(t)
	testenv.RequireSlow(t, "starts a control plane and kube-proxy and grows it (about 25 s)")
	res := runKubeProxyScenario(t, kb, "sweep-kube-proxy.yaml", `
seed: 2
repetitions: 1
modes: [iptables]
implementation: [builtin, kube-proxy]
services: {count: 40, endpoints: {count: 3}}
sweep: {services: [40, 120, 80]}
traffic: {connections: 30, positions: [first, last]}
iptables: {backend: legacy}
`)
	var kp []reports.ModeResult
	for _, m := range res.Modes {
		if m.Implementation == scenarios.ImplKubeProxy {
			kp = append(kp, m)
		}
	}
	if len(kp) != 3 || len(res.Modes) != 6 {
		t.Fatalf("%d rows, %d kube-proxy ones: want 6 and 3", len(res.Modes), len(kp))
	}
	want := []struct{ services, from, created, deleted int }{{40, 0, 40, 0}, {120, 40, 80, 0}, {80, 120, 0, 40}}
	for i, m := range kp {
		p := m.KubeProxySweep
		if p == nil || m.Partial != "" {
			t.Fatalf("%s @%d: point %+v, partial %q", m.Mode, m.Services, p, m.Partial)
		}
		t.Logf("@%d from %d: +%d -%d, writes %v, sync after growth %v, %d kube-proxy syncs (%v, last %v), %d objects, CPU %v + %v, RSS %d MiB",
			p.Services, p.From, p.Created, p.Deleted, time.Duration(p.WritesNs), time.Duration(p.SyncNs), p.KubeProxySyncs,
			time.Duration(p.KubeProxySyncSumNs), time.Duration(p.LastSyncNs), p.Objects, time.Duration(p.CPUNs), time.Duration(p.ChildCPUNs), p.RSSBytes>>20)
		w := want[i]
		if p.Services != w.services || p.From != w.from || p.Created != w.created || p.Deleted != w.deleted {
			t.Errorf("size %d: %+v, want %+v", i, p, w)
		}
		if p.KubeProxySyncs == 0 || p.Objects == 0 || p.CPUNs <= 0 || p.RSSBytes <= 0 {
			t.Errorf("@%d: syncs %d, objects %d, CPU %d, RSS %d: want each", p.Services, p.KubeProxySyncs, p.Objects, p.CPUNs, p.RSSBytes)
		}
		if i > 0 && p.Created > 0 && (p.Probed == 0 || p.SyncNs <= 0) {
			t.Errorf("@%d: %d probed, sync after growth %v", p.Services, p.Probed, time.Duration(p.SyncNs))
		}
		if m.KubeProxy == nil || len(m.KubeProxy.Earlier) != 0 || m.KubeProxy.Log != kp[0].KubeProxy.Log {
			t.Errorf("@%d: kube-proxy record %+v: want the one process of the row", p.Services, m.KubeProxy)
		}
		for _, l := range m.Lookup {
			if l.Errors > 0 || l.Latency.Count == 0 {
				t.Errorf("@%d %s: %d errors, %d answered", p.Services, l.Position, l.Errors, l.Latency.Count)
			}
		}
	}
	if a, b, c := kp[0].KubeProxySweep.Objects, kp[1].KubeProxySweep.Objects, kp[2].KubeProxySweep.Objects; !(a < c && c < b) {
		t.Errorf("rule objects %d, %d, %d at 40, 120, 80 services: want them to follow the size", a, b, c)
	}
	rows := 0
	for _, s := range res.Sections {
		if s.Phase == reports.PhaseKubeProxySweep {
			rows += len(s.Rows)
		}
	}
	if rows != 3 {
		t.Errorf("sweep section has %d rows, want 3", rows)
	}
}
