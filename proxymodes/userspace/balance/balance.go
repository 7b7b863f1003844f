// Package balance is the legacy userspace proxy's endpoint choice (its
// LoadBalancerRR): round robin over a shuffled endpoint list, with
// ClientIP session affinity. It is pure (no kernel), so the userspace mode
// and the sim engine run the same code (docs/architecture.md).
package balance

import (
	"errors"
	"math/rand"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// DefaultAffinityTimeout is Kubernetes' default
// sessionAffinityConfig.clientIP.timeoutSeconds (10800 s, 3 hours), used
// when Affinity.Timeout is zero, as the legacy LoadBalancerRR did.
const DefaultAffinityTimeout = 10800 * time.Second

// ErrNoEndpoints is returned by Balancer.Next when the service port has no
// ready endpoint (the legacy proxier's ErrMissingEndpoints); the proxy then
// closes the client connection.
var ErrNoEndpoints = errors.New("userspace: service port has no ready endpoints")

// Affinity is a Service's sessionAffinity as the legacy proxier applied it.
type Affinity struct {
	// ClientIP is sessionAffinity: ClientIP: a client IP's connections stick
	// to the endpoint it was last given until Timeout has passed since its
	// last connection.
	ClientIP bool
	// Timeout is sessionAffinityConfig.clientIP.timeoutSeconds; zero means
	// DefaultAffinityTimeout.
	Timeout time.Duration
}

// EffectiveTimeout is Timeout, or DefaultAffinityTimeout when it is zero.
func (a Affinity) EffectiveTimeout() time.Duration { return a.timeout() }

func (a Affinity) timeout() time.Duration {
	if a.Timeout <= 0 {
		return DefaultAffinityTimeout
	}
	return a.Timeout
}

type session struct {
	endpoint netip.AddrPort
	lastUsed time.Time
}

// Balancer is the round-robin endpoint chooser of one ServicePort, with
// optional ClientIP session affinity: the per-service balancerState of the
// legacy pkg/proxy/userspace/roundrobin.go (LoadBalancerRR.NextEndpoint,
// OnEndpointsUpdate, CleanupStaleStickySessions). Differences: one lock per
// ServicePort instead of one for all services, endpoints as
// netip.AddrPort, and expiry compared as durations (the legacy code
// truncated the age to whole seconds). It is safe for concurrent use.
type Balancer struct {
	mu        sync.Mutex
	endpoints []netip.AddrPort // shuffled once per change, as the legacy code did
	index     int              // next endpoint, round robin
	affinity  Affinity
	sessions  map[netip.Addr]*session
	now       func() time.Time
	shuffle   func([]netip.AddrPort)
}

// NewBalancer returns a Balancer with no endpoints. now is the clock (nil:
// time.Now; tests pass a fake); shuffle reorders a new endpoint set (nil:
// math/rand.Shuffle, as util.ShuffleStrings did; tests pass a no-op to
// make the order predictable).
func NewBalancer(aff Affinity, now func() time.Time, shuffle func([]netip.AddrPort)) *Balancer {
	if now == nil {
		now = time.Now
	}
	if shuffle == nil {
		shuffle = func(eps []netip.AddrPort) {
			rand.Shuffle(len(eps), func(i, j int) { eps[i], eps[j] = eps[j], eps[i] })
		}
	}
	return &Balancer{affinity: aff, sessions: map[netip.Addr]*session{}, now: now, shuffle: shuffle}
}

// SetAffinity changes the affinity policy; existing sessions are kept (the
// legacy newServiceInternal only overwrote the type).
func (b *Balancer) SetAffinity(aff Affinity) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.affinity = aff
}

// Update replaces the endpoint set (the ready endpoints' "ip:targetPort")
// when it differs from the current one as a set, as
// LoadBalancerRR.OnEndpointsUpdate: sessions pinned to a removed endpoint
// are dropped, the new set is shuffled and the round-robin index restarts
// at 0. It reports whether anything changed; an equal set (in any order)
// keeps the order, index and sessions.
func (b *Balancer) Update(endpoints []netip.AddrPort) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if sameSet(b.endpoints, endpoints) {
		return false
	}
	keep := make(map[netip.AddrPort]bool, len(endpoints))
	for _, e := range endpoints {
		keep[e] = true
	}
	for ip, s := range b.sessions {
		if !keep[s.endpoint] {
			delete(b.sessions, ip)
		}
	}
	b.endpoints = slices.Clone(endpoints)
	b.shuffle(b.endpoints)
	b.index = 0
	return true
}

// Endpoints returns the current endpoints in round-robin order.
func (b *Balancer) Endpoints() []netip.AddrPort {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.endpoints)
}

// Next returns the endpoint for a new connection from client, as
// LoadBalancerRR.NextEndpoint: with ClientIP affinity and reset false, the
// client's pinned endpoint while its session is younger than the timeout
// (refreshing it); otherwise the next endpoint round robin, which becomes
// the client's pinned endpoint under ClientIP affinity. tryConnect passes
// reset true after a failed dial so a client pinned to a dead endpoint
// moves on. It returns ErrNoEndpoints when there is none.
func (b *Balancer) Next(client netip.Addr, reset bool) (netip.AddrPort, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.endpoints) == 0 {
		return netip.AddrPort{}, ErrNoEndpoints
	}
	now := b.now()
	if b.affinity.ClientIP && !reset {
		if s, ok := b.sessions[client]; ok && now.Sub(s.lastUsed) < b.affinity.timeout() {
			s.lastUsed = now
			return s.endpoint, nil
		}
	}
	ep := b.endpoints[b.index]
	b.index = (b.index + 1) % len(b.endpoints)
	if b.affinity.ClientIP {
		s := b.sessions[client]
		if s == nil {
			s = &session{}
			b.sessions[client] = s
		}
		s.endpoint, s.lastUsed = ep, now
	}
	return ep, nil
}

// CleanupStale drops the sessions idle for the affinity timeout or longer
// (LoadBalancerRR.CleanupStaleStickySessions, run on every sync) and
// returns how many it dropped.
func (b *Balancer) CleanupStale() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	now, n := b.now(), 0
	for ip, s := range b.sessions {
		if now.Sub(s.lastUsed) >= b.affinity.timeout() {
			delete(b.sessions, ip)
			n++
		}
	}
	return n
}

// Sessions returns the number of live affinity sessions.
func (b *Balancer) Sessions() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.sessions)
}

func sameSet(a, b []netip.AddrPort) bool {
	if len(a) != len(b) {
		return false
	}
	x, y := slices.Clone(a), slices.Clone(b)
	cmp := func(p, q netip.AddrPort) int { return p.Compare(q) }
	slices.SortFunc(x, cmp)
	slices.SortFunc(y, cmp)
	return slices.Equal(x, y)
}
