// Package observe times programming latency: how long a change of the
// desired cluster state (a workload.Change) takes to show in the data
// plane, judged from probe connections through the service's VIP. It is
// pure: the probes are made elsewhere (the runner's churn phase) and fed
// in with their start time and the endpoint they landed on.
package observe

import (
	"math"
	"net/netip"
	"sync"
	"time"

	"github.com/proxybench/proxybench/workload"
)

// Observation follows one change in the data plane. An appearance (an
// endpoint added or turned ready, a service created) is seen by the first
// probe started after the change that lands on it; a disappearance (an
// endpoint removed or turned unready, a service deleted) by Need
// consecutive probes that avoid it, and its latency runs to the first of
// those probes.
type Observation struct {
	Change workload.Change
	// At is when the change was applied to the desired state.
	At time.Time
	// Need is how many consecutive misses confirm a disappearance.
	Need int
	// Done is set once the change is seen; Latency is then its
	// programming latency (from At).
	Done    bool
	Latency time.Duration

	// Probes counts the probes started after the change, by outcome:
	// Hits landed on the change's endpoint (a service change: reached
	// any), Elsewhere landed on another endpoint, Failed reached none.
	// An unobserved change is explained by them (a removed endpoint that
	// still answered, or probes that failed).
	Hits, Elsewhere, Failed int

	appear  bool
	lastHit time.Time
	miss    time.Time // start of the first miss after the last hit
	misses  int
}

// New starts observing ch, applied at at. A service deletion is confirmed
// by 3 consecutive failed probes, an endpoint disappearance by
// ConfirmMisses(ch.Ready) probes that land elsewhere.
func New(ch workload.Change, at time.Time) *Observation {
	o := &Observation{Change: ch, At: at, appear: workload.Appears(ch.Kind), Need: ConfirmMisses(ch.Ready)}
	if ch.Kind == workload.ServiceDelete {
		o.Need = 3
	}
	return o
}

// ConfirmMisses is how many consecutive connections must avoid a removed
// endpoint (one of n) before it counts as gone: the least k with
// ((n-1)/n)^k < 0.001 for a uniform random choice, at least n+1 for
// round-robin schedulers and at least 3, at most 500.
func ConfirmMisses(n int) int {
	if n <= 1 {
		return 3
	}
	k := int(math.Ceil(math.Log(0.001) / math.Log(float64(n-1)/float64(n))))
	return min(max(k, n+1, 3), 500)
}

// See records one probe connection started at start: ok reports whether
// it reached an endpoint, landed is the endpoint (invalid when !ok).
// Probes started before the change are ignored. It reports whether the
// observation is done.
func (o *Observation) See(start time.Time, landed netip.Addr, ok bool) bool {
	if o.Done || start.Before(o.At) {
		return o.Done
	}
	var hit bool
	switch o.Change.Kind {
	case workload.ServiceCreate, workload.ServiceDelete:
		hit = ok
	default:
		hit = ok && landed == o.Change.Endpoint
	}
	switch {
	case hit:
		o.Hits++
	case ok:
		o.Elsewhere++
	default:
		o.Failed++
	}
	if o.appear {
		if hit {
			o.Done, o.Latency = true, start.Sub(o.At)
		}
		return o.Done
	}
	// Disappearance: an endpoint change only counts connections that
	// reached some endpoint; a service deletion counts failures.
	if !ok && o.Change.Kind != workload.ServiceDelete {
		return false
	}
	if hit {
		o.lastHit, o.misses, o.miss = start, 0, time.Time{}
		return false
	}
	if o.misses == 0 {
		o.miss = start
	}
	o.misses++
	if o.misses >= o.Need {
		o.Done, o.Latency = true, o.miss.Sub(o.At)
	}
	return o.Done
}

// Tracker is the set of changes under observation, shared by concurrent
// probe workers: each asks Next for a change still pending (in turn, so
// every pending change gets probes) and reports its probe with See.
type Tracker struct {
	mu   sync.Mutex
	obs  []*Observation
	next int
}

// Add starts observing o.
func (t *Tracker) Add(o *Observation) {
	t.mu.Lock()
	t.obs = append(t.obs, o)
	t.mu.Unlock()
}

// Next returns the next observation not yet done, rotating over them, or
// nil when none is pending.
func (t *Tracker) Next() *Observation {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := 0; i < len(t.obs); i++ {
		cand := t.obs[(t.next+i)%len(t.obs)]
		if !cand.Done {
			t.next = (t.next + i + 1) % len(t.obs)
			return cand
		}
	}
	return nil
}

// See records a probe of o (Observation.See) and reports whether this
// probe completed it (false when it was already done).
func (t *Tracker) See(o *Observation, start time.Time, landed netip.Addr, ok bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if o.Done {
		return false
	}
	return o.See(start, landed, ok)
}

// Pending counts the observations not yet done.
func (t *Tracker) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, o := range t.obs {
		if !o.Done {
			n++
		}
	}
	return n
}

// All returns every observation in the order added. Call it once the
// probes have stopped.
func (t *Tracker) All() []*Observation {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]*Observation(nil), t.obs...)
}
