package observe

import (
	"net/netip"
	"testing"
	"time"

	"github.com/proxybench/proxybench/workload"
)

// A change followed on two nodes is seen once both saw it, with the
// slower node's latency; each node's own latency is kept; one node
// behaves as a Tracker.
func TestSpread(t *testing.T) {
	ep := netip.MustParseAddr("198.19.0.7")
	other := netip.MustParseAddr("198.19.0.8")
	t0 := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	ch := workload.Change{Kind: workload.EndpointAdd, Endpoint: ep, Ready: 3}
	s := NewSpread([]int{0, 3})
	s.Add(ch, t0)
	if s.Tracker(1) != nil || s.Pending() != 1 {
		t.Fatalf("tracker of an unfollowed node %v, pending %d", s.Tracker(1), s.Pending())
	}
	see := func(node int, after time.Duration, landed netip.Addr) *Observation {
		tr := s.Tracker(node)
		o := tr.Next()
		if o == nil {
			t.Fatalf("node %d: nothing pending", node)
		}
		if tr.See(o, t0.Add(after), landed, true) {
			return s.Seen(o)
		}
		return nil
	}
	if got := see(3, 100*time.Millisecond, other); got != nil {
		t.Fatalf("a miss completed the change")
	}
	if got := see(3, 200*time.Millisecond, ep); got != nil {
		t.Fatalf("one node of two completed the change: %+v", got)
	}
	if s.Tracker(3).Next() != nil {
		t.Error("node 3 still has the change pending after seeing it")
	}
	got := see(0, 700*time.Millisecond, ep)
	if got == nil || !got.Done || got.Latency != 700*time.Millisecond {
		t.Fatalf("both nodes saw it: %+v, want done at 700ms", got)
	}
	all, per := s.All()
	if len(all) != 1 || all[0] != got || all[0].Hits != 2 || all[0].Elsewhere != 1 {
		t.Errorf("All %+v", all)
	}
	if len(per) != 1 || per[0][0].Latency != 700*time.Millisecond || per[0][1].Latency != 200*time.Millisecond {
		t.Errorf("per node %+v", per)
	}
	if s.Pending() != 0 {
		t.Errorf("pending %d", s.Pending())
	}

	one := NewSpread([]int{0})
	one.Add(ch, t0)
	tr := one.Tracker(0)
	o := tr.Next()
	if !tr.See(o, t0.Add(50*time.Millisecond), ep, true) {
		t.Fatal("one node: not seen")
	}
	if got := one.Seen(o); got != o || got.Latency != 50*time.Millisecond {
		t.Errorf("one node: %+v, want the node's own observation", got)
	}
}
