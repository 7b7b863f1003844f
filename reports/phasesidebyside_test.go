package reports

import (
	"strings"
	"testing"
	"time"
)

// sideBySideFixture is phaseFixture with an "iptables (kube-proxy)" row
// beside the builtin iptables one: its transitions with kube-proxy's own
// cleanup account (one whose counter and log disagree) and its
// lifecycle changes.
func sideBySideFixture() *Result {
	r := phaseFixture()
	kp := r.Modes[0]
	kp.Mode, kp.BaseMode, kp.Implementation = "iptables (kube-proxy)", "iptables", "kube-proxy"
	kp.Transitions = []Transition{
		{Name: "endpoint-removal", Cleanup: true, RecoveryNs: 60_000_000, Observe: 3 * time.Second, Sent: 30, Live: 27, Stale: 2, Lost: 1,
			ConntrackDeleted: 1, FlowsBefore: []string{"198.19.0.5"}, FlowsAfter: []string{"198.19.0.6"}, SyncNs: 80_000_000,
			KubeProxy: &TransitionKubeProxy{Runs: 1, Deleted: 1, LogRuns: 1, LogDeleted: 2, Log: "kube-proxy's -v raised from 2 to 4"}},
		{Name: "restart-1to0to1", Cleanup: true, RecoveryNs: -1, Observe: 3 * time.Second, Sent: 30, Lost: 30,
			KubeProxy: &TransitionKubeProxy{Runs: 0, Deleted: -1}},
	}
	kp.Lifecycle = []LifecycleChange{{Name: "removal", Held: 12, HeldOnChanged: 4, Broken: 0, New: 40, NewFailed: 2, LastToOldNs: -1, FirstSuccessNs: 9_000_000}}
	kp.ConnReuse = nil
	r.Modes = append(r.Modes, kp)
	return r
}

// TestTransitionsSectionKubeProxy: a kube-proxy row's transitions say
// the cleanup is kube-proxy's own, show its cleanups and what its log
// says it deleted, the flows after the sync, and notes for its -v, a
// counter that disagrees with its log and a kube-proxy without the
// counter; builtin rows show "-" for kube-proxy's columns.
func TestTransitionsSectionKubeProxy(t *testing.T) {
	r := sideBySideFixture()
	s := TransitionsSection("iptables (kube-proxy)", r.Modes[2].Transitions, nil)
	checkShape(t, s, "transitions", "iptables (kube-proxy)", 2)
	wantCell(t, s, 0, "conntrack cleanup", "on (kube-proxy's own)", nil)
	wantCell(t, s, 0, "kube-proxy cleanups", "1", v(1))
	wantCell(t, s, 0, "deleted by its log", "2", v(2))
	wantCell(t, s, 0, "flows after (reply src)", "198.19.0.6", nil)
	wantCell(t, s, 1, "deleted by its log", "-", nil)
	notes := strings.Join(s.Notes, "\n")
	for _, w := range []string{"raised from 2 to 4", "counter says 1 entries deleted, its log 2", "before v1.33"} {
		if !strings.Contains(notes, w) {
			t.Errorf("notes %q lack %q", s.Notes, w)
		}
	}
	b := TransitionsSection("iptables", r.Modes[0].Transitions, nil)
	wantCell(t, b, 0, "kube-proxy cleanups", "-", nil)
	wantCell(t, b, 0, "flows after (reply src)", "-", nil)
}

// TestPhaseSideBySide: one run-scoped section per phase with a
// kube-proxy row beside builtin: a row per kube-proxy row's change,
// builtin's figures (its transition with cleanup on) beside kube-proxy's;
// a change builtin lacks has no row; no section without kube-proxy rows;
// every format gets them through AllSections.
func TestPhaseSideBySide(t *testing.T) {
	r := sideBySideFixture()
	secs := PhaseSideBySide(r)
	if len(secs) != 2 {
		t.Fatalf("%d sections, want transitions and lifecycle", len(secs))
	}
	tr, lc := secs[0], secs[1]
	if tr.Scope != "run" || len(tr.Rows) != 1 || tr.Rows[0].Row != r.label(r.Modes[2]) {
		t.Fatalf("transitions side by side: %+v", tr)
	}
	wantCell(t, tr, 0, "transition", "endpoint-removal", nil)
	wantCell(t, tr, 0, "builtin live after", "0.004", v(0.004))
	wantCell(t, tr, 0, "kube-proxy live after", "0.060", v(0.06))
	wantCell(t, tr, 0, "builtin stale", "0", v(0))
	wantCell(t, tr, 0, "kube-proxy stale", "2", v(2))
	wantCell(t, tr, 0, "kube-proxy flows after", "198.19.0.6", nil)
	if len(tr.Notes) != 1 || !strings.Contains(tr.Notes[0], "kube-proxy 2 stale answers, builtin 0") {
		t.Errorf("notes %q", tr.Notes)
	}
	wantCell(t, lc, 0, "change", "removal", nil)
	wantCell(t, lc, 0, "builtin broken", "4", v(4))
	wantCell(t, lc, 0, "kube-proxy broken", "0", v(0))
	wantCell(t, lc, 0, "kube-proxy new failed", "2", v(2))
	if len(lc.Rows) != 1 {
		t.Errorf("lifecycle rows %d, want removal only (builtin has it; restart is builtin's alone)", len(lc.Rows))
	}
	if n := len(PhaseSideBySide(phaseFixture())); n != 0 {
		t.Errorf("%d side-by-side sections without kube-proxy rows", n)
	}
	found := 0
	for _, s := range r.AllSections() {
		if s.Phase == PhaseImplementations {
			found++
		}
	}
	if found != 2 {
		t.Errorf("AllSections has %d side-by-side sections, want 2", found)
	}
	var md strings.Builder
	if err := WriteMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"UDP endpoint transitions: builtin beside kube-proxy", "endpoint lifecycle: builtin beside kube-proxy", "on (kube-proxy's own)"} {
		if !strings.Contains(md.String(), w) {
			t.Errorf("Markdown lacks %q", w)
		}
	}
}
