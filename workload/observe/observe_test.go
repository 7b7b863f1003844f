package observe

import (
	"math"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/proxybench/proxybench/workload"
)

var (
	t0  = time.Unix(1000, 0)
	ep  = netip.MustParseAddr("10.1.0.7")
	ep2 = netip.MustParseAddr("10.1.0.8")
	ms  = time.Millisecond
)

func TestConfirmMisses(t *testing.T) {
	for _, n := range []int{2, 3, 5, 10, 50, 200, 2000} {
		k := ConfirmMisses(n)
		if k <= n && k < 500 {
			t.Errorf("ConfirmMisses(%d) = %d: a round-robin scheduler cycles through %d endpoints", n, k, n)
		}
		if k > 500 {
			t.Errorf("ConfirmMisses(%d) = %d, above the cap of 500", n, k)
		}
		// A random choice keeps avoiding a live endpoint k times in a row
		// with probability ((n-1)/n)^k: below 0.001 unless capped.
		if p := math.Pow(float64(n-1)/float64(n), float64(k)); k < 500 && p >= 0.001 {
			t.Errorf("ConfirmMisses(%d) = %d: a live endpoint is missed %d times in a row with probability %.4f", n, k, k, p)
		}
	}
	if ConfirmMisses(1) != 3 || ConfirmMisses(0) != 3 {
		t.Errorf("ConfirmMisses(1), (0) = %d, %d, want 3", ConfirmMisses(1), ConfirmMisses(0))
	}
}

func TestAppearance(t *testing.T) {
	o := New(workload.Change{Kind: workload.EndpointAdd, Endpoint: ep, Ready: 2}, t0)
	if o.See(t0.Add(-ms), ep, true) {
		t.Fatal("a probe started before the change completed the observation")
	}
	if o.See(t0.Add(5*ms), ep2, true) || o.See(t0.Add(6*ms), netip.Addr{}, false) {
		t.Fatal("a probe landing elsewhere, or failing, completed an appearance")
	}
	if !o.See(t0.Add(9*ms), ep, true) || o.Latency != 9*ms {
		t.Fatalf("done=%v latency=%v, want done at 9ms", o.Done, o.Latency)
	}
	// Later probes change nothing.
	o.See(t0.Add(20*ms), ep, true)
	if o.Latency != 9*ms {
		t.Errorf("latency moved to %v after the observation was done", o.Latency)
	}
}

func TestDisappearance(t *testing.T) {
	o := New(workload.Change{Kind: workload.EndpointRemove, Endpoint: ep, Ready: 2}, t0)
	need := ConfirmMisses(2)
	if o.Need != need {
		t.Fatalf("Need = %d, want %d", o.Need, need)
	}
	// Misses interrupted by a hit start over; failures do not count.
	o.See(t0.Add(1*ms), ep2, true)
	o.See(t0.Add(2*ms), ep, true)
	at := t0.Add(3 * ms)
	for i := 0; i < need-1; i++ {
		if o.See(at.Add(time.Duration(i)*ms), ep2, true) {
			t.Fatalf("done after %d misses, need %d", i+1, need)
		}
		o.See(at.Add(time.Duration(i)*ms), netip.Addr{}, false)
	}
	if !o.See(at.Add(time.Duration(need)*ms), ep2, true) {
		t.Fatalf("not done after %d consecutive misses", need)
	}
	if o.Latency != 3*ms {
		t.Errorf("latency %v, want 3ms: from the change to the first miss after the last hit", o.Latency)
	}
	// Every probe after the change is counted by its outcome.
	if o.Hits != 1 || o.Elsewhere != need+1 || o.Failed != need-1 {
		t.Errorf("probes: %d hits, %d elsewhere, %d failed; want 1, %d, %d", o.Hits, o.Elsewhere, o.Failed, need+1, need-1)
	}
}

func TestServiceChanges(t *testing.T) {
	c := New(workload.Change{Kind: workload.ServiceCreate}, t0)
	if c.See(t0.Add(ms), netip.Addr{}, false) || !c.See(t0.Add(2*ms), ep, true) || c.Latency != 2*ms {
		t.Errorf("service create: done=%v latency=%v, want the first successful probe (2ms)", c.Done, c.Latency)
	}
	d := New(workload.Change{Kind: workload.ServiceDelete, Ready: 50}, t0)
	if d.Need != 3 {
		t.Errorf("service delete needs %d failures, want 3", d.Need)
	}
	d.See(t0.Add(ms), ep, true)
	for i := 2; i <= 4; i++ {
		d.See(t0.Add(time.Duration(i)*ms), netip.Addr{}, false)
	}
	if !d.Done || d.Latency != 2*ms {
		t.Errorf("service delete: done=%v latency=%v, want done at the first of 3 failures (2ms)", d.Done, d.Latency)
	}
}

func TestTrackerRotates(t *testing.T) {
	var tr Tracker
	if tr.Next() != nil || tr.Pending() != 0 {
		t.Fatal("an empty tracker has something pending")
	}
	a := New(workload.Change{Kind: workload.EndpointAdd, Endpoint: ep}, t0)
	b := New(workload.Change{Kind: workload.EndpointAdd, Endpoint: ep2}, t0)
	tr.Add(a)
	tr.Add(b)
	if x, y, z := tr.Next(), tr.Next(), tr.Next(); x != a || y != b || z != a {
		t.Fatalf("Next does not rotate over the pending observations")
	}
	if !tr.See(a, t0.Add(ms), ep, true) || tr.See(a, t0.Add(2*ms), ep, true) {
		t.Fatal("See must report true once, for the probe that completes the observation")
	}
	if tr.Pending() != 1 || tr.Next() != b || tr.Next() != b {
		t.Fatal("a done observation is still handed out")
	}
	if all := tr.All(); len(all) != 2 || all[0] != a || all[1] != b {
		t.Fatal("All lost the order of Add")
	}
}

// TestTrackerConcurrent: many workers probing the same observations
// complete each exactly once (run with -race).
func TestTrackerConcurrent(t *testing.T) {
	var tr Tracker
	for i := 0; i < 20; i++ {
		tr.Add(New(workload.Change{Kind: workload.EndpointAdd, Endpoint: ep}, t0))
	}
	var mu sync.Mutex
	completed := 0
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := tr.Next(); o != nil; o = tr.Next() {
				if tr.See(o, t0.Add(ms), ep, true) {
					mu.Lock()
					completed++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if completed != 20 || tr.Pending() != 0 {
		t.Errorf("%d completions, %d pending, want 20 and 0", completed, tr.Pending())
	}
}
