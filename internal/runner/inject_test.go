//go:build linux

package runner

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
)

// TestInjectSyncErrors: with every: 3, calls 3 and 6 of the wrapped
// programs (counted together) exit 1 without running the tool; the others
// run the real one; restore puts PATH back.
func TestInjectSyncErrors(t *testing.T) {
	testenv.RequireTool(t, "iptables-legacy-restore", "flock")
	restore, err := injectSyncErrors(scenarios.SyncErrorsSpec{Every: 3}, 1)
	if err != nil {
		t.Fatal(err)
	}
	wrapped, _ := exec.LookPath("iptables-legacy-restore")
	var failed []int
	for n := 1; n <= 6; n++ {
		out, err := exec.Command("iptables-legacy-restore", "--version").CombinedOutput()
		switch {
		case err != nil && strings.Contains(string(out), "rule-program call") && strings.Contains(string(out), "fails"):
			failed = append(failed, n)
		case err != nil || !strings.Contains(string(out), "iptables-restore v"):
			t.Fatalf("call %d: %v: %s", n, err, out)
		}
	}
	restore()
	if len(failed) != 2 || failed[0] != 3 || failed[1] != 6 {
		t.Errorf("failed calls %v, want [3 6]", failed)
	}
	if p, _ := exec.LookPath("iptables-legacy-restore"); p == wrapped || !strings.Contains(wrapped, "proxybench-syncerrors-") {
		t.Errorf("wrapper %s, after restore %s", wrapped, p)
	}
}

// TestSyncFailures: a failed sync is described with the next successful
// sync's end as its recovery, the changes made meanwhile and the probes'
// view of that window.
func TestSyncFailures(t *testing.T) {
	s := time.Second.Nanoseconds()
	syncs := []reports.SyncRecord{
		{AtNs: 0},
		{AtNs: 2 * s, Err: "exit status 1"},
		{AtNs: 3 * s, Err: "exit status 1"},
		{AtNs: 4 * s},
		{AtNs: 9 * s, Err: "exit status 4"},
	}
	syncs[1].Kind, syncs[3].Kind, syncs[3].Wall = "incremental", "full", 500*time.Millisecond
	var seen probeBins
	seen.add(1500*time.Millisecond, true)
	seen.add(2500*time.Millisecond, false)
	seen.add(4200*time.Millisecond, true)
	seen.add(5*time.Second, true)
	samples := []reports.ChurnSample{{AtNs: s}, {AtNs: 2 * s}, {AtNs: 3500 * time.Millisecond.Nanoseconds()}, {AtNs: 6 * s}}
	got := syncFailures(syncs, &seen, samples)
	if len(got) != 3 {
		t.Fatalf("%d failures, want 3: %+v", len(got), got)
	}
	f := got[0]
	if f.Index != 1 || f.RecoveredNs != 2500*time.Millisecond.Nanoseconds() || f.RecoveryKind != "full" || f.Changes != 2 || f.ProbeConns != 2 || f.ProbeErrors != 1 {
		t.Errorf("first failure %+v", f)
	}
	if got[2].RecoveredNs != -1 || got[2].Err != "exit status 4" {
		t.Errorf("unrecovered failure %+v", got[2])
	}
}

// TestSyncErrorsNotInjected: with failure.syncErrors set, nftables (whose
// nft knftables resolves once) gets a fault saying plainly that nothing
// was injected, the PATH-wrapped modes get none; with it off, no mode does.
func TestSyncErrorsNotInjected(t *testing.T) {
	sc := &scenarios.Scenario{}
	sc.Failure.SyncErrors = &scenarios.SyncErrorsSpec{Every: 3}
	got := syncErrorsNotInjected(sc, "nftables")
	if !strings.Contains(got, "no sync errors were injected into nftables") || !strings.Contains(got, "resolves nft once") {
		t.Errorf("nftables with syncErrors: fault %q, want it to say no sync errors were injected and why", got)
	}
	for _, mode := range []string{"iptables", "ipvs"} {
		if got := syncErrorsNotInjected(sc, mode); got != "" {
			t.Errorf("%s with syncErrors: fault %q, want none (its programs go through PATH)", mode, got)
		}
	}
	sc.Failure.SyncErrors = nil
	if got := syncErrorsNotInjected(sc, "nftables"); got != "" {
		t.Errorf("nftables without syncErrors: fault %q, want none", got)
	}
}
