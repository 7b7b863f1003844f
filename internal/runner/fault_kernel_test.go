//go:build linux

package runner

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/reports"
)

// runFaults runs scenario text for real and returns its one row.
func runFaults(t *testing.T, text string) reports.ModeResult {
	t.Helper()
	res := runChecked(t, "faults-test.yaml", text)
	if len(res.Modes) != 1 {
		t.Fatalf("%d rows, want 1", len(res.Modes))
	}
	return res.Modes[0]
}

// checkCrash: each crash's outage lasts at least its back-off (the
// change made after the kill cannot be served before the restart),
// probes reached the removed endpoint meanwhile (the old rules stay),
// and the rules and the probes converged.
func checkCrash(t *testing.T, cs []reports.CrashCase, n int) {
	t.Helper()
	if len(cs) != n {
		t.Fatalf("%d crashes, want %d", len(cs), n)
	}
	for _, c := range cs {
		t.Logf("crash %d: back-off %v, first sync %v, outage %v, rules %v, stale served %d of %d, failed %d", c.Crash,
			time.Duration(c.BackoffNs), time.Duration(c.SyncNs), time.Duration(c.Conv.ProbesNs), time.Duration(c.Conv.RulesNs), c.Conv.Stale, c.Conv.Probes, c.Conv.Failed)
		if c.Conv.ProbesNs < c.StartNs || c.Conv.RulesNs < c.StartNs || c.SyncNs <= 0 {
			t.Errorf("crash %d: outage %v, rules %v, before the restart at %v (or never), first sync %v", c.Crash,
				time.Duration(c.Conv.ProbesNs), time.Duration(c.Conv.RulesNs), time.Duration(c.StartNs), time.Duration(c.SyncNs))
		}
		if c.StartNs < c.BackoffNs || c.Conv.Stale == 0 || c.Conv.MaxStale != c.Conv.Changed || c.Conv.MaxMissing != c.Conv.Changed {
			t.Errorf("crash %d: start %v before back-off %v, or no stale endpoint seen (probes %d, rules stale %d missing %d of %d)", c.Crash,
				time.Duration(c.StartNs), time.Duration(c.BackoffNs), c.Conv.Stale, c.Conv.MaxStale, c.Conv.MaxMissing, c.Conv.Changed)
		}
	}
}

// checkRestart: with changes, every flow's stale conntrack entry was
// deleted by the restarted proxy's cleanup and the flow moved to its
// new endpoint, none answered from the removed one after the first
// sync; held TCP connections survive.
func checkRestart(t *testing.T, cs []reports.RestartCase) {
	t.Helper()
	if len(cs) != 1 || cs[0].Case != "changes" {
		t.Fatalf("restart cases %+v", cs)
	}
	c := cs[0]
	moved, deleted, broken, sent, lost, toRemoved, hole := c.Totals()
	t.Logf("restart: first sync %v, %d flows: moved %d, deleted %d, broken %d, %d datagrams %d lost, longest hole %v, to removed %d",
		time.Duration(c.SyncNs), len(c.Flows), moved, deleted, broken, sent, lost, time.Duration(hole), toRemoved)
	if !c.EntryStamps {
		t.Fatal("no conntrack timestamps in the node")
	}
	if moved != len(c.Flows) || deleted != len(c.Flows) || toRemoved != 0 || broken != 0 || sent == 0 {
		t.Errorf("flows %+v", c.Flows)
	}
}

// TestKernelFaultsBuiltin runs faults.restart (changes) and faults.crash
// for real on a builtin iptables row at 20 services (a 200 ms gap and
// back-off): see checkRestart and checkCrash; nothing of the run is
// left and the root namespace is unchanged. About 6 s.
func TestKernelFaultsBuiltin(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore")
	m := runFaults(t, `
seed: 3
repetitions: 1
modes: [iptables]
services: {count: 20, endpoints: {count: 3}}
traffic: {connections: 20, positions: [first]}
faults:
  restart: {cases: [changes], services: 2, gap: 200ms, observe: 1s}
  crash: {crashes: 1, backoff: 300ms, services: 3, probes: 2, settle: 10s}
`)
	checkRestart(t, m.Restart)
	checkCrash(t, m.Crash, 1)
}

// TestKernelFaultsKubeProxy runs the three process faults for real on a
// kube-proxy iptables row at 20 services: an API server outage of 2 s
// (kube-apiserver), then of etcd, converges (the writes land after the
// component is back, the rules then match), a restart with changes
// (checkRestart), a crash (checkCrash); nothing of the run is left and
// the root namespace is unchanged. A control plane, kube-proxy's
// starts and the outages: about 60 s, behind RequireSlow.
func TestKernelFaultsKubeProxy(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore")
	kb := testenv.RequireKube(t)
	testenv.RequireSlow(t, "starts a control plane, stops and starts its components and kube-proxy (about 60 s)")
	t.Setenv(KubeBinEnv, filepath.Dir(kb.KubeProxy))
	m := runFaults(t, `
seed: 3
repetitions: 1
modes: [iptables]
implementation: [kube-proxy]
services: {count: 20, endpoints: {count: 3}}
traffic: {connections: 20, positions: [first]}
iptables: {minSyncPeriod: 1s, syncPeriod: 30s}
faults:
  apiOutage: {components: [kube-apiserver, etcd], duration: 2s, services: 3, probes: 2, settle: 60s}
  restart: {cases: [changes], services: 2, gap: 1s, observe: 2s}
  crash: {crashes: 1, backoff: 1s, services: 3, probes: 2, settle: 30s}
`)
	if len(m.APIOutage) != 2 {
		t.Fatalf("API outage cases %+v", m.APIOutage)
	}
	for _, c := range m.APIOutage {
		t.Logf("%s down %v, ready %v, %d writes (%d errors), written %v, rules %v, probes %v, stale %d of %d, timeline %s", c.Component,
			time.Duration(c.DownNs), time.Duration(c.ReadyNs), c.Writes, c.WriteErrors, time.Duration(c.WrittenNs), time.Duration(c.Conv.RulesNs),
			time.Duration(c.Conv.ProbesNs), c.Conv.Stale, c.Conv.Probes, c.Conv.Timeline())
		if c.WrittenNs < c.DownNs || c.WriteErrors == 0 || c.Conv.RulesNs < c.WrittenNs || c.Conv.ProbesNs < c.WrittenNs {
			t.Errorf("%s: written %v (%d errors) before the API was back at %v, or the data plane (rules %v, probes %v) before the writes",
				c.Component, time.Duration(c.WrittenNs), c.WriteErrors, time.Duration(c.DownNs), time.Duration(c.Conv.RulesNs), time.Duration(c.Conv.ProbesNs))
		}
	}
	checkRestart(t, m.Restart)
	checkCrash(t, m.Crash, 1)
}
