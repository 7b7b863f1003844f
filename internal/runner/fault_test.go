//go:build linux

package runner

import (
	"context"
	"errors"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/proxybench/proxybench/workload"
)

// TestParseRuleEndpoints: each mode's read-back finds the endpoints new
// connections can reach, and only those: an iptables KUBE-SEP chain no
// rule jumps to any more, and an IPVS real server at weight 0, do not
// count.
func TestParseRuleEndpoints(t *testing.T) {
	for _, tc := range []struct {
		mode, text string
		want       []string
	}{
		{"iptables", `*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-A - [0:0]
:KUBE-SEP-1 - [0:0]
:KUBE-SEP-2 - [0:0]
:KUBE-SEP-OLD - [0:0]
-A KUBE-SERVICES -d 198.18.0.1/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-A
-A KUBE-SVC-A -m statistic --mode random --probability 0.5 -j KUBE-SEP-1
-A KUBE-SVC-A -j KUBE-SEP-2
-A KUBE-SEP-1 -p tcp -m tcp -j DNAT --to-destination 198.19.0.1:8080
-A KUBE-SEP-2 -p tcp -m tcp -j DNAT --to-destination 198.19.0.2:8080
-A KUBE-SEP-OLD -p tcp -m tcp -j DNAT --to-destination 198.19.0.9:8080
COMMIT
`, []string{"198.19.0.1", "198.19.0.2"}},
		{"nftables", `table ip kube-proxy {
	chain service-X-default/s0/tcp/ {
		ip daddr 198.18.0.1 tcp dport 80 ip saddr != 198.20.0.0/16 jump mark-for-masquerade
		meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 198.19.0.1 . 8080,
			1 : 198.19.0.2 . 8080 }
	}
	chain service-Y-default/s1/tcp/ {
		meta l4proto tcp dnat to 198.19.0.3:8080
	}
	map service-ips {
		elements = { 198.18.0.1 . tcp . 80 : goto service-X-default/s0/tcp/ }
	}
}
`, []string{"198.19.0.1", "198.19.0.2", "198.19.0.3"}},
		{"ipvs", `-A -t 198.18.0.1:80 -s rr
-a -t 198.18.0.1:80 -r 198.19.0.1:8080 -m -w 1
-a -t 198.18.0.1:80 -r 198.19.0.2:8080 -m -w 0
`, []string{"198.19.0.1"}},
	} {
		got := map[netip.Addr]bool{}
		m, err := modes.Lookup(tc.mode)
		if err != nil || m.Endpoints == nil {
			t.Fatalf("%s: no endpoint read-back (%v)", tc.mode, err)
		}
		m.Endpoints.Parse(tc.text, got)
		if len(got) != len(tc.want) {
			t.Errorf("%s: got %v, want %v", tc.mode, got, tc.want)
		}
		for _, w := range tc.want {
			if !got[netip.MustParseAddr(w)] {
				t.Errorf("%s: %s missing from %v", tc.mode, w, got)
			}
		}
	}
}

// TestBlackholes: the longest run without an answer runs from the first
// unanswered datagram's send to the next answered one's; datagrams
// before t0 are not counted; a run still open at the end ends at the
// last answer time.
func TestBlackholes(t *testing.T) {
	t0 := time.Unix(100, 0)
	a := netip.MustParseAddr("198.19.0.1")
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	recs := []exchange{
		{sent: at(-20), answered: at(-19)}, // before t0, unanswered: not counted
		{sent: at(0), answered: at(1), from: a},
		{sent: at(20), answered: at(220)},
		{sent: at(220), answered: at(420)},
		{sent: at(420), answered: at(421), from: a},
		{sent: at(440), answered: at(640)},
	}
	sent, lost, longest := blackholes(recs, t0)
	if sent != 5 || lost != 3 || longest != int64(400*time.Millisecond) {
		t.Errorf("sent %d lost %d longest %v; want 5, 3, 400ms", sent, lost, time.Duration(longest))
	}
	if _, _, l := blackholes(recs[:4], t0); l != int64(400*time.Millisecond) {
		t.Errorf("open run: longest %v, want 400ms (20 ms to the last answer time 420 ms)", time.Duration(l))
	}
}

// TestConvergenceAccount: the probes converge when every changed
// service has answered from its new endpoint and nothing landed on a
// removed endpoint or failed after; a service never answered from its
// new endpoint leaves the figure at -1.
func TestConvergenceAccount(t *testing.T) {
	t0 := time.Unix(100, 0)
	old0, new0 := netip.MustParseAddr("198.19.0.1"), netip.MustParseAddr("198.19.1.1")
	old1, new1 := netip.MustParseAddr("198.19.0.2"), netip.MustParseAddr("198.19.1.2")
	other := netip.MustParseAddr("198.19.0.3")
	tr := &convTracker{svcs: make([]workload.Service, 2), removed: []netip.Addr{old0, old1}, added: []netip.Addr{new0, new1}, start: t0}
	rec := func(target, ms int, landed netip.Addr, err error) probeRec {
		return probeRec{target: target, start: t0.Add(time.Duration(ms) * time.Millisecond), lat: time.Millisecond, landed: landed, err: err}
	}
	recs := []probeRec{
		rec(0, 10, old0, nil), rec(1, 20, old1, nil), rec(0, 500, other, nil),
		rec(0, 900, new0, nil), rec(1, 1200, old1, nil), rec(1, 1500, netip.Addr{}, errors.New("timeout")),
		rec(1, 2000, new1, nil), rec(0, 2500, new0, nil),
	}
	c := tr.account(recs)
	if c.Probes != 8 || c.Stale != 3 || c.Failed != 1 || c.LastStaleNs != int64(1200*time.Millisecond) {
		t.Errorf("counts %+v", c)
	}
	if c.ProbesNs != int64(2001*time.Millisecond) {
		t.Errorf("probes converged at %v, want 2.001s (service 1's first answer from its new endpoint)", time.Duration(c.ProbesNs))
	}
	if c := tr.account(recs[:6]); c.ProbesNs != -1 {
		t.Errorf("service 1 never answered from its new endpoint, converged at %v", time.Duration(c.ProbesNs))
	}
}

// failingAPI refuses every write until its API is back (up), as an API
// server that is down; it counts the attempts.
type failingAPI struct {
	faultAPI
	mu       sync.Mutex
	up       bool
	attempts int
	written  map[string]time.Time
	// lostAnswers: while down, the write is committed all the same and
	// only its answer fails (a client deadline passed while the API
	// server stored it).
	lostAnswers bool
	reads       int
}

func (f *failingAPI) WriteChange(_ context.Context, _ workload.Change, s workload.Service, _ time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts++
	if !f.up {
		if f.lostAnswers {
			f.written[s.Name] = time.Now()
			return errors.New("context deadline exceeded")
		}
		return errors.New("connection refused")
	}
	f.written[s.Name] = time.Now()
	return nil
}

func (f *failingAPI) SliceHolds(_ context.Context, s workload.Service, _ time.Time) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if !f.up && !f.lostAnswers {
		return false, errors.New("connection refused")
	}
	_, ok := f.written[s.Name]
	return ok, nil
}

// TestSliceWriterLostAnswer: an attempt that failed although the API
// committed it (its answer lost) is found by the read-back and counted
// accepted, not retried on the back-off until the phase ends (the guest's
// apiOutage read "written: never" with every change in the rules).
func TestSliceWriterLostAnswer(t *testing.T) {
	defer func(b time.Duration) { sliceBackoff = b }(sliceBackoff)
	sliceBackoff = time.Hour // a retry would never come within the test
	api := &failingAPI{written: map[string]time.Time{}, lostAnswers: true}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // without the read-back: done 0
	defer cancel()
	w := startSliceWriter(ctx, api, []workload.Service{{Name: "a"}, {Name: "b"}}, time.Now())
	writes, errs, done, _ := w.wait()
	lost, first := w.answers()
	if writes != 2 || errs != 2 || done != 2 || lost != 2 {
		t.Errorf("writes %d errs %d done %d lost %d, want 2 each", writes, errs, done, lost)
	}
	if first == "" {
		t.Error("the first failed attempt's error was not kept")
	}
}

// TestSliceWriterRetries: a write refused while the API is down is
// retried on the controller's doubling back-off and lands once the API
// is back, not before; every attempt is counted.
func TestSliceWriterRetries(t *testing.T) {
	defer func(b time.Duration) { sliceBackoff = b }(sliceBackoff)
	sliceBackoff = 20 * time.Millisecond
	api := &failingAPI{written: map[string]time.Time{}}
	t0 := time.Now()
	w := startSliceWriter(context.Background(), api, []workload.Service{{Name: "a"}, {Name: "b"}}, t0)
	time.Sleep(100 * time.Millisecond) // attempts at 0, 20, 60 ms: 3 each
	api.mu.Lock()
	api.up = true
	back := time.Now()
	api.mu.Unlock()
	writes, errs, done, last := w.wait()
	if done != 2 || errs < 4 || writes != errs+2 {
		t.Errorf("writes %d errs %d done %d", writes, errs, done)
	}
	// No write lands before the API is back (no bound on when after it:
	// at load 37 the test's own sleep overshot to 123 ms).
	if last.Before(back) {
		t.Errorf("last write %v after the start, API back at %v", last.Sub(t0), back.Sub(t0))
	}
}
