package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/topology"
)

// TestKernelRunKeepsKilledKubeProxyRow: `run` with an iptables kube-proxy
// row (20 services) whose kube-proxy is SIGKILLed after its first sync
// (at its second iptables-restore: a later sync; testenv.KubeProxyShim),
// then mode none. The run goes on to none and exits 1 (a row failed, as
// when a row stops the run), and the result it saves is whole (not
// partial) with both rows: the kube-proxy row marked failed, with how
// kube-proxy exited and the figures measured before (sync.full, the
// setup, kube-proxy's metric of its first sync from its last scrape, its
// CPU and RSS, its log's tail); none measured in full. Nothing of the
// run is left.
func TestKernelRunKeepsKilledKubeProxyRow(t *testing.T) {
	testenv.RequireKernel(t, "iptables", "iptables-save", "iptables-restore")
	kb := testenv.RequireKube(t)
	wrapper := testenv.KubeProxyShim(t, kb.KubeProxy, "iptables-restore", 2, testenv.ShimKill)
	runID := topology.NewRunID()
	out := filepath.Join(t.TempDir(), "r.json")
	body := "services: {count: 20}\nmodes: [iptables, none]\nimplementation: [kube-proxy]\nrepetitions: 1\ntraffic: {connections: 50, positions: [first]}\n"
	t0 := time.Now()
	stdout, stderr, code := run(t, []string{"PROXYBENCH_KUBE_BIN=" + filepath.Dir(kb.KubeProxy)},
		"run", "--quiet", "--kernel", "host", "--run-id", runID, "--kube-proxy", wrapper, "--output", out, writeFile(t, body))
	t.Logf("run took %v; stderr:\n%s", time.Since(t0).Round(time.Millisecond), stderr)
	if code != 1 || !strings.Contains(stderr, "1 row(s) failed") || !strings.Contains(stderr, "mode iptables (kube-proxy) at 20 services") ||
		!strings.Contains(stderr, "signal: killed") || !strings.Contains(stderr, "the result, every row in it, is saved at "+out) {
		t.Fatalf("exit %d, want 1 saying the kube-proxy row failed and how; stderr:\n%s\nstdout:\n%s", code, stderr, stdout)
	}
	if n := testenv.ShimCalls(t, wrapper); n != 2 {
		t.Errorf("iptables-restore called %d times, want 2 (the first sync's, then the kill)", n)
	}
	if !strings.Contains(stdout, "result: "+out) || !strings.Contains(stdout, "FAILED") {
		t.Errorf("stdout lacks the saved result and the FAILED row:\n%s", stdout)
	}
	r, err := reports.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Partial != "" || len(r.Modes) != 2 || r.Modes[0].Mode != "iptables (kube-proxy)" || r.Modes[1].Mode != "none" {
		t.Fatalf("result partial %q, %d rows; want a whole result with iptables (kube-proxy) then none", r.Partial, len(r.Modes))
	}
	kpRow, none := r.Modes[0], r.Modes[1]
	t.Logf("failed row: %s; partial: %s", kpRow.Failed, kpRow.Partial)
	if !strings.Contains(kpRow.Failed, "kube-proxy exited on its own") || !strings.Contains(kpRow.Failed, "signal: killed") {
		t.Errorf("kube-proxy row failed %q, want why", kpRow.Failed)
	}
	if len(kpRow.SyncFull) != 1 || kpRow.SyncFull[0].Wall <= 0 || kpRow.SyncFullSummary.Count != 1 {
		t.Errorf("kube-proxy row sync.full %+v, want its first sync kept", kpRow.SyncFull)
	}
	kp := kpRow.KubeProxy
	if kp == nil {
		t.Fatal("kube-proxy row has no record")
	}
	if kp.ControlPlaneNs <= 0 || kp.APIObjects < 20 || kp.CPUNs <= 0 || kp.PeakRSSBytes <= 0 {
		t.Errorf("record %+v: want the setup, CPU and RSS", kp)
	}
	// kube-proxy's sync runner allows a burst of 2 syncs (pkg/proxy
	// async.BoundedFrequencyRunner, burstSyncs): when a change lands just
	// after the first sync, the second restore (the kill) follows within
	// milliseconds, before any scrape saw the first done; the row then
	// says kube-proxy died during its first sync, which is what was seen.
	if n, _ := measure.MetricDelta(nil, kp.AfterFullSync, "kubeproxy_sync_proxy_rules_duration_seconds", "IPv4"); kp.Exit == nil || !strings.Contains(kp.Exit.During, "first sync") {
		if n < 1 || kp.FirstSyncNs <= 0 {
			t.Errorf("record %+v: killed after its first sync was seen, want that sync with kube-proxy's metric of it", kp)
		}
	} else {
		t.Logf("the kill came before a scrape saw the first sync done (%s): its metric is not checked", kp.Exit.During)
	}
	if e := kp.Exit; e == nil || e.Signal != "SIGKILL" || e.Status != "signal: killed" || e.During == "" || len(e.LogTail) == 0 || e.LastScrapeNs <= 0 {
		t.Errorf("record's exit %+v: want SIGKILL, when, the last scrape and the log's tail", kp.Exit)
	}
	if kpRow.Info["exit"] == "" {
		t.Errorf("kube-proxy row info %v lacks the exit", kpRow.Info)
	}
	if none.Failed != "" || none.Partial != "" || len(none.Lookup) != 1 || none.Lookup[0].Latency.Count != 50 {
		t.Errorf("none after the failed row: failed %q, partial %q, lookup %+v; want it measured in full", none.Failed, none.Partial, none.Lookup)
	}
	if left := topology.ChildProcesses(runID); len(left) > 0 {
		t.Errorf("processes of run %s left: %v", runID, left)
	}
	if left, _ := topology.Leftovers(); containsRun(left, runID) {
		t.Errorf("run %s left namespaces: %v", runID, left)
	}
}
