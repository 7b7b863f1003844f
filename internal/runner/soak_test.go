//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/observe"
)

// fakeSyncs is a sync loop's record, drained by the sampler.
type fakeSyncs struct{ recs []reports.SyncRecord }

func (f *fakeSyncs) drain() []reports.SyncRecord {
	out := f.recs
	f.recs = nil
	return out
}

// TestSoakSampler: a sample reads what happened since the previous one
// (syncs' CPU and the objects they wrote, changes, changes seen with
// their latency, traffic) and what stands at its moment (the kernel's
// objects read back, conntrack, memory; the last full sync's objects),
// and the next sample starts from zero; a failed reading is a fault.
func TestSoakSampler(t *testing.T) {
	e := &env{}
	ct := 0
	e.conntrackCount = func(n int) (int, error) {
		if n != 0 {
			return 0, fmt.Errorf("node %d", n)
		}
		ct += 100
		if ct > 200 {
			return 0, errors.New("netlink: no conntrack")
		}
		return ct, nil
	}
	cpu := time.Second
	self := func() selfStats {
		cpu += 250 * time.Millisecond
		return selfStats{rss: 80 << 20, heap: 30 << 20, goroutines: 12, cpu: cpu}
	}
	syncs := &fakeSyncs{}
	var tracker observe.Tracker
	var tr soakTraffic
	var changes atomic.Int64
	t0 := time.Unix(1000, 0)
	s := &soakSampler{e: e, loop: syncs, tracker: &tracker, traffic: &tr, changes: &changes, self: self, start: t0, last: t0, lastCPU: self().cpu}

	// The read-back as the objectReader leaves it: the first sample finds
	// none yet, the second read 1 (finished 400 ms before), the third a
	// failed read 2 (a fault once), the fourth still read 2 (no new fault).
	rb := readBack{}
	s.readBack = func() readBack { return rb }
	syncs.recs = []reports.SyncRecord{{SyncStats: proxymodes.SyncStats{Kind: "full", CPU: 30 * time.Millisecond, Objects: 90}},
		{SyncStats: proxymodes.SyncStats{Kind: "incremental", CPU: 20 * time.Millisecond, Objects: 15}}, {SyncStats: proxymodes.SyncStats{CPU: 5 * time.Millisecond}, Err: "restore failed"}}
	ep := netip.MustParseAddr("198.19.0.9")
	var obs []*observe.Observation
	for i := range 4 {
		o := observe.New(workload.Change{Kind: workload.EndpointAdd, Endpoint: ep}, t0)
		tracker.Add(o)
		obs = append(obs, o)
		changes.Add(1)
		if i < 3 {
			tracker.See(o, t0.Add(time.Duration(i+1)*10*time.Millisecond), ep, true)
		}
	}
	for i := range 10 {
		tr.schedule()
		switch {
		case i < 7:
			tr.done("", time.Duration(100+i)*time.Microsecond, time.Millisecond, false)
		case i < 9:
			tr.done("timeout", 0, 0, i == 8) // one in the connect, one after it
		}
	}
	tr.schedule()
	tr.done(overrun, 0, 3*time.Millisecond, false)

	x, _ := s.sample(context.Background(), 1, reports.SoakIdle, t0.Add(time.Second))
	want := reports.SoakSample{Index: 1, AtNs: int64(time.Second), SpanNs: int64(time.Second), Stage: reports.SoakIdle,
		ProxyCPUNs: int64(55 * time.Millisecond), SelfRSSBytes: 80 << 20, SelfHeapBytes: 30 << 20, SelfGoroutines: 12, SelfCPUNs: int64(250 * time.Millisecond),
		Conntrack: 100, Objects: -1, SyncObjects: 90, WrittenObjects: 105, Syncs: 3, FailedSyncs: 1, Changes: 4, Observed: 3, ProgP50Ns: x.ProgP50Ns, ProgP99Ns: x.ProgP99Ns, Pending: 1,
		Attempts: 11, OK: 7, Errors: map[string]int{"timeout": 2}, AfterConnect: map[string]int{"timeout": 1}, NotStarted: 1, LookupP50Ns: x.LookupP50Ns, LookupP99Ns: x.LookupP99Ns, LateMaxNs: int64(3 * time.Millisecond)}
	if !reflect.DeepEqual(x, want) {
		t.Errorf("sample\n%+v\nwant\n%+v", x, want)
	}
	near := func(got int64, want time.Duration) bool {
		return got >= int64(want) && float64(got) <= float64(want)*1.001
	}
	if !near(x.ProgP50Ns, 20*time.Millisecond) || !near(x.ProgP99Ns, 30*time.Millisecond) {
		t.Errorf("programming p50 %d p99 %d ns, want 20 ms and 30 ms (HDR, 3 digits)", x.ProgP50Ns, x.ProgP99Ns)
	}
	if x.LookupP50Ns < 102_000 || x.LookupP50Ns > 104_000 || x.LookupP99Ns < 105_000 || x.LookupP99Ns > 107_000 {
		t.Errorf("lookup p50 %d p99 %d ns, want about 103 µs and 106 µs", x.LookupP50Ns, x.LookupP99Ns)
	}
	if got := tr.inFlight(); got != 1 {
		t.Errorf("%d in flight, want 1 (one of 11 scheduled has no outcome)", got)
	}

	// Nothing new: the next sample counts nothing, keeps the objects, and
	// a failed conntrack read is a fault, not a figure.
	tracker.See(obs[3], t0.Add(1500*time.Millisecond), ep, true)
	rb = readBack{objects: 1200, start: t0.Add(100 * time.Millisecond), end: t0.Add(2100 * time.Millisecond), seq: 1}
	y, _ := s.sample(context.Background(), 2, reports.SoakChurn, t0.Add(2500*time.Millisecond))
	if y.Objects != 1200 || y.ObjectsRead != 1 || y.ObjectsReadNs != int64(2*time.Second) || y.ObjectsAgeNs != int64(400*time.Millisecond) {
		t.Errorf("read-back %d objects (read %d, %v long, %v old): want 1200 of read 1, 2 s long, 400 ms old",
			y.Objects, y.ObjectsRead, time.Duration(y.ObjectsReadNs), time.Duration(y.ObjectsAgeNs))
	}
	if y.SpanNs != int64(1500*time.Millisecond) || y.Syncs != 0 || y.ProxyCPUNs != 0 || y.SyncObjects != 90 || y.WrittenObjects != 0 || y.Changes != 0 ||
		y.Observed != 1 || !near(y.ProgP50Ns, 1500*time.Millisecond) || y.Pending != 0 || y.Attempts != 0 || y.OK != 0 || y.Errors != nil || y.AfterConnect != nil || y.Conntrack != 200 {
		t.Errorf("second sample %+v", y)
	}
	rb = readBack{err: errors.New("iptables-legacy-save: exit status 4"), start: t0.Add(2100 * time.Millisecond), end: t0.Add(2900 * time.Millisecond), seq: 2}
	z, _ := s.sample(context.Background(), 3, reports.SoakChurn, t0.Add(3*time.Second))
	if z.Conntrack != -1 || z.Objects != -1 || len(z.Faults) != 2 || !strings.Contains(z.Faults[0], "exit status 4") || !strings.Contains(z.Faults[1], "no conntrack") {
		t.Errorf("conntrack %d, objects %d, faults %v: want -1, -1 and the reads' errors", z.Conntrack, z.Objects, z.Faults)
	}
	if w, _ := s.sample(context.Background(), 4, reports.SoakChurn, t0.Add(4*time.Second)); w.Objects != -1 || len(w.Faults) != 1 {
		t.Errorf("objects %d, faults %v: want -1 and only conntrack's fault (read 2's was told once)", w.Objects, w.Faults)
	}
}

// TestSoakStage: idle intervals end by the churn's start, quiet ones
// start at its end or later, the rest churn (a duration that is not a
// whole number of intervals makes a churn interval of the one it ends
// in).
func TestSoakStage(t *testing.T) {
	iv := time.Second
	var got []string
	for k := 1; k <= 7; k++ {
		got = append(got, soakStage(k, iv, 2*iv, 2*iv+2500*time.Millisecond))
	}
	if want := "idle idle churn churn churn quiet quiet"; strings.Join(got, " ") != want {
		t.Errorf("stages %v, want %s", got, want)
	}
}

// TestOpenLoop: the open loop schedules rate × duration connections
// whatever the workers do; with one slow worker and a short queue the
// connections it cannot start are counted failed as overrun, and every
// connection scheduled has an outcome when it returns. "keeps up" has a
// worker for each of its 100 connections, so a send always finds a
// worker waiting (or the queue's room) however late the goroutines run:
// with 2 workers, a loaded machine (load 80) stalled the test past the
// 16-slot queue's 80 ms and it counted 20-35 not started.
func TestOpenLoop(t *testing.T) {
	_, svcs := phaseScenario(t, "", "")
	for _, tc := range []struct {
		name    string
		workers int
		delay   time.Duration
		overrun bool
	}{{"keeps up", 100, 0, false}, {"falls behind", 1, 40 * time.Millisecond, true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := &env{probes: func(n int) (workerPool, error) { return fakePool{n}, nil }}
			var dials atomic.Int64
			e.dial = func(dst netip.Addr, port uint16, _ time.Duration) (netip.AddrPort, time.Time, error) {
				start := time.Now()
				time.Sleep(tc.delay)
				if dials.Add(1)%10 == 0 {
					return netip.AddrPort{}, start, fmt.Errorf("connect %s:%d: %w", dst, port, syscall.ECONNREFUSED)
				}
				return netip.AddrPortFrom(dst, port), start, nil
			}
			pool, _ := e.probes(tc.workers)
			var tr soakTraffic
			start := time.Now()
			runOpenLoop(context.Background(), e, pool, &tr, svcs, 200, 50*time.Millisecond, start, start.Add(500*time.Millisecond), 1)
			var x reports.SoakSample
			tr.take(&x)
			if x.Attempts != 100 || x.OK+x.ErrorCount()+x.NotStarted != x.Attempts || tr.inFlight() != 0 {
				t.Fatalf("%d scheduled, %d ok, errors %v, %d in flight: want 100 at 200/s over 0.5 s, each with an outcome", x.Attempts, x.OK, x.Errors, tr.inFlight())
			}
			if got := x.NotStarted > 0; got != tc.overrun || x.Errors["refused"] == 0 || x.Errors[overrun] != 0 {
				t.Errorf("errors %v, %d not started: want refused, none of cause overrun, and some not started %v", x.Errors, x.NotStarted, tc.overrun)
			}
		})
	}
}

// soakScenario is a short soak on the fakes: 1 idle, 4 churn and 1
// quiet interval of 100 ms.
func soakScenario(t *testing.T) (*scenarios.Scenario, []workload.Service) {
	t.Helper()
	return phaseScenario(t, ", timeout: 200ms", "soak: {duration: 400ms, interval: 100ms, rate: 300, churn: 40, idle: 1, quiet: 1, probes: 2}\n")
}

// TestSoakPhaseOnFakes: a soak over the fake proxier and data plane
// streams one sample per interval after its header, in stage order,
// then its end line; the stream reads back as the result holds it;
// every connection scheduled has an outcome (0 lost), changes are made
// in the churn intervals only and seen, and the proxier synced them.
func TestSoakPhaseOnFakes(t *testing.T) {
	sc, svcs := soakScenario(t)
	p := newFakeProxier()
	if _, err := p.Sync(context.Background(), svcs); err != nil {
		t.Fatal(err)
	}
	e := newFakeEnv(p)
	e.conntrackCount = func(int) (int, error) { return 7, nil }
	var f faults
	path := filepath.Join(t.TempDir(), "r", "soak", "fake.jsonl")
	sr, err := soakPhase(context.Background(), soakRun{sc: sc, e: &e.env, services: svcs, ap: &loopApplier{p: p, sc: sc, minSync: 20 * time.Millisecond, period: time.Hour},
		path: path, header: reports.SoakHeader{Row: "fake", RunID: "abc123"}, prog: &recProgress{}, faults: &f})
	if err != nil {
		t.Fatal(err)
	}
	back, err := reports.ReadSoakStream(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Samples, sr.Samples) || !reflect.DeepEqual(back.End, sr.End) || back.Header.Row != "fake" || back.Header.Spec != *sc.Soak {
		t.Errorf("the stream does not hold what the result does: %d samples against %d, end %+v against %+v", len(back.Samples), len(sr.Samples), back.End, sr.End)
	}
	var stages []string
	changesOutside := 0
	for i, x := range sr.Samples {
		stages = append(stages, x.Stage)
		if x.Index != i+1 || x.Conntrack != 7 || x.SelfRSSBytes == 0 || x.SpanNs <= 0 {
			t.Errorf("sample %d: %+v", i, x)
		}
		if x.Stage != reports.SoakChurn {
			changesOutside += x.Changes
		}
	}
	if want := "idle churn churn churn churn quiet"; strings.Join(stages, " ") != want {
		t.Errorf("stages %v, want %s", stages, want)
	}
	v := reports.SoakVerdicts(sr)
	if v.Attempts < 150 || v.Lost != 0 || !v.LostKnown || sr.End.InFlight != 0 || v.Errors != 0 {
		t.Errorf("%d connections, %d ok, errors %v, lost %d, in flight %d: want about 180 at 300/s over 0.6 s, every one answered", v.Attempts, v.OK, v.ErrorsBy, v.Lost, sr.End.InFlight)
	}
	if v.Changes < 5 || changesOutside != 0 || sr.End.Changes != v.Changes || v.Observed+sr.End.Unobserved != v.Changes || v.Observed == 0 {
		t.Errorf("%d changes (%d outside the churn), %d seen, %d unobserved", v.Changes, changesOutside, v.Observed, sr.End.Unobserved)
	}
	if p.syncs < 2 || len(f) != 0 {
		t.Errorf("%d syncs, faults %v", p.syncs, f)
	}
}

// TestSoakPhaseStopped: a soak whose run is cancelled samples the
// interval so far, ends its stream saying why, and returns the error
// with its samples.
func TestSoakPhaseStopped(t *testing.T) {
	sc, svcs := soakScenario(t)
	sc.Soak.Duration.Duration = time.Hour
	p := newFakeProxier()
	if _, err := p.Sync(context.Background(), svcs); err != nil {
		t.Fatal(err)
	}
	e := newFakeEnv(p)
	ctx, cancel := context.WithCancelCause(context.Background())
	var f faults
	path := filepath.Join(t.TempDir(), "soak.jsonl")
	// Cancel once 3 whole intervals are on disk (not at a fixed time: on
	// a loaded machine an interval can take longer than its 100 ms).
	go func() {
		for ctx.Err() == nil {
			if back, err := reports.ReadSoakStream(path); err == nil && len(back.Samples) >= 3 {
				cancel(errors.New("interrupted by SIGINT"))
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	sr, err := soakPhase(ctx, soakRun{sc: sc, e: &e.env, services: svcs, ap: &loopApplier{p: p, sc: sc, minSync: 20 * time.Millisecond, period: time.Hour},
		path: path, header: reports.SoakHeader{Row: "fake"}, prog: &recProgress{}, faults: &f})
	if !errors.Is(err, context.Canceled) || sr == nil {
		t.Fatalf("err %v, result %v: want the cancellation with the samples", err, sr)
	}
	back, rerr := reports.ReadSoakStream(path)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if n := len(back.Samples); n < 4 || back.End == nil || back.End.Stopped != "interrupted by SIGINT" || back.Samples[n-1].SpanNs >= int64(100*time.Millisecond) {
		t.Errorf("%d samples, end %+v: want 3 whole intervals, the part of the 4th, and the end saying why", n, back.End)
	}
	if v := reports.SoakVerdicts(back); v.Lost != 0 {
		t.Errorf("%d connections lost when stopped", v.Lost)
	}
}

// fakeKubeProxy is a fakeAPI (kube-proxy behind its API server) with a
// process of its own: its CPU grows 10 ms per read, its RSS is 40 MiB,
// heap 12 MiB, 90 goroutines, and its syncs are the fake loop's; after
// exitAt reads it has exited.
type fakeKubeProxy struct {
	*fakeAPI
	reads  atomic.Int64
	exitAt int64
}

func (f *fakeKubeProxy) Resources(context.Context) (kubeproxy.Resources, error) {
	n := f.reads.Add(1)
	if f.exitAt > 0 && n >= f.exitAt {
		return kubeproxy.Resources{}, &proxymodes.Failed{Msg: "kube-proxy exited (killed)"}
	}
	f.mu.Lock()
	syncs := f.loopSyncs
	f.mu.Unlock()
	return kubeproxy.Resources{CPU: time.Duration(n) * 10 * time.Millisecond, ChildCPU: time.Duration(n) * time.Millisecond, RSS: 40 << 20,
		Scraped: true, Heap: 12 << 20, Goroutines: 90, Syncs: uint64(syncs)}, nil
}

// TestSoakThroughFakeAPI: a kube-proxy row's soak writes every change
// through the API (never syncs the proxier itself), sees them in the data
// plane, samples the proxy's process (its CPU growth, RSS, heap,
// goroutines and syncs), regresses the proxy's own RSS, and keeps
// kube-proxy's own account of the soak; a kube-proxy that exits stops
// the soak with its error, the stream ended saying so.
func TestSoakThroughFakeAPI(t *testing.T) {
	sc, svcs := soakScenario(t)
	f := &fakeKubeProxy{fakeAPI: newFakeAPI()}
	if _, err := f.Sync(context.Background(), svcs); err != nil {
		t.Fatal(err)
	}
	e := newFakeEnv(f.fakeProxier)
	var fl faults
	path := filepath.Join(t.TempDir(), "kp.jsonl")
	sr, err := soakPhase(context.Background(), soakRun{sc: sc, e: &e.env, services: svcs, ap: newAPIApplier(f, 0), proc: f,
		path: path, header: reports.SoakHeader{Row: "fake (kube-proxy)"}, prog: &recProgress{}, faults: &fl})
	if err != nil {
		t.Fatal(err)
	}
	if f.syncs != 1 {
		t.Errorf("the proxier was synced %d times: kube-proxy syncs on its own", f.syncs)
	}
	v := reports.SoakVerdicts(sr)
	if v.Changes < 5 || len(f.writes) != v.Changes || v.Observed != v.Changes || v.Lost != 0 {
		t.Errorf("%d changes, %d written, %d seen, %d lost", v.Changes, len(f.writes), v.Observed, v.Lost)
	}
	syncs := 0
	for _, x := range sr.Samples {
		syncs += x.Syncs
		if x.ProxyCPUNs != int64(11*time.Millisecond) || x.ProxyRSSBytes != 40<<20 || x.ProxyHeapBytes != 12<<20 || x.ProxyGoroutines != 90 || len(x.Faults) > 0 {
			t.Errorf("interval %d: proxy CPU %v, RSS %d, heap %d, goroutines %d, faults %v", x.Index, time.Duration(x.ProxyCPUNs), x.ProxyRSSBytes, x.ProxyHeapBytes, x.ProxyGoroutines, x.Faults)
		}
	}
	if syncs == 0 || v.Memory.Series != "proxy RSS" || sr.KubeProxy == nil || sr.KubeProxy.Writes != v.Changes {
		t.Errorf("%d syncs sampled, memory series %q, kube-proxy account %+v", syncs, v.Memory.Series, sr.KubeProxy)
	}

	// kube-proxy exits in the third interval.
	f2 := &fakeKubeProxy{fakeAPI: newFakeAPI(), exitAt: 4}
	if _, err := f2.Sync(context.Background(), svcs); err != nil {
		t.Fatal(err)
	}
	e2 := newFakeEnv(f2.fakeProxier)
	path2 := filepath.Join(t.TempDir(), "kp2.jsonl")
	sr2, err := soakPhase(context.Background(), soakRun{sc: sc, e: &e2.env, services: svcs, ap: newAPIApplier(f2, 0), proc: f2,
		path: path2, header: reports.SoakHeader{Row: "fake (kube-proxy)"}, prog: &recProgress{}, faults: &fl})
	var failed *proxymodes.Failed
	if !errors.As(err, &failed) || sr2 == nil || len(sr2.Samples) != 3 || sr2.End == nil || !strings.Contains(sr2.End.Stopped, "exited") {
		t.Fatalf("err %v; samples %d, end %+v: want the exit, 3 samples and an end saying why", err, len(sr2.Samples), sr2.End)
	}
	back, _ := reports.ReadSoakStream(path2)
	if back == nil || back.End == nil || back.End.Stopped != sr2.End.Stopped {
		t.Errorf("the stream's end %+v", back)
	}
}

// TestSoakSlowReadBack: a read-back of the rule objects far slower than
// the interval (at 10k services one took minutes in session 8, and the
// sampler waited for it) delays neither the samples nor the traffic:
// every interval but the last (which waits for the connections in
// flight) spans one interval, the samples before the first read
// finished say none yet (−1, no age), later ones carry the latest read
// with its number and age, every connection has an outcome, and the
// reader stops with the soak.
func TestSoakSlowReadBack(t *testing.T) {
	sc, svcs := soakScenario(t)
	p := newFakeProxier()
	if _, err := p.Sync(context.Background(), svcs); err != nil {
		t.Fatal(err)
	}
	e := newFakeEnv(p)
	var reads, running atomic.Int64
	e.kernelObjects = func(ctx context.Context, _ int) (int, error) {
		running.Add(1)
		defer running.Add(-1)
		n := reads.Add(1)
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
		return int(1000 + n), nil
	}
	var f faults
	sr, err := soakPhase(context.Background(), soakRun{sc: sc, e: &e.env, services: svcs, ap: &loopApplier{p: p, sc: sc, minSync: 20 * time.Millisecond, period: time.Hour},
		path: filepath.Join(t.TempDir(), "soak.jsonl"), header: reports.SoakHeader{Row: "fake"}, prog: &recProgress{}, faults: &f})
	if err != nil {
		t.Fatal(err)
	}
	iv := sc.Soak.Interval.Duration
	seen := 0
	// A sampler that waited for the read would make every interval span
	// about the read's 250 ms; a loaded machine stretches a few of them:
	// the median tells the two apart.
	var spans []float64
	for _, x := range sr.Samples[:len(sr.Samples)-1] {
		spans = append(spans, float64(x.SpanNs))
	}
	sort.Float64s(spans)
	if med := time.Duration(stat.Quantile(0.5, stat.Empirical, spans, nil)); med > iv+60*time.Millisecond {
		t.Errorf("median interval spans %v: the sampler waited (interval %v, a read 250 ms); spans %v", med, iv, spans)
	}
	for _, x := range sr.Samples {
		switch {
		case x.ObjectsRead == 0:
			if x.Objects != -1 || x.ObjectsAgeNs != 0 {
				t.Errorf("interval %d: %d objects aged %d ns before any read finished", x.Index, x.Objects, x.ObjectsAgeNs)
			}
		default:
			seen++
			if x.Objects != 1000+x.ObjectsRead || x.ObjectsReadNs < int64(250*time.Millisecond) || x.ObjectsAgeNs < 0 || x.ObjectsAgeNs > x.AtNs {
				t.Errorf("interval %d: %d objects of read %d, %v long, %v old", x.Index, x.Objects, x.ObjectsRead, time.Duration(x.ObjectsReadNs), time.Duration(x.ObjectsAgeNs))
			}
		}
	}
	if sr.Samples[0].ObjectsRead != 0 || seen == 0 {
		t.Errorf("first sample's read %d, %d samples with a read: want none yet in the first, some later", sr.Samples[0].ObjectsRead, seen)
	}
	if v := reports.SoakVerdicts(sr); v.Lost != 0 || v.NotStarted != 0 || v.OK == 0 {
		t.Errorf("%d ok, %d lost, %d not started", v.OK, v.Lost, v.NotStarted)
	}
	if n := running.Load(); n != 0 {
		t.Errorf("%d reads still running after the soak returned", n)
	}
	if n := reads.Load(); n > int64(len(sr.Samples)) {
		t.Errorf("%d reads over %d intervals: at most one an interval", n, len(sr.Samples))
	}
}

// TestSoakRowsOwnCounts: two rows soaked at once, each on its own data
// plane (one refuses every 4th connection, the other none), count their
// own connections: each row's successes and errors are its own dials'
// (session 8's two 1 h rows showed the same 74,400 / 24,072 / 50,328,
// which a shared generator or a copied summary would give).
func TestSoakRowsOwnCounts(t *testing.T) {
	type row struct {
		refuseEvery    int64
		dials, refused atomic.Int64
		sr             *reports.SoakResult
		err            error
	}
	rows := []*row{{refuseEvery: 4}, {refuseEvery: 0}}
	var wg sync.WaitGroup
	for i, r := range rows {
		sc, svcs := soakScenario(t)
		sc.Soak.Churn = 0 // no changes: no probes, every dial is the traffic's
		p := newFakeProxier()
		if _, err := p.Sync(context.Background(), svcs); err != nil {
			t.Fatal(err)
		}
		e := newFakeEnv(p)
		e.dial = func(dst netip.Addr, port uint16, _ time.Duration) (netip.AddrPort, time.Time, error) {
			start := time.Now()
			time.Sleep(100 * time.Microsecond)
			if n := r.dials.Add(1); r.refuseEvery > 0 && n%r.refuseEvery == 0 {
				r.refused.Add(1)
				return netip.AddrPort{}, start, fmt.Errorf("connect %s:%d: %w", dst, port, syscall.ECONNREFUSED)
			}
			return netip.AddrPortFrom(dst, port), start, nil
		}
		path := filepath.Join(t.TempDir(), fmt.Sprintf("row%d.jsonl", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			var f faults
			r.sr, r.err = soakPhase(context.Background(), soakRun{sc: sc, e: &e.env, services: svcs, ap: &loopApplier{p: p, sc: sc, minSync: 20 * time.Millisecond, period: time.Hour},
				path: path, header: reports.SoakHeader{Row: fmt.Sprintf("row%d", i)}, prog: &recProgress{}, faults: &f})
		}()
	}
	wg.Wait()
	for i, r := range rows {
		if r.err != nil {
			t.Fatalf("row %d: %v", i, r.err)
		}
		v := reports.SoakVerdicts(r.sr)
		back, err := reports.ReadSoakStream(r.sr.Stream)
		if err != nil {
			t.Fatal(err)
		}
		if int64(v.OK+v.Errors) != r.dials.Load() || int64(v.ErrorsBy["refused"]) != r.refused.Load() || v.Lost != 0 ||
			!reflect.DeepEqual(reports.SoakVerdicts(back).ErrorsBy, v.ErrorsBy) {
			t.Errorf("row %d: %d ok + %d errors (%v) against its own %d dials, %d refused; stream %v",
				i, v.OK, v.Errors, v.ErrorsBy, r.dials.Load(), r.refused.Load(), reports.SoakVerdicts(back).ErrorsBy)
		}
	}
	if rows[1].sr != nil && reports.SoakVerdicts(rows[1].sr).Errors != 0 {
		t.Errorf("the row that refuses nothing counts errors %v", reports.SoakVerdicts(rows[1].sr).ErrorsBy)
	}
}

// slowProc is a kube-proxy whose metrics scrape takes long enough for the
// next interval's changes to arrive meanwhile (during calls).
type slowProc struct {
	changes *atomic.Int64
	during  int64
}

func (p *slowProc) Resources(context.Context) (kubeproxy.Resources, error) {
	p.changes.Add(p.during)
	return kubeproxy.Resources{Scraped: true}, nil
}

// TestSoakSamplerCountsAtItsEnd: changes made while the sample reads the
// proxy's resources (a slow scrape in a loaded guest) belong to the next
// interval, not to the one that ended before them: an idle interval
// holds none of the churn's first changes.
func TestSoakSamplerCountsAtItsEnd(t *testing.T) {
	var changes atomic.Int64
	var tracker observe.Tracker
	var tr soakTraffic
	t0 := time.Unix(1000, 0)
	proc := &slowProc{changes: &changes, during: 36}
	s := &soakSampler{e: &env{}, proc: proc, tracker: &tracker, traffic: &tr, changes: &changes,
		self: func() selfStats { return selfStats{} }, start: t0, last: t0}
	changes.Add(2) // made within interval 1
	x, err := s.sample(context.Background(), 1, reports.SoakIdle, t0.Add(10*time.Second))
	if err != nil || x.Changes != 2 {
		t.Fatalf("interval 1: %d changes (err %v), want the 2 made before its end", x.Changes, err)
	}
	proc.during = 0
	if x, _ = s.sample(context.Background(), 2, reports.SoakChurn, t0.Add(20*time.Second)); x.Changes != 36 {
		t.Errorf("interval 2: %d changes, want the 36 made during interval 1's scrape", x.Changes)
	}
}
