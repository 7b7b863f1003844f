package sim

import (
	"fmt"
	"net/netip"
	"testing"
)

func dests(weights ...int) []*Dest {
	out := make([]*Dest, len(weights))
	for i, w := range weights {
		out[i] = &Dest{Addr: netip.AddrFrom4([4]byte{198, 19, 0, byte(i + 1)}), Port: 8080, Weight: w}
	}
	return out
}

func client(i int) Conn {
	return Conn{Src: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), Dst: netip.MustParseAddr("198.18.0.1"), DstPort: 80}
}

func sequence(t *testing.T, s Scheduler, d []*Dest, n int, conn func(int) Conn) []int {
	t.Helper()
	out := make([]int, n)
	for i := range out {
		out[i] = s.Schedule(d, conn(i))
		if out[i] < 0 {
			t.Fatalf("%s: no destination at connection %d", s.Name(), i)
		}
	}
	return out
}

// TestRR: strict rotation in list order, starting after the list head.
func TestRR(t *testing.T) {
	d := dests(1, 1, 1)
	s, _ := NewScheduler("rr", d)
	got := fmt.Sprint(sequence(t, s, d, 7, client))
	if want := "[0 1 2 0 1 2 0]"; got != want {
		t.Fatalf("rr: %s, want %s", got, want)
	}
	// A destination with weight 0 (quiesced) is skipped.
	d[1].Weight = 0
	if got := fmt.Sprint(sequence(t, s, d, 4, client)); got != "[2 0 2 0]" {
		t.Fatalf("rr with d1 quiesced: %s", got)
	}
}

// TestWRR: weights 1:2:3 get 1/6, 2/6, 3/6 of a cycle, in the kernel's
// interleaved order (cw = 3, 2, 1: the weight-3 server, then 3 and 2,
// then all three).
func TestWRR(t *testing.T) {
	d := dests(1, 2, 3)
	s, _ := NewScheduler("wrr", d)
	got := sequence(t, s, d, 12, client)
	if want := "[2 1 2 0 1 2 2 1 2 0 1 2]"; fmt.Sprint(got) != want {
		t.Fatalf("wrr 1:2:3: %v, want %s", got, want)
	}
	counts := make([]int, 3)
	for _, i := range got[:6] {
		counts[i]++
	}
	if fmt.Sprint(counts) != "[1 2 3]" {
		t.Fatalf("wrr cycle counts %v, want [1 2 3]", counts)
	}
	// gcd > 1: weights 2:4 behave as 1:2.
	d = dests(2, 4)
	s, _ = NewScheduler("wrr", d)
	if got := fmt.Sprint(sequence(t, s, d, 6, client)); got != "[1 0 1 1 0 1]" {
		t.Fatalf("wrr 2:4: %s", got)
	}
}

// TestSH: one client always reaches one server; many clients spread
// over all of them by weight.
func TestSH(t *testing.T) {
	d := dests(1, 1, 1)
	s, _ := NewScheduler("sh", d)
	first := s.Schedule(d, client(7))
	for i := 0; i < 100; i++ {
		if got := s.Schedule(d, client(7)); got != first {
			t.Fatalf("sh: client moved from %d to %d", first, got)
		}
	}
	seen := map[int]bool{}
	for i := 0; i < 256; i++ {
		seen[s.Schedule(d, client(i))] = true
	}
	if len(seen) != 3 {
		t.Fatalf("sh: 256 clients reached %d servers, want 3", len(seen))
	}
	// The buckets follow ip_vs_sh_assign: weight 2 takes two in a row.
	if b := fillBuckets(dests(2, 1), 6, true); fmt.Sprint(b) != "[0 0 1 0 0 1]" {
		t.Fatalf("sh buckets %v", b)
	}
}

// TestDH: the destination address picks the server, whatever the client.
func TestDH(t *testing.T) {
	d := dests(1, 1, 1)
	s, _ := NewScheduler("dh", d)
	first := s.Schedule(d, client(1))
	for i := 0; i < 50; i++ {
		if got := s.Schedule(d, client(i)); got != first {
			t.Fatalf("dh: %d then %d for one VIP", first, got)
		}
	}
}

// TestLCWLC: least-connection schedulers follow active connections.
func TestLCWLC(t *testing.T) {
	d := dests(1, 1, 1)
	d[0].Active, d[1].Active, d[2].Active = 3, 1, 2
	lc, _ := NewScheduler("lc", d)
	if got := lc.Schedule(d, client(0)); got != 1 {
		t.Fatalf("lc chose %d, want 1 (fewest active)", got)
	}
	// Inactive connections count 1/256 of an active one.
	d[0].Active, d[1].Active, d[2].Active = 1, 1, 1
	d[0].Inactive, d[1].Inactive, d[2].Inactive = 5, 3, 4
	if got := lc.Schedule(d, client(0)); got != 1 {
		t.Fatalf("lc chose %d, want 1 (fewest inactive at equal active)", got)
	}
	// wlc: overhead/weight; weight 3 with 2 active beats weight 1 with 1.
	d = dests(1, 3)
	d[0].Active, d[1].Active = 1, 2
	wlc, _ := NewScheduler("wlc", d)
	if got := wlc.Schedule(d, client(0)); got != 1 {
		t.Fatalf("wlc chose %d, want 1", got)
	}
	// Opening connections one by one on wlc keeps active counts level.
	d = dests(1, 1, 1)
	for i := 0; i < 30; i++ {
		d[wlc.Schedule(d, client(i))].Active++
	}
	for i, x := range d {
		if x.Active != 10 {
			t.Fatalf("wlc: server %d has %d active, want 10", i, x.Active)
		}
	}
}

// TestSEDNQ: nq takes an idle server first; sed the shortest expected delay.
func TestSEDNQ(t *testing.T) {
	d := dests(1, 4)
	d[0].Active, d[1].Active = 0, 2
	nq, _ := NewScheduler("nq", d)
	if got := nq.Schedule(d, client(0)); got != 0 {
		t.Fatalf("nq chose %d, want the idle 0", got)
	}
	sed, _ := NewScheduler("sed", d)
	// (0+1)/1 = 1 vs (2+1)/4 = 0.75.
	if got := sed.Schedule(d, client(0)); got != 1 {
		t.Fatalf("sed chose %d, want 1", got)
	}
}

// TestLBLC: one VIP sticks to one server until it is overloaded.
func TestLBLC(t *testing.T) {
	d := dests(1, 1, 1)
	s, _ := NewScheduler("lblc", d)
	first := s.Schedule(d, client(0))
	if got := s.Schedule(d, client(1)); got != first {
		t.Fatalf("lblc moved without overload")
	}
	d[first].Active = 5 // > weight, and others have 0*2 < 1
	if got := s.Schedule(d, client(2)); got == first {
		t.Fatalf("lblc kept an overloaded server")
	}
	r, _ := NewScheduler("lblcr", d)
	got := r.Schedule(d, client(3))
	if got == first {
		t.Fatalf("lblcr chose the overloaded server")
	}
}

// TestMH: the kernel's table size, every server present, and most
// assignments kept when a server is removed (Maglev's minimal disruption).
func TestMH(t *testing.T) {
	d := dests(1, 1, 1, 1, 1)
	s, _ := NewScheduler("mh", d)
	table := s.(*mhSched).Table()
	if len(table) != 4093 {
		t.Fatalf("table size %d, want 4093 (IP_VS_MH_TAB_SIZE)", len(table))
	}
	per := make([]int, len(d))
	for _, i := range table {
		per[i]++
	}
	for i, n := range per {
		if n < 4093/5-60 || n > 4093/5+60 {
			t.Fatalf("server %d has %d entries, want about %d", i, n, 4093/5)
		}
	}
	before := make([]int, 1000)
	for i := range before {
		before[i] = int(d[s.Schedule(d, client(i))].Addr.As4()[3])
	}
	// Remove server 2 (the kernel's del_dest then reassigns).
	d2 := append(append([]*Dest{}, d[:2]...), d[3:]...)
	s.Update(d2)
	kept, moved := 0, 0
	for i := range before {
		now := int(d2[s.Schedule(d2, client(i))].Addr.As4()[3])
		switch {
		case before[i] == 3: // was on the removed server
		case now == before[i]:
			kept++
		default:
			moved++
		}
	}
	if frac := float64(kept) / float64(kept+moved); frac < 0.85 {
		t.Fatalf("mh kept %.0f%% of the clients of remaining servers, want >= 85%%", 100*frac)
	}
}

// TestHSipHash: hsiphash is deterministic and keyed (no reference
// vector for SipHash-1-3 is at hand; the MH table tests cover its use).
func TestHSipHash(t *testing.T) {
	// Stability: the same input always hashes the same; different keys
	// give different permutations.
	a := HSipHash32(0xC6130001, mhKey1)
	if a != HSipHash32(0xC6130001, mhKey1) {
		t.Fatal("not deterministic")
	}
	if a == HSipHash32(0xC6130001, mhKey2) {
		t.Fatal("keys do not matter")
	}
}

// TestKernelOrder: destinations added later come first in the list.
func TestKernelOrder(t *testing.T) {
	d := dests(1, 2, 3)
	k := KernelOrder(d)
	if k[0] != d[2] || k[2] != d[0] {
		t.Fatal("KernelOrder does not reverse the add order")
	}
}
