package userspace

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func noShuffle([]netip.AddrPort) {}

func eps(n int) []netip.AddrPort {
	out := make([]netip.AddrPort, n)
	a := netip.MustParseAddr("198.19.0.1")
	for i := range out {
		out[i] = netip.AddrPortFrom(a, 8080)
		a = a.Next()
	}
	return out
}

var clientA, clientB = netip.MustParseAddr("198.19.255.6"), netip.MustParseAddr("198.19.255.10")

func TestRoundRobin(t *testing.T) {
	b := NewBalancer(Affinity{}, nil, noShuffle)
	if _, err := b.Next(clientA, false); !errors.Is(err, ErrNoEndpoints) {
		t.Fatalf("no endpoints: err %v, want ErrNoEndpoints", err)
	}
	e := eps(3)
	if !b.Update(e) {
		t.Fatal("Update of a new set reported no change")
	}
	// Two full rounds, whatever the client: strict rotation.
	for i := 0; i < 6; i++ {
		c := clientA
		if i%2 == 1 {
			c = clientB
		}
		got, err := b.Next(c, false)
		if err != nil || got != e[i%3] {
			t.Fatalf("connection %d: %v %v, want %v", i, got, err, e[i%3])
		}
	}
}

func TestRoundRobinShuffleCoversAll(t *testing.T) {
	b := NewBalancer(Affinity{}, nil, nil) // real shuffle
	e := eps(5)
	b.Update(e)
	hits := map[netip.AddrPort]int{}
	for i := 0; i < 50; i++ {
		got, _ := b.Next(clientA, false)
		hits[got]++
	}
	for _, x := range e {
		if hits[x] != 10 {
			t.Fatalf("hits %v: want 10 per endpoint", hits)
		}
	}
}

func TestUpdateSameSetKeepsIndex(t *testing.T) {
	b := NewBalancer(Affinity{}, nil, noShuffle)
	e := eps(3)
	b.Update(e)
	b.Next(clientA, false) // index 1
	rev := []netip.AddrPort{e[2], e[1], e[0]}
	if b.Update(rev) {
		t.Fatal("same set in another order reported as a change")
	}
	if got, _ := b.Next(clientA, false); got != e[1] {
		t.Fatalf("after no-op update got %v, want %v (index kept)", got, e[1])
	}
	// A different set restarts at index 0.
	if !b.Update(e[:2]) {
		t.Fatal("shrunk set not reported as a change")
	}
	if got, _ := b.Next(clientA, false); got != e[0] {
		t.Fatalf("after change got %v, want %v (index reset)", got, e[0])
	}
}

func TestAffinity(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	b := NewBalancer(Affinity{ClientIP: true, Timeout: 10 * time.Second}, clk.now, noShuffle)
	e := eps(3)
	b.Update(e)
	first, _ := b.Next(clientA, false)
	otherB, _ := b.Next(clientB, false)
	if first == otherB {
		t.Fatalf("two clients got the same first endpoint %v", first)
	}
	// Sticky while used within the timeout, even over longer than it in total.
	for i := 0; i < 5; i++ {
		clk.advance(9 * time.Second)
		if got, _ := b.Next(clientA, false); got != first {
			t.Fatalf("step %d: %v, want sticky %v", i, got, first)
		}
	}
	// Idle for the timeout: expired, next round robin (index 2).
	clk.advance(10 * time.Second)
	got, _ := b.Next(clientA, false)
	if got != e[2] {
		t.Fatalf("after expiry %v, want round robin %v", got, e[2])
	}
	// reset (failed dial) skips the pinned endpoint and re-pins.
	got, _ = b.Next(clientA, true)
	if got != e[0] {
		t.Fatalf("reset: %v, want %v", got, e[0])
	}
	if again, _ := b.Next(clientA, false); again != e[0] {
		t.Fatalf("after reset not pinned to %v: %v", e[0], again)
	}
	// Removing the pinned endpoint drops the session.
	b.Update([]netip.AddrPort{e[1], e[2]})
	if b.Sessions() != 1 { // clientB is pinned to e[1]
		t.Fatalf("sessions %d after removing e0, want 1", b.Sessions())
	}
	clk.advance(10 * time.Second)
	if n := b.CleanupStale(); n != 1 || b.Sessions() != 0 {
		t.Fatalf("CleanupStale dropped %d, %d left; want 1, 0", n, b.Sessions())
	}
}

func TestAffinityDefaultTimeout(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	b := NewBalancer(Affinity{ClientIP: true}, clk.now, noShuffle)
	b.Update(eps(2))
	first, _ := b.Next(clientA, false)
	clk.advance(DefaultAffinityTimeout - time.Second)
	if got, _ := b.Next(clientA, false); got != first {
		t.Fatal("session expired before 3h")
	}
}

type fakeConn struct{ net.Conn }

func TestTryConnectRetries(t *testing.T) {
	b := NewBalancer(Affinity{}, nil, noShuffle)
	e := eps(3)
	b.Update(e)
	down := map[netip.AddrPort]bool{e[0]: true}
	var tries []time.Duration
	dial := func(_ context.Context, ep netip.AddrPort, to time.Duration) (net.Conn, error) {
		tries = append(tries, to)
		if down[ep] {
			return nil, errors.New("connection refused")
		}
		return fakeConn{}, nil
	}
	// 30 connections, each lands on a live endpoint. The retry consumes
	// a turn too, so the rotation runs e0(fail)->e1, e2, e0(fail)->e1, e2:
	// every other connection takes two tries, as in the legacy proxier.
	retried := 0
	for i := 0; i < 30; i++ {
		res, err := TryConnect(context.Background(), b, clientA, DefaultDialTimeouts, dial)
		if err != nil || res.Endpoint == e[0] {
			t.Fatalf("connection %d: %+v %v", i, res, err)
		}
		if res.Tries > 1 {
			retried++
		}
	}
	if retried != 15 {
		t.Fatalf("retried %d, want 15 (every other connection meets e0)", retried)
	}
	// All down: 4 tries with the legacy timeouts, then ErrAllTriesFailed.
	down[e[1]], down[e[2]] = true, true
	tries = nil
	res, err := TryConnect(context.Background(), b, clientA, DefaultDialTimeouts, dial)
	if !errors.Is(err, ErrAllTriesFailed) || res.Tries != 4 || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("all down: %+v %v", res, err)
	}
	for i, d := range DefaultDialTimeouts {
		if tries[i] != d {
			t.Fatalf("try %d timeout %v, want %v", i, tries[i], d)
		}
	}
	// No endpoints: fails at once.
	empty := NewBalancer(Affinity{}, nil, noShuffle)
	if _, err := TryConnect(context.Background(), empty, clientA, DefaultDialTimeouts, dial); !errors.Is(err, ErrNoEndpoints) {
		t.Fatalf("no endpoints: %v", err)
	}
}

// A client pinned to an endpoint that dies moves to a live one and stays there.
func TestTryConnectAffinityReset(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	b := NewBalancer(Affinity{ClientIP: true, Timeout: time.Hour}, clk.now, noShuffle)
	e := eps(3)
	b.Update(e)
	down := map[netip.AddrPort]bool{}
	dial := func(_ context.Context, ep netip.AddrPort, _ time.Duration) (net.Conn, error) {
		if down[ep] {
			return nil, errors.New("reset")
		}
		return fakeConn{}, nil
	}
	res, _ := TryConnect(context.Background(), b, clientA, DefaultDialTimeouts, dial)
	pinned := res.Endpoint
	down[pinned] = true
	res, err := TryConnect(context.Background(), b, clientA, DefaultDialTimeouts, dial)
	if err != nil || res.Endpoint == pinned || res.Tries != 2 {
		t.Fatalf("after pinned endpoint died: %+v %v", res, err)
	}
	again, _ := TryConnect(context.Background(), b, clientA, DefaultDialTimeouts, dial)
	if again.Endpoint != res.Endpoint || again.Tries != 1 {
		t.Fatalf("not re-pinned: %+v, want %v in 1 try", again, res.Endpoint)
	}
}
