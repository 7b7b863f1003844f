//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
)

// probeRec is one probe connection to probe target target.
type probeRec struct {
	target int
	start  time.Time
	lat    time.Duration
	err    error
	// landed is the endpoint that answered (zero on an error).
	landed netip.Addr
}

// probeTargets spreads n ServicePorts evenly over the service list (first
// port of each), the first and the last service included.
func probeTargets(services []workload.Service, n int) []workload.Target {
	var out []workload.Target
	if len(services) == 0 {
		return nil
	}
	n = min(n, len(services))
	if n == 1 {
		return []workload.Target{{Service: 0}}
	}
	for i := 0; i < n; i++ {
		out = append(out, workload.Target{Service: i * (len(services) - 1) / (n - 1)})
	}
	return out
}

// window counts the probes started in [from, to) into w, and those of
// the second before from as its baseline.
func window(w *reports.SyncWindow, recs []probeRec, from, to time.Time, slow time.Duration) {
	var lats []float64
	for _, r := range recs {
		switch {
		case r.start.Before(from.Add(-time.Second)) || !r.start.Before(to):
		case r.start.Before(from):
			w.BeforeAttempts++
			if r.err != nil {
				w.BeforeFailed++
			}
		default:
			w.Attempts++
			if r.err != nil {
				w.Failed++
				if len(w.FailedSamples) < 3 {
					w.FailedSamples = append(w.FailedSamples, r.err.Error())
				}
				continue
			}
			if r.lat > slow {
				w.Slow++
			}
			w.MaxNs = max(w.MaxNs, int64(r.lat))
			lats = append(lats, float64(r.lat))
		}
	}
	if len(lats) > 0 {
		slices.Sort(lats)
		w.P50Ns = int64(stat.Quantile(0.5, stat.Empirical, lats, nil))
		w.P99Ns = int64(stat.Quantile(0.99, stat.Empirical, lats, nil))
	}
}

// answers fills w's Probed, Answered, FirstAnswerNs and LastAnswerNs: for
// each of n targets, the first probe started at or after from that
// succeeded, and when it answered (its start plus its connect time),
// from from. A target that never answered leaves LastAnswerNs at -1.
func answers(w *reports.SyncWindow, recs []probeRec, n int, from time.Time) {
	first := make([]time.Duration, n)
	for i := range first {
		first[i] = -1
	}
	for _, r := range recs {
		if r.err != nil || r.start.Before(from) || r.target < 0 || r.target >= n {
			continue
		}
		at := r.start.Add(r.lat).Sub(from)
		if first[r.target] < 0 || at < first[r.target] {
			first[r.target] = at
		}
	}
	w.Probed, w.Answered = n, 0
	w.FirstAnswerNs, w.LastAnswerNs = -1, -1
	var last time.Duration
	for _, d := range first {
		if d < 0 {
			continue
		}
		w.Answered++
		if w.FirstAnswerNs < 0 || int64(d) < w.FirstAnswerNs {
			w.FirstAnswerNs = int64(d)
		}
		last = max(last, d)
	}
	if w.Answered == n && n > 0 {
		w.LastAnswerNs = int64(last)
	}
}

// prober is the probe workers' shared state: which targets answered since
// the current window began. Half of each worker's picks go to a target
// that has not answered yet (so a cold start finds each service's first
// answer quickly), the other half cycle over every target (the traffic
// whose failures and connect times the window counts).
type prober struct {
	targets []workload.Target
	next    atomic.Int64 // round-robin over every target
	pend    atomic.Int64 // round-robin cursor over unanswered targets
	epoch   atomic.Int64 // window start, Unix ns
	ok      []atomic.Int64
}

func newProber(targets []workload.Target) *prober {
	return &prober{targets: targets, ok: make([]atomic.Int64, len(targets))}
}

// pick returns the target of a worker's k-th probe.
func (p *prober) pick(k int) int {
	n := len(p.targets)
	if k%2 == 1 {
		ep := p.epoch.Load()
		start := int(p.pend.Add(1))
		for i := 0; i < n; i++ {
			t := (start + i) % n
			if p.ok[t].Load() < ep {
				p.pend.Store(int64(t))
				return t
			}
		}
	}
	return int(p.next.Add(1)) % n
}

// answered records a success of target t at time at.
func (p *prober) answered(t int, at time.Time) { p.ok[t].Store(at.UnixNano()) }

// allAnswered reports whether every target has answered since the epoch.
func (p *prober) allAnswered() bool {
	ep := p.epoch.Load()
	for i := range p.ok {
		if p.ok[i].Load() < ep {
			return false
		}
	}
	return true
}

// probeLoop is the probe workers' loop of a phase that probes across a
// change (syncDisruption, modeSwitch): every worker of its pool picks a
// target (prober.pick), connects to its service's first ServicePort
// with a timeout (env.dial), records the connection and pauses for the
// interval, until stop.
type probeLoop struct {
	mu     sync.Mutex
	recs   []probeRec
	halted atomic.Bool
	done   chan struct{}
}

func startProbeLoop(e *env, pool workerPool, pr *prober, services []workload.Service, timeout, interval time.Duration) *probeLoop {
	l := &probeLoop{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		pool.Each(func(int) {
			for k := 0; !l.halted.Load(); k++ {
				ti := pr.pick(k)
				s := services[pr.targets[ti].Service]
				landed, start, err := e.dial(s.ClusterIP, s.Ports[0].Port, timeout)
				r := probeRec{target: ti, start: start, lat: time.Since(start), err: err, landed: landed.Addr()}
				if err == nil {
					pr.answered(ti, start.Add(r.lat))
				}
				l.mu.Lock()
				l.recs = append(l.recs, r)
				l.mu.Unlock()
				if interval > 0 {
					time.Sleep(interval)
				}
			}
		})
	}()
	return l
}

// snapshot returns the connections recorded so far.
func (l *probeLoop) snapshot() []probeRec {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]probeRec(nil), l.recs...)
}

// stop ends the loop (once; later calls only read) and returns every
// connection recorded.
func (l *probeLoop) stop() []probeRec {
	if !l.halted.Swap(true) {
		<-l.done
	}
	return l.snapshot()
}

// syncKindNames are the window kinds of syncDisruption.syncs.
var syncKindNames = map[string]string{"cold": "full (cold start)", "restart": "full (restart)", "incremental": "incremental"}

// syncDisruptionPhase probes the data plane while the syncs of
// syncDisruption.syncs run, in order:
//   - cold: the node's rules are removed (p.Cleanup; kube-proxy
//     --cleanup), then a new proxier of m makes its first, full sync, as
//     on a node that joins while the services exist;
//   - restart: a new proxier of m makes its first, full sync over the
//     rules p programmed (kube-proxy after a restart);
//   - incremental: p syncs with one endpoint moved.
//
// A proxier that is a proxymodes.Restarter (kube-proxy) restarts its own
// program instead of a new proxier being made. The probes run for one
// second before each sync as a baseline; after a cold or restart sync they
// go on for up to Settle until every probed service has answered. p is
// left programming services (forced full sync at the end).
func syncDisruptionPhase(ctx context.Context, sc *scenarios.Scenario, e *env, tb *topology.Testbed, m proxymodes.Mode, p proxymodes.Proxier,
	services []workload.Service, prog Progress) (out []reports.SyncWindow, err error) {
	sd := sc.SyncDisruption
	targets := probeTargets(services, sd.Services)
	pool, err := e.probes(sd.Probes)
	if err != nil {
		return nil, fmt.Errorf("sync-disruption probes: %w", err)
	}
	defer pool.Close()
	pr := newProber(targets)
	loop := startProbeLoop(e, pool, pr, services, sd.Timeout.Duration, 0)
	defer loop.stop()
	snapshot := loop.snapshot
	// measure takes the one-second baseline, then starts the window: ready
	// (a restart: stop the old proxy, make the new one) and the sync both
	// fall inside it, so a restart's outage counts against the sync.
	// started is when the new proxier of a full sync started (set by the
	// sync functions below; a Restarter's process start, SyncStats.Start).
	var started time.Time
	measure := func(kind string, sync func() (proxymodes.SyncStats, error)) error {
		prog.Start(fmt.Sprintf("%s: %s sync under probes (%d services probed)", m.Name, kind, len(targets)), 1)
		defer prog.Done()
		time.Sleep(time.Second) // baseline
		from := time.Now()
		started = time.Time{}
		pr.epoch.Store(from.UnixNano())
		st, err := sync()
		to := time.Now()
		if !st.Start.IsZero() {
			started = st.Start
		}
		if started.IsZero() || started.Before(from) {
			started = from
		}
		if err != nil {
			return fmt.Errorf("%s sync: %w", kind, err)
		}
		full := kind != syncKindNames["incremental"]
		if full {
			for end := to.Add(sd.Settle.Duration); !pr.allAnswered() && time.Now().Before(end); {
				time.Sleep(10 * time.Millisecond)
			}
		}
		time.Sleep(sd.Timeout.Duration) // let connections started in the window finish
		w := reports.SyncWindow{Kind: kind, SyncNs: int64(st.Wall), Objects: st.Objects, SlowAbove: sd.Slow.Duration,
			ProxyMetricNs: int64(st.Phases["kube-proxy.metric"]), ProxySyncEndNs: int64(st.Phases["kube-proxy.syncEnd"])}
		all := snapshot()
		window(&w, all, from, to, sd.Slow.Duration)
		if full {
			w.StartNs = int64(started.Sub(from))
			answers(&w, all, len(targets), started)
		}
		out = append(out, w)
		return nil
	}
	// A proxy whose data path is in this process (userspace) cannot run
	// twice: its restart stops the old one first, as a process restart.
	_, inProcess := p.(proxymodes.Usager)
	rs, restarter := p.(proxymodes.Restarter)
	// fresh starts a new proxier of m and makes its first sync; an
	// in-process one is stopped after its window (p takes over again).
	var q proxymodes.Proxier
	fresh := func() (proxymodes.SyncStats, error) {
		var err error
		started = time.Now()
		if q, err = m.New(sc, tb.Node); err != nil {
			return proxymodes.SyncStats{}, err
		}
		return q.Sync(ctx, services)
	}
	for _, kind := range sd.Syncs {
		var err error
		switch kind {
		case "cold":
			// The node without rules before the window: the baseline
			// shows what a node that has not synced yet does.
			if restarter {
				err = rs.Halt(ctx, true)
			} else {
				err = p.Cleanup(ctx)
			}
			if err != nil {
				return out, fmt.Errorf("cold start: remove the rules: %w", err)
			}
			err = measure(syncKindNames[kind], func() (proxymodes.SyncStats, error) {
				if restarter {
					return rs.Resume(ctx)
				}
				return fresh()
			})
		case "restart":
			err = measure(syncKindNames[kind], func() (proxymodes.SyncStats, error) {
				switch {
				case restarter:
					if err := rs.Halt(ctx, false); err != nil {
						return proxymodes.SyncStats{}, err
					}
					return rs.Resume(ctx)
				case inProcess:
					if err := p.Cleanup(ctx); err != nil {
						return proxymodes.SyncStats{}, err
					}
				}
				return fresh()
			})
		case "incremental":
			err = measure(syncKindNames[kind], func() (proxymodes.SyncStats, error) {
				return p.Sync(ctx, moveOneEndpoint(services, 1))
			})
		default:
			err = fmt.Errorf("syncDisruption.syncs: unknown sync %q", kind)
		}
		if q != nil && inProcess {
			err = errors.Join(err, q.Cleanup(ctx))
		}
		q = nil
		if err != nil {
			return out, err
		}
		// Back to p programming services, fully, before the next sync.
		if !restarter {
			if fs, ok := p.(proxymodes.FullSyncer); ok {
				fs.ForceFullSync()
			}
		}
		if _, err := p.Sync(ctx, services); err != nil {
			return out, fmt.Errorf("sync back to the mode's proxier after the %s sync: %w", kind, err)
		}
	}
	return out, nil
}

// syncDisruptionPhaseV is the sync-disruption phase as a Phase: the
// windows measured before a failure are kept.
var syncDisruptionPhaseV = Phase{
	PhaseRule: scenarios.PhaseRule{Name: "syncDisruption", Field: "syncDisruption", Scope: scenarios.ScopeRow, Rules: true, TCP: true,
		Wants:                 func(s *scenarios.Scenario) bool { return s.SyncDisruption != nil },
		NotWithKubeProxyNodes: "its halt and restart act on node-0's kube-proxy only"},
	Report: reports.SyncDisruptionReport,
	Run: func(ctx context.Context, r *Row) (err error) {
		if r.Result.SyncDisruption, err = syncDisruptionPhase(ctx, r.Sc, r.Env, r.Testbed, r.Mode, r.Proxier, r.Services, r.Progress()); err != nil {
			return fmt.Errorf("sync disruption: %w", err)
		}
		return nil
	},
}
