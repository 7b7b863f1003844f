//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxybench/proxybench/internal/monitoring"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/observe"
	"github.com/proxybench/proxybench/workload/traffic"
)

// soakProbePause is each soak probe worker's pause after a connection:
// a worker makes at most about 1000 connections/s, so the probes' own
// connections (10 s each in conntrack's CLOSE state after the RST) do
// not crowd the node's conntrack table over hours; it delays an
// appearance's observation by a few ms (the probes cycle over the
// pending changes), a disappearance's not at all (its latency runs to
// the first probe that misses).
const soakProbePause = time.Millisecond

// soakMix is the soak's change mix: endpoint additions, removals and
// readiness flips in equal shares (the churn phase's default), so every
// service keeps a ready endpoint and the traffic to it never has cause
// to fail.
var soakMix = scenarios.ChurnMix{EndpointAdd: 1, EndpointRemove: 1, ReadinessFlip: 1}

// What a builtin row's proxy figures measure (the stream's header says
// it, and the report).
const (
	kubeProxyCPU    = "kube-proxy's CPU time and that of the rule programs it ran (user+system, /proc/<pid>/stat)"
	kubeProxyRSS    = "kube-proxy's resident set (VmRSS); its Go heap and goroutines from its metrics endpoint (go_memstats_heap_alloc_bytes, go_goroutines)"
	builtinProxyCPU = "the CPU of its syncs (the syncing thread and the rule programs it ran, SyncStats.CPU; the kernel's packet path is not in it)"
	builtinProxyRSS = "not separable: the builtin proxier runs inside proxybench, whose RSS (proxybench RSS) holds it, with the traffic driver and the probes"
)

// selfStats is proxybench's own process at one moment: resident set
// (bytes), Go heap objects (bytes), goroutines, and CPU time so far
// (user+system, reaped children included).
type selfStats struct {
	rss, heap  uint64
	goroutines int
	cpu        time.Duration
}

// readSelf reads selfStats: the resident set from /proc/self/statm
// (proc(5): resident pages × page size), heap and goroutines from
// runtime/metrics (/memory/classes/heap/objects:bytes,
// /sched/goroutines:goroutines), CPU from getrusage(2)
// (proxymodes.CPUTime).
func readSelf() selfStats {
	var st selfStats
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			if pages, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				st.rss = pages * uint64(os.Getpagesize())
			}
		}
	}
	ms := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/sched/goroutines:goroutines"}}
	metrics.Read(ms)
	if ms[0].Value.Kind() == metrics.KindUint64 {
		st.heap = ms[0].Value.Uint64()
	}
	if ms[1].Value.Kind() == metrics.KindUint64 {
		st.goroutines = int(ms[1].Value.Uint64())
	}
	st.cpu = proxymodes.CPUTime()
	return st
}

// soakTraffic is the soak's open-loop traffic, interval by interval:
// the connections scheduled, the outcomes of those that finished (an
// echo, or an error by cause) with the successes' connect times, and
// those never started (the driver behind).
type soakTraffic struct {
	mu         sync.Mutex
	attempts   int
	ok         int
	errs       map[string]int
	notStarted int
	after      map[string]int
	lat        []int64
	lateMax    time.Duration
	// scheduled and finished count over the whole soak (in flight: the
	// difference).
	scheduled, finished atomic.Int64
}

// overrun names a connection the open loop scheduled while every worker
// was busy and the queue (one timeout's worth of the rate) was full: it
// was never started, so it is neither a success nor an error of the
// proxy, and it is not lost either: it is counted apart
// (SoakSample.NotStarted), and a row with any has not held its rate
// (proxybench's driver fell behind: a starved machine).
const overrun = "overrun"

func (t *soakTraffic) schedule() {
	t.scheduled.Add(1)
	t.mu.Lock()
	t.attempts++
	t.mu.Unlock()
}

// done records a connection's outcome: kind "" a success with its
// connect time lat, overrun one never started, else its error's cause,
// counted again by cause among those after the connect when
// afterConnect (traffic.AfterConnect: the handshake was done, the echo
// line did not come); late is how long after its scheduled time it
// started (or was given up).
func (t *soakTraffic) done(kind string, lat, late time.Duration, afterConnect bool) {
	t.mu.Lock()
	switch kind {
	case "":
		t.ok++
		t.lat = append(t.lat, int64(lat))
	case overrun:
		t.notStarted++
	default:
		if t.errs == nil {
			t.errs = map[string]int{}
		}
		t.errs[kind]++
		if afterConnect {
			if t.after == nil {
				t.after = map[string]int{}
			}
			t.after[kind]++
		}
	}
	t.lateMax = max(t.lateMax, late)
	t.mu.Unlock()
	t.finished.Add(1)
}

// take fills s with the interval's traffic and starts the next interval.
func (t *soakTraffic) take(s *reports.SoakSample) {
	t.mu.Lock()
	attempts, ok, errs, after, skipped, lat, late := t.attempts, t.ok, t.errs, t.after, t.notStarted, t.lat, t.lateMax
	t.attempts, t.ok, t.errs, t.after, t.notStarted, t.lat, t.lateMax = 0, 0, nil, nil, 0, nil, 0
	t.mu.Unlock()
	s.Attempts, s.OK, s.Errors, s.AfterConnect, s.NotStarted, s.LateMaxNs = attempts, ok, errs, after, skipped, int64(late)
	if len(lat) > 0 {
		sum := reports.Summarize(lat)
		s.LookupP50Ns, s.LookupP99Ns = sum.P50, sum.P99
	}
}

// inFlight is the connections scheduled and not finished.
func (t *soakTraffic) inFlight() int { return int(t.scheduled.Load() - t.finished.Load()) }

// soakWorkers is the number of traffic workers for rate connections/s
// whose connects and echo reads are each bounded by timeout: one more
// than rate × 2 × timeout (2..160), so that the rate is held even when
// every connection waits its whole timeout twice (a connect that
// completes, then an echo that never comes: traffic.DialEcho's
// SO_RCVTIMEO read); only a driver starved of CPU then leaves
// connections not started. Session 8's 2 workers for 20/s could not: at
// load 25-57 a connection took ~300 ms and 50k of 74k were never
// started. Session 10's rate × timeout + 1 (41 for 20/s at 2 s) covered
// one timeout only: in the hour at 10k every interval with connections
// not started also had timeouts (session 11's rerun: docs/reports.md).
func soakWorkers(rate float64, timeout time.Duration) int {
	return min(max(int(math.Ceil(rate*2*timeout.Seconds()))+1, 2), 160)
}

// runOpenLoop schedules a connection every 1/rate from start until end
// (open loop: the schedule does not wait for the connections) to a
// random service's first ServicePort, each dialled by one of pool's
// workers (env.dial, traffic.DialEcho: a connect, the echo line, a
// close with RST) with timeout; a connection finds its outcome in t. A
// connection scheduled while the queue (one timeout's worth of the rate)
// is full is never started: counted as overrun. It returns when every
// connection scheduled has finished, or at ctx's end.
func runOpenLoop(ctx context.Context, e *env, pool workerPool, t *soakTraffic, services []workload.Service, rate float64,
	timeout time.Duration, start, end time.Time, seed int64) {
	jobs := make(chan time.Time, max(int(rate*timeout.Seconds()), 16))
	done := make(chan struct{})
	go func() {
		defer close(done)
		pool.Each(func(w int) {
			rng := rand.New(rand.NewSource(seed + int64(w)*7919))
			for at := range jobs {
				s := services[rng.Intn(len(services))]
				_, t0, err := e.dial(s.ClusterIP, s.Ports[0].Port, timeout)
				lat := time.Since(t0)
				kind := ""
				if err != nil {
					kind = traffic.ErrorKind(err)
				}
				t.done(kind, lat, t0.Sub(at), traffic.AfterConnect(err))
			}
		})
	}()
	period := float64(time.Second) / rate
	for k := 0; ; k++ {
		at := start.Add(time.Duration(float64(k) * period))
		if !at.Before(end) || ctx.Err() != nil {
			break
		}
		if d := time.Until(at); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
			if ctx.Err() != nil {
				break
			}
		}
		t.schedule()
		select {
		case jobs <- at:
		default:
			t.done(overrun, 0, time.Since(at), false)
		}
	}
	close(jobs)
	<-done
}

// soakStage is the stage of interval k (1-based, covering
// [(k−1)·iv, k·iv)): idle before the churn starts, quiet once it ended,
// else churn.
func soakStage(k int, iv, churnFrom, churnTo time.Duration) string {
	switch {
	case time.Duration(k)*iv <= churnFrom:
		return reports.SoakIdle
	case time.Duration(k-1)*iv >= churnTo:
		return reports.SoakQuiet
	}
	return reports.SoakChurn
}

// soakSampler takes the soak's samples: each reads what happened since
// the last one (syncs, changes, observations, traffic, CPU) and what
// stands at its moment (memory, conntrack, pending changes).
type soakSampler struct {
	e *env
	// loop is the sync loop of a proxier proxybench syncs (builtin): its
	// syncs are the proxy's; proc a proxy with a process of its own
	// (kube-proxy), whose resources are. One of them is set.
	loop    interface{ drain() []reports.SyncRecord }
	proc    soakProcess
	tracker *observe.Tracker
	traffic *soakTraffic
	changes *atomic.Int64
	self    func() selfStats
	// match, when set, matches the proxy's log to the changes (a
	// kube-proxy row: apiApplier.matchLog) with the observations the
	// sample took done.
	match func(done []*observe.Observation) error

	// readBack is the latest read-back of the proxy objects in the
	// node's kernel (objectReader.last: off the sampling path; nil: none
	// read back), readSeq the read the last sample took.
	readBack func() readBack
	readSeq  int

	start   time.Time
	last    time.Time
	lastCPU time.Duration
	// objects are the objects of the last full sync.
	objects int
	// procCPU and procSyncs are proc's CPU (its own and its rule
	// programs') and syncs at the last sample.
	procCPU   time.Duration
	procSyncs uint64
}

// soakProcess is a proxier with a process of its own whose resources a
// soak samples (kubeproxy.Proxier).
type soakProcess interface {
	Resources(ctx context.Context) (kubeproxy.Resources, error)
}

// startProc reads proc's resources at the soak's start (the sampler's
// first deltas are from them).
func (s *soakSampler) startProc(ctx context.Context) error {
	if s.proc == nil {
		return nil
	}
	r, err := s.proc.Resources(ctx)
	if err != nil {
		return err
	}
	s.procCPU, s.procSyncs = r.CPU+r.ChildCPU, r.Syncs
	return nil
}

// sample takes interval k's sample, ending now. Its error is the proxy
// process's exit (proxymodes.Failed): the sample holds what was read.
func (s *soakSampler) sample(ctx context.Context, k int, stage string, now time.Time) (reports.SoakSample, error) {
	x := reports.SoakSample{Index: k, AtNs: int64(now.Sub(s.start)), SpanNs: int64(now.Sub(s.last)), Stage: stage, Conntrack: -1}
	s.last = now
	// The counts of the interval are taken first, at its end: the
	// readings after (kube-proxy's metrics scrape, seconds in a loaded
	// guest) must not pull the next interval's changes and connections
	// into this one (an idle interval held the churn's first 36 renames).
	x.Changes = int(s.changes.Swap(0))
	var lat []int64
	done := s.tracker.TakeDone()
	for _, o := range done {
		lat = append(lat, int64(o.Latency))
	}
	if s.match != nil {
		if err := s.match(done); err != nil {
			x.Faults = append(x.Faults, "kube-proxy's log not read for the match of its lines to the changes (read next interval): "+err.Error())
		}
	}
	if x.Observed = len(lat); x.Observed > 0 {
		sum := reports.Summarize(lat)
		x.ProgP50Ns, x.ProgP99Ns = sum.P50, sum.P99
	}
	x.Pending = s.tracker.Pending()
	s.traffic.take(&x)
	var exited error
	if s.loop != nil {
		for _, r := range s.loop.drain() {
			x.Syncs++
			x.ProxyCPUNs += int64(r.CPU)
			if r.Err != "" {
				x.FailedSyncs++
				continue
			}
			x.WrittenObjects += r.Objects
			if r.Kind == "full" {
				s.objects = r.Objects
			}
		}
	}
	if s.proc != nil {
		r, err := s.proc.Resources(ctx)
		var fl *proxymodes.Failed
		switch {
		case errors.As(err, &fl):
			exited = err
			x.Faults = append(x.Faults, "the proxy exited: "+err.Error())
		case err != nil:
			x.Faults = append(x.Faults, "the proxy's resources not read: "+err.Error())
		default:
			cpu := r.CPU + r.ChildCPU
			x.ProxyCPUNs, s.procCPU = int64(cpu-s.procCPU), cpu
			x.ProxyRSSBytes = uint64(max(r.RSS, 0))
			if r.Scraped {
				x.ProxyHeapBytes, x.ProxyGoroutines = r.Heap, r.Goroutines
				x.Syncs, s.procSyncs = int(r.Syncs-s.procSyncs), r.Syncs
			} else {
				x.Faults = append(x.Faults, "the proxy's metrics not scraped (no heap, goroutines, syncs): "+r.ScrapeErr)
			}
		}
	}
	x.SyncObjects = s.objects
	x.Objects = -1
	if s.readBack != nil {
		// The latest read-back, however old: the sampler never waits for
		// one (objectReader). None yet: Objects −1, no age.
		rb := s.readBack()
		switch {
		case rb.seq == 0:
		case rb.err != nil:
			if rb.seq != s.readSeq {
				x.Faults = append(x.Faults, "kernel objects not read back: "+rb.err.Error())
			}
		default:
			x.Objects, x.ObjectsReadNs, x.ObjectsAgeNs = rb.objects, int64(rb.end.Sub(rb.start)), max(int64(now.Sub(rb.end)), 0)
			x.ObjectsRead = rb.seq
		}
		s.readSeq = rb.seq
	}
	if s.e.conntrackCount != nil {
		if n, err := s.e.conntrackCount(0); err != nil {
			x.Faults = append(x.Faults, "conntrack entries not read: "+err.Error())
		} else {
			x.Conntrack = n
		}
	}
	st := s.self()
	x.SelfRSSBytes, x.SelfHeapBytes, x.SelfGoroutines = st.rss, st.heap, st.goroutines
	x.SelfCPUNs = int64(st.cpu - s.lastCPU)
	s.lastCPU = st.cpu
	return x, exited
}

// drain returns the syncs recorded since the last drain and forgets
// them (a long soak keeps none).
func (l *syncLoop) drain() []reports.SyncRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.syncs
	l.syncs = nil
	return out
}

// soakRun is one row's soak: how its changes reach its proxier, where
// its stream goes and what its header says.
type soakRun struct {
	sc       *scenarios.Scenario
	e        *env
	services []workload.Service
	// ap makes each change reach the row's proxier: a *loopApplier (the
	// mode's sync loop, builtin) or an *apiApplier (API writes,
	// kube-proxy syncing on its own); proc is the proxier's process when
	// it has one of its own (kube-proxy: its resources are sampled), nil
	// for a builtin one (its sync loop's syncs are).
	ap     churnApplier
	proc   soakProcess
	live   *monitoring.RowMetrics
	path   string
	header reports.SoakHeader
	prog   Progress
	faults *faults
	// objects are the rule objects of the proxier's full sync before the
	// soak.
	objects int
	// spec is the soak's block (nil: the scenario's soak; the sliceChurn
	// phase's faults.sliceChurn).
	spec *scenarios.SoakSpec
	// next, when set, makes each change instead of the cluster's soakMix
	// (workload.Cluster.Next): the change and its service, ok false to
	// skip one. Its changes are not timed on the data plane (they change
	// no endpoint: the sliceChurn phase's renamed EndpointSlices).
	next func(rng *rand.Rand) (ch workload.Change, s workload.Service, ok bool)
}

// soakPhase soaks one row (scenario block soak): for (idle+quiet)
// intervals plus duration, it churns the cluster at soak.churn changes/s
// (Poisson arrivals of workload.Cluster.Next with soakMix; changes only
// during the duration, after the idle intervals), each change handed to
// run.ap (the churn phase's appliers: the mode's sync loop for a
// builtin row, API writes for a kube-proxy row); times each change's
// programming latency with probes (package observe); drives soak.rate
// connections/s open loop (runOpenLoop); and at the end of every
// interval writes one sample to the stream at run.path
// (reports.SoakWriter: fsync'd), which the result keeps too. The
// proxier must be in sync with services. On ctx's end, or when the
// proxy's process exits, the interval so far is sampled, the end line
// says why and the soak returns the error with what it measured; a
// stream that cannot be written is a fault (the samples stay in the
// result).
func soakPhase(ctx context.Context, run soakRun) (*reports.SoakResult, error) {
	sc, e, spec := run.sc, run.e, run.spec
	if spec == nil {
		spec = sc.Soak
	}
	iv := spec.Interval.Duration
	n := spec.Intervals()
	churnFrom := time.Duration(spec.Idle) * iv
	churnTo := churnFrom + spec.Duration.Duration
	timeout := sc.Traffic.Timeout.Duration
	rng := rand.New(rand.NewSource(sc.Seed))
	var arrivals []time.Duration
	if spec.Churn > 0 {
		arrivals = workload.Arrivals(spec.Churn, spec.Duration.Duration, "poisson", rng)
	}

	probes, err := e.probes(spec.Probes)
	if err != nil {
		return nil, fmt.Errorf("soak probes: %w", err)
	}
	defer probes.Close()
	workers, err := e.probes(soakWorkers(spec.Rate, timeout))
	if err != nil {
		return nil, fmt.Errorf("soak traffic workers: %w", err)
	}
	defer workers.Close()

	var mu sync.Mutex // guards cluster
	cluster := workload.NewCluster(sc, run.services)
	snapshot := func() []workload.Service {
		mu.Lock()
		defer mu.Unlock()
		return cluster.Snapshot()
	}
	start := time.Now()
	run.header.Started, run.header.Spec = start, *spec
	sr := &reports.SoakResult{Stream: run.path, Header: run.header}
	w, werr := reports.CreateSoakStream(run.path, run.header)
	if werr != nil {
		return nil, fmt.Errorf("soak stream: %w", werr)
	}
	defer w.Close()
	writeFault := false
	write := func(f func() error) {
		if err := f(); err != nil && !writeFault {
			writeFault = true
			run.faults.add("soak stream %s not written from %s on (the result keeps every sample): %v", run.path, clockOf(time.Since(start)), err)
		}
	}
	if err := run.ap.begin(ctx, start, len(arrivals), snapshot); err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	smp := &soakSampler{e: e, proc: run.proc, traffic: nil, self: readSelf, start: start, last: start, objects: run.objects}
	if la, ok := run.ap.(*loopApplier); ok {
		smp.loop = la.loop
	}
	if e.self != nil {
		smp.self = e.self
	}
	smp.lastCPU = smp.self().cpu
	if err := smp.startProc(ctx); err != nil {
		res := &reports.ChurnResult{}
		return nil, errors.Join(fmt.Errorf("soak: the proxy's resources: %w", err), run.ap.end(ctx, res, nil, start))
	}

	var tracker observe.Tracker
	var changes, total atomic.Int64
	// An API applier matches kube-proxy's log to the changes interval by
	// interval (programmedStream): the soak keeps only those a later line
	// may still match.
	api, viaAPI := run.ap.(*apiApplier)
	if viaAPI {
		api.streamed()
		smp.match = api.matchLog
	}

	stopProbes := probeChanges(ctx, probes, e, func(int) *observe.Tracker { return &tracker }, time.Millisecond, soakProbePause, nil,
		func(o *observe.Observation) {
			run.live.ChurnObserved(o.Change.Kind, o.Latency)
			mu.Lock()
			cluster.Release(o.Change.Service)
			mu.Unlock()
		})

	// Churn: Poisson arrivals over the duration, after the idle intervals.
	churnDone := make(chan struct{})
	go func() {
		defer close(churnDone)
		for _, off := range arrivals {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(start.Add(churnFrom + off))):
			}
			var ch workload.Change
			var svc workload.Service
			var ok bool
			mu.Lock()
			if run.next != nil {
				ch, svc, ok = run.next(rng)
			} else if ch, ok = cluster.Next(rng, soakMix); ok {
				svc = cluster.Services[ch.Service]
			}
			at := time.Now()
			mu.Unlock()
			if !ok {
				continue
			}
			if run.next == nil {
				o := observe.New(ch, at)
				if viaAPI {
					api.track(o, svc)
				}
				tracker.Add(o)
			}
			run.live.ChurnApplied(ch.Kind)
			changes.Add(1)
			total.Add(1)
			run.ap.apply(ch, svc, at)
		}
	}()

	// Traffic: open loop over every interval.
	var tr soakTraffic
	end := start.Add(time.Duration(n) * iv)
	trafficCtx, stopTraffic := context.WithCancel(ctx)
	defer stopTraffic()
	trafficDone := make(chan struct{})
	go func() {
		defer close(trafficDone)
		runOpenLoop(trafficCtx, e, workers, &tr, run.services, spec.Rate, timeout, start, end, sc.Seed+1)
	}()

	smp.tracker, smp.traffic, smp.changes = &tracker, &tr, &changes
	// The rule objects are read back on their own goroutine, once an
	// interval at most: the traffic and the sampler never wait for a read.
	if e.kernelObjects != nil {
		readCtx, stopReads := context.WithCancel(ctx)
		reader := startObjectReader(readCtx, e.kernelObjects, iv)
		defer reader.wait()
		defer stopReads()
		smp.readBack = reader.last
	}
	run.prog.Start(fmt.Sprintf("%s: soak %s: %d idle intervals, churn %.3g changes/s for %s, %d quiet, every %s; %.3g connections/s; stream %s",
		run.header.Row, clockOf(spec.Total()), spec.Idle, spec.Churn, spec.Duration.Duration, spec.Quiet, iv, spec.Rate, run.path), n)
	defer run.prog.Done()
	var stop string
	var stopErr error
	for k := 1; k <= n; k++ {
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(start.Add(time.Duration(k) * iv))):
		}
		if ctx.Err() != nil {
			stop, stopErr = context.Cause(ctx).Error(), ctx.Err()
		}
		if k == n || stop != "" {
			// The last interval waits for the connections in flight
			// (a connect is bounded by the timeout).
			stopTraffic()
			select {
			case <-trafficDone:
			case <-time.After(timeout + 2*time.Second):
			}
		}
		x, exited := smp.sample(context.WithoutCancel(ctx), k, soakStage(k, iv, churnFrom, churnTo), time.Now())
		sr.Samples = append(sr.Samples, x)
		if time.Duration(k)*iv == soakProfileAt || k == n || stop != "" || exited != nil {
			writeHeapProfile(run.path, k, iv, run.faults)
		}
		write(func() error { return w.Sample(x) })
		run.prog.Add(1)
		if exited != nil && stop == "" {
			stop, stopErr = exited.Error(), exited
		}
		if stop != "" {
			break
		}
	}
	stopTraffic()
	stopProbes()
	<-churnDone // no change is applied after the applier's end
	res := &reports.ChurnResult{}
	// The observations done since the last sample (after it, before the
	// probes stopped): the stream's last pass takes them.
	endErr := run.ap.end(context.WithoutCancel(ctx), res, tracker.TakeDone(), start)
	sr.KubeProxy = res.KubeProxy
	sr.End = &reports.SoakEnd{AtNs: int64(time.Since(start)), Stopped: stop, InFlight: tr.inFlight(),
		Changes: int(total.Load()), Unobserved: tracker.Pending()}
	write(func() error { return w.End(*sr.End) })
	if stopErr != nil {
		return sr, stopErr
	}
	if endErr != nil {
		run.faults.add("soak: the end of kube-proxy's account: %v", endErr)
	}
	return sr, nil
}

// soakProfileAt is when the soak writes proxybench's first heap profile
// (the minute-5 sample the 10% bound starts from); the last
// sample writes the second.
const soakProfileAt = 5 * time.Minute

// writeHeapProfile writes proxybench's heap profile (runtime/pprof
// "heap": the live objects at the last collection by where they were
// allocated, and all allocations so far; read with `go tool pprof
// -sample_index=inuse_space`) beside the soak's stream at sample k:
// <stream>.heap-<mm>m.pprof, so what proxybench's RSS holds at minute 5
// and at the end can be told apart. A profile not written is a fault.
func writeHeapProfile(stream string, k int, iv time.Duration, fl *faults) {
	path := fmt.Sprintf("%s.heap-%02.0fm.pprof", strings.TrimSuffix(stream, ".jsonl"), (time.Duration(k) * iv).Minutes())
	runtime.GC() // the profile's in-use figures are as of the last collection
	f, err := os.Create(path)
	if err == nil {
		err = errors.Join(pprof.Lookup("heap").WriteTo(f, 0), f.Close())
	}
	if err != nil {
		fl.add("soak: heap profile %s not written: %v", path, err)
	}
}

// clockOf formats d as hh:mm:ss.
func clockOf(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	return fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
}

// soakStreamPath is where a row's soak stream goes: the run's artifact
// folder, soak/<row>.jsonl (with the service count when the scenario
// sweeps sizes).
func soakStreamPath(artifacts, label string, sc *scenarios.Scenario, services int) string {
	name := rowDir(label)
	if len(sc.Sweep.Services) > 0 {
		name += fmt.Sprintf("-%d", services)
	}
	return filepath.Join(artifacts, "soak", name+".jsonl")
}

// soakHeaderOf is row r's stream header (label: its row label), whose
// proxy CPU and RSS figures measure cpu and rss.
func soakHeaderOf(r *Row, label, cpu, rss string) reports.SoakHeader {
	return reports.SoakHeader{Tool: "proxybench " + r.O.Version, RunID: r.O.RunID, Row: label, Mode: r.Mode.Name,
		Implementation: r.Mode.Implementation, BaseMode: r.Mode.Base, Kernel: string(r.O.Where), Services: len(r.Services),
		Machine: MachineInfo(), Scenario: r.Sc, ProxyCPU: cpu, ProxyRSS: rss}
}

// soakPhaseV is the soak phase (scenario block soak) as a Phase: a
// builtin row's changes reach its proxier through the mode's sync loop
// (loopApplier), a kube-proxy row's through the API, kube-proxy syncing
// on its own (apiApplier), as in the churn phase; a kube-proxy row's
// process is sampled (CPU, RSS, Go heap, goroutines, syncs).
var soakPhaseV = Phase{
	PhaseRule: scenarios.PhaseRule{Name: "soak", Field: "soak", Scope: scenarios.ScopeRow, Rules: true, TCP: true,
		Wants:                 func(s *scenarios.Scenario) bool { return s.Soak != nil },
		NotWithKubeProxyNodes: "its samples read node-0's kube-proxy only"},
	Report: reports.SoakReport,
	Run: func(ctx context.Context, r *Row) error {
		st, err := r.Proxier.Sync(ctx, r.Services)
		if err != nil {
			return fmt.Errorf("sync before the soak: %w", err)
		}
		label := rowLabel(r.Mode, r.Sc)
		h := soakHeaderOf(r, label, builtinProxyCPU, builtinProxyRSS)
		run := soakRun{sc: r.Sc, e: r.Env, services: r.Services, live: r.Live, header: h, prog: r.Progress(), faults: r.Faults,
			path: soakStreamPath(r.O.ArtifactDir, label, r.Sc, len(r.Services)), objects: st.Objects}
		api, viaAPI := r.Proxier.(churnAPI)
		switch {
		case r.Mode.Implementation == scenarios.ImplKubeProxy && !viaAPI:
			return fmt.Errorf("soak: the %s row's proxier (%T) takes no API writes", r.Mode.Name, r.Proxier)
		case viaAPI:
			proc, ok := r.Proxier.(soakProcess)
			if !ok {
				return fmt.Errorf("soak: the %s row's proxier (%T) has no process to sample", r.Mode.Name, r.Proxier)
			}
			run.ap, run.proc = newAPIApplier(api, 0), proc
			run.header.ProxyCPU, run.header.ProxyRSS = kubeProxyCPU, kubeProxyRSS
		default:
			if r.Mode.SyncPeriods == nil {
				return fmt.Errorf("soak: mode %s runs no sync loop", r.Mode.Name)
			}
			minSync, period := r.Mode.SyncPeriods(r.Sc)
			run.ap = &loopApplier{p: r.Proxier, sc: r.Sc, minSync: minSync, period: period, live: r.Live}
		}
		sr, err := soakPhase(ctx, run)
		if sr != nil {
			r.Result.Soak = sr
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("soak: %w", err)
		}
		return err
	},
}
