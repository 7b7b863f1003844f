//go:build linux

package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/iptables"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// fakeAPI is a churnAPI over a fakeProxier, standing in for kube-proxy
// behind its API server: a write reaches the fake data plane only when
// the fake's own sync loop (every loopEvery, its minSyncPeriod) syncs
// it, and it logs each sync and, per trigger time it programmed, a
// "Network programming" observation from the trigger to that sync's end,
// as kube-proxy does. A service deletion carries no trigger time.
type fakeAPI struct {
	*fakeProxier
	loopEvery time.Duration
	// fail, when set, fails the write of a change it returns an error for.
	fail func(n int, ch workload.Change) error

	mu         sync.Mutex
	api        map[string]workload.Service
	pending    []kubeproxy.Programmed // Service and trigger (At) only
	dirty      bool
	writes     []fakeWrite
	programmed []kubeproxy.Programmed
	logged     []kubeproxy.LoggedSync
	begun      int
	restarts   []time.Duration
	triggers   []int // EndChurn's argument, per phase
	minSync    time.Duration
	stop       chan struct{}
	done       chan struct{}
	// pathFirst is PathFirst's answer: the failure.syncErrors wrappers'
	// folder, as kube-proxy would have it first on its PATH.
	pathFirst string
	// loopSyncs and programmedTotal count the loop's syncs and lines
	// (logged and programmed lose those ReadChurnLog handed over); reads
	// counts the ReadChurnLog calls.
	loopSyncs, programmedTotal, reads int
	// noWrites: writes are not recorded (the memory benchmark: a real
	// kube-proxy's API server keeps them outside proxybench).
	noWrites bool
}

type fakeWrite struct {
	kind, service string
	trigger       time.Time
}

func newFakeAPI() *fakeAPI {
	return &fakeAPI{fakeProxier: newFakeProxier(), loopEvery: 5 * time.Millisecond, minSync: time.Second}
}

func (f *fakeAPI) Mode() string { return "fake (kube-proxy)" }

func (f *fakeAPI) BeginChurn(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.begun++
	f.api = map[string]workload.Service{}
	f.fakeProxier.mu.Lock()
	for _, s := range f.fakeProxier.state {
		f.api[s.Name] = s
	}
	f.fakeProxier.mu.Unlock()
	f.stop, f.done = make(chan struct{}), make(chan struct{})
	go f.loop()
	return nil
}

// loop is the fake kube-proxy's own sync loop.
func (f *fakeAPI) loop() {
	defer close(f.done)
	for {
		select {
		case <-f.stop:
			return
		case <-time.After(f.loopEvery):
		}
		f.mu.Lock()
		if !f.dirty {
			f.mu.Unlock()
			continue
		}
		start := time.Now()
		state := make([]workload.Service, 0, len(f.api))
		for _, s := range f.api {
			state = append(state, s)
		}
		pending := f.pending
		f.pending, f.dirty = nil, false
		f.fakeProxier.mu.Lock()
		f.fakeProxier.state = state
		f.fakeProxier.mu.Unlock()
		end := time.Now()
		for _, p := range pending {
			f.programmed = append(f.programmed, kubeproxy.Programmed{Service: p.Service, At: end, Elapsed: end.Sub(p.At)})
			f.programmedTotal++
		}
		f.logged = append(f.logged, kubeproxy.LoggedSync{Start: start, End: end, Elapsed: end.Sub(start), Kind: "partial"})
		f.loopSyncs++
		f.mu.Unlock()
	}
}

func (f *fakeAPI) WriteChange(_ context.Context, ch workload.Change, s workload.Service, trigger time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.writes)
	if !f.noWrites {
		f.writes = append(f.writes, fakeWrite{kind: ch.Kind, service: s.Namespace + "/" + s.Name, trigger: trigger})
	}
	if f.fail != nil {
		if err := f.fail(n, ch); err != nil {
			return err
		}
	}
	if ch.Kind == workload.ServiceDelete {
		delete(f.api, s.Name)
	} else {
		f.api[s.Name] = s
		f.pending = append(f.pending, kubeproxy.Programmed{Service: s.Namespace + "/" + s.Name, At: trigger})
	}
	f.dirty = true
	return nil
}

func (f *fakeAPI) EndChurn(_ context.Context, triggers int) (kubeproxy.ChurnAccount, error) {
	// As kube-proxy's: wait until the loop has programmed every trigger.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		f.mu.Lock()
		n := f.programmedTotal
		f.mu.Unlock()
		if n >= triggers {
			break
		}
	}
	f.triggers = append(f.triggers, triggers)
	close(f.stop)
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	a := kubeproxy.ChurnAccount{Version: "v0.0.0-fake", PerChange: "fake", Programmed: slices.Clone(f.programmed), Logged: slices.Clone(f.logged),
		CPU: 30 * time.Millisecond, PeakRSS: 50 << 20, MinSyncPeriod: f.minSync, SyncPeriod: time.Hour}
	bounds := reports.ProgrammingBuckets()
	a.Programming = kubeproxy.Histogram{Bounds: bounds, Buckets: make([]uint64, len(bounds))}
	for _, p := range f.programmed {
		a.Programming.Count++
		a.Programming.Sum += p.Elapsed.Seconds()
		for i, b := range bounds {
			if p.Elapsed.Seconds() <= b {
				a.Programming.Buckets[i]++
			}
		}
	}
	a.Syncs = kubeproxy.Histogram{Count: uint64(len(f.logged))}
	return a, nil
}

// ReadChurnLog hands over the lines and syncs logged since the last
// read and forgets them, as kube-proxy's log file keeps them outside
// proxybench (each of the fake's syncs is whole: its lines are logged
// with it).
func (f *fakeAPI) ReadChurnLog() ([]kubeproxy.Programmed, []kubeproxy.LoggedSync, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	p, l := f.programmed, f.logged
	f.programmed, f.logged = nil, nil
	return p, l, nil
}

func (f *fakeAPI) UseMinSyncPeriod(_ context.Context, d time.Duration) (bool, proxymodes.SyncStats, error) {
	want := kubeproxy.KubeProxyMinSync("iptables", d)
	if want == f.minSync {
		return false, proxymodes.SyncStats{}, nil
	}
	f.restarts = append(f.restarts, d)
	f.minSync = want
	return true, proxymodes.SyncStats{Kind: "full", Wall: 7 * time.Millisecond}, nil
}

func (f *fakeAPI) SyncPeriods() (time.Duration, time.Duration) { return f.minSync, time.Hour }

func (f *fakeAPI) PathFirst() string { return f.pathFirst }

var _ churnAPI = (*fakeAPI)(nil)

// churnAPIScenario is a small churn scenario with every kind of change.
func churnAPIScenario(t *testing.T, extra string) (*scenarios.Scenario, []workload.Service) {
	return phaseScenario(t, "", "churn: {rate: 40, duration: 1s, grace: 3s, probes: 4, mix: {endpointAdd: 1, endpointRemove: 1, readinessFlip: 1, serviceCreate: 1, serviceDelete: 1}}\n"+extra)
}

// TestChurnThroughFakeAPI: with a proxier that syncs on its own
// (kube-proxy's seam, a fake API writer here), the churn phase writes
// every change once, stamped with the change's own time (the instant
// the data plane's clock starts), a service's changes in order, never
// syncs the proxier itself, sees
// every change in the data plane, and keeps the proxier's account
// beside it: its syncs, its programming histogram, and per change its
// own latency (none for a deletion).
func TestChurnThroughFakeAPI(t *testing.T) {
	sc, svcs := churnAPIScenario(t, "")
	f := newFakeAPI()
	if _, err := f.Sync(context.Background(), svcs); err != nil {
		t.Fatal(err)
	}
	e := newFakeEnv(f.fakeProxier)
	res, err := runChurn(context.Background(), sc, &e.env, f.Mode(), svcs, newAPIApplier(f, 0), time.Second, time.Hour, &recProgress{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.syncs != 1 {
		t.Errorf("the proxier was synced %d times, want only the sync before the phase: kube-proxy runs its own loop", f.syncs)
	}
	if res.Changes < 20 || res.Observed != res.Changes {
		t.Fatalf("%d changes, %d observed: want every change seen in the data plane", res.Changes, res.Observed)
	}
	if len(f.writes) != res.Changes {
		t.Fatalf("%d writes for %d changes", len(f.writes), res.Changes)
	}
	last := map[string]time.Time{}
	for _, w := range f.writes {
		if w.trigger.Before(last[w.service]) {
			t.Errorf("%s: a write of %v reached the API after one of %v: one service's writes go in order", w.service, w.trigger, last[w.service])
		}
		last[w.service] = w.trigger
	}
	ws := slices.Clone(f.writes)
	sort.Slice(ws, func(i, j int) bool { return ws[i].trigger.Before(ws[j].trigger) })
	kinds := map[string]int{}
	deletes := 0
	for i, w := range ws {
		kinds[w.kind]++
		if w.kind == workload.ServiceDelete {
			deletes++
		}
		s := res.Samples[i]
		if w.kind != s.Kind || w.trigger.Sub(ws[0].trigger) != time.Duration(s.AtNs-res.Samples[0].AtNs) {
			t.Errorf("write %d: %s at +%v, want change %d's %s at +%v: the trigger time is the change's", i, w.kind, w.trigger.Sub(ws[0].trigger), i, s.Kind, time.Duration(s.AtNs-res.Samples[0].AtNs))
		}
	}
	for k, n := range res.ByKind {
		if kinds[k] != n {
			t.Errorf("%s: %d written, %d made", k, kinds[k], n)
		}
	}
	if len(res.ByKind) < 4 || deletes == 0 {
		t.Errorf("kinds %v: want every kind of the mix, deletions included", res.ByKind)
	}
	kp := res.KubeProxy
	if kp == nil {
		t.Fatal("no kube-proxy account")
	}
	want := res.Changes - deletes
	if !slices.Equal(f.triggers, []int{want}) {
		t.Errorf("EndChurn waited for %v trigger times, want [%d] (the writes but deletions)", f.triggers, want)
	}
	if int(kp.Programming.Count) != want || kp.Logged != want || kp.Matched != want {
		t.Errorf("programming observations %d, logged %d, matched %d: want %d (every change but the deletions)", kp.Programming.Count, kp.Logged, kp.Matched, want)
	}
	for _, s := range res.Samples {
		if (s.Kind == workload.ServiceDelete) != (s.KubeProxyNs == 0) || s.KubeProxyNs < 0 || s.KubeProxyNs > int64(5*time.Second) {
			t.Errorf("%s: kube-proxy's own latency %v (data plane %v)", s.Kind, time.Duration(s.KubeProxyNs), time.Duration(s.LatencyNs))
		}
	}
	if len(res.Syncs) == 0 || len(res.Syncs) != len(f.logged) || res.SyncSummary["incremental"].Count != len(res.Syncs) {
		t.Errorf("%d syncs recorded (%v), the fake logged %d partial ones", len(res.Syncs), res.SyncSummary, len(f.logged))
	}
	if kp.Writes != res.Changes || kp.WriteErrors != 0 || kp.WriteLatency.Count != res.Changes || kp.MinSyncPeriodNs != int64(time.Second) {
		t.Errorf("writes %d, errors %d, latencies %d, minSyncPeriod %v", kp.Writes, kp.WriteErrors, kp.WriteLatency.Count, time.Duration(kp.MinSyncPeriodNs))
	}
	if p50 := kp.Programming.Quantile(0.5); !(p50 > 0 && p50 <= 0.25) {
		t.Errorf("kube-proxy metric p50 %g s, want within its first bucket (the fake syncs every 5 ms)", p50)
	}
	if res.SyncCPUNs != kp.CPUNs+kp.ChildCPUNs {
		t.Errorf("sync CPU %d, want kube-proxy's %d", res.SyncCPUNs, kp.CPUNs+kp.ChildCPUNs)
	}
}

// TestChurnFakeAPIWriteFails: a write the API refuses is counted with its
// error and its change (an endpoint added) stays unobserved; the phase
// goes on.
func TestChurnFakeAPIWriteFails(t *testing.T) {
	sc, svcs := phaseScenario(t, "", "churn: {rate: 40, duration: 500ms, grace: 1s, probes: 2}\n")
	f := newFakeAPI()
	failed := false
	f.fail = func(_ int, ch workload.Change) error {
		// An appearance: no probe can see it without the write (a
		// removal can look done by chance, ConfirmMisses).
		if ch.Kind == workload.EndpointAdd && !failed {
			failed = true
			return errors.New("etcdserver: request timed out")
		}
		return nil
	}
	if _, err := f.Sync(context.Background(), svcs); err != nil {
		t.Fatal(err)
	}
	e := newFakeEnv(f.fakeProxier)
	res, err := runChurn(context.Background(), sc, &e.env, f.Mode(), svcs, newAPIApplier(f, 0), time.Second, time.Hour, &recProgress{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kp := res.KubeProxy
	if kp.WriteErrors != 1 || !strings.Contains(kp.WriteError, "request timed out") || res.Unobserved != 1 || res.Observed != res.Changes-1 {
		t.Errorf("write errors %d (%q), %d of %d observed, %d unobserved: want the failed write's change alone unseen", kp.WriteErrors, kp.WriteError, res.Observed, res.Changes, res.Unobserved)
	}
}

// TestChurnPhaseKubeProxySweep: a kube-proxy row sweeping minSyncPeriod
// restarts kube-proxy once per value it does not run with (0 s as 1ns,
// kube-proxy's 0 being 1 s), records each phase under the swept value
// with its restart, and gives kube-proxy its own value back when a
// later phase runs on it; the report has both columns for each phase.
func TestChurnPhaseKubeProxySweep(t *testing.T) {
	sc, svcs := churnAPIScenario(t, "sweep: {minSyncPeriod: [0s, 20ms]}\n")
	sc.Churn.Duration.Duration = 300 * time.Millisecond
	f := newFakeAPI()
	if _, err := f.Sync(context.Background(), svcs); err != nil {
		t.Fatal(err)
	}
	e := newFakeEnv(f.fakeProxier)
	m := proxymodes.Mode{Name: "fake (kube-proxy)", Base: "iptables", Implementation: scenarios.ImplKubeProxy, SyncPeriods: iptables.Mode.SyncPeriods}
	mr := &reports.ModeResult{Mode: m.Name, Implementation: scenarios.ImplKubeProxy}
	r := &Row{Sc: sc, O: Options{Progress: &recProgress{}}, Env: &e.env, Mode: m, Proxier: f, Services: svcs, Result: mr, later: []string{"syncDisruption"}}
	if err := churnPhaseV.Run(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{0, 20 * time.Millisecond, time.Second}; !slices.Equal(f.restarts, want) {
		t.Errorf("restarts with %v, want %v (the sweep, then its own value back)", f.restarts, want)
	}
	if len(mr.Churn) != 2 || mr.Churn[0].MinSyncPeriodNs != 0 || mr.Churn[1].MinSyncPeriodNs != int64(20*time.Millisecond) {
		t.Fatalf("churn phases %d, want one per swept value", len(mr.Churn))
	}
	for _, c := range mr.Churn {
		if c.KubeProxy == nil || c.KubeProxy.RestartNs != int64(7*time.Millisecond) || c.Observed != c.Changes {
			t.Errorf("minSyncPeriod %v: account %+v, %d of %d observed", time.Duration(c.MinSyncPeriodNs), c.KubeProxy, c.Observed, c.Changes)
		}
	}
	if f.syncs != 3 {
		t.Errorf("%d proxier syncs, want the first and one sync back before each phase", f.syncs)
	}
	secs := churnPhaseV.Report("fake (kube-proxy)", mr)
	if len(secs) != 2 || len(secs[0].Rows) != 2 || len(secs[1].Rows) != 2 {
		t.Fatalf("sections %+v, want the latency and cost tables with a row per phase", secs)
	}
	if got := secs[0].RowNames(); got[0] != "fake (kube-proxy), 0s" || got[1] != "fake (kube-proxy), 20ms" {
		t.Errorf("row names %q", got)
	}

	// Without later phases the last swept value stays.
	f.restarts = nil
	r.later, r.Result = nil, &reports.ModeResult{}
	if err := churnPhaseV.Run(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{0, 20 * time.Millisecond}; !slices.Equal(f.restarts, want) {
		t.Errorf("restarts %v, want %v", f.restarts, want)
	}
}

// TestMatchProgrammed pairs kube-proxy's log lines with the changes by
// service and trigger time, each line once; a line of another service,
// or too far from any change's time, stays unmatched.
func TestMatchProgrammed(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	changes := []appliedChange{{"pb/a", t0}, {"pb/b", t0.Add(ms(10))}, {"pb/a", t0.Add(ms(900))}, {"pb/c", t0.Add(ms(950))}}
	line := func(svc string, trigger time.Time, elapsed time.Duration) kubeproxy.Programmed {
		return kubeproxy.Programmed{Service: svc, At: trigger.Add(elapsed).Add(40 * time.Microsecond), Elapsed: elapsed}
	}
	lines := []kubeproxy.Programmed{
		line("pb/a", t0.Add(ms(900)), ms(300)), // the second change of a, logged first
		line("pb/a", t0, ms(1200)),
		line("pb/b", t0.Add(ms(10)), ms(250)),
		line("pb/x", t0.Add(ms(950)), ms(5)),  // another service
		line("pb/c", t0.Add(ms(2000)), ms(5)), // more than the tolerance away
	}
	if got, want := matchProgrammed(changes, lines, matchTolerance), []int{1, 2, 0, -1}; !slices.Equal(got, want) {
		t.Errorf("matched lines %v, want %v", got, want)
	}
}

// TestSeenBeforeSync: an observation before the start of the sync whose
// span holds the change's programming line was made before any rule
// changed; one during or after that sync was not.
func TestSeenBeforeSync(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	syncs := []kubeproxy.LoggedSync{{Start: ms(0), End: ms(100)}, {Start: ms(1000), End: ms(1300)}}
	for _, tc := range []struct {
		seen, programmed int
		want             bool
	}{{900, 1290, true}, {1100, 1290, false}, {1350, 1290, false}, {50, 90, false}, {500, 600, false}} {
		if got := seenBeforeSync(ms(tc.seen), ms(tc.programmed), syncs); got != tc.want {
			t.Errorf("seen at %d ms, programmed at %d ms: %v, want %v", tc.seen, tc.programmed, got, tc.want)
		}
	}
}

// TestChurnRefusalGone: validate accepts churn, transitions, lifecycle
// and connReuse with kube-proxy rows (each runs with kube-proxy now: no
// phase of those says NotWithKubeProxy), and refuses none of them with
// "not yet with implementation kube-proxy".
func TestChurnRefusalGone(t *testing.T) {
	cat := scenarios.Catalog{Modes: []string{"none", "iptables", "nftables", "ipvs"}, Phases: PhaseRules()}
	base := "modes: [iptables, ipvs]\nimplementation: [builtin, kube-proxy]\nservices: {count: 10}\n"
	for _, tc := range []struct{ field, yaml string }{
		{"churn", "churn: {rate: 5}\nsweep: {minSyncPeriod: [0s, 1s]}\n"},
		{"lifecycle", "lifecycle: {}\n"},
		{"connReuse", "connReuse: {}\n"},
		{"transitions", "transitions: {withoutCleanup: true}\n"},
	} {
		if _, err := cat.Parse([]byte(base+tc.yaml), "c.yaml"); err != nil {
			t.Errorf("%s with kube-proxy rows refused: %v", tc.field, err)
		}
		for _, ph := range Phases {
			if ph.Field == tc.field && ph.NotWithKubeProxy != "" {
				t.Errorf("%s still says %q", tc.field, ph.NotWithKubeProxy)
			}
		}
	}
}

// TestChurnFakeAPISyncErrors: with failure.syncErrors, a kube-proxy
// row's phase arms the wrappers in the folder first on its PATH for the
// phase (the fail list is there while the changes are written), disarms
// them before kube-proxy's last syncs, and keeps their account; without
// that folder the phase refuses to start.
func TestChurnFakeAPISyncErrors(t *testing.T) {
	testenv.RequireTool(t, "flock")
	sc, svcs := phaseScenario(t, "", "churn: {rate: 40, duration: 300ms, grace: 1s, probes: 2}\nfailure: {syncErrors: {every: 2}}\n")
	f := newFakeAPI()
	w, err := writeSyncErrorWrappers(filepath.Join(t.TempDir(), "syncerrors"), kubeProxyWrapped, true)
	if err != nil {
		t.Fatal(err)
	}
	f.pathFirst = w.dir
	armed := 0
	f.fail = func(int, workload.Change) error {
		if _, err := os.Stat(filepath.Join(w.dir, "fail")); err == nil {
			armed++
		}
		return nil
	}
	if _, err := f.Sync(context.Background(), svcs); err != nil {
		t.Fatal(err)
	}
	e := newFakeEnv(f.fakeProxier)
	ap := newAPIApplier(f, 0).withSyncErrors(sc.Failure.SyncErrors, sc.Seed)
	res, err := runChurn(context.Background(), sc, &e.env, f.Mode(), svcs, ap, time.Second, time.Hour, &recProgress{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if armed != res.Changes || res.Changes == 0 {
		t.Errorf("%d of %d writes made while armed", armed, res.Changes)
	}
	if _, err := os.Stat(filepath.Join(w.dir, "fail")); !errors.Is(err, os.ErrNotExist) || res.Injected == nil {
		t.Errorf("after the phase: fail list %v, account %+v: want disarmed, with an account", err, res.Injected)
	}
	f2 := newFakeAPI()
	if _, err := f2.Sync(context.Background(), svcs); err != nil {
		t.Fatal(err)
	}
	_, err = runChurn(context.Background(), sc, &newFakeEnv(f2.fakeProxier).env, f2.Mode(), svcs, newAPIApplier(f2, 0).withSyncErrors(sc.Failure.SyncErrors, sc.Seed), time.Second, time.Hour, &recProgress{}, nil)
	if err == nil || !strings.Contains(err.Error(), "failure.syncErrors") {
		t.Errorf("without the wrappers' folder: %v, want a failure.syncErrors error", err)
	}
}
