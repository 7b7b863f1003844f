//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
)

// The process faults (scenario block faults: apiOutage, restart, crash;
// issue 27, point 2) share what this file holds: the proxier seam of a
// kube-proxy row (faultAPI), fresh pod addresses for replaced endpoints
// (podAlloc), the EndpointSlice controller's retrying writer
// (sliceWriter) and the follow-up of a change through the data plane,
// by probes and by the rules read back (convTracker).

// faultAPI is a proxier that runs as its own program over an API
// (kubeproxy.Proxier): what the fault phases do to it.
type faultAPI interface {
	proxymodes.Proxier
	proxymodes.Restarter
	// WriteChange writes one change through the API (churnAPI's).
	WriteChange(ctx context.Context, ch workload.Change, s workload.Service, trigger time.Time) error
	// SliceHolds reports whether the API holds s's EndpointSlice as
	// WriteChange wrote it with trigger (a write whose answer was lost).
	SliceHolds(ctx context.Context, s workload.Service, trigger time.Time) (bool, error)
	// StopComponent and StartComponent stop and start one program of the
	// control plane (kube-apiserver, etcd); StartComponent returns when
	// the API server answers /readyz again.
	StopComponent(name string) error
	StartComponent(ctx context.Context, name string) (time.Duration, error)
	// Kill ends the proxy's program with SIGKILL; Resume starts it again.
	Kill(ctx context.Context) error
}

var _ faultAPI = (*kubeproxy.Proxier)(nil)

// podAlloc hands out pod addresses no service of the run uses: after
// the highest endpoint address, within the scenario's pod CIDR.
type podAlloc struct {
	next netip.Addr
	net  netip.Prefix
}

func newPodAlloc(sc *scenarios.Scenario, services []workload.Service) *podAlloc {
	_, podNet, _, _ := sc.Prefixes()
	a := podNet.Addr()
	for _, s := range services {
		for _, e := range s.Endpoints {
			if e.IP.Compare(a) > 0 {
				a = e.IP
			}
		}
	}
	return &podAlloc{next: a.Next(), net: podNet}
}

// take returns a fresh address, or an error when the pod CIDR is full.
func (a *podAlloc) take() (netip.Addr, error) {
	ip := a.next
	if !a.net.Contains(ip) {
		return ip, fmt.Errorf("no free address left in podCIDR %s for a replaced endpoint", a.net)
	}
	a.next = ip.Next()
	return ip, nil
}

// replaceFirst returns services with the first endpoint of each service
// of idx replaced by a fresh address (a pod replaced: a new address,
// ready), and the removed and added address per entry of idx. The
// services are copied; services itself is not changed.
func replaceFirst(services []workload.Service, idx []int, alloc *podAlloc) (out []workload.Service, removed, added []netip.Addr, err error) {
	out = slices.Clone(services)
	for _, i := range idx {
		s := out[i]
		if len(s.Endpoints) == 0 {
			return nil, nil, nil, fmt.Errorf("service %s has no endpoint to replace", s.Name)
		}
		ip, err := alloc.take()
		if err != nil {
			return nil, nil, nil, err
		}
		eps := slices.Clone(s.Endpoints)
		removed = append(removed, eps[0].IP)
		added = append(added, ip)
		eps[0] = workload.NewEndpoint(ip)
		s.Endpoints = eps
		out[i] = s
	}
	return out, removed, added, nil
}

// indexes are the service indexes of probe targets.
func indexes(ts []workload.Target) []int {
	out := make([]int, len(ts))
	for i, t := range ts {
		out[i] = t.Service
	}
	return out
}

// sliceWriter writes changed services' EndpointSlices through the API as
// the EndpointSlice controller does while the API is away: each
// service's sync retried after a per-service back-off of 1 s doubled per
// failure, at most 1000 s (kubernetes pkg/controller/endpointslice:
// defaultSyncBackOff, maxSyncBackOff, with an
// ItemExponentialFailureRateLimiter), each attempt bounded by
// attemptTimeout; the write of a service is its whole slice as it is
// now (the controller reconciles state, it does not replay changes).
// After a failed attempt the slice is read back (SliceHolds, bounded by
// attemptTimeout): an attempt whose answer was lost while the API server
// committed it (its client deadline passed, as when kube-apiserver is
// slow to start in a loaded guest) counts as accepted at that read, an
// upper bound of when it landed, as the controller's informer would show
// it its own write; lost counts those.
type sliceWriter struct {
	wg sync.WaitGroup
	mu sync.Mutex
	// writes and errs count the attempts and the failed ones; last is
	// when the last service's write was accepted, done how many were.
	writes, errs, lost int
	last               time.Time
	done               int
	firstErr           string
}

// sliceBackoff is the EndpointSlice controller's first retry back-off
// (defaultSyncBackOff), sliceMaxBackoff its cap (maxSyncBackOff).
var sliceBackoff, sliceMaxBackoff = time.Second, 1000 * time.Second

// attemptTimeout bounds one write attempt: with etcd down the API server
// takes a write and answers only when its own etcd timeout passes.
const attemptTimeout = 2 * time.Second

// startSliceWriter writes each service of changed (trigger: the change's
// time) until the API takes it or ctx ends.
func startSliceWriter(ctx context.Context, api faultAPI, changed []workload.Service, trigger time.Time) *sliceWriter {
	w := &sliceWriter{}
	for _, s := range changed {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			backoff := sliceBackoff
			for {
				actx, cancel := context.WithTimeout(ctx, attemptTimeout)
				err := api.WriteChange(actx, workload.Change{Kind: workload.EndpointRemove}, s, trigger)
				cancel()
				w.mu.Lock()
				w.writes++
				if err == nil {
					w.done++
					w.last = time.Now()
					w.mu.Unlock()
					return
				}
				w.errs++
				if w.firstErr == "" {
					w.firstErr = fmt.Sprintf("%s: %v", s.Name, err)
				}
				w.mu.Unlock()
				rctx, cancel := context.WithTimeout(ctx, attemptTimeout)
				held, herr := api.SliceHolds(rctx, s, trigger)
				cancel()
				if herr == nil && held {
					w.mu.Lock()
					w.lost++
					w.done++
					w.last = time.Now()
					w.mu.Unlock()
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, sliceMaxBackoff)
			}
		}()
	}
	return w
}

// wait waits for every write (ctx bounds it) and returns the counts.
func (w *sliceWriter) wait() (writes, errs, done int, last time.Time) {
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes, w.errs, w.done, w.last
}

// answers returns, after wait, the failed attempts found committed by
// the read-back and the first failed attempt's error ("" : none).
func (w *sliceWriter) answers() (lost int, firstErr string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lost, w.firstErr
}

// ruleEndpoints reads the endpoint addresses of mode's rules in node
// (topology.Netns.Run of the mode's Endpoints commands: iptables-{legacy,
// nft}-save -t nat, nft list table ip kube-proxy, ipvsadm -Sn), the
// addresses new connections can be sent to. An optional command that
// fails (no table yet) adds nothing; a mode without Endpoints is an
// error.
func ruleEndpoints(ctx context.Context, node *topology.Netns, mode string) (map[netip.Addr]bool, error) {
	m, err := modes.Lookup(mode)
	if err != nil {
		return nil, err
	}
	rb := m.Endpoints
	if rb == nil {
		return nil, fmt.Errorf("rules of mode %q are not read back", mode)
	}
	out := map[netip.Addr]bool{}
	for _, c := range rb.Commands {
		b, err := node.Run(ctx, nil, c.Name, c.Args...)
		if err != nil {
			if c.Optional {
				continue
			}
			return nil, fmt.Errorf("%s %v: %w: %s", c.Name, c.Args, err, b)
		}
		rb.Parse(string(b), out)
	}
	return out, nil
}

// convTracker follows a change through the data plane: probe workers
// connect to the changed services and note where each connection
// landed; every sample interval the rules are read back and compared
// with the change (removed endpoints still there: stale; new ones not
// yet: missing). Times are from the change.
type convTracker struct {
	e                *env
	mode             string
	svcs             []workload.Service // the changed services, after the change
	removed, added   []netip.Addr       // per entry of svcs
	start            time.Time
	every            time.Duration
	loop             *probeLoop
	mu               sync.Mutex
	samples          []reports.ConvergenceSample
	seen             int // probe records counted into samples
	stop, sampleDone chan struct{}
}

// startConvergence starts following the change made at start: changed
// are the changed services after it, removed and added their replaced
// endpoint's old and new address.
func startConvergence(e *env, pool workerPool, mode string, changed []workload.Service, removed, added []netip.Addr,
	start time.Time, every, timeout time.Duration) *convTracker {
	targets := make([]workload.Target, len(changed))
	for i := range targets {
		targets[i] = workload.Target{Service: i}
	}
	t := &convTracker{e: e, mode: mode, svcs: changed, removed: removed, added: added, start: start, every: every,
		stop: make(chan struct{}), sampleDone: make(chan struct{})}
	t.loop = startProbeLoop(e, pool, newProber(targets), changed, timeout, 0)
	go t.sampler()
	return t
}

func (t *convTracker) sampler() {
	defer close(t.sampleDone)
	for {
		t.sample()
		select {
		case <-t.stop:
			return
		case <-time.After(t.every):
		}
	}
}

// sample reads the rules back once and counts the probes since the last
// sample.
func (t *convTracker) sample() {
	s := reports.ConvergenceSample{Stale: -1, Missing: -1}
	if t.e.ruleEndpoints != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		eps, err := t.e.ruleEndpoints(ctx, t.mode)
		cancel()
		if err == nil {
			s.Stale, s.Missing = 0, 0
			for i := range t.svcs {
				if eps[t.removed[i]] {
					s.Stale++
				}
				if !eps[t.added[i]] {
					s.Missing++
				}
			}
		}
	}
	s.AtNs = int64(time.Since(t.start))
	recs := t.loop.snapshot()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range recs[t.seen:] {
		switch t.classify(r) {
		case landedNew:
			s.New++
		case landedOld:
			s.Old++
		case landedFailed:
			s.Failed++
		default:
			s.Other++
		}
	}
	t.seen = len(recs)
	t.samples = append(t.samples, s)
}

const (
	landedOther = iota
	landedNew
	landedOld
	landedFailed
)

func (t *convTracker) classify(r probeRec) int {
	switch {
	case r.err != nil:
		return landedFailed
	case r.landed == t.added[r.target]:
		return landedNew
	case r.landed == t.removed[r.target]:
		return landedOld
	}
	return landedOther
}

// converged reports whether the change has reached the data plane: the
// last read-back shows no stale and no missing endpoint, every changed
// service has answered from its new endpoint, and no probe landed on a
// removed endpoint or failed within the last quiet.
func (t *convTracker) converged(quiet time.Duration) bool {
	t.mu.Lock()
	n := len(t.samples)
	rulesOK := n > 0 && t.samples[n-1].Stale == 0 && t.samples[n-1].Missing == 0
	t.mu.Unlock()
	if !rulesOK && t.e.ruleEndpoints != nil {
		return false
	}
	c := t.account(t.loop.snapshot())
	return c.ProbesNs >= 0 && time.Since(t.start.Add(time.Duration(c.ProbesNs))) >= quiet
}

// wait returns once converged (quiet 1 s) or when settle has passed
// since now, or ctx is done.
func (t *convTracker) wait(ctx context.Context, settle time.Duration) error {
	end := time.Now().Add(settle)
	for time.Now().Before(end) {
		if t.converged(time.Second) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// finish stops the probes and the sampler and returns the account.
func (t *convTracker) finish() reports.Convergence {
	recs := t.loop.stop()
	close(t.stop)
	<-t.sampleDone
	c := t.account(recs)
	t.mu.Lock()
	defer t.mu.Unlock()
	c.Samples = slices.Clone(t.samples)
	c.RulesNs = -1
	for i := len(c.Samples) - 1; i >= 0; i-- {
		s := c.Samples[i]
		if s.Stale != 0 || s.Missing != 0 {
			break
		}
		c.RulesNs = s.AtNs
	}
	for _, s := range c.Samples {
		c.MaxStale, c.MaxMissing = max(c.MaxStale, s.Stale), max(c.MaxMissing, s.Missing)
	}
	return c
}

// account counts recs (the probes from the change on): every target's
// first answer from its new endpoint, and the end of the last probe
// that landed on a removed endpoint or failed.
func (t *convTracker) account(recs []probeRec) reports.Convergence {
	c := reports.Convergence{Changed: len(t.svcs), ProbesNs: -1, LastStaleNs: -1}
	firstNew := make([]time.Duration, len(t.svcs))
	for i := range firstNew {
		firstNew[i] = -1
	}
	var lastBad time.Duration
	for _, r := range recs {
		end := r.start.Add(r.lat).Sub(t.start)
		c.Probes++
		switch t.classify(r) {
		case landedNew:
			if firstNew[r.target] < 0 || end < firstNew[r.target] {
				firstNew[r.target] = end
			}
		case landedOld:
			c.Stale++
			c.LastStaleNs = max(c.LastStaleNs, int64(r.start.Sub(t.start)))
			lastBad = max(lastBad, end)
		case landedFailed:
			c.Failed++
			lastBad = max(lastBad, end)
		}
	}
	conv := lastBad
	for _, d := range firstNew {
		if d < 0 {
			return c
		}
		conv = max(conv, d)
	}
	c.ProbesNs = int64(conv)
	return c
}

// replaceCase is one case of a fault that replaces one endpoint of each
// of a set of services (replaceFirst): every service after the change
// (next), the changed ones after it, and their replaced endpoint's old
// and new address.
type replaceCase struct {
	next, changed  []workload.Service
	removed, added []netip.Addr
}

// runReplaceCases runs the n cases of a fault phase (what names them in
// the progress): probes probe workers, and each case replacing one
// endpoint of each of services services (spread over the list, the same
// ones every case) from the services the case before left, a second
// after it (the rules settle). At the end the row's proxier programs
// the row's services again (a full sync), whatever happened.
func runReplaceCases(ctx context.Context, r *Row, probes, services, n int, what string,
	run func(i int, pool workerPool, rc replaceCase) error) (err error) {
	pool, err := r.Env.probes(probes)
	if err != nil {
		return fmt.Errorf("probes: %w", err)
	}
	defer pool.Close()
	cur := r.Services
	alloc := newPodAlloc(r.Sc, cur)
	idx := indexes(probeTargets(cur, services))
	prog := r.Progress()
	prog.Start(fmt.Sprintf("%s: %s while %d services change", r.Mode.Name, what, len(idx)), n)
	defer prog.Done()
	defer func() {
		if fs, ok := r.Proxier.(proxymodes.FullSyncer); ok {
			fs.ForceFullSync()
		}
		if _, serr := r.Proxier.Sync(context.WithoutCancel(ctx), r.Services); serr != nil {
			err = errors.Join(err, fmt.Errorf("sync back to the row's services: %w", serr))
		}
	}()
	for i := range n {
		next, removed, added, err := replaceFirst(cur, idx, alloc)
		if err != nil {
			return err
		}
		rc := replaceCase{next: next, removed: removed, added: added}
		for _, j := range idx {
			rc.changed = append(rc.changed, next[j])
		}
		if err := sleepCtx(ctx, time.Second); err != nil {
			return err
		}
		if err := run(i, pool, rc); err != nil {
			return err
		}
		cur = next
		prog.Add(1)
	}
	return nil
}

// faultPhaseRule is the rule of a fault phase: per row, over the rules
// of a mode, TCP probes to the services' first port.
func faultPhaseRule(name, field string, wants func(f *scenarios.FaultsSpec) bool) scenarios.PhaseRule {
	return scenarios.PhaseRule{Name: name, Field: field, Scope: scenarios.ScopeRow, Rules: true, TCP: true,
		Wants: func(s *scenarios.Scenario) bool { return s.Faults != nil && wants(s.Faults) }}
}

// sleepCtx sleeps for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
