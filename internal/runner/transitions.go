//go:build linux

package runner

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// dnsLike returns the DNS-like service of the transitions phase: named
// "dns", ClusterIP the address after the last service's, ServicePorts
// dns-udp 53/UDP and dns-tcp 53/TCP to targetPort, and candidate endpoint
// addresses A and B after the last endpoint. It fails when they do not fit
// the scenario's CIDRs.
func dnsLike(sc *scenarios.Scenario, services []workload.Service, targetPort uint16) (svc workload.Service, a, b netip.Addr, err error) {
	svcNet, podNet, _, _ := sc.Prefixes()
	vip := svcNet.Addr()
	pod := podNet.Addr()
	for _, s := range services {
		if s.ClusterIP.Compare(vip) > 0 {
			vip = s.ClusterIP
		}
		for _, e := range s.Endpoints {
			if e.IP.Compare(pod) > 0 {
				pod = e.IP
			}
		}
	}
	vip, a = vip.Next(), pod.Next()
	b = a.Next()
	if !svcNet.Contains(vip) || !podNet.Contains(b) {
		return svc, a, b, fmt.Errorf("transitions: no room for the DNS-like service in serviceCIDR %s and podCIDR %s", svcNet, podNet)
	}
	svc = workload.Service{Namespace: workload.Namespace, Name: "dns", ClusterIP: vip, Ports: []workload.ServicePort{
		{Name: "dns-udp", Port: 53, TargetPort: targetPort, Protocol: "UDP"},
		{Name: "dns-tcp", Port: 53, TargetPort: targetPort, Protocol: "TCP"},
	}}
	return svc, a, b, nil
}

// withEndpoints returns services plus dns with endpoints eps (none: the
// service exists with 0 endpoints).
func withEndpoints(services []workload.Service, dns workload.Service, eps ...netip.Addr) []workload.Service {
	dns.Endpoints = nil
	for _, e := range eps {
		dns.Endpoints = append(dns.Endpoints, workload.Endpoint{IP: e, Ready: true, Weight: 1})
	}
	return append(slices.Clip(services), dns)
}

// exchange is one datagram of the transitions client.
type exchange struct {
	sent, answered time.Time
	from           netip.Addr // zero: no answer (timeout or refusal)
}

// udpSender keeps one fixed-source-port UDP client sending until stopped.
type udpSender struct {
	mu   sync.Mutex
	recs []exchange
	stop chan struct{}
	done chan struct{}
}

func startSender(c udpConn, interval, timeout time.Duration) *udpSender {
	s := &udpSender{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		var seq uint64
		for {
			seq++
			sent := time.Now()
			ap, err := c.Exchange(seq, timeout)
			r := exchange{sent: sent, answered: time.Now()}
			if err == nil {
				r.from = ap.Addr()
			}
			s.mu.Lock()
			s.recs = append(s.recs, r)
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-time.After(time.Until(sent.Add(interval))):
			}
		}
	}()
	return s
}

func (s *udpSender) records() []exchange {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.recs)
}

func (s *udpSender) close() []exchange {
	close(s.stop)
	<-s.done
	return s.records()
}

// waitAnswer waits up to d for an answer after since and returns who
// answered (zero Addr: none).
func (s *udpSender) waitAnswer(since time.Time, d time.Duration) netip.Addr {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, r := range s.records() {
			if r.sent.After(since) && r.from.IsValid() {
				return r.from
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return netip.Addr{}
}

// tally fills the figures of t from the exchanges sent at or after t0.
func tally(t *reports.Transition, recs []exchange, t0 time.Time, live []netip.Addr) {
	t.RecoveryNs = -1
	for _, r := range recs {
		if r.sent.Before(t0) {
			continue
		}
		t.Sent++
		switch {
		case !r.from.IsValid():
			t.Lost++
		case slices.Contains(live, r.from):
			t.Live++
			if t.RecoveryNs < 0 {
				t.RecoveryNs = int64(r.answered.Sub(t0))
			}
		default:
			t.Stale++
		}
	}
}

// ownConntrack is a proxier whose stale UDP conntrack cleanup is its own
// (kubeproxy.Proxier, a kube-proxy row): the transitions phase cannot
// turn it off, and reads kube-proxy's account of each transition's sync
// (its metrics and, at -v 4, its log) instead of the sync's stats.
type ownConntrack interface {
	ConntrackMarkNow(ctx context.Context) (kubeproxy.ConntrackMark, error)
	ConntrackSince(ctx context.Context, mk kubeproxy.ConntrackMark) (kubeproxy.ConntrackCleanup, error)
	RaiseVerbosity(ctx context.Context, v int, what string) (note string, restore func(context.Context) error)
}

var _ ownConntrack = (*kubeproxy.Proxier)(nil)

// transitionsPhase runs the DNS-like service through each transition of
// reports.Transition with the mode's proxier p (conntrack cleanup on, as
// kube-proxy) and, when the scenario asks, with a second proxier of m
// built without the cleanup; the node's conntrack table is flushed before
// each transition. Afterwards p programs services again (a full sync).
// A kube-proxy row (ownConntrack) makes every change through the API
// (its Sync) and runs with kube-proxy's own cleanup only: kube-proxy has
// no switch to turn it off, so transitions.withoutCleanup is builtin's
// alone; its -v is raised to 4 for the phase for its cleanup's log lines.
func transitionsPhase(ctx context.Context, r *Row) (out []reports.Transition, dnsCheck *reports.DNSCheck, err error) {
	sc, e, m, p, services, prog, f := r.Sc, r.Env, r.Mode, r.Proxier, r.Services, r.Progress(), r.Faults
	tr := sc.Transitions
	target := uint16(5353)
	for slices.Contains(workload.TargetPorts(services), target) {
		target++
	}
	dns, a, b, err := dnsLike(sc, services, target)
	if err != nil {
		return nil, nil, err
	}
	stopUDP, err := e.listenUDP([]uint16{target})
	if err != nil {
		return nil, nil, err
	}
	defer stopUDP()
	stopTCP, err := e.listen([]uint16{target})
	if err != nil {
		return nil, nil, err
	}
	defer stopTCP()

	variants := []bool{true}
	own, _ := p.(ownConntrack)
	wantOff := tr.WithoutCleanup != nil && *tr.WithoutCleanup
	if wantOff && own == nil {
		variants = append(variants, false)
	}
	logNote := ""
	if own != nil {
		var restore func(context.Context) error
		logNote, restore = own.RaiseVerbosity(ctx, kubeproxy.ConntrackVerbosity, "a \"Finished reconciling conntrack entries\" line per cleanup with the entries it deleted")
		if wantOff {
			logNote += "; the run without cleanup (transitions.withoutCleanup) is builtin's alone: kube-proxy has no switch to turn its cleanup off"
		}
		defer func() {
			if rerr := restore(ctx); rerr != nil {
				f.add("transitions: %v", rerr)
			}
		}()
	}
	prog.Start(fmt.Sprintf("%s: UDP transitions of %s (%d variants)", m.Name, dns.ClusterIP, len(variants)), 3*len(variants))
	defer prog.Done()
	for _, clean := range variants {
		q := p
		if !clean {
			off := *sc
			off.NoConntrackCleanup = true
			if q, err = e.newProxier(&off, m); err != nil {
				return out, nil, err
			}
		}
		for _, name := range []string{"0to1-new-service", "endpoint-removal", "restart-1to0to1"} {
			var o ownConntrack
			if clean {
				o = own
			}
			t, err := runTransition(ctx, e, q, o, services, dns, a, b, name, tr)
			if err != nil {
				return out, nil, fmt.Errorf("transition %s (cleanup %v): %w", name, clean, err)
			}
			t.Cleanup = clean
			if t.KubeProxy != nil {
				t.KubeProxy.Log = logNote
			}
			out = append(out, t)
			prog.Add(1)
		}
		// The proxier without cleanup is not cleaned up: its Cleanup would
		// also remove what p relies on (iptables' jump rules, which p
		// ensured once); p's forced full sync below takes its objects over.
	}
	if fs, ok := p.(proxymodes.FullSyncer); ok {
		fs.ForceFullSync()
	}
	if dnsCheck, err = checkDNS(ctx, e, p, services, dns, a, tr); err != nil {
		return out, nil, err
	}
	if _, err := p.Sync(ctx, services); err != nil {
		return out, dnsCheck, fmt.Errorf("sync after transitions: %w", err)
	}
	if ferr := e.flush(0); ferr != nil {
		f.add("conntrack flush of node0 after the transitions failed: %v", ferr)
	}
	return out, dnsCheck, nil
}

// checkDNS programs the DNS-like service with endpoint a and sends 20
// datagrams to 53/UDP and 20 connections to 53/TCP from client pod 0.
func checkDNS(ctx context.Context, e *env, p proxymodes.Proxier, services []workload.Service,
	dns workload.Service, a netip.Addr, tr *scenarios.TransitionsSpec) (*reports.DNSCheck, error) {
	if _, err := p.Sync(ctx, withEndpoints(services, dns, a)); err != nil {
		return nil, fmt.Errorf("DNS check sync: %w", err)
	}
	d := &reports.DNSCheck{}
	c, err := e.udpClient(0, netip.AddrPortFrom(dns.ClusterIP, 53))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	for i := 0; i < 20; i++ {
		d.UDPSent++
		if ap, err := c.Exchange(uint64(i+1), tr.Timeout.Duration+time.Second); err == nil && ap.Addr() == a {
			d.UDPOK++
		}
	}
	err = e.inClient(func() error {
		for i := 0; i < 20; i++ {
			d.TCPSent++
			if ap, _, err := e.dial(dns.ClusterIP, 53, 2*time.Second); err == nil && ap.Addr() == a {
				d.TCPOK++
			}
		}
		return nil
	})
	return d, err
}

// runTransition performs one transition (see reports.Transition.Name)
// with a fresh client on transitions.sourcePort. own, when set (a
// kube-proxy row), is p's own cleanup: its account of the change's sync
// is the transition's (Transition.KubeProxy), and an error its cleanup
// logged is recorded there, not failed on (kube-proxy goes on after it).
func runTransition(ctx context.Context, e *env, p proxymodes.Proxier, own ownConntrack, services []workload.Service,
	dns workload.Service, a, b netip.Addr, name string, tr *scenarios.TransitionsSpec) (reports.Transition, error) {
	t := reports.Transition{Name: name, Observe: tr.Observe.Duration}
	if err := e.flush(0); err != nil {
		return t, err
	}
	sync := func(svcs []workload.Service) (proxymodes.SyncStats, error) {
		st, err := p.Sync(ctx, svcs)
		if err == nil && st.ConntrackError != "" {
			err = fmt.Errorf("conntrack cleanup: %s", st.ConntrackError)
		}
		return st, err
	}
	var pre []workload.Service
	switch name {
	case "0to1-new-service":
		pre = services
	case "endpoint-removal":
		pre = withEndpoints(services, dns, a, b)
	default:
		pre = withEndpoints(services, dns, a)
	}
	if _, err := sync(pre); err != nil {
		return t, err
	}
	c, err := e.udpClient(uint16(tr.SourcePort), netip.AddrPortFrom(dns.ClusterIP, 53))
	if err != nil {
		return t, err
	}
	defer c.Close()
	s := startSender(c, tr.Interval.Duration, tr.Timeout.Duration)
	defer func() {
		select {
		case <-s.done:
		default:
			s.close()
		}
	}()
	start := time.Now()
	// restart-1to0to1's figures of cleanup are over both its syncs (to 0
	// endpoints and to the new one): kube-proxy deletes the client's
	// entry in the first (CleanStaleEntries: a UDP service with no
	// serving endpoint keeps no entry), builtin in the second.
	var mark kubeproxy.ConntrackMark
	markNow := func() error {
		if own == nil {
			return nil
		}
		var err error
		mark, err = own.ConntrackMarkNow(ctx)
		return err
	}
	zeroDeleted := 0
	var change []workload.Service
	var live []netip.Addr
	switch name {
	case "0to1-new-service":
		time.Sleep(5 * tr.Interval.Duration)
		change, live = withEndpoints(services, dns, a), []netip.Addr{a}
	case "endpoint-removal":
		first := s.waitAnswer(start, tr.Observe.Duration)
		if !first.IsValid() {
			return t, fmt.Errorf("no answer from %s or %s within %s before the change", a, b, tr.Observe.Duration)
		}
		other := a
		if first == a {
			other = b
		}
		change, live = withEndpoints(services, dns, other), []netip.Addr{other}
	default:
		if s.waitAnswer(start, tr.Observe.Duration) != a {
			return t, fmt.Errorf("no answer from %s within %s before the change", a, tr.Observe.Duration)
		}
		if err := markNow(); err != nil {
			return t, err
		}
		st, err := sync(withEndpoints(services, dns))
		if err != nil {
			return t, err
		}
		zeroDeleted = st.ConntrackDeleted
		time.Sleep(tr.Observe.Duration / 2) // the service sits at 0 endpoints
		change, live = withEndpoints(services, dns, b), []netip.Addr{b}
	}
	flowsOf := func() (out []string) {
		if flows, err := e.udpFlows(); err == nil {
			for _, fl := range flows {
				if fl.OrigDst == dns.ClusterIP {
					out = append(out, fl.ReplySrc.String())
				}
			}
		}
		return out
	}
	t.FlowsBefore = flowsOf()
	if name != "restart-1to0to1" {
		if err := markNow(); err != nil {
			return t, err
		}
	}
	st, err := sync(change)
	if err != nil {
		return t, err
	}
	t0 := time.Now()
	t.FlowsAfter = flowsOf()
	t.ConntrackDeleted, t.SyncNs = zeroDeleted+st.ConntrackDeleted, int64(st.Wall)
	if own != nil {
		c, err := own.ConntrackSince(ctx, mark)
		if err != nil {
			return t, err
		}
		t.KubeProxy = &reports.TransitionKubeProxy{Runs: c.Runs, Deleted: c.Deleted, LogRuns: c.LogRuns, LogDeleted: c.LogDeleted, Errors: c.Errors}
		t.ConntrackDeleted = c.Deleted
		if c.Deleted < 0 {
			t.ConntrackDeleted = c.LogDeleted
		}
	}
	select {
	case <-ctx.Done():
		return t, ctx.Err()
	case <-time.After(tr.Observe.Duration):
	}
	tally(&t, s.close(), t0, live)
	return t, nil
}

// transitionsPhaseV is the transitions phase (and its DNS check) as a
// Phase.
var transitionsPhaseV = Phase{
	PhaseRule: scenarios.PhaseRule{Name: "transitions", Field: "transitions", Scope: scenarios.ScopeRow, Rules: true,
		Wants: func(s *scenarios.Scenario) bool { return s.Transitions != nil }},
	Report: reports.TransitionsReport,
	Run: func(ctx context.Context, r *Row) (err error) {
		if r.Result.Transitions, r.Result.DNS, err = transitionsPhase(ctx, r); err != nil {
			return fmt.Errorf("transitions: %w", err)
		}
		return nil
	},
}
