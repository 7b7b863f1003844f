//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/observe"
)

// churnAPI is a proxier that runs its own sync loop and takes changes
// through an API (kubeproxy.Proxier; a fake API writer in the unit
// tests): the churn phase writes each change, never syncs it, and reads
// the proxier's own account of the phase afterwards.
type churnAPI interface {
	proxymodes.Proxier
	// BeginChurn and EndChurn bracket the phase: the proxier's account
	// (its metrics' growth, CPU, memory, the syncs and per-change lines
	// of its log) is over what lies between.
	BeginChurn(ctx context.Context) error
	// EndChurn waits (bounded) until the proxier has programmed triggers
	// trigger times since BeginChurn, then returns its account.
	EndChurn(ctx context.Context, triggers int) (kubeproxy.ChurnAccount, error)
	// WriteChange writes change ch (s: the service after it) through the
	// API with trigger as its last-change-trigger-time. Safe for
	// concurrent use.
	WriteChange(ctx context.Context, ch workload.Change, s workload.Service, trigger time.Time) error
	// UseMinSyncPeriod restarts the proxier with minSyncPeriod d unless
	// it runs with it (sweep.minSyncPeriod); SyncPeriods are the ones it
	// runs with.
	UseMinSyncPeriod(ctx context.Context, d time.Duration) (restarted bool, st proxymodes.SyncStats, err error)
	SyncPeriods() (minSync, sync time.Duration)
	// PathFirst is the folder first on the proxier's PATH: a kube-proxy
	// row's failure.syncErrors wrappers ("": none).
	PathFirst() string
	// ReadChurnLog returns the per-change lines and syncs of the
	// proxier's log since BeginChurn or the last read, up to its last
	// whole sync; EndChurn's account then holds only the lines after
	// the last read (the soak matches per interval: programmedStream).
	ReadChurnLog() ([]kubeproxy.Programmed, []kubeproxy.LoggedSync, error)
}

var _ churnAPI = (*kubeproxy.Proxier)(nil)

// apiWriters is how many API writes a kube-proxy row's churn phase has in
// flight: the EndpointSlice controller's default
// --concurrent-service-endpoint-syncs (5), so a slow write delays the
// changes behind it as a cluster's controller would, not every one. A
// service's changes all go to one writer (by its name), in order, as
// the controller syncs one Service at a time: a change the probes saw
// early (a removal confirmed by chance) frees its service for the next
// change before its own write may have returned.
const apiWriters = 5

// matchTolerance bounds how far a kube-proxy log line's trigger time
// (its time minus its latency) may lie from the change's own for the two
// to be matched: the line is logged right after kube-proxy computed the
// latency (microseconds; more under load), and two changes of one
// service are at least the first one's programming latency apart.
const matchTolerance = 500 * time.Millisecond

// apiApplier is the churn phase's applier for a kube-proxy row: each
// change is one API write (apiWriters in flight) stamped with the time
// of the change, and kube-proxy syncs on its own (its minSyncPeriod,
// from its configuration); the phase drives no sync loop.
type apiApplier struct {
	api churnAPI
	// restartNs is the restart before the phase that gave kube-proxy the
	// phase's minSyncPeriod (0: none).
	restartNs int64
	// syncErrors, when set, is failure.syncErrors (with the scenario's
	// seed): the wrappers on kube-proxy's PATH (api.PathFirst) are armed
	// for the phase; wrappers is them while armed.
	syncErrors *scenarios.SyncErrorsSpec
	seed       int64
	wrappers   *syncErrorWrappers

	q apiQueues

	mu      sync.Mutex
	changes []appliedChange // in apply order (= the observations'); none when streamed
	// stream, when set (streamed), matches the changes to kube-proxy's
	// log per interval (the soak) instead of at the end; added are the
	// changes made since its last pass.
	stream   *programmedStream
	added    []*streamChange
	writeNs  []int64
	writes   int
	errs     int
	firstErr string
	// triggers counts the writes that carried a trigger time (every
	// successful one but a deletion's).
	triggers int
}

// apiWrite is one change for the writers.
type apiWrite struct {
	ch workload.Change
	s  workload.Service
	at time.Time
}

// appliedChange is one change as kube-proxy's log names it: its
// service (namespace/name) and trigger time.
type appliedChange struct {
	service string
	at      time.Time
}

func newAPIApplier(api churnAPI, restartNs int64) *apiApplier {
	return &apiApplier{api: api, restartNs: restartNs}
}

// withSyncErrors makes the phase arm the failure.syncErrors wrappers on
// kube-proxy's PATH (se not set: nothing).
func (a *apiApplier) withSyncErrors(se *scenarios.SyncErrorsSpec, seed int64) *apiApplier {
	if se.Set() {
		a.syncErrors, a.seed = se, seed
	}
	return a
}

// everyNode: a kube-proxy row on several nodes has a kube-proxy per
// node reading the API, so each write reaches every node.
func (a *apiApplier) everyNode() bool {
	mn, ok := a.api.(multiNode)
	return ok && mn.NodeCount() > 1
}

func (a *apiApplier) begin(ctx context.Context, _ time.Time, n int, _ func() []workload.Service) error {
	if err := a.api.BeginChurn(ctx); err != nil {
		return fmt.Errorf("churn: %w", err)
	}
	if a.syncErrors != nil {
		// Armed after BeginChurn's scrape, so kube-proxy's failure
		// counters' growth over the phase holds every injected failure.
		dir := a.api.PathFirst()
		if dir == "" {
			_, _ = a.api.EndChurn(ctx, 0)
			return fmt.Errorf("failure.syncErrors: %s runs without the wrappers' folder first on its PATH", a.api.Mode())
		}
		w := &syncErrorWrappers{dir: dir}
		if err := w.arm(*a.syncErrors, a.seed); err != nil {
			_, _ = a.api.EndChurn(ctx, 0)
			return fmt.Errorf("failure.syncErrors: %w", err)
		}
		a.wrappers = w
	}
	a.q.start(func(j apiWrite) {
		err := a.api.WriteChange(ctx, j.ch, j.s, j.at)
		took := time.Since(j.at)
		a.mu.Lock()
		a.writes++
		if err != nil {
			a.errs++
			if a.firstErr == "" {
				a.firstErr = fmt.Sprintf("%s of %s/%s at %s: %v", j.ch.Kind, j.s.Namespace, j.s.Name, j.at.Format("15:04:05.000"), err)
			}
		} else {
			a.writeNs = append(a.writeNs, int64(took))
			if j.ch.Kind != workload.ServiceDelete {
				a.triggers++
			}
		}
		a.mu.Unlock()
	})
	return nil
}

// apiQueues are a churn's API writers: apiWriters goroutines, each
// draining a queue of its own in order; all of a service's writes go to
// one of them (by its namespace/name), as the EndpointSlice controller
// syncs one Service at a time. A queue never blocks put and holds only
// the writes not yet made: a channel buffered for every change of an
// hour's soak (36k of 304 bytes) kept the pages its ring had passed
// resident, 11 MB of proxybench's RSS growing with the soak.
type apiQueues struct {
	qs []*writeQueue
	wg sync.WaitGroup
}

// writeQueue is one writer's queue (FIFO, unbounded).
type writeQueue struct {
	mu     sync.Mutex
	ready  sync.Cond
	items  []apiWrite
	closed bool
}

// start starts the writers, each write made by write (a queue grows and
// shrinks with its backlog).
func (q *apiQueues) start(write func(apiWrite)) {
	for range apiWriters {
		wq := &writeQueue{}
		wq.ready.L = &wq.mu
		q.qs = append(q.qs, wq)
		q.wg.Add(1)
		go func() {
			defer q.wg.Done()
			for {
				j, ok := wq.take()
				if !ok {
					return
				}
				write(j)
			}
		}()
	}
}

// take waits for the next write (false: the queue is closed and empty).
func (wq *writeQueue) take() (apiWrite, bool) {
	wq.mu.Lock()
	defer wq.mu.Unlock()
	for len(wq.items) == 0 && !wq.closed {
		wq.ready.Wait()
	}
	if len(wq.items) == 0 {
		return apiWrite{}, false
	}
	j := wq.items[0]
	wq.items[0] = apiWrite{} // the service's slices are not kept by the array
	wq.items = wq.items[1:]
	return j, true
}

// put queues w on its service's writer.
func (q *apiQueues) put(w apiWrite) {
	h := fnv.New32a()
	h.Write([]byte(w.s.Namespace + "/" + w.s.Name))
	wq := q.qs[h.Sum32()%uint32(len(q.qs))]
	wq.mu.Lock()
	wq.items = append(wq.items, w)
	wq.mu.Unlock()
	wq.ready.Signal()
}

// close ends the queues and waits for the writes in them.
func (q *apiQueues) close() {
	for _, wq := range q.qs {
		wq.mu.Lock()
		wq.closed = true
		wq.mu.Unlock()
		wq.ready.Broadcast()
	}
	q.wg.Wait()
}

func (a *apiApplier) apply(ch workload.Change, s workload.Service, at time.Time) {
	if a.stream == nil {
		name := s.Namespace + "/" + s.Name
		a.mu.Lock()
		a.changes = append(a.changes, appliedChange{service: name, at: at})
		a.mu.Unlock()
	}
	a.q.put(apiWrite{ch: ch, s: s, at: at})
}

// streamed makes a match kube-proxy's log to its changes interval by
// interval (programmedStream; the soak): each change is then announced
// with track, before its observation is tracked, and matched by
// matchLog; end takes only the observations done since the last
// matchLog.
func (a *apiApplier) streamed() *apiApplier {
	a.stream = newProgrammedStream(matchTolerance)
	return a
}

// track announces a streamed change (s: its service) with its
// observation o, before o is tracked (a change seen at once is then
// known when its observation comes out done) and before apply.
func (a *apiApplier) track(o *observe.Observation, s workload.Service) {
	a.mu.Lock()
	a.added = append(a.added, &streamChange{service: s.Namespace + "/" + s.Name, at: o.At, obs: o})
	a.mu.Unlock()
}

// matchLog is one streamed pass: kube-proxy's log since the last read
// (ReadChurnLog) against the changes, done the observations that came
// out of the tracker done since the last pass. An unread log consumes
// nothing: its lines are read next time.
func (a *apiApplier) matchLog(done []*observe.Observation) error {
	lines, syncs, err := a.api.ReadChurnLog()
	// The changes taken after the read: a line read is of a change
	// written, so announced before.
	a.mu.Lock()
	added := a.added
	a.added = nil
	a.mu.Unlock()
	a.stream.pass(added, lines, syncs, done, time.Now())
	return err
}

// end waits for the writes, ends kube-proxy's account and fills res:
// its syncs by its log (Syncs), its figures (KubeProxy) and, per change,
// kube-proxy's own latency where its log's line matches the change.
// Streamed, obs are the observations done since the last matchLog: the
// last pass reads the rest of the log, res gets kube-proxy's figures
// (the match's counts over the whole phase) and the syncs since the
// last read, no samples.
func (a *apiApplier) end(ctx context.Context, res *reports.ChurnResult, obs []*observe.Observation, start time.Time) error {
	a.q.close()
	a.mu.Lock()
	defer a.mu.Unlock()
	var disarmErr error
	if a.wrappers != nil {
		// The errors stop with the changes: kube-proxy's syncs of the last
		// writes (EndChurn waits for them) run the real programs, so its
		// recovery from a trailing failure is in its account.
		disarmErr = a.wrappers.disarm()
		res.Injected = a.wrappers.injected()
	}
	acct, err := a.api.EndChurn(ctx, a.triggers)
	err = errors.Join(err, disarmErr)
	kp := &reports.ChurnKubeProxy{Version: acct.Version, Programming: HistogramOf(acct.Programming), Syncs: HistogramOf(acct.Syncs),
		Logged: len(acct.Programmed), PerChange: acct.PerChange, CPUNs: int64(acct.CPU), ChildCPUNs: int64(acct.ChildCPU),
		PeakRSSBytes: acct.PeakRSS, MinSyncPeriodNs: int64(acct.MinSyncPeriod), SyncPeriodNs: int64(acct.SyncPeriod), RestartNs: a.restartNs,
		Writes: a.writes, WriteErrors: a.errs, WriteError: a.firstErr, WriteLatency: reports.Summarize(a.writeNs),
		SettleNs: int64(acct.Settle), Unsettled: acct.Unsettled, FailureCounters: acct.Failures, Events: acct.Events,
		APIServerCPUNs: int64(acct.APIServerCPU), EtcdCPUNs: int64(acct.EtcdCPU)}
	for _, n := range acct.Nodes {
		kp.Nodes = append(kp.Nodes, reports.ChurnKubeProxyNode{Node: n.Node, Programming: HistogramOf(n.Programming), CPUNs: int64(n.CPU),
			ChildCPUNs: int64(n.ChildCPU), PeakRSSBytes: n.PeakRSS, Events: n.Events, Unsettled: n.Unsettled, Err: n.Err})
	}
	if acct.HasFullPartial {
		f, p := HistogramOf(acct.Full), HistogramOf(acct.Partial)
		kp.FullSyncs, kp.PartialSyncs = &f, &p
	}
	res.KubeProxy = kp
	res.Syncs = loggedSyncs(acct.Logged, start)
	if a.stream != nil {
		added := a.added
		a.added = nil
		a.stream.pass(added, acct.Programmed, acct.Logged, obs, time.Now())
		kp.Logged, kp.Matched, kp.SeenBeforeSync = a.stream.logged, a.stream.matched, a.stream.seenBeforeSync
		return err
	}
	if len(a.changes) != len(obs) || len(res.Samples) != len(obs) {
		return errors.Join(err, fmt.Errorf("churn: %d changes written for %d observations", len(a.changes), len(obs)))
	}
	line := matchProgrammed(a.changes, acct.Programmed, matchTolerance)
	for i, j := range line {
		if j < 0 {
			continue
		}
		l := acct.Programmed[j]
		res.Samples[i].KubeProxyNs = int64(l.Elapsed)
		kp.Matched++
		if obs[i].Done && seenBeforeSync(obs[i].At.Add(obs[i].Latency), l.At, acct.Logged) {
			kp.SeenBeforeSync++
		}
	}
	return err
}

// seenBeforeSync reports whether the data plane's observation at seen
// came before the start of kube-proxy's sync that programmed the change
// (the logged sync whose span holds its "Network programming" line at
// programmed): only a disappearance can be seen so, when ConfirmMisses
// connections in a row avoided the endpoint by chance before any rule
// changed.
func seenBeforeSync(seen, programmed time.Time, syncs []kubeproxy.LoggedSync) bool {
	for _, s := range syncs {
		if !programmed.Before(s.Start) && !programmed.After(s.End.Add(time.Millisecond)) {
			return seen.Before(s.Start)
		}
	}
	return false
}

// HistogramOf is a kube-proxy histogram's growth as the result keeps it:
// cumulative buckets named by their bound in seconds, "+Inf" last.
func HistogramOf(h kubeproxy.Histogram) reports.KubeProxyHistogram {
	out := reports.KubeProxyHistogram{Count: h.Count, SumSeconds: h.Sum}
	if h.Count == 0 && len(h.Buckets) == 0 {
		return out
	}
	for i, b := range h.Bounds {
		if i < len(h.Buckets) {
			out.Buckets = append(out.Buckets, reports.Bucket{LE: strconv.FormatFloat(b, 'f', -1, 64), Count: int(h.Buckets[i])})
		}
	}
	out.Buckets = append(out.Buckets, reports.Bucket{LE: "+Inf", Count: int(h.Count)})
	return out
}

// loggedSyncs are kube-proxy's syncs by its log as the phase's sync
// records, at their start's offset from the phase start (a sync that
// began before the phase is left out): kind full, or incremental for a
// partial sync (kube-proxy's IPVS mode has no partial sync: full), the
// wall its log gave, an error when it logged "Sync failed".
func loggedSyncs(logged []kubeproxy.LoggedSync, start time.Time) []reports.SyncRecord {
	var out []reports.SyncRecord
	for _, s := range logged {
		if s.Start.Before(start) || s.Kind == "" {
			continue
		}
		kind := "full"
		if s.Kind == "partial" {
			kind = "incremental"
		}
		rec := reports.SyncRecord{AtNs: int64(s.Start.Sub(start))}
		rec.Kind, rec.Wall = kind, s.Elapsed
		if s.Failed {
			rec.Err = "kube-proxy logged \"Sync failed\" (its next sync is full)"
		}
		out = append(out, rec)
	}
	return out
}

// matchProgrammed pairs each change with kube-proxy's "Network
// programming" line for it: a line of the change's service whose
// trigger time (the line's time minus its latency) is the nearest to the
// change's and within tol; each line pairs with one change at most, the
// changes taken in order. It returns the line's index per change (-1:
// none matched: a deletion, which kube-proxy does not time, or a change
// kube-proxy had not programmed when the phase ended).
func matchProgrammed(changes []appliedChange, lines []kubeproxy.Programmed, tol time.Duration) []int {
	byService := map[string][]int{}
	for i, l := range lines {
		byService[l.Service] = append(byService[l.Service], i)
	}
	used := make([]bool, len(lines))
	out := make([]int, len(changes))
	for i, c := range changes {
		out[i] = -1
		best, bestOff := -1, time.Duration(math.MaxInt64)
		for _, j := range byService[c.service] {
			if used[j] {
				continue
			}
			off := lines[j].At.Add(-lines[j].Elapsed).Sub(c.at)
			if off < 0 {
				off = -off
			}
			if off <= tol && off < bestOff {
				best, bestOff = j, off
			}
		}
		if best >= 0 {
			used[best] = true
			out[i] = best
		}
	}
	return out
}

// kubeProxyChurnPeriods readies a kube-proxy row's churn phase for one
// minSyncPeriod value ms: with sweep.minSyncPeriod, kube-proxy is
// restarted with ms unless it runs with it (restartNs: that restart's
// first sync, 0 without); without one, the phase runs with kube-proxy's
// own configuration. minSync and period are what kube-proxy runs with
// (its log), the phase's record; minSync is ms for a swept 0 that
// kube-proxy runs as 1ns.
func kubeProxyChurnPeriods(ctx context.Context, api churnAPI, ms time.Duration, swept bool) (minSync, period time.Duration, restartNs int64, err error) {
	if swept {
		restarted, st, err := api.UseMinSyncPeriod(ctx, ms)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("churn: restart kube-proxy with minSyncPeriod %v: %w", ms, err)
		}
		if restarted {
			restartNs = int64(st.Wall)
		}
	}
	minSync, period = api.SyncPeriods()
	if swept {
		minSync = ms
	}
	return minSync, period, restartNs, nil
}
