//go:build linux

package runner

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"time"

	"github.com/proxybench/proxybench/internal/monitoring"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/proxymodes/syncloop"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/observe"
)

// churnApplier is how a churn phase's changes reach the row's proxier:
// the one part that differs between a proxier proxybench syncs itself
// (builtin: the mode's sync loop, loopApplier) and one that runs its own
// sync loop and takes the changes through an API (kube-proxy: each change
// an API write, apiApplier). The change generator (workload.Cluster at
// the scenario's arrivals and mix), the probes and the data-plane
// observer (workload/observe) are the phase's own, shared by both.
type churnApplier interface {
	// begin starts the applier at the phase's start, before the first
	// of its (at most) n changes; snapshot is the desired state at any
	// moment (a proxier proxybench syncs). An error ends the phase before
	// any change.
	begin(ctx context.Context, start time.Time, n int, snapshot func() []workload.Service) error
	// apply makes change ch, applied to the desired state at at, reach
	// the proxier; s is the changed service as the state now holds it (a
	// deleted one as it was). It returns at once: its work runs in the
	// background.
	apply(ch workload.Change, s workload.Service, at time.Time)
	// end stops the applier once the probes are done (grace included)
	// and fills res with its side of the phase: the syncs (Syncs), and a
	// proxier's own account (KubeProxy, each sample's KubeProxyNs); res's
	// samples are filled already, in the order of obs.
	end(ctx context.Context, res *reports.ChurnResult, obs []*observe.Observation, start time.Time) error
}

// churnPhase is the churn phase of a proxier proxybench syncs itself:
// runChurn with the mode's sync loop (loopApplier, kube-proxy's
// semantics: minSync and period) keeping p in step. A failed sync does
// not stop it: it is recorded (ChurnResult.Failures, with its recovery),
// the next sync is full, as in kube-proxy. With failure.syncErrors, the
// rule programs fail on purpose (injectSyncErrors).
func churnPhase(ctx context.Context, sc *scenarios.Scenario, e *env, p proxymodes.Proxier,
	services []workload.Service, minSync, period time.Duration, prog Progress, live *monitoring.RowMetrics) (*reports.ChurnResult, error) {
	return runChurn(ctx, sc, e, p.Mode(), services, &loopApplier{p: p, sc: sc, minSync: minSync, period: period, live: live}, minSync, period, prog, live)
}

// runChurn changes the cluster at the scenario's churn rate, hands each
// change to ap (which makes it reach the row's proxier, label), and
// probes the data plane from the client namespaces to time each
// change's programming latency (package observe): from the change to
// the first connection through the VIP that lands on a new endpoint, or,
// for a removal, to the first connection after the last one that still
// lands on it. The proxier must be in sync with services when it is
// called. A probe worker that cannot enter its namespace fails the phase
// before any change is made. minSync and period are recorded as the
// phase's. Every change applied and every change the probes saw (with
// its programming latency) are observed in live as they happen (nil:
// not monitored).
func runChurn(ctx context.Context, sc *scenarios.Scenario, e *env, label string, services []workload.Service, ap churnApplier,
	minSync, period time.Duration, prog Progress, live *monitoring.RowMetrics) (*reports.ChurnResult, error) {
	c := sc.Churn
	rng := rand.New(rand.NewSource(sc.Seed))
	arrivals := workload.Arrivals(c.Rate, c.Duration.Duration, c.Arrival, rng)
	res := &reports.ChurnResult{MinSyncPeriodNs: int64(minSync), SyncPeriodNs: int64(period), Rate: c.Rate,
		DurationNs: int64(c.Duration.Duration), Arrival: c.Arrival, ByKind: map[string]int{}}

	probes, err := e.probes(c.Probes)
	if err != nil {
		return nil, fmt.Errorf("churn probes: %w", err)
	}
	defer probes.Close()

	var mu sync.Mutex // guards cluster
	cluster := workload.NewCluster(sc, services)
	// When the applier makes every node's proxier take each change (a
	// kube-proxy row on several nodes), each change is followed on every
	// node the probes dial from (their client pods' nodes): seen when
	// every one of them shows it. Otherwise (a builtin row's sync loop
	// syncs node0's proxier only) every probe counts for the change.
	nodeOf := func(w int) int {
		if e.probeNode == nil || !appliesEverywhere(ap) {
			return 0
		}
		return e.probeNode(w)
	}
	var nodes []int
	for w := range max(c.Probes, 1) {
		if !slices.Contains(nodes, nodeOf(w)) {
			nodes = append(nodes, nodeOf(w))
		}
	}
	spread := observe.NewSpread(nodes)
	var seen probeBins
	start := time.Now()
	cpu0 := proxymodes.CPUTime()
	if err := ap.begin(ctx, start, len(arrivals), func() []workload.Service {
		mu.Lock()
		defer mu.Unlock()
		return cluster.Snapshot()
	}); err != nil {
		return nil, err
	}

	stopProbes := probeChanges(ctx, probes, e, func(w int) *observe.Tracker { return spread.Tracker(nodeOf(w)) }, 200*time.Microsecond, 0,
		func(t0 time.Time, ok bool) { seen.add(t0.Sub(start), ok) },
		func(o *observe.Observation) {
			all := spread.Seen(o)
			if all == nil {
				return // another node has yet to show it
			}
			live.ChurnObserved(all.Change.Kind, all.Latency)
			mu.Lock()
			cluster.Release(all.Change.Service)
			mu.Unlock()
		})

	prog.Start(fmt.Sprintf("%s: churn %.3g changes/s for %s, minSyncPeriod %s", label, c.Rate, c.Duration.Duration, minSync), len(arrivals))
	for _, off := range arrivals {
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(start.Add(off))):
		}
		if ctx.Err() != nil {
			break
		}
		mu.Lock()
		ch, ok := cluster.Next(rng, c.Mix)
		var svc workload.Service
		if ok {
			svc = cluster.Services[ch.Service]
		}
		at := time.Now()
		mu.Unlock()
		if ok {
			spread.Add(ch, at)
			live.ChurnApplied(ch.Kind)
			res.ByKind[ch.Kind]++
			ap.apply(ch, svc, at)
		} else {
			res.Skipped++
		}
		prog.Add(1)
	}
	prog.Done()
	// Let the last changes reach the data plane, up to the grace period.
	deadline := time.Now().Add(c.Grace.Duration)
	for time.Now().Before(deadline) && ctx.Err() == nil && spread.Pending() > 0 {
		time.Sleep(20 * time.Millisecond)
	}
	stopProbes()
	obs, perNode := spread.All()
	summarizeSamples(res, obs, start)
	if len(nodes) > 1 {
		summarizeNodes(res, nodes, perNode)
	}
	endErr := ap.end(ctx, res, obs, start)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res.CPUNs = int64(proxymodes.CPUTime() - cpu0)
	summarizeSyncs(res)
	if res.KubeProxy != nil {
		// kube-proxy's syncs by its log carry no CPU: its own and its rule
		// programs' over the phase stand for the syncs'.
		res.SyncCPUNs = res.KubeProxy.CPUNs + res.KubeProxy.ChildCPUNs
	}
	res.Failures = syncFailures(res.Syncs, &seen, res.Samples)
	res.FailedSyncs = len(res.Failures)
	return res, endErr
}

// everyNodeApplier is a churnApplier that may make each change reach
// every node's proxier (apiApplier: kube-proxy on every node reads the
// API).
type everyNodeApplier interface {
	everyNode() bool
}

// appliesEverywhere says whether ap makes each change reach every node's
// proxier, so the probes follow it on each node they dial from.
func appliesEverywhere(ap churnApplier) bool {
	en, ok := ap.(everyNodeApplier)
	return ok && en.everyNode()
}

// loopApplier is the churn phase's applier for a proxier proxybench syncs
// itself: the mode's sync loop (syncloop: kube-proxy's minSyncPeriod and
// syncPeriod semantics) syncs p to the desired state after each change,
// every sync recorded. A failed sync is data, not the end (kube-proxy
// logs it, makes the next sync full and carries on). With
// failure.syncErrors the rule programs fail on purpose meanwhile.
type loopApplier struct {
	p               proxymodes.Proxier
	sc              *scenarios.Scenario
	minSync, period time.Duration
	live            *monitoring.RowMetrics
	loop            *syncLoop
	restore         func()
	wrappers        *syncErrorWrappers
}

func (a *loopApplier) begin(ctx context.Context, start time.Time, _ int, snapshot func() []workload.Service) error {
	if se := a.sc.Failure.SyncErrors; se.Set() {
		w, restore, err := injectSyncErrors(*se, a.sc.Seed)
		if err != nil {
			return fmt.Errorf("failure.syncErrors: %w", err)
		}
		a.wrappers = w
		// A proxier that resolved its program before (nftables) looks
		// it up again: the wrapper now, the real one after.
		tr, _ := a.p.(proxymodes.ToolResolver)
		if tr != nil {
			tr.ResolveTools()
		}
		a.restore = func() {
			restore()
			if tr != nil {
				tr.ResolveTools()
			}
		}
	}
	a.loop = startSyncLoop(ctx, a.p, a.minSync, a.period, start, a.live, snapshot)
	return nil
}

func (a *loopApplier) apply(workload.Change, workload.Service, time.Time) { a.loop.changed() }

func (a *loopApplier) end(_ context.Context, res *reports.ChurnResult, _ []*observe.Observation, _ time.Time) error {
	syncs, _ := a.loop.stop() // a failed sync is recorded in syncs
	if a.wrappers != nil {
		res.Injected = a.wrappers.injected() // before restore removes them
	}
	if a.restore != nil {
		a.restore()
	}
	res.Syncs = syncs
	return nil
}

// probeBins counts probe connections and failed ones per 100 ms of a
// churn phase, so that what the probes saw during a failed sync's window
// can be told afterwards.
type probeBins struct {
	mu         sync.Mutex
	conns, bad []int
}

const probeBin = 100 * time.Millisecond

func (b *probeBins) add(at time.Duration, ok bool) {
	i := max(int(at/probeBin), 0)
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.conns) <= i {
		b.conns, b.bad = append(b.conns, 0), append(b.bad, 0)
	}
	b.conns[i]++
	if !ok {
		b.bad[i]++
	}
}

// window sums the bins overlapping [from, to).
func (b *probeBins) window(from, to time.Duration) (conns, bad int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := max(int(from/probeBin), 0); i < len(b.conns) && time.Duration(i)*probeBin < to; i++ {
		conns += b.conns[i]
		bad += b.bad[i]
	}
	return conns, bad
}

// syncFailures describes every failed sync of syncs (in order): when it
// started and failed, its error, when the next successful sync ended (the
// data plane served the rules of the last good sync until then: stale for
// every change made meanwhile), the changes made in that window, and what
// the probes saw in it.
func syncFailures(syncs []reports.SyncRecord, seen *probeBins, samples []reports.ChurnSample) []reports.SyncFailure {
	var out []reports.SyncFailure
	for i, s := range syncs {
		if s.Err == "" {
			continue
		}
		f := reports.SyncFailure{Index: i, AtNs: s.AtNs, Kind: s.Kind, Err: s.Err, RecoveredNs: -1, RecoveryKind: ""}
		end := time.Duration(s.AtNs + int64(s.Wall))
		for _, n := range syncs[i+1:] {
			if n.Err == "" {
				f.RecoveredNs = n.AtNs + int64(n.Wall) - s.AtNs
				f.RecoveryKind = n.Kind
				end = time.Duration(n.AtNs + int64(n.Wall))
				break
			}
		}
		from := time.Duration(s.AtNs)
		for _, c := range samples {
			if at := time.Duration(c.AtNs); at >= from && at < end {
				f.Changes++
			}
		}
		f.ProbeConns, f.ProbeErrors = seen.window(from, end)
		out = append(out, f)
	}
	return out
}

// syncLoop is a running syncloop.Runner that syncs a proxier to the
// churned cluster and records every sync.
type syncLoop struct {
	runner *syncloop.Runner
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	syncs []reports.SyncRecord
	err   error // the first failed sync's
	// resyncs counts the syncs told to read everything back
	// (proxymodes.Resyncer).
	resyncs int
}

// startSyncLoop runs the sync loop of minSync and period (and the mode's
// MaxSyncInterval) for p (which
// already holds the cluster's services: that was the loop's first, full,
// sync, started at start): every sync gives p snapshot() (full when the
// loop says so and p is a proxymodes.FullSyncer) and is recorded with its
// offset from start, and observed in live. A p that is a
// proxymodes.Resyncer (builtin IPVS) is told to read everything back for
// a sync when period has passed since the start of the last sync that did
// (a full one or a resync; syncloop.State.ReadBack): kube-proxy's IPVS proxier reads every real server on every
// sync, so a real server deleted out of band is re-added within one
// syncPeriod; builtin's loop does it at most once a period, so its partial
// syncs under churn stay partial.
func startSyncLoop(ctx context.Context, p proxymodes.Proxier, minSync, period time.Duration, start time.Time, live *monitoring.RowMetrics, snapshot func() []workload.Service) *syncLoop {
	l := &syncLoop{done: make(chan struct{})}
	st := syncloop.New(minSync, period)
	if m, err := modes.Lookup(p.Mode()); err == nil {
		// iptables and nftables: no sync with nothing changed for an hour
		// (kube-proxy's maxInterval), retries after period.
		st.MaxInterval = m.MaxSyncInterval
	}
	rs, resyncer := p.(proxymodes.Resyncer)
	if resyncer {
		st.ReadBackPeriod = period
	}
	st.Start(start)
	st.Done(nil)
	l.runner = syncloop.NewRunner(st, func(ctx context.Context, full, readBack bool) error {
		if fs, ok := p.(proxymodes.FullSyncer); ok && full {
			fs.ForceFullSync()
		}
		if resyncer && readBack {
			rs.Resync()
			l.mu.Lock()
			l.resyncs++
			l.mu.Unlock()
		}
		snap := snapshot()
		at := time.Since(start)
		s, err := p.Sync(context.WithoutCancel(ctx), snap)
		kind := "incremental"
		if full {
			kind = "full"
		}
		observeSync(live, kind, s, err)
		rec := reports.SyncRecord{AtNs: int64(at), SyncStats: s}
		if err != nil {
			rec.Err = err.Error()
		}
		l.mu.Lock()
		l.syncs = append(l.syncs, rec)
		if err != nil && l.err == nil {
			l.err = err
		}
		l.mu.Unlock()
		return err
	})
	var loopCtx context.Context
	loopCtx, l.cancel = context.WithCancel(ctx)
	go func() { l.runner.Run(loopCtx); close(l.done) }()
	return l
}

// resyncCount returns how many syncs were told to read everything back.
func (l *syncLoop) resyncCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.resyncs
}

// changed tells the loop the desired state changed.
func (l *syncLoop) changed() { l.runner.Changed() }

// stop ends the loop and returns its syncs and the first sync error.
func (l *syncLoop) stop() ([]reports.SyncRecord, error) {
	l.cancel()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.syncs, l.err
}

// summarizeSamples fills res's samples, counts, programming-latency
// summary and buckets from the observations (an unobserved change is a
// sample with latency -1).
func summarizeSamples(res *reports.ChurnResult, obs []*observe.Observation, start time.Time) {
	var lat []int64
	for _, o := range obs {
		s := reports.ChurnSample{Kind: o.Change.Kind, AtNs: int64(o.At.Sub(start)), LatencyNs: -1}
		if o.Done {
			s.LatencyNs = int64(o.Latency)
			lat = append(lat, int64(o.Latency))
			res.Observed++
		} else {
			res.Unobserved++
			s.Probes = &reports.ProbeCounts{Hits: o.Hits, Elsewhere: o.Elsewhere, Failed: o.Failed}
		}
		res.Samples = append(res.Samples, s)
	}
	res.Changes = len(obs)
	res.Latency = reports.Summarize(lat)
	res.LatencyBuckets = reports.BucketCounts(lat, reports.ProgrammingBuckets())
}

// summarizeNodes fills res's per-node data-plane figures when the probes
// followed each change on several nodes: the nodes, each node's
// latency summary over the changes it saw, and each sample's latency
// per node (-1: that node did not show it).
func summarizeNodes(res *reports.ChurnResult, nodes []int, perNode [][]*observe.Observation) {
	res.ProbeNodes = append([]int(nil), nodes...)
	lat := make([][]int64, len(nodes))
	for i, per := range perNode {
		ns := make([]int64, len(per))
		for k, o := range per {
			ns[k] = -1
			if o.Done {
				ns[k] = int64(o.Latency)
				lat[k] = append(lat[k], int64(o.Latency))
			}
		}
		if i < len(res.Samples) {
			res.Samples[i].NodeLatencyNs = ns
		}
	}
	for _, l := range lat {
		res.NodeLatency = append(res.NodeLatency, reports.Summarize(l))
	}
}

// summarizeSyncs fills res's sync summaries and buckets per kind, and the
// syncs' CPU, from res.Syncs.
func summarizeSyncs(res *reports.ChurnResult) {
	byKind := map[string][]int64{}
	for _, s := range res.Syncs {
		byKind[s.Kind] = append(byKind[s.Kind], int64(s.Wall))
		res.SyncCPUNs += int64(s.CPU)
	}
	res.SyncSummary, res.SyncBuckets = map[string]reports.Summary{}, map[string][]reports.Bucket{}
	for k, v := range byKind {
		res.SyncSummary[k] = reports.Summarize(v)
		res.SyncBuckets[k] = reports.BucketCounts(v, reports.SyncBucketBounds())
	}
}

// churnPhaseV is the churn phase (churn.rate > 0) as a Phase: one churn
// run per minSyncPeriod value of the mode (a sweep of periods), each
// after a sync back to services. A builtin row's changes reach its
// proxier through the mode's sync loop (loopApplier); a kube-proxy row's
// through the API, kube-proxy syncing on its own (apiApplier), restarted
// with each swept minSyncPeriod (and with its own again after the sweep
// when a later phase runs on it).
var churnPhaseV = Phase{
	PhaseRule: scenarios.PhaseRule{Name: "churn", Field: "churn", Scope: scenarios.ScopeRow, Rules: true, TCP: true,
		Wants: func(s *scenarios.Scenario) bool { return s.Churn.Rate > 0 }},
	Core: true,
	Report: func(label string, mr *reports.ModeResult) []reports.Section {
		return append(reports.ChurnKubeProxyReport(label, mr), reports.ChurnSyncErrorsReport(label, mr)...)
	},
	Run: func(ctx context.Context, r *Row) error {
		values, period, err := r.Mode.ChurnSyncPeriods(r.Sc)
		if err != nil {
			return err
		}
		api, viaAPI := r.Proxier.(churnAPI)
		if r.Mode.Implementation == scenarios.ImplKubeProxy && !viaAPI {
			return fmt.Errorf("churn: the %s row's proxier (%T) takes no API writes", r.Mode.Name, r.Proxier)
		}
		swept := len(r.Sc.Sweep.MinSyncPeriod) > 0
		var own time.Duration // kube-proxy's minSyncPeriod before the sweep
		if viaAPI {
			own, _ = api.SyncPeriods()
		}
		restarted := false
		for _, ms := range values {
			if _, err := r.Proxier.Sync(ctx, r.Services); err != nil {
				return fmt.Errorf("sync before churn: %w", err)
			}
			var cr *reports.ChurnResult
			if viaAPI {
				minSync, kpPeriod, restartNs, err := kubeProxyChurnPeriods(ctx, api, ms, swept)
				if err != nil {
					return err
				}
				restarted = restarted || restartNs > 0
				cr, err = runChurn(ctx, r.Sc, r.Env, r.Proxier.Mode(), r.Services, newAPIApplier(api, restartNs).withSyncErrors(r.Sc.Failure.SyncErrors, r.Sc.Seed), minSync, kpPeriod, r.Progress(), r.Live)
				if cr != nil {
					r.Result.Churn = append(r.Result.Churn, *cr)
				}
				if err != nil {
					return err
				}
				continue
			}
			cr, err = churnPhase(ctx, r.Sc, r.Env, r.Proxier, r.Services, ms, period, r.Progress(), r.Live)
			if cr != nil {
				r.Result.Churn = append(r.Result.Churn, *cr)
			}
			if err != nil {
				return err
			}
		}
		if restarted && len(r.later) > 0 && own > 0 {
			// The row's later phases run on kube-proxy as configured.
			if _, _, err := api.UseMinSyncPeriod(ctx, own); err != nil {
				return fmt.Errorf("churn: restart kube-proxy with its own minSyncPeriod %v for %v: %w", own, r.later, err)
			}
		}
		return nil
	},
}

// probeChanges starts the probe workers of a churn or soak phase: each
// (worker w) cycles over the pending changes of trackerOf(w) (Tracker.Next), dials the change's
// VIP with a 1 s timeout and reports it (Tracker.See), calling dialled
// (nil: none) for every probe and done for each probe that completes an
// observation; a worker with nothing pending sleeps idle, and every probe
// is followed by pause (0: none). The returned stop ends the workers and
// waits for them.
func probeChanges(ctx context.Context, probes workerPool, e *env, trackerOf func(w int) *observe.Tracker, idle, pause time.Duration,
	dialled func(t0 time.Time, ok bool), done func(o *observe.Observation)) (stop func()) {
	probeCtx, cancel := context.WithCancel(ctx)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		probes.Each(func(w int) {
			tr := trackerOf(w)
			for probeCtx.Err() == nil {
				o := tr.Next()
				if o == nil {
					time.Sleep(idle)
					continue
				}
				landed, t0, err := e.dial(o.Change.VIP, o.Change.Port, time.Second)
				if dialled != nil {
					dialled(t0, err == nil)
				}
				if tr.See(o, t0, landed.Addr(), err == nil) {
					done(o)
				}
				if pause > 0 {
					time.Sleep(pause)
				}
			}
		})
	}()
	return func() {
		cancel()
		<-finished
	}
}
