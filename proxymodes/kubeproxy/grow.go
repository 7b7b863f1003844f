//go:build linux

package kubeproxy

import (
	"context"
	"fmt"
	"time"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/workload"
)

// GrowWorkers is how many API writes Grow has in flight: as many as the
// first Sync's object creation (apiobjects.Create's default), so a size
// step reaches the API server as fast as the first size's objects did.
const GrowWorkers = 64

// Growth is one step of a service-count sweep (sweep.services) on a
// running kube-proxy: the API brought from the last Sync's services to
// the next size's, as a cluster grows or shrinks, and kube-proxy's
// syncs of it.
type Growth struct {
	// From and To are the service counts before and after; Created,
	// Updated and Deleted the Services (each with its EndpointSlice) the
	// writes created, changed and deleted.
	From, To, Created, Updated, Deleted int
	// Stats is the step as a sync.full figure: Wall from the last API
	// write returned to every probed new service answering through the
	// node's rules (the data plane; with none to probe, kube-proxy's sync
	// of the writes ended), as a first Sync's Wall runs from the API
	// objects created; Phases: "setup.api" the writes (first sent to
	// last returned), "kube-proxy.lastSync" the last of kube-proxy's
	// syncs in the step by its log (the one that finished it),
	// "kube-proxy.metric" the growth of its sync histogram's sum over
	// the step (every sync it ran meanwhile); CPU kube-proxy's own and
	// its rule programs' over the step; Objects and Bytes what it had
	// installed afterwards, read back (0 for IPVS).
	Stats proxymodes.SyncStats
	// Syncs are kube-proxy's IPv4 syncs in the step by its log, in
	// order; Metric its sync histogram's growth (IPv4) over the step.
	Syncs  []LoggedSync
	Metric Histogram
	// Probed counts the new services' ServicePorts the data plane waited
	// for (the first Sync's probe, DataPlane, over the created ones).
	Probed int
}

// Grow makes the API hold services (the next size of a sweep: more or
// fewer services than the last Sync's) and waits until kube-proxy has
// programmed them: the writes are the ones a later Sync makes (plan: a
// Service and its EndpointSlice created per new service, with the
// last-change-trigger-time, deleted per removed one), GrowWorkers at a
// time, after kube-proxy has been idle for its minSyncPeriod. It is
// done when kube-proxy has ended the sync that programmed every written
// trigger time (with deletions only, the timing rule of Sync) and every
// probed new service answers (DataPlane). Before the first Sync it is
// the first Sync. Errors: as Sync's (a failed sync is a
// *proxymodes.SyncFailed, kube-proxy exiting a *proxymodes.Failed); a
// write the API server refused is a *proxymodes.SyncFailed too, saying
// so (the row's sweep ends there, the run goes on).
func (p *Proxier) Grow(ctx context.Context, services []workload.Service) (Growth, error) {
	g := Growth{From: len(p.last), To: len(services)}
	if p.kp == nil {
		st, err := p.first(ctx, services, time.Now())
		g.From, g.Created, g.Stats = 0, len(services), st
		return g, err
	}
	const during = "the growth to the sweep's next size"
	if err := p.exited(during, proxymodes.SyncStats{}, 0); err != nil {
		return g, err
	}
	if err := p.waitIdle(ctx); err != nil {
		return g, p.orExited(err, during)
	}
	v0, err := p.syncView(ctx)
	if err != nil {
		return g, p.orExited(err, during)
	}
	c0, err := p.changes(ctx)
	if err != nil {
		return g, p.orExited(err, during)
	}
	var added []workload.Service
	for _, s := range services {
		if old, ok := p.last[s.Name]; !ok {
			added = append(added, s)
		} else if !sameService(old, s) {
			g.Updated++
		}
	}
	g.Created = len(added)
	cur, ops, triggers := p.plan(services)
	g.Deleted = len(ops) - g.Created - g.Updated
	u0 := p.kp.Usage()
	logFrom := p.kp.logSize()
	w, err := applyWrites(ctx, ops, GrowWorkers)
	if err != nil {
		if ctx.Err() != nil {
			return g, err
		}
		// The API server refused or lost a write (under load: a create
		// whose ClusterIP a timed-out attempt left allocated): the step
		// is not the next size, so the row's sweep ends here, kept; the
		// run goes on (*proxymodes.SyncFailed: fate Partial).
		p.last = cur // what the API may hold; the row is cleaned up next
		return g, &proxymodes.SyncFailed{Msg: fmt.Sprintf("kubeproxy: API writes of the growth from %d to %d services failed after %v: %v",
			g.From, g.To, time.Since(w.start).Round(time.Millisecond), err)}
	}
	p.last = cur
	if len(ops) == 0 {
		return g, nil
	}
	// The data plane over the new services, while kube-proxy's syncs are
	// watched.
	type answer struct {
		at     time.Time
		probed int
		err    error
	}
	dp := make(chan answer, 1)
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if p.spec.DataPlane != nil && len(added) > 0 {
		go func() {
			at, n, err := p.spec.DataPlane(dctx, added)
			dp <- answer{at, n, err}
		}()
	} else {
		dp <- answer{}
	}
	var got *answer
	busy := func() bool {
		if got != nil {
			return false
		}
		select {
		case a := <-dp:
			got = &a
			return false
		default:
			return true
		}
	}
	// The changes kube-proxy receives: a Service and an EndpointSlice
	// change per created or deleted service, a slice change per updated
	// one (kubeproxy_sync_proxy_rules_{service,endpoint}_changes_total),
	// which the rule for writes without a trigger time counts.
	changes := 2*(g.Created+g.Deleted) + g.Updated
	// Written in parallel: the last write sent is no bound on the others'
	// arrival, so the timing rule counts from the last one returned.
	wt := w
	wt.sent = w.written
	end, v, err := p.waitWritten(ctx, during, v0, c0, u0, logFrom, wt, triggers, changes, busy)
	if err != nil {
		return g, err
	}
	if got == nil {
		a := <-dp
		got = &a
	}
	if got.err != nil {
		return g, fmt.Errorf("data plane after the growth from %d to %d services: %w", g.From, g.To, got.err)
	}
	if !got.at.IsZero() && got.at.After(end) {
		end = got.at
	}
	g.Probed = got.probed
	u := p.kp.Usage()
	g.Metric = v.sync.Sub(v0.sync)
	log := readFile(p.kp.LogPath)
	if logFrom <= len(log) {
		_, g.Syncs = ParseChurnLog(log[logFrom:], time.Now(), time.Local)
	}
	g.Stats = proxymodes.SyncStats{Kind: "full", Wall: end.Sub(w.written), CPU: (u.CPU + u.ChildCPU) - (u0.CPU + u0.ChildCPU),
		Phases: map[string]time.Duration{"setup.api": w.written.Sub(w.start), "kube-proxy.metric": time.Duration(g.Metric.Sum * float64(time.Second))}}
	if n := len(g.Syncs); n > 0 {
		g.Stats.Phases["kube-proxy.lastSync"] = g.Syncs[n-1].Elapsed
	}
	p.readBackStats(ctx, &g.Stats, fmt.Sprintf(" after the growth from %d to %d services", g.From, g.To))
	if err := p.exited("the read-back after a growth, after it was measured", g.Stats, 0); err != nil {
		return g, err
	}
	return g, nil
}
