//go:build linux

package runner

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// heldConn is one connection held open across a change.
type heldConn struct {
	fd int
	ep netip.Addr
}

// lifecycleChanges are the changes of the lifecycle phase, as endpoint
// lists of the web service before and after (nil after: drain then refill
// with d), and the endpoints the change takes away or marks terminating.
// On a kube-proxy row each list is an EndpointSlice write with the
// endpoints' ready/serving/terminating conditions
// (apiobjects.EndpointSlice) through the row's API.
func lifecycleChanges(a, b, c, d, a2 netip.Addr) []struct {
	name        string
	pre, change []workload.Endpoint
	old         []netip.Addr
} {
	ep := workload.NewEndpoint
	// term is an endpoint terminating and still serving (its pod's
	// readiness probe passes during the grace period), gone one
	// terminating and no longer serving: the EndpointSlice conditions
	// ready=false, serving=true|false, terminating=true.
	term := func(ip netip.Addr) workload.Endpoint {
		return workload.Endpoint{IP: ip, Serving: true, Terminating: true, Weight: 1}
	}
	gone := func(ip netip.Addr) workload.Endpoint { return workload.Endpoint{IP: ip, Terminating: true, Weight: 1} }
	return []struct {
		name        string
		pre, change []workload.Endpoint
		old         []netip.Addr
	}{
		{"removal", []workload.Endpoint{ep(a), ep(b), ep(c)}, []workload.Endpoint{ep(b), ep(c)}, []netip.Addr{a}},
		{"terminating", []workload.Endpoint{ep(a), ep(b), ep(c)}, []workload.Endpoint{term(a), ep(b), ep(c)}, []netip.Addr{a}},
		{"drain-refill", []workload.Endpoint{ep(a), ep(b), ep(c)}, []workload.Endpoint{ep(d)}, []netip.Addr{a, b, c}},
		{"restart", []workload.Endpoint{ep(a), ep(b), ep(c)}, []workload.Endpoint{ep(a2), ep(b), ep(c)}, []netip.Addr{a}},
		// Every endpoint terminating (a rollout's old pods, no new one
		// ready yet): still serving, kube-proxy falls back to them
		// (KEP-1669, pkg/proxy/topology.go CategorizeEndpoints: no ready
		// endpoint, so the serving terminating ones), so new connections
		// reach them; no longer serving, it has none, and they fail.
		{"all-serving-terminating", []workload.Endpoint{ep(a), ep(b), ep(c)}, []workload.Endpoint{term(a), term(b), term(c)}, []netip.Addr{a, b, c}},
		{"all-terminating", []workload.Endpoint{ep(a), ep(b), ep(c)}, []workload.Endpoint{gone(a), gone(b), gone(c)}, []netip.Addr{a, b, c}},
	}
}

// lifecyclePhase runs a TCP service "web" (ClusterIP after the last
// service, three endpoints after the last pod IP) through each lifecycle
// change with lifecycle.held connections held across it, then makes new
// connections one at a time for lifecycle.observe. drain-refill removes
// every endpoint, observes half the time, then adds a new one. restart
// then opens three more batches of held connections and records the open
// connections per endpoint after each. p programs services again at the
// end (full sync).
func lifecyclePhase(ctx context.Context, r *Row) (out []reports.LifecycleChange, err error) {
	sc, e, m, p, services, prog, f := r.Sc, r.Env, r.Mode, r.Proxier, r.Services, r.Progress(), r.Faults
	lc := sc.Lifecycle
	target := uint16(5353)
	for slices.Contains(workload.TargetPorts(services), target) {
		target++
	}
	web, a, b, err := dnsLike(sc, services, target)
	if err != nil {
		return nil, err
	}
	web.Name, web.Ports = "web", []workload.ServicePort{{Name: "http", Port: 80, TargetPort: target, Protocol: "TCP"}}
	c := b.Next()
	d, a2 := c.Next(), c.Next().Next()
	_, podNet, _, _ := sc.Prefixes()
	if !podNet.Contains(a2) {
		return nil, fmt.Errorf("lifecycle: no room for the web service's endpoints in podCIDR %s", podNet)
	}
	stop, err := e.listen([]uint16{target})
	if err != nil {
		return nil, err
	}
	defer stop()
	dialFor := func(timeout time.Duration) (fd int, landed netip.Addr, start time.Time, err error) {
		fd, ap, start, err := e.open(web.ClusterIP, 80, timeout)
		return fd, ap.Addr(), start, err
	}
	dial := func() (int, netip.Addr, time.Time, error) { return dialFor(time.Second) }
	with := func(eps []workload.Endpoint) []workload.Service {
		w := web
		w.Endpoints = eps
		return append(slices.Clip(services), w)
	}
	changes := lifecycleChanges(a, b, c, d, a2)
	prog.Start(fmt.Sprintf("%s: endpoint lifecycle of %s with %d held connections", m.Name, web.ClusterIP, lc.Held), len(changes))
	defer prog.Done()
	for _, ch := range changes {
		if err := e.flush(0); err != nil {
			return out, err
		}
		if _, err := p.Sync(ctx, with(ch.pre)); err != nil {
			return out, err
		}
		rc := reports.LifecycleChange{Name: ch.name, LastToOldNs: -1, FirstSuccessNs: -1}
		var held []heldConn
		closeAll := func() {
			for _, h := range held {
				e.closeConn(h.fd)
			}
			held = nil
		}
		for i := 0; i < lc.Held; i++ {
			fd, ep, _, err := dial()
			if err != nil {
				closeAll()
				return out, fmt.Errorf("%s: held connection %d: %w", ch.name, i, err)
			}
			held = append(held, heldConn{fd, ep})
			if slices.Contains(ch.old, ep) {
				rc.HeldOnChanged++
			}
		}
		rc.Held = len(held)
		if ch.name == "drain-refill" {
			if _, err := p.Sync(ctx, with(nil)); err != nil {
				closeAll()
				return out, err
			}
		} else if _, err := p.Sync(ctx, with(ch.change)); err != nil {
			closeAll()
			return out, err
		}
		if m.VSSysctls && e.realServers != nil {
			// The kernel's view of the change (graceful termination keeps
			// a removed real server at weight 0 while it has
			// connections), read before the observation starts.
			if rs, err := e.realServers(ctx, web.ClusterIP, 80); err != nil {
				f.add("lifecycle %s: IPVS real servers not read: %v", ch.name, err)
			} else {
				rc.RealServers = rs
			}
		}
		t0 := time.Now()
		refilled := ch.name != "drain-refill"
		for time.Since(t0) < lc.Observe.Duration {
			if !refilled && time.Since(t0) >= lc.Observe.Duration/2 {
				if _, err := p.Sync(ctx, with(ch.change)); err != nil {
					closeAll()
					return out, err
				}
				refilled = true
			}
			// A connect that fails waits up to 1 s; before the refill it
			// waits no longer than until the refill is due, so a short
			// observe window still sees the refilled endpoint.
			timeout := time.Second
			if !refilled {
				timeout = min(timeout, max(lc.Observe.Duration/2-time.Since(t0), 10*time.Millisecond))
			}
			fd, ep, start, err := dialFor(timeout)
			rc.New++
			if err != nil {
				rc.NewFailed++
				continue
			}
			e.closeConn(fd)
			if rc.FirstSuccessNs < 0 {
				rc.FirstSuccessNs = int64(start.Sub(t0))
			}
			if slices.Contains(ch.old, ep) {
				rc.NewToOld++
				rc.LastToOldNs = int64(start.Sub(t0))
			}
		}
		if ch.name == "restart" {
			for batch := 0; batch < 3; batch++ {
				for i := 0; i < max(1, lc.Held/3); i++ {
					fd, ep, _, err := dial()
					if err == nil {
						held = append(held, heldConn{fd, ep})
					}
				}
				active := map[string]int{}
				for _, h := range held {
					if e.alive(h.fd) {
						active[h.ep.String()]++
					}
				}
				rc.ActiveAfter = append(rc.ActiveAfter, active)
			}
		}
		for _, h := range held[:rc.Held] {
			if !e.alive(h.fd) {
				rc.Broken++
			}
		}
		closeAll()
		out = append(out, rc)
		prog.Add(1)
	}
	if fs, ok := p.(proxymodes.FullSyncer); ok {
		fs.ForceFullSync()
	}
	if _, err := p.Sync(ctx, services); err != nil {
		return out, fmt.Errorf("sync after lifecycle: %w", err)
	}
	if ferr := e.flush(0); ferr != nil {
		f.add("conntrack flush of node0 after the lifecycle phase failed: %v", ferr)
	}
	return out, nil
}

// lifecyclePhaseV is the lifecycle phase as a Phase.
var lifecyclePhaseV = Phase{
	PhaseRule: scenarios.PhaseRule{Name: "lifecycle", Field: "lifecycle", Scope: scenarios.ScopeRow, Rules: true,
		Wants: func(s *scenarios.Scenario) bool { return s.Lifecycle != nil }},
	Report: reports.LifecycleReport,
	Run: func(ctx context.Context, r *Row) (err error) {
		if r.Result.Lifecycle, err = lifecyclePhase(ctx, r); err != nil {
			return fmt.Errorf("lifecycle: %w", err)
		}
		return nil
	},
}
