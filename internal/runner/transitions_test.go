//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/conntrack"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// TestTally: exchanges before the change are ignored; recovery is the
// first live answer's time after it; stale and lost are counted apart.
func TestTally(t *testing.T) {
	t0 := time.Unix(100, 0)
	live, old := netip.MustParseAddr("198.19.0.2"), netip.MustParseAddr("198.19.0.1")
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	recs := []exchange{
		{sent: at(-20), answered: at(-19), from: old},
		{sent: at(0), answered: at(1), from: old},
		{sent: at(20), answered: at(220)},
		{sent: at(240), answered: at(245), from: live},
		{sent: at(260), answered: at(261), from: live},
	}
	var tr reports.Transition
	tally(&tr, recs, t0, []netip.Addr{live})
	if tr.Sent != 4 || tr.Stale != 1 || tr.Lost != 1 || tr.Live != 2 || tr.RecoveryNs != int64(245*time.Millisecond) {
		t.Errorf("tally = %+v, want 4 sent, 1 stale, 1 lost, 2 live, recovery 245ms", tr)
	}
	var never reports.Transition
	tally(&never, recs[:3], t0, []netip.Addr{live})
	if never.RecoveryNs != -1 {
		t.Errorf("no live answer: recovery %d, want -1", never.RecoveryNs)
	}
}

// TestDNSLike: the DNS-like service takes the addresses after the last
// service and endpoint, with 53/UDP and 53/TCP.
func TestDNSLike(t *testing.T) {
	sc, err := scenarios.Parse([]byte("services:\n  count: 3\n"), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := workload.Services(sc)
	if err != nil {
		t.Fatal(err)
	}
	dns, a, b, err := dnsLike(sc, svcs, 5353)
	if err != nil {
		t.Fatal(err)
	}
	if dns.ClusterIP != netip.MustParseAddr("198.18.0.4") || a != netip.MustParseAddr("198.19.0.10") || b != a.Next() {
		t.Errorf("dns %s, endpoints %s %s; want 198.18.0.4, 198.19.0.10, .11", dns.ClusterIP, a, b)
	}
	if len(dns.Ports) != 2 || dns.Ports[0].Protocol != "UDP" || dns.Ports[1].Protocol != "TCP" || dns.Ports[0].Port != 53 {
		t.Errorf("ports %+v, want 53/UDP and 53/TCP", dns.Ports)
	}
	if got := withEndpoints(svcs, dns, a); len(got) != 4 || len(got[3].Endpoints) != 1 || len(svcs) != 3 {
		t.Errorf("withEndpoints: %d services, dns endpoints %v", len(got), got[len(got)-1].Endpoints)
	}
}

// udpFake is the transitions phase's node, backend host and client pod:
// the node's "kernel" holds the last sync of either proxier; a client
// socket's datagrams follow its conntrack entry (one per source port,
// made by its first datagram: to a ready endpoint in turn, untranslated
// when no service has the ClusterIP, none when the service has no
// endpoint: refused), and the backend host answers for any endpoint, so
// an entry to a removed endpoint gets stale answers and an untranslated
// one none. A proxier with cleanup deletes, at each sync, the entries
// to an endpoint no longer ready and the untranslated ones of a service
// that has ready endpoints (ConntrackDeleted), as kube-proxy does.
type udpFake struct {
	env
	log  *stepLog
	p, q *logProxier
	vip  netip.Addr

	mu          sync.Mutex
	kernel      []workload.Service
	flows       map[uint16]netip.Addr // source port: endpoint (zero: untranslated)
	rr          int
	ephemeral   uint16
	sockets     int
	inClientIn  bool
	afterFlows  bool
	changeWalls []time.Duration // the wall of each sync right after a conntrack listing before a change
	listings    int
	pSyncs      int
	ctErrAt     int // p's ctErrAt-th sync in the phase reports a conntrack cleanup error
	flushes     int
	flushErrAt  int
	dropAll     bool
	newErr      error
}

func newUDPFake(t *testing.T, sc *scenarios.Scenario, svcs []workload.Service) (*udpFake, map[string]netip.Addr) {
	t.Helper()
	dns, a, b, err := dnsLike(sc, svcs, 5353)
	if err != nil {
		t.Fatal(err)
	}
	f := &udpFake{log: &stepLog{}, vip: dns.ClusterIP, flows: map[uint16]netip.Addr{}, ephemeral: 40000}
	names := map[netip.Addr]string{a: "a", b: "b"}
	f.p = &logProxier{fakeProxier: newFakeProxier(), name: "p", watch: "dns", log: f.log, names: names, hook: f.synced(true)}
	f.q = &logProxier{fakeProxier: newFakeProxier(), name: "q", watch: "dns", log: f.log, names: names, hook: f.synced(false)}
	if _, err := f.p.fakeProxier.Sync(context.Background(), svcs); err != nil {
		t.Fatal(err)
	}
	f.kernel = svcs
	f.env = env{
		flush: func(n int) error {
			f.log.add("flush %d", n)
			f.mu.Lock()
			defer f.mu.Unlock()
			f.flows = map[uint16]netip.Addr{}
			f.flushes++
			if f.flushes == f.flushErrAt {
				return errors.New("netlink: conntrack flush refused")
			}
			return nil
		},
		listen: func(ports []uint16) (func(), error) {
			f.log.add("listen tcp %v", ports)
			return func() { f.log.add("stop tcp") }, nil
		},
		listenUDP: func(ports []uint16) (func(), error) {
			f.log.add("listen udp %v", ports)
			return func() { f.log.add("stop udp") }, nil
		},
		udpClient: func(src uint16, dst netip.AddrPort) (udpConn, error) {
			f.log.add("udp %d", src)
			if dst != netip.AddrPortFrom(f.vip, 53) {
				return nil, fmt.Errorf("UDP client to %s, want the DNS-like service's 53", dst)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if src == 0 {
				f.ephemeral++
				src = f.ephemeral
			}
			f.sockets++
			return &fakeUDP{f: f, src: src}, nil
		},
		udpFlows: func() ([]conntrack.Flow, error) {
			f.log.add("flows")
			f.mu.Lock()
			defer f.mu.Unlock()
			// Each transition lists the flows before its change and after
			// it: the sync after the first listing is the change's.
			f.listings++
			f.afterFlows = f.listings%2 == 1
			var out []conntrack.Flow
			for _, ep := range f.flows {
				reply := ep
				if !ep.IsValid() {
					reply = f.vip
				}
				out = append(out, conntrack.Flow{Protocol: 17, OrigDst: f.vip, OrigDstPort: 53, ReplySrc: reply})
			}
			return out, nil
		},
		newProxier: func(sc *scenarios.Scenario, m proxymodes.Mode) (proxymodes.Proxier, error) {
			f.log.add("new proxier of %s, cleanup %v", m.Name, !sc.NoConntrackCleanup)
			if f.newErr != nil {
				return nil, f.newErr
			}
			return f.q, nil
		},
		inClient: func(fn func() error) error {
			f.log.add("in client")
			f.mu.Lock()
			f.inClientIn = true
			f.mu.Unlock()
			defer func() { f.mu.Lock(); f.inClientIn = false; f.mu.Unlock() }()
			return fn()
		},
		dial: func(dst netip.Addr, port uint16, _ time.Duration) (netip.AddrPort, time.Time, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			svc, ok := service(f.kernel, dst)
			if !f.inClientIn || !ok || port != 53 {
				return netip.AddrPort{}, time.Now(), fmt.Errorf("dial %s:%d: outside the client or no such service", dst, port)
			}
			ready := readyIPs(svc)
			if len(ready) == 0 {
				return netip.AddrPort{}, time.Now(), fmt.Errorf("connect %s:%d: connection refused", dst, port)
			}
			f.rr++
			return netip.AddrPortFrom(ready[f.rr%len(ready)], 5353), time.Now(), nil
		},
	}
	return f, map[string]netip.Addr{"a": a, "b": b, "vip": dns.ClusterIP}
}

// synced is a proxier's hook: the kernel holds its sync, and with
// cleanup the stale entries go.
func (f *udpFake) synced(cleanup bool) func(before, after []workload.Service, st *proxymodes.SyncStats) {
	return func(_, after []workload.Service, st *proxymodes.SyncStats) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.kernel, f.rr = after, 0
		if cleanup {
			f.pSyncs++
			if f.pSyncs == f.ctErrAt {
				st.ConntrackError = "netlink: EPERM"
			}
			svc, _ := service(after, f.vip)
			ready := readyIPs(svc)
			for src, ep := range f.flows {
				if (ep.IsValid() && !slices.Contains(ready, ep)) || (!ep.IsValid() && len(ready) > 0) {
					delete(f.flows, src)
					st.ConntrackDeleted++
				}
			}
		}
		if f.afterFlows {
			f.changeWalls = append(f.changeWalls, st.Wall)
			f.afterFlows = false
		}
	}
}

// fakeUDP is a client socket of udpFake.
type fakeUDP struct {
	f      *udpFake
	src    uint16
	closed bool
}

func (c *fakeUDP) Exchange(_ uint64, timeout time.Duration) (netip.AddrPort, error) {
	f := c.f
	f.mu.Lock()
	ep, ok := f.flows[c.src]
	if !ok && !f.dropAll {
		svc, found := service(f.kernel, f.vip)
		ready := readyIPs(svc)
		switch {
		case !found: // no rule: the entry goes untranslated
			f.flows[c.src] = netip.Addr{}
		case len(ready) == 0: // rejected: no entry
			f.mu.Unlock()
			time.Sleep(time.Millisecond)
			return netip.AddrPort{}, fmt.Errorf("read: %w", unix.ECONNREFUSED)
		default:
			ep = ready[f.rr%len(ready)]
			f.rr++
			f.flows[c.src] = ep
		}
	}
	f.mu.Unlock()
	if !ep.IsValid() {
		time.Sleep(timeout)
		return netip.AddrPort{}, fmt.Errorf("read: %w", unix.ETIMEDOUT)
	}
	time.Sleep(100 * time.Microsecond)
	return netip.AddrPortFrom(ep, 5353), nil
}

func (c *fakeUDP) Close() error {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	if !c.closed {
		c.closed = true
		c.f.sockets--
	}
	return nil
}

func transitionsScenario(t *testing.T) (*scenarios.Scenario, []workload.Service) {
	return phaseScenario(t, "", "transitions: {sourcePort: 5300, interval: 5ms, timeout: 50ms, observe: 400ms, withoutCleanup: true}\n")
}

// transitionSteps are one variant's steps with proxier x: per transition
// a flush, the service before, the client, the conntrack listing, the
// change (restart: through 0 endpoints first), the listing after it.
func transitionSteps(x string) []string {
	return []string{
		"flush 0", "sync " + x + " dns=-", "udp 5300", "flows", "sync " + x + " dns=a", "flows",
		"flush 0", "sync " + x + " dns=a,b", "udp 5300", "flows", "sync " + x + " dns=b", "flows",
		"flush 0", "sync " + x + " dns=a", "udp 5300", "sync " + x + " dns=", "flows", "sync " + x + " dns=b", "flows",
	}
}

// TestTransitionsPhaseOnFake: with cleanup every transition recovers at
// once (the entries deleted by the change's sync or before it), without
// it the client stays on its old entry (lost for the new service, stale
// for the removed endpoints); the entries before each change are
// recorded, the change's sync time kept, the DNS check reaches endpoint
// a over UDP and TCP, and the steps come in order: both listeners, the
// row's proxier's transitions, the second proxier (cleanup off) made
// once for its own, a forced full sync, the DNS check, the services
// again, a flush, the listeners stopped.
func TestTransitionsPhaseOnFake(t *testing.T) {
	sc, svcs := transitionsScenario(t)
	f, ip := newUDPFake(t, sc, svcs)
	r := phaseRow(sc, &f.env, fakeMode(), f.p, svcs)
	if err := transitionsPhaseV.Run(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	want := []string{"listen udp [5353]", "listen tcp [5353]"}
	want = append(want, transitionSteps("p")...)
	want = append(want, "new proxier of fake, cleanup false")
	want = append(want, transitionSteps("q")...)
	want = append(want, "force p", "sync p dns=a", "udp 0", "in client", "sync p dns=-", "flush 0", "stop tcp", "stop udp")
	wantSteps(t, f.log, want)
	if f.sockets != 0 {
		t.Errorf("%d UDP sockets left open", f.sockets)
	}
	out := r.Result.Transitions
	if len(out) != 6 || len(f.changeWalls) != 6 {
		t.Fatalf("%d transitions, %d change syncs; want 3 with cleanup, 3 without", len(out), len(f.changeWalls))
	}
	vip, a := ip["vip"].String(), ip["a"].String()
	for i, w := range []struct {
		name    string
		cleanup bool
		flows   string // FlowsBefore
		deleted int
		outcome string // every datagram after the change: live, lost or stale
	}{
		{"0to1-new-service", true, "[" + vip + "]", 1, "live"},
		{"endpoint-removal", true, "[" + a + "]", 1, "live"},
		{"restart-1to0to1", true, "[]", 1, "live"}, // a's entry went with the 0-endpoint sync, counted in
		{"0to1-new-service", false, "[" + vip + "]", 0, "lost"},
		{"endpoint-removal", false, "[" + a + "]", 0, "stale"},
		{"restart-1to0to1", false, "[" + a + "]", 0, "stale"},
	} {
		tr := out[i]
		if tr.Name != w.name || tr.Cleanup != w.cleanup || fmt.Sprint(tr.FlowsBefore) != w.flows || tr.ConntrackDeleted != w.deleted {
			t.Errorf("transition %d: %s cleanup %v, flows before %v, %d deleted; want %s %v %s %d", i, tr.Name, tr.Cleanup, tr.FlowsBefore, tr.ConntrackDeleted, w.name, w.cleanup, w.flows, w.deleted)
		}
		if tr.SyncNs != int64(f.changeWalls[i]) || tr.Observe != sc.Transitions.Observe.Duration {
			t.Errorf("%s (cleanup %v): sync %v, observe %v; want the change's sync %v, %v", tr.Name, tr.Cleanup, time.Duration(tr.SyncNs), tr.Observe, f.changeWalls[i], sc.Transitions.Observe.Duration)
		}
		// Without cleanup the client's entry outlives the change's sync.
		if !w.cleanup && w.flows != "[]" && fmt.Sprint(tr.FlowsAfter) != w.flows {
			t.Errorf("%s (cleanup off): flows after the change %v, want the entry before it %s", tr.Name, tr.FlowsAfter, w.flows)
		}
		if tr.KubeProxy != nil {
			t.Errorf("%s: a builtin row with kube-proxy's cleanup account %+v", tr.Name, tr.KubeProxy)
		}
		got := map[string]int{"live": tr.Live, "lost": tr.Lost, "stale": tr.Stale}
		if tr.Sent < 2 || got[w.outcome] != tr.Sent || tr.Live+tr.Lost+tr.Stale != tr.Sent {
			t.Errorf("%s (cleanup %v): %d sent, %d live, %d lost, %d stale; want every one %s", tr.Name, tr.Cleanup, tr.Sent, tr.Live, tr.Lost, tr.Stale, w.outcome)
		}
		if recovered := tr.RecoveryNs >= 0 && tr.RecoveryNs < int64(tr.Observe); recovered != (w.outcome == "live") {
			t.Errorf("%s (cleanup %v): recovery %v", tr.Name, tr.Cleanup, time.Duration(tr.RecoveryNs))
		}
	}
	if d := r.Result.DNS; d == nil || *d != (reports.DNSCheck{UDPSent: 20, UDPOK: 20, TCPSent: 20, TCPOK: 20}) {
		t.Errorf("DNS check %+v, want 20 of 20 over UDP and TCP", d)
	}
	if fmt.Sprint(f.p.state) != fmt.Sprint(svcs) {
		t.Error("the proxier does not hold the row's services after the phase")
	}
}

// TestTransitionsPhaseErrors: an error stops the phase, naming the
// transition and variant, with the transitions finished before it (and
// the DNS check, once done) kept in the row, every client socket closed
// and the listeners stopped; a failed flush after the phase is a fault.
func TestTransitionsPhaseErrors(t *testing.T) {
	sc, svcs := transitionsScenario(t)
	for _, tc := range []struct {
		name  string
		set   func(f *udpFake)
		kept  int
		err   string
		steps int // the log's length; 0: not checked
	}{
		{"second proxier's sync", func(f *udpFake) { f.q.failAt = 1 }, 3, "transitions: transition 0to1-new-service (cleanup false): fake sync failure", 0},
		// p's syncs: 0to1 2, then endpoint-removal's before (3) and change (4).
		{"conntrack cleanup", func(f *udpFake) { f.ctErrAt = 4 }, 1, "transitions: transition endpoint-removal (cleanup true): conntrack cleanup: netlink: EPERM", 2 + 6 + 5 + 2},
		{"second proxier", func(f *udpFake) { f.newErr = errors.New("iptables: not found") }, 3, "transitions: iptables: not found", 2 + 19 + 1 + 2},
		{"no answer", func(f *udpFake) { f.dropAll = true }, 1, "transitions: transition endpoint-removal (cleanup true): no answer from", 0},
		// p's syncs: 1 before the phase, 2 + 2 + 3 in the transitions.
		{"DNS check", func(f *udpFake) { f.p.failAt = 1 + 7 + 1 }, 6, "transitions: DNS check sync: fake sync failure", 0},
		{"final sync", func(f *udpFake) { f.p.failAt = 1 + 7 + 2 }, 6, "transitions: sync after transitions: fake sync failure", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := newUDPFake(t, sc, svcs)
			tc.set(f)
			r := phaseRow(sc, &f.env, fakeMode(), f.p, svcs)
			err := transitionsPhaseV.Run(context.Background(), r)
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
			// The DNS check is kept when it finished (the sync after it failed).
			if len(r.Result.Transitions) != tc.kept || (r.Result.DNS != nil) != (tc.name == "final sync") {
				t.Errorf("the row kept %d transitions and DNS check %v, want the %d finished and the check only once done", len(r.Result.Transitions), r.Result.DNS, tc.kept)
			}
			steps := f.log.get()
			if n := len(steps); n < 2 || steps[n-2] != "stop tcp" || steps[n-1] != "stop udp" || (tc.steps != 0 && n != tc.steps) {
				t.Errorf("%d steps ending %q, want %d ending with the listeners stopped", n, steps[max(0, n-2):], tc.steps)
			}
			if f.sockets != 0 {
				t.Errorf("%d UDP sockets left open", f.sockets)
			}
		})
	}
	f, _ := newUDPFake(t, sc, svcs)
	f.flushErrAt = 7 // after the six transitions
	r := phaseRow(sc, &f.env, fakeMode(), f.p, svcs)
	if err := transitionsPhaseV.Run(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if len(r.Result.Transitions) != 6 || r.Result.DNS == nil || len(*r.Faults) != 1 || !strings.Contains((*r.Faults)[0], "after the transitions failed: netlink: conntrack flush refused") {
		t.Errorf("%d transitions, DNS %v, faults %q: want all, the check, and the failed flush as a fault", len(r.Result.Transitions), r.Result.DNS, *r.Faults)
	}
}

// ownFake is p as a kube-proxy row's proxier: its cleanup is its own
// (ownConntrack), counted by it, not in the Sync's stats.
type ownFake struct {
	*logProxier
	log             *stepLog
	deleted, syncs  int // the cleanup's counter and runs
	markDel, markSy int
	raised          bool
}

func (o *ownFake) Sync(ctx context.Context, svcs []workload.Service) (proxymodes.SyncStats, error) {
	st, err := o.logProxier.Sync(ctx, svcs)
	o.deleted += st.ConntrackDeleted
	o.syncs++
	st.ConntrackDeleted = 0 // kube-proxy's Sync does not see its cleanup
	return st, err
}

func (o *ownFake) ConntrackMarkNow(context.Context) (kubeproxy.ConntrackMark, error) {
	o.markDel, o.markSy = o.deleted, o.syncs
	return kubeproxy.ConntrackMark{}, nil
}

func (o *ownFake) ConntrackSince(context.Context, kubeproxy.ConntrackMark) (kubeproxy.ConntrackCleanup, error) {
	d := o.deleted - o.markDel
	return kubeproxy.ConntrackCleanup{Runs: o.syncs - o.markSy, Deleted: d, LogRuns: o.syncs - o.markSy, LogDeleted: d}, nil
}

func (o *ownFake) RaiseVerbosity(_ context.Context, v int, _ string) (string, func(context.Context) error) {
	o.log.add("raise -v %d", v)
	o.raised = true
	return "raised", func(context.Context) error { o.log.add("restore -v"); o.raised = false; return nil }
}

// TestTransitionsPhaseKubeProxyOnFake: a kube-proxy row (its proxier
// does its own cleanup) runs the transitions once, with its cleanup: no
// second proxier without it although the scenario asks (kube-proxy has
// no switch; the note says so), its -v raised for the phase and put
// back at the end, and each transition's entries deleted taken from
// kube-proxy's own account of the change's sync, not the Sync's stats.
func TestTransitionsPhaseKubeProxyOnFake(t *testing.T) {
	sc, svcs := transitionsScenario(t)
	f, _ := newUDPFake(t, sc, svcs)
	own := &ownFake{logProxier: f.p, log: f.log}
	r := phaseRow(sc, &f.env, fakeMode(), own, svcs)
	if err := transitionsPhaseV.Run(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	want := []string{"listen udp [5353]", "listen tcp [5353]", "raise -v 4"}
	want = append(want, transitionSteps("p")...)
	want = append(want, "force p", "sync p dns=a", "udp 0", "in client", "sync p dns=-", "flush 0", "restore -v", "stop tcp", "stop udp")
	wantSteps(t, f.log, want)
	out := r.Result.Transitions
	if len(out) != 3 {
		t.Fatalf("%d transitions, want the 3 with kube-proxy's cleanup alone", len(out))
	}
	for i, w := range []struct {
		name    string
		deleted int
		after   string
		runs    int
	}{{"0to1-new-service", 1, "[]", 1}, {"endpoint-removal", 1, "[]", 1}, {"restart-1to0to1", 1, "[]", 2}} { // restart: both its syncs
		tr := out[i]
		kp := tr.KubeProxy
		if tr.Name != w.name || !tr.Cleanup || kp == nil || tr.ConntrackDeleted != w.deleted || kp.Deleted != w.deleted || kp.Runs != w.runs || kp.LogDeleted != w.deleted {
			t.Errorf("transition %d: %s cleanup %v, %d deleted, kube-proxy %+v; want %s with kube-proxy's own %d", i, tr.Name, tr.Cleanup, tr.ConntrackDeleted, kp, w.name, w.deleted)
			continue
		}
		if !strings.Contains(kp.Log, "withoutCleanup") {
			t.Errorf("%s: note %q does not say why the run without cleanup is builtin's alone", tr.Name, kp.Log)
		}
		if fmt.Sprint(tr.FlowsAfter) != w.after || tr.Live != tr.Sent {
			t.Errorf("%s: flows after %v, %d of %d live; want %s, all live", tr.Name, tr.FlowsAfter, tr.Live, tr.Sent, w.after)
		}
	}
	if own.raised {
		t.Error("kube-proxy's -v was not put back")
	}
}
