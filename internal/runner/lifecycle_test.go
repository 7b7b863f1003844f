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

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// lifecycleFake is the lifecycle phase's data plane: connections to the
// web service land round robin on its ready endpoints of the proxier's
// last sync (the count starts over at every sync); a held connection
// stays open while its endpoint is in the service, in any condition
// (removed: reset). With stale > 0, a sync that takes away a ready
// endpoint holding open connections sends the next stale connections
// round robin to the ready endpoints before it (conntrack-like reuse of
// the old decisions).
type lifecycleFake struct {
	env
	p   *logProxier
	log *stepLog

	mu         sync.Mutex
	fds        map[int]netip.Addr // open connections and their endpoints
	next       int
	rr         int
	old        []netip.Addr
	staleLeft  int
	stale      int
	opens      int
	openErrAt  int // the openErrAt-th open (1-based) fails; 0: none
	flushes    int
	flushErrAt int // the flushErrAt-th flush (1-based) fails; 0: none
	misuse     []string
}

func newLifecycleFake(t *testing.T, sc *scenarios.Scenario, svcs []workload.Service) (*lifecycleFake, map[string]netip.Addr) {
	t.Helper()
	target := uint16(5353)
	for slices.Contains(workload.TargetPorts(svcs), target) {
		target++
	}
	web, a, b, err := dnsLike(sc, svcs, target)
	if err != nil {
		t.Fatal(err)
	}
	c := b.Next()
	d, a2 := c.Next(), c.Next().Next()
	byName := map[string]netip.Addr{"a": a, "b": b, "c": c, "d": d, "a2": a2, "vip": web.ClusterIP}
	names := map[netip.Addr]string{}
	for n, ip := range byName {
		names[ip] = n
	}
	f := &lifecycleFake{log: &stepLog{}, fds: map[int]netip.Addr{}, next: 3}
	f.p = &logProxier{fakeProxier: newFakeProxier(), name: "p", watch: "web", log: f.log, names: names, hook: f.synced}
	if _, err := f.p.fakeProxier.Sync(context.Background(), svcs); err != nil { // the row's state before the phase
		t.Fatal(err)
	}
	f.env = env{
		flush: func(n int) error {
			f.log.add("flush %d", n)
			f.mu.Lock()
			defer f.mu.Unlock()
			f.flushes++
			if f.flushes == f.flushErrAt {
				return errors.New("netlink: conntrack flush refused")
			}
			return nil
		},
		listen: func(ports []uint16) (func(), error) {
			f.log.add("listen %v", ports)
			return func() { f.log.add("stop listen") }, nil
		},
		open:      f.open,
		alive:     f.alive,
		closeConn: f.closeConn,
	}
	return f, byName
}

// synced is the proxier's hook: a new sync starts the round robin over
// and, when it takes away a ready endpoint with open connections, sends
// the next f.stale connections to the ready endpoints before it.
func (f *lifecycleFake) synced(before, after []workload.Service, _ *proxymodes.SyncStats) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rr, f.staleLeft = 0, 0
	var prev, now []netip.Addr
	for _, s := range before {
		if s.Name == "web" {
			prev = readyIPs(s)
		}
	}
	for _, s := range after {
		if s.Name == "web" {
			now = readyIPs(s)
		}
	}
	for _, ip := range prev {
		if !slices.Contains(now, ip) && f.holds(ip) {
			f.old, f.staleLeft = prev, f.stale
			return
		}
	}
}

// holds says whether ip has an open connection (f.mu held).
func (f *lifecycleFake) holds(ip netip.Addr) bool {
	for _, ep := range f.fds {
		if ep == ip {
			return true
		}
	}
	return false
}

func (f *lifecycleFake) open(dst netip.Addr, port uint16, _ time.Duration) (int, netip.AddrPort, time.Time, error) {
	start := time.Now()
	time.Sleep(200 * time.Microsecond) // a connect's round trip
	f.p.mu.Lock()
	state := f.p.state
	f.p.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opens++
	if f.opens == f.openErrAt {
		return -1, netip.AddrPort{}, start, errors.New("enter netns pb-x-c0: bad file descriptor")
	}
	svc, ok := service(state, dst)
	if !ok || len(svc.Ports) != 1 || svc.Ports[0].Port != port {
		return -1, netip.AddrPort{}, start, fmt.Errorf("connect %s:%d: timeout", dst, port)
	}
	pool := readyIPs(svc)
	if svc.ServingFallback() { // no ready endpoint: the serving terminating ones (KEP-1669)
		for _, e := range svc.Endpoints {
			if e.Programmed(true) {
				pool = append(pool, e.IP)
			}
		}
	}
	if f.staleLeft > 0 {
		pool = f.old
		f.staleLeft--
	}
	if len(pool) == 0 {
		return -1, netip.AddrPort{}, start, fmt.Errorf("connect %s:%d: connection refused", dst, port)
	}
	ep := pool[f.rr%len(pool)]
	f.rr++
	fd := f.next
	f.next++
	f.fds[fd] = ep
	return fd, netip.AddrPortFrom(ep, svc.Ports[0].TargetPort), start, nil
}

func (f *lifecycleFake) alive(fd int) bool {
	f.p.mu.Lock()
	state := f.p.state
	f.p.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	ep, ok := f.fds[fd]
	if !ok {
		f.misuse = append(f.misuse, fmt.Sprintf("alive(%d) of a closed connection", fd))
		return false
	}
	for _, s := range state {
		if s.Name == "web" && slices.ContainsFunc(s.Endpoints, func(e workload.Endpoint) bool { return e.IP == ep }) {
			return true
		}
	}
	return false
}

func (f *lifecycleFake) closeConn(fd int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.fds[fd]; !ok {
		f.misuse = append(f.misuse, fmt.Sprintf("close(%d) of a closed connection", fd))
	}
	delete(f.fds, fd)
}

// leaks fails t when the phase left a connection open or used a closed one.
func (f *lifecycleFake) leaks(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.fds) != 0 || len(f.misuse) != 0 {
		t.Errorf("%d connections left open (%v), misuse %q", len(f.fds), f.fds, f.misuse)
	}
}

func lifecycleScenario(t *testing.T) (*scenarios.Scenario, []workload.Service) {
	return phaseScenario(t, "", "lifecycle: {held: 6, observe: 100ms}\n")
}

// lifecycleSteps are the phase's steps: per change a flush, the
// endpoints before, the change (drain-refill: none, then d half-way
// through), then a forced full sync of the services alone, a flush, and
// the listener stopped last.
var lifecycleSteps = []string{
	"listen [5353]",
	"flush 0", "sync p web=a,b,c", "sync p web=b,c",
	"flush 0", "sync p web=a,b,c", "sync p web=a~,b,c",
	"flush 0", "sync p web=a,b,c", "sync p web=", "sync p web=d",
	"flush 0", "sync p web=a,b,c", "sync p web=a2,b,c",
	"flush 0", "sync p web=a,b,c", "sync p web=a~,b~,c~",
	"flush 0", "sync p web=a,b,c", "sync p web=a~,b~,c~",
	"force p", "sync p web=-", "flush 0",
	"stop listen",
}

// TestLifecyclePhaseOnFake runs the six changes on the fake data plane
// and checks each figure the phase computes from it: held connections on
// the changed endpoints and broken by the change, new connections that
// failed or still reached an old endpoint, the first success, the open
// connections per endpoint after the restart; then the same with a data
// plane that keeps sending 3 new connections to the old endpoints after
// a removal.
func TestLifecyclePhaseOnFake(t *testing.T) {
	sc, svcs := lifecycleScenario(t)
	observe := sc.Lifecycle.Observe.Duration
	f, ip := newLifecycleFake(t, sc, svcs)
	r := phaseRow(sc, &f.env, fakeMode(), f.p, svcs)
	if err := lifecyclePhaseV.Run(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	wantSteps(t, f.log, lifecycleSteps)
	f.leaks(t)
	if fmt.Sprint(f.p.state) != fmt.Sprint(svcs) || !strings.Contains(r.Progress().(*recProgress).steps[0], "fake: endpoint lifecycle of "+ip["vip"].String()+" with 6 held") {
		t.Errorf("the proxier does not hold the row's services after the phase, or progress %q", r.Progress().(*recProgress).steps)
	}
	out := r.Result.Lifecycle
	if len(out) != 6 {
		t.Fatalf("%d changes, want 6", len(out))
	}
	// Every endpoint terminating: held connections stay; still serving,
	// every new one reaches them (the fallback), else every one fails.
	for _, w := range []struct {
		name          string
		toOld, failed bool
		heldOnChanged int
	}{{"all-serving-terminating", true, false, 6}, {"all-terminating", false, true, 6}} {
		c := out[map[string]int{"all-serving-terminating": 4, "all-terminating": 5}[w.name]]
		if c.Name != w.name || c.HeldOnChanged != w.heldOnChanged || c.Broken != 0 || c.New == 0 ||
			(c.NewToOld == c.New) != w.toOld || (c.NewFailed == c.New) != w.failed || (w.failed && c.FirstSuccessNs != -1) {
			t.Errorf("%s: held on changed %d, broken %d, %d new: %d to old, %d failed, first success %d; want %s: %d held, none broken, all to old %v, all failed %v",
				c.Name, c.HeldOnChanged, c.Broken, c.New, c.NewToOld, c.NewFailed, c.FirstSuccessNs, w.name, w.heldOnChanged, w.toOld, w.failed)
		}
	}
	out = out[:4]
	// Held: 6 round robin over a, b, c: 2 on a. Removed endpoints reset
	// their connections; a terminating one keeps them.
	for i, w := range []struct {
		name                  string
		heldOnChanged, broken int
	}{{"removal", 2, 2}, {"terminating", 2, 0}, {"drain-refill", 6, 6}, {"restart", 2, 2}} {
		c := out[i]
		if c.Name != w.name || c.Held != 6 || c.HeldOnChanged != w.heldOnChanged || c.Broken != w.broken {
			t.Errorf("%s: held %d, on the changed endpoints %d, broken %d; want %s 6, %d, %d", c.Name, c.Held, c.HeldOnChanged, c.Broken, w.name, w.heldOnChanged, w.broken)
		}
		if c.NewToOld != 0 || c.LastToOldNs != -1 || c.New == 0 {
			t.Errorf("%s: %d of %d new connections to an old endpoint (last %d ns), want none of some", c.Name, c.NewToOld, c.New, c.LastToOldNs)
		}
		if w.name != "drain-refill" && (c.NewFailed != 0 || c.FirstSuccessNs < 0 || c.FirstSuccessNs > int64(observe/2)) {
			t.Errorf("%s: %d failed, first success at %v; want none failed, the first at once", c.Name, c.NewFailed, time.Duration(c.FirstSuccessNs))
		}
		if (w.name == "restart") != (c.ActiveAfter != nil) {
			t.Errorf("%s: active after %v", c.Name, c.ActiveAfter)
		}
	}
	// drain-refill: no endpoint for the first half of the observation.
	if dr := out[2]; dr.NewFailed == 0 || dr.NewFailed == dr.New || dr.FirstSuccessNs < int64(observe/2) {
		t.Errorf("drain-refill: %d of %d failed, first success at %v; want the failures of the empty half, then successes from %v", dr.NewFailed, dr.New, time.Duration(dr.FirstSuccessNs), observe/2)
	}
	// restart: 3 batches of 2 more held connections; a's 2 are reset,
	// the others count on their endpoints, a never.
	for i, act := range out[3].ActiveAfter {
		total := 0
		for ep, n := range act {
			total += n
			if ep == ip["a"].String() {
				t.Errorf("batch %d: %d open connections on the replaced endpoint", i, n)
			}
		}
		if total != 6+2*i {
			t.Errorf("batch %d: %d open connections (%v), want %d", i, total, act, 6+2*i)
		}
	}
	if len(out[3].ActiveAfter) != 3 || out[3].ActiveAfter[0][ip["b"].String()] < 2 {
		t.Errorf("restart: active after %v, want 3 batches, b keeping its 2 held connections", out[3].ActiveAfter)
	}

	// A data plane that sends the next 3 connections after a removal to
	// the endpoints before it: removal, terminating and restart see one
	// new connection reach a (the first), drain-refill three (a, b, c)
	// and its first success at once.
	f, _ = newLifecycleFake(t, sc, svcs)
	f.stale = 3
	r = phaseRow(sc, &f.env, fakeMode(), f.p, svcs)
	if err := lifecyclePhaseV.Run(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	f.leaks(t)
	for i, want := range []int{1, 1, 3, 1} { // the first four changes
		c := r.Result.Lifecycle[i]
		if c.NewToOld != want || c.LastToOldNs < 0 || c.LastToOldNs >= int64(observe) {
			t.Errorf("%s: %d new connections to an old endpoint, the last at %v; want %d within the observation", c.Name, c.NewToOld, time.Duration(c.LastToOldNs), want)
		}
	}
	if dr := r.Result.Lifecycle[2]; dr.FirstSuccessNs < 0 || dr.FirstSuccessNs >= int64(observe/2) || dr.NewFailed == 0 {
		t.Errorf("drain-refill: first success at %v, %d failed; want the stale connections at once, then failures", time.Duration(dr.FirstSuccessNs), dr.NewFailed)
	}
}

// TestLifecyclePhaseErrors: an error stops the phase with the changes
// finished before it kept in the row (the adapter prefixes
// "lifecycle: "), every held connection closed and the listener stopped;
// a failed flush before a change is an error, after the phase a fault.
func TestLifecyclePhaseErrors(t *testing.T) {
	sc, svcs := lifecycleScenario(t)
	for _, tc := range []struct {
		name    string
		set     func(f *lifecycleFake)
		changes int    // kept in the row
		err     string // in the error
		last    string // the last step before "stop listen"
	}{
		// Syncs: 1 before the phase, 2 each for removal and terminating,
		// then drain-refill's before (6) and its drain (7).
		{"sync", func(f *lifecycleFake) { f.p.failAt = 7 }, 2, "lifecycle: fake sync failure", "sync p failed"},
		{"final sync", func(f *lifecycleFake) { f.p.failAt = 1 + 2 + 2 + 3 + 2 + 2 + 2 + 1 }, 6, "lifecycle: sync after lifecycle: fake sync failure", "sync p failed"},
		// Opens: 6 held in removal, then the third held one fails.
		{"held connection", func(f *lifecycleFake) { f.openErrAt = 3 }, 0, "lifecycle: removal: held connection 2: enter netns pb-x-c0", "sync p web=a,b,c"},
		{"flush", func(f *lifecycleFake) { f.flushErrAt = 2 }, 1, "lifecycle: netlink: conntrack flush refused", "flush 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := newLifecycleFake(t, sc, svcs)
			tc.set(f)
			r := phaseRow(sc, &f.env, fakeMode(), f.p, svcs)
			err := lifecyclePhaseV.Run(context.Background(), r)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
			if len(r.Result.Lifecycle) != tc.changes {
				t.Errorf("the row kept %d changes, want the %d finished", len(r.Result.Lifecycle), tc.changes)
			}
			steps := f.log.get()
			if n := len(steps); n < 2 || steps[n-1] != "stop listen" || steps[n-2] != tc.last {
				t.Errorf("steps end %q, want %q then the listener stopped", steps[max(0, n-2):], tc.last)
			}
			f.leaks(t)
		})
	}
	f, _ := newLifecycleFake(t, sc, svcs)
	f.flushErrAt = 7 // after the six changes
	r := phaseRow(sc, &f.env, fakeMode(), f.p, svcs)
	if err := lifecyclePhaseV.Run(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if len(r.Result.Lifecycle) != 6 || len(*r.Faults) != 1 || !strings.Contains((*r.Faults)[0], "after the lifecycle phase failed: netlink: conntrack flush refused") {
		t.Errorf("%d changes, faults %q: want all six and the failed flush after them as a fault", len(r.Result.Lifecycle), *r.Faults)
	}
}

// TestParseRealServers reads ipvsadm -Ln -t's real servers, a weight-0
// one with connections (graceful termination) included, and leaves the
// headers out.
func TestParseRealServers(t *testing.T) {
	out := []byte(`IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port Scheduler Flags
  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn
TCP  198.18.0.22:80 rr
  -> 198.19.0.61:5353             Masq    0      4          0
  -> 198.19.0.62:5353             Masq    1      4          1
`)
	got := parseRealServers(out)
	if want := []string{"198.19.0.61:5353 w0 a4 i0", "198.19.0.62:5353 w1 a4 i1"}; !slices.Equal(got, want) {
		t.Errorf("%q, want %q", got, want)
	}
	if got := parseRealServers(nil); got != nil {
		t.Errorf("empty output: %q", got)
	}
}
