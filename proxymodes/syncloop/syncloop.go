// Package syncloop reproduces kube-proxy's sync loop: changes are batched;
// a sync runs no more often than minSyncPeriod (a token bucket of burst 2,
// as kube-proxy's BoundedFrequencyRunner, pkg/util/async) and at least
// every maxInterval with nothing changed (syncPeriod unless set: IPVS;
// FullSyncPeriod for iptables and nftables); a failed sync is retried
// after syncPeriod and forces the next sync to be full; a partial sync
// can be told to read everything back once per ReadBackPeriod. The decisions live in State, a pure state machine driven by the
// caller's clock, so tests (fake clock) and the sim engine (simulated time)
// replay exactly what Runner does in real time.
package syncloop

import (
	"context"
	"math"
	"sync"
	"time"
)

// DefaultBurst is kube-proxy's burstSyncs: two syncs may run back to back
// before minSyncPeriod applies.
const DefaultBurst = 2

// DefaultFullSyncPeriod is kube-proxy's FullSyncPeriod (pkg/proxy/util):
// the iptables and nftables proxiers rewrite everything at startup and
// then once an hour; the syncs in between, periodic ones included, are
// partial (upstream issue 139513 measures this hourly full sync at scale).
const DefaultFullSyncPeriod = time.Hour

// State decides when syncs run and whether they are full.
type State struct {
	// MinSyncPeriod is the shortest average interval between sync starts
	// (0: sync on every change). SyncPeriod is the retry interval after a
	// failed sync, and the longest interval between syncs unless
	// MaxInterval is set. MaxInterval (SyncPeriod when 0) is the longest
	// interval between syncs when nothing changed and nothing failed:
	// kube-proxy's BoundedFrequencyRunner maxInterval, which v1.36 and
	// v1.37 set to FullSyncPeriod (1 h) for iptables and nftables and to
	// syncPeriod for IPVS (k8s.io/kubernetes pkg/proxy/{iptables,
	// nftables,ipvs}/proxier.go, NewBoundedFrequencyRunner(name, fn,
	// minSyncPeriod, syncPeriod, maxInterval)). FullSyncPeriod
	// (DefaultFullSyncPeriod when 0) is how often a sync is full.
	MinSyncPeriod, SyncPeriod, MaxInterval, FullSyncPeriod time.Duration
	// Burst is the token bucket size (DefaultBurst when 0).
	Burst int
	// ReadBackPeriod (0: never) is how often a partial sync must read
	// every object back from the kernel (ReadBack): for a proxier whose
	// partial syncs read back only changed services (builtin IPVS) where
	// kube-proxy's IPVS proxier reads every real server on every sync and
	// syncs at least every syncPeriod (pkg/proxy/ipvs/proxier.go,
	// syncEndpoint's GetRealServers).
	ReadBackPeriod time.Duration
	// MinFromEnd also holds a sync back until MinSyncPeriod after the end
	// of the previous one (recorded by Ended): kube-proxy's
	// BoundedFrequencyRunner (pkg/util/async) records its last run when
	// the sync function returns and re-arms its timer for minInterval
	// from then ("at least minInterval between them, from completion to
	// next start"); measured on kube-proxy v1.37.2 under churn: 1.00 s
	// from each sync's end to the next start at minSyncPeriod 1 s. The
	// sim's kube-proxy rows set it; builtin's loop (the real runner's)
	// does not.
	MinFromEnd bool

	tokens   float64
	refilled time.Time
	lastSync time.Time // start of the last sync
	lastEnd  time.Time // end of the last sync (Ended)
	lastFull time.Time
	lastRead time.Time // start of the last full or read-back sync
	started  bool
	pending  bool // changes not yet synced
	needFull bool
	retry    bool // the last sync failed: the next is due SyncPeriod after it
}

// New returns a State whose first sync (due at once) is full.
func New(minSyncPeriod, syncPeriod time.Duration) *State {
	return &State{MinSyncPeriod: minSyncPeriod, SyncPeriod: syncPeriod, pending: true, needFull: true}
}

func (s *State) burst() float64 {
	if s.Burst <= 0 {
		return DefaultBurst
	}
	return float64(s.Burst)
}

// refill brings the token bucket to now.
func (s *State) refill(now time.Time) {
	if !s.started && s.refilled.IsZero() {
		s.tokens, s.refilled = s.burst(), now
		return
	}
	if s.MinSyncPeriod > 0 && now.After(s.refilled) {
		s.tokens = math.Min(s.burst(), s.tokens+float64(now.Sub(s.refilled))/float64(s.MinSyncPeriod))
	}
	s.refilled = now
}

// Change records that the desired state changed at now.
func (s *State) Change(now time.Time) { s.pending = true }

// Pending reports whether changes wait for a sync.
func (s *State) Pending() bool { return s.pending }

// maxInterval is the longest interval between syncs as things stand:
// SyncPeriod after a failed sync (the runner's retryInterval, bounded by
// its maxInterval), else MaxInterval (SyncPeriod when unset).
func (s *State) maxInterval() time.Duration {
	if s.MaxInterval <= 0 {
		return s.SyncPeriod
	}
	if s.retry {
		return min(s.SyncPeriod, s.MaxInterval)
	}
	return s.MaxInterval
}

// NextRun returns when the next sync is due, as seen at now (never before
// now): for pending changes, as soon as the token bucket holds a token;
// otherwise maxInterval after the last sync started (SyncPeriod after a
// failed one).
func (s *State) NextRun(now time.Time) time.Time {
	s.refill(now)
	periodic := s.lastSync.Add(s.maxInterval())
	if !s.started {
		periodic = now
	}
	if !s.pending {
		if periodic.Before(now) {
			return now
		}
		return periodic
	}
	at := now
	if s.MinSyncPeriod > 0 && s.tokens < 1 {
		at = now.Add(time.Duration((1 - s.tokens) * float64(s.MinSyncPeriod)))
	}
	if s.MinFromEnd && s.started && !s.lastEnd.IsZero() {
		at = maxTime(at, s.lastEnd.Add(s.MinSyncPeriod))
	}
	if periodic.Before(at) && s.started {
		at = maxTime(periodic, now)
	}
	return at
}

// Due reports whether a sync should start at now.
func (s *State) Due(now time.Time) bool { return !s.NextRun(now).After(now) }

// Start records that a sync starts at now (taking a token) and returns
// whether it must be full: the first sync, after a failure, or when
// FullSyncPeriod has passed since the last full sync. Changes recorded before
// now are covered by this sync.
func (s *State) Start(now time.Time) (full bool) {
	s.refill(now)
	if s.MinSyncPeriod > 0 {
		s.tokens = math.Max(0, s.tokens-1)
	}
	fullEvery := s.FullSyncPeriod
	if fullEvery <= 0 {
		fullEvery = DefaultFullSyncPeriod
	}
	full = s.needFull || !s.started || now.Sub(s.lastFull) >= fullEvery
	s.started, s.lastSync, s.pending = true, now, false
	if full {
		s.lastFull, s.lastRead = now, now
	}
	s.needFull = false
	return full
}

// ReadBack reports whether the partial sync that Start began at now must
// read every object back: ReadBackPeriod is set and has passed since the
// start of the last full or read-back sync (so with nothing changed and
// MaxInterval equal to ReadBackPeriod, every periodic sync reads back). A
// true answer is recorded as a read-back sync at now. Call it after
// Start with the same now, for a sync Start did not make full.
func (s *State) ReadBack(now time.Time) bool {
	if s.ReadBackPeriod <= 0 || now.Sub(s.lastRead) < s.ReadBackPeriod {
		return false
	}
	s.lastRead = now
	return true
}

// Done records the outcome of the sync started last. A failure forces the
// next sync to be full; like kube-proxy's retryInterval (syncPeriod), it
// is retried SyncPeriod after the failed one started, or sooner when a new
// change arrives, whatever MaxInterval is. A success ends the retry.
func (s *State) Done(err error) {
	s.retry = err != nil
	if err != nil {
		s.needFull = true
	}
}

// Ended records that the sync started last ended at now (MinFromEnd
// counts from it).
func (s *State) Ended(now time.Time) { s.lastEnd = now }

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// SyncFunc performs one sync of the latest desired state; full says
// whether it must be a full sync, readBack (never with full) whether a
// partial one must read every object back (State.ReadBack).
type SyncFunc func(ctx context.Context, full, readBack bool) error

// Runner drives a State in real time: Changed wakes it, and it calls
// sync whenever the State says a sync is due, one at a time.
type Runner struct {
	mu    sync.Mutex
	st    *State
	wake  chan struct{}
	sync  SyncFunc
	now   func() time.Time
	after func(time.Duration) <-chan time.Time
}

// NewRunner returns a Runner over st calling fn.
func NewRunner(st *State, fn SyncFunc) *Runner {
	return &Runner{st: st, wake: make(chan struct{}, 1), sync: fn, now: time.Now, after: time.After}
}

// Changed records a change now and wakes the loop.
func (r *Runner) Changed() {
	r.mu.Lock()
	r.st.Change(r.now())
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run loops until ctx ends, running syncs as the State decides.
func (r *Runner) Run(ctx context.Context) {
	for {
		r.mu.Lock()
		now := r.now()
		next := r.st.NextRun(now)
		due := !next.After(now)
		var full, readBack bool
		if due {
			full = r.st.Start(now)
			readBack = !full && r.st.ReadBack(now)
		}
		r.mu.Unlock()
		if due {
			err := r.sync(ctx, full, readBack)
			r.mu.Lock()
			r.st.Done(err)
			r.mu.Unlock()
			if ctx.Err() != nil {
				return
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-r.after(next.Sub(now)):
		}
	}
}
