//go:build linux

package runner

import (
	"errors"
	"testing"
	"time"

	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/workload"
)

// TestSyncWindow: probes started in the second before the sync are the
// baseline, those started during it count (failed, slow, max), later ones
// not at all.
func TestSyncWindow(t *testing.T) {
	from := time.Unix(100, 0)
	to := from.Add(2 * time.Second)
	recs := []probeRec{
		{start: from.Add(-2 * time.Second), lat: time.Millisecond},
		{start: from.Add(-500 * time.Millisecond), err: errors.New("x")},
		{start: from.Add(-100 * time.Millisecond), lat: time.Millisecond},
		{start: from, lat: 300 * time.Millisecond},
		{start: from.Add(time.Second), err: errors.New("timeout")},
		{start: from.Add(1500 * time.Millisecond), lat: 5 * time.Millisecond},
		{start: to, lat: time.Second},
	}
	var w reports.SyncWindow
	window(&w, recs, from, to, 100*time.Millisecond)
	if w.BeforeAttempts != 2 || w.BeforeFailed != 1 || w.Attempts != 3 || w.Failed != 1 || w.Slow != 1 || w.MaxNs != int64(300*time.Millisecond) {
		t.Errorf("window = %+v", w)
	}
	// Successful connects in the window: 300 ms and 5 ms.
	if w.P50Ns != int64(5*time.Millisecond) || w.P99Ns != int64(300*time.Millisecond) {
		t.Errorf("p50 %v p99 %v, want 5ms and 300ms", time.Duration(w.P50Ns), time.Duration(w.P99Ns))
	}
	if got := probeTargets(make([]workload.Service, 10), 4); len(got) != 4 || got[0].Service != 0 || got[1].Service != 3 || got[3].Service != 9 {
		t.Errorf("probeTargets(10, 4) = %v, want services 0 3 6 9", got)
	}
	if got := probeTargets(make([]workload.Service, 10), 1); len(got) != 1 || got[0].Service != 0 {
		t.Errorf("probeTargets(10, 1) = %v, want service 0", got)
	}
}

// TestSyncAnswers: the first and the last probed service to answer are
// taken from each target's first success at or after the window's start
// (its start plus its connect time); failures and earlier successes do
// not count, and a target that never answered leaves the last at -1.
func TestSyncAnswers(t *testing.T) {
	from := time.Unix(100, 0)
	ms := time.Millisecond
	recs := []probeRec{
		{target: 0, start: from.Add(-10 * ms), lat: ms}, // before the window
		{target: 0, start: from.Add(100 * ms), err: errors.New("timeout")},
		{target: 0, start: from.Add(400 * ms), lat: 2 * ms},
		{target: 1, start: from.Add(200 * ms), lat: 50 * ms},
		{target: 1, start: from.Add(900 * ms), lat: ms},
		{target: 2, start: from.Add(1500 * ms), lat: 10 * ms},
	}
	var w reports.SyncWindow
	answers(&w, recs, 3, from)
	if w.Probed != 3 || w.Answered != 3 || w.FirstAnswerNs != int64(250*ms) || w.LastAnswerNs != int64(1510*ms) {
		t.Errorf("answers = probed %d answered %d first %v last %v, want 3 3 250ms 1.51s",
			w.Probed, w.Answered, time.Duration(w.FirstAnswerNs), time.Duration(w.LastAnswerNs))
	}
	answers(&w, recs[:4], 3, from)
	if w.Answered != 2 || w.FirstAnswerNs != int64(250*ms) || w.LastAnswerNs != -1 {
		t.Errorf("with target 2 silent: answered %d first %v last %d, want 2 250ms -1", w.Answered, time.Duration(w.FirstAnswerNs), w.LastAnswerNs)
	}
}

// TestProberPicks: every other pick goes to a target that has not answered
// since the epoch, the rest cycle over all targets; once all answered,
// picks cycle over all.
func TestProberPicks(t *testing.T) {
	p := newProber(make([]workload.Target, 4))
	now := time.Now()
	p.epoch.Store(now.UnixNano())
	p.answered(0, now.Add(time.Millisecond))
	p.answered(1, now.Add(time.Millisecond))
	p.answered(3, now.Add(-time.Second)) // before the epoch: still pending
	for k := 1; k < 20; k += 2 {
		if got := p.pick(k); got != 2 && got != 3 {
			t.Fatalf("pick %d = target %d, want a pending one (2 or 3)", k, got)
		}
	}
	seen := map[int]bool{}
	for k := 0; k < 8; k += 2 {
		seen[p.pick(k)] = true
	}
	if len(seen) != 4 {
		t.Errorf("even picks reached %v, want all 4 targets", seen)
	}
	if p.allAnswered() {
		t.Error("allAnswered with targets 2 and 3 pending")
	}
	p.answered(2, now.Add(time.Millisecond))
	p.answered(3, now.Add(time.Millisecond))
	if !p.allAnswered() {
		t.Error("not allAnswered after every target answered")
	}
}
