//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
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

// slowProxier is a fake proxier whose Sync takes delay before the rules
// change (the data plane answers from p's state).
type slowProxier struct {
	*fakeProxier
	delay time.Duration
}

func (s slowProxier) Sync(ctx context.Context, services []workload.Service) (proxymodes.SyncStats, error) {
	time.Sleep(s.delay)
	return s.fakeProxier.Sync(ctx, services)
}

// restartProxier is a fake kube-proxy: Halt removes the rules when asked
// to clean up, Resume programs them after delay.
type restartProxier struct {
	*fakeProxier
	delay    time.Duration
	services []workload.Service // what the API holds
	calls    []string
	// before is how long Resume takes before the new process starts
	// (kube-proxy's --version check); with it Resume reports Start and
	// its own account of the sync (kube-proxy.metric) as kube-proxy does.
	before time.Duration
}

func (r *restartProxier) Halt(ctx context.Context, cleanup bool) error {
	r.calls = append(r.calls, fmt.Sprintf("halt(%t)", cleanup))
	if cleanup {
		return r.fakeProxier.Cleanup(ctx)
	}
	return nil
}

func (r *restartProxier) Resume(ctx context.Context) (proxymodes.SyncStats, error) {
	r.calls = append(r.calls, "resume")
	time.Sleep(r.before)
	start := time.Now()
	time.Sleep(r.delay)
	st, err := r.fakeProxier.Sync(ctx, r.services)
	if r.before > 0 {
		st.Start, st.Wall = start, time.Since(start)
		st.Phases = map[string]time.Duration{"kube-proxy.metric": r.delay / 2, "kube-proxy.syncEnd": r.delay}
	}
	return st, err
}

func sdScenario(t *testing.T) (*scenarios.Scenario, []workload.Service) {
	return phaseScenario(t, "", "syncDisruption: {syncs: [cold, restart, incremental], services: 4, probes: 2, timeout: 50ms, settle: 2s}\n")
}

// TestSyncDisruptionColdStart: the cold sync removes the node's rules
// before its baseline (every baseline probe fails), and no probed service
// answers before the new proxier's sync is done; the restart keeps
// answering from the old rules; every sync runs in the listed order and the
// mode's proxier programs the services at the end.
func TestSyncDisruptionColdStart(t *testing.T) {
	sc, svcs := sdScenario(t)
	p := newFakeProxier()
	e := newFakeEnv(p)
	if _, err := p.Sync(context.Background(), svcs); err != nil {
		t.Fatal(err)
	}
	const delay = 300 * time.Millisecond
	m := proxymodes.Mode{Name: "fake", New: func(*scenarios.Scenario, proxymodes.Node) (proxymodes.Proxier, error) {
		return slowProxier{p, delay}, nil
	}}
	tb := &topology.Testbed{}
	out, err := syncDisruptionPhase(context.Background(), sc, &e.env, tb, m, p, svcs, &recProgress{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || out[0].Kind != "full (cold start)" || out[1].Kind != "full (restart)" || out[2].Kind != "incremental" {
		t.Fatalf("windows %+v, want cold start, restart, incremental", out)
	}
	cold, restart, inc := out[0], out[1], out[2]
	if cold.BeforeAttempts == 0 || cold.BeforeFailed != cold.BeforeAttempts {
		t.Errorf("cold baseline: %d of %d failed, want all (the node has no rules)", cold.BeforeFailed, cold.BeforeAttempts)
	}
	if cold.Probed != 4 || cold.Answered != 4 || cold.FirstAnswerNs < int64(delay) || cold.LastAnswerNs < cold.FirstAnswerNs || cold.Failed == 0 {
		t.Errorf("cold: probed %d answered %d first %v last %v failed %d; want 4 4, first >= %v, failures during the sync",
			cold.Probed, cold.Answered, time.Duration(cold.FirstAnswerNs), time.Duration(cold.LastAnswerNs), cold.Failed, delay)
	}
	if restart.Failed != 0 || restart.Answered != 4 || restart.LastAnswerNs >= int64(delay) {
		t.Errorf("restart: failed %d answered %d last %v; want 0 failures and every service answering before the sync ends",
			restart.Failed, restart.Answered, time.Duration(restart.LastAnswerNs))
	}
	if inc.Probed != 0 {
		t.Errorf("incremental window has answer times (probed %d)", inc.Probed)
	}
	if p.cleanups != 1 || len(p.state) != len(svcs) {
		t.Errorf("%d cleanups (want 1, the cold start), %d services programmed at the end (want %d)", p.cleanups, len(p.state), len(svcs))
	}
}

// TestSyncDisruptionRestarter: a proxier that restarts itself (kube-proxy)
// is asked to, cold then warm, and no new proxier of the mode is made.
func TestSyncDisruptionRestarter(t *testing.T) {
	sc, svcs := sdScenario(t)
	fp := newFakeProxier()
	r := &restartProxier{fakeProxier: fp, delay: 100 * time.Millisecond, services: svcs}
	e := newFakeEnv(fp)
	if _, err := r.Sync(context.Background(), svcs); err != nil {
		t.Fatal(err)
	}
	m := proxymodes.Mode{Name: "fake", New: func(*scenarios.Scenario, proxymodes.Node) (proxymodes.Proxier, error) {
		return nil, errors.New("a restarter must not be replaced by a new proxier")
	}}
	out, err := syncDisruptionPhase(context.Background(), sc, &e.env, &topology.Testbed{}, m, r, svcs, &recProgress{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.calls, " "); got != "halt(true) resume halt(false) resume" {
		t.Errorf("calls %q, want halt(true) resume halt(false) resume", got)
	}
	if len(out) != 3 || out[0].Answered != 4 || out[0].FirstAnswerNs < int64(r.delay) {
		t.Errorf("cold window %+v: want every service answering, none before the restart's sync", out[0])
	}
}

// TestSyncDisruptionProcessStart: a restarter's first and last answers
// count from its new process's start (SyncStats.Start), not from the
// window's start, and the window says when that start was and carries the
// proxy's own account of the sync.
func TestSyncDisruptionProcessStart(t *testing.T) {
	sc, svcs := sdScenario(t)
	fp := newFakeProxier()
	const before, delay = 400 * time.Millisecond, 100 * time.Millisecond
	r := &restartProxier{fakeProxier: fp, delay: delay, before: before, services: svcs}
	e := newFakeEnv(fp)
	if _, err := r.Sync(context.Background(), svcs); err != nil {
		t.Fatal(err)
	}
	m := proxymodes.Mode{Name: "fake", New: func(*scenarios.Scenario, proxymodes.Node) (proxymodes.Proxier, error) {
		return nil, errors.New("a restarter must not be replaced by a new proxier")
	}}
	out, err := syncDisruptionPhase(context.Background(), sc, &e.env, &topology.Testbed{}, m, r, svcs, &recProgress{})
	if err != nil {
		t.Fatal(err)
	}
	cold := out[0]
	if cold.StartNs < int64(before) {
		t.Errorf("cold: start %v after the window's start, want >= %v (the new process starts after Resume's checks)", time.Duration(cold.StartNs), before)
	}
	if cold.Answered != 4 || cold.FirstAnswerNs < int64(delay) || cold.StartNs+cold.FirstAnswerNs < int64(before+delay) {
		t.Errorf("cold: answered %d, first answer %v from a start at %v; want 4, >= %v from the process start",
			cold.Answered, time.Duration(cold.FirstAnswerNs), time.Duration(cold.StartNs), delay)
	}
	if cold.ProxyMetricNs != int64(delay/2) || cold.ProxySyncEndNs != int64(delay) {
		t.Errorf("cold: own account %v / %v, want %v / %v (SyncStats phases kube-proxy.metric, kube-proxy.syncEnd)",
			time.Duration(cold.ProxyMetricNs), time.Duration(cold.ProxySyncEndNs), delay/2, delay)
	}
	if out[2].StartNs != 0 || out[2].ProxyMetricNs != 0 {
		t.Errorf("incremental window %+v has a start or an own account", out[2])
	}
}
