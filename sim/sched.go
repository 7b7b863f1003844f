package sim

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"
)

// Dest is one IPVS real server as a scheduler sees it (struct ip_vs_dest):
// address, weight and connection counters. Active counts ESTABLISHED
// connections, Inactive the others still in the connection table.
type Dest struct {
	Addr     netip.Addr
	Port     uint16
	Weight   int
	Active   int
	Inactive int
	// Overloaded is IP_VS_DEST_F_OVERLOAD (upper threshold reached).
	Overloaded bool
}

// overhead is ip_vs_dest_conn_overhead (include/net/ip_vs.h):
// (activeconns << 8) + inactconns.
func (d *Dest) overhead() int64 { return int64(d.Active)<<8 + int64(d.Inactive) }

// Conn is what a scheduler may look at of a new connection.
type Conn struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
}

// Scheduler chooses a real server for a new connection, as the kernel's
// IPVS scheduler of the same name does. Dests are in the kernel's list
// order: ip_vs_ctl.c adds each new destination at the head of
// svc->destinations (list_add_rcu), so the list is the reverse of the
// order real servers were added. Schedule returns an index into dests, or
// -1 when the kernel would find no destination.
type Scheduler interface {
	Name() string
	// Update is called after the destination list changed (the
	// scheduler's add_dest/del_dest/upd_dest hooks).
	Update(dests []*Dest)
	Schedule(dests []*Dest, c Conn) int
}

// NewScheduler returns the simulator of the named IPVS scheduler (rr,
// wrr, lc, wlc, lblc, lblcr, dh, sh, sed, nq, mh), initialised for dests
// (init_service).
func NewScheduler(name string, dests []*Dest) (Scheduler, error) {
	var s Scheduler
	switch name {
	case "rr", "":
		s = &rrSched{cur: -1}
	case "wrr":
		s = &wrrSched{}
	case "lc":
		s = lcSched{}
	case "wlc":
		s = wlcSched{}
	case "sed":
		s = sedSched{}
	case "nq":
		s = nqSched{}
	case "sh":
		s = &shSched{}
	case "dh":
		s = &dhSched{}
	case "mh":
		s = &mhSched{}
	case "lblc":
		s = &lblcSched{cache: map[netip.Addr]int{}}
	case "lblcr":
		s = &lblcrSched{sets: map[netip.Addr][]int{}}
	default:
		return nil, fmt.Errorf("sim: unknown IPVS scheduler %q", name)
	}
	s.Update(dests)
	return s, nil
}

// KernelOrder returns dests in svc->destinations order for real servers
// added in the order given (each goes to the list head).
func KernelOrder(added []*Dest) []*Dest {
	out := make([]*Dest, len(added))
	for i, d := range added {
		out[len(added)-1-i] = d
	}
	return out
}

// rrSched is ip_vs_rr.c: a cursor into the list; the next available
// destination after it (weight > 0, not overloaded), wrapping through
// the list head. The cursor starts at the head.
type rrSched struct{ cur int } // -1 = list head

func (s *rrSched) Name() string { return "rr" }
func (s *rrSched) Update(dests []*Dest) {
	if s.cur >= len(dests) {
		s.cur = -1 // the cursor's destination went away
	}
}
func (s *rrSched) Schedule(dests []*Dest, _ Conn) int {
	avail := func(i int) bool { return !dests[i].Overloaded && dests[i].Weight > 0 }
	// First pass: from after the cursor to the list head.
	for i := s.cur + 1; i < len(dests); i++ {
		if avail(i) {
			s.cur = i
			return i
		}
	}
	if s.cur < 0 {
		return -1 // started at the head: every destination was checked
	}
	// Second pass: from the head up to and including the cursor.
	for i := 0; i <= s.cur && i < len(dests); i++ {
		if avail(i) {
			s.cur = i
			return i
		}
	}
	return -1
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// wrrSched is ip_vs_wrr.c: interleaved weighted round robin. mark.cl is
// the current position, cw the current weight, which drops by di (the gcd
// of the weights) each time the walk passes the list head, from mw (the
// largest weight - (di - 1)); a destination is chosen when its weight is
// >= cw.
type wrrSched struct {
	cl         int // -1 = list head
	cw, mw, di int
}

func (s *wrrSched) Name() string { return "wrr" }

// Update is ip_vs_wrr_dest_changed.
func (s *wrrSched) Update(dests []*Dest) {
	g, mx := 0, 0
	for _, d := range dests {
		if d.Weight > 0 {
			if g > 0 {
				g = gcd(d.Weight, g)
			} else {
				g = d.Weight
			}
		}
		mx = max(mx, d.Weight)
	}
	if g == 0 {
		g = 1
	}
	s.cl = -1
	s.di = g
	s.mw = mx - (g - 1)
	if s.cw > s.mw || s.cw == 0 {
		s.cw = s.mw
	} else if s.di > 1 {
		s.cw = (s.cw/s.di)*s.di + 1
	}
}

// Schedule is ip_vs_wrr_schedule.
func (s *wrrSched) Schedule(dests []*Dest, _ Conn) int {
	if s.mw <= 0 {
		return -1
	}
	last := s.cl
	stop := -2 // none
	lastPass, restarted := false, false
	i := s.cl
	for {
		for i = i + 1; i < len(dests); i++ {
			d := dests[i]
			if !d.Overloaded && d.Weight >= s.cw {
				s.cl = i
				return i
			}
			if i == stop {
				return -1
			}
		}
		i = -1 // passed the list head
		s.cw -= s.di
		if s.cw <= 0 {
			s.cw = s.mw
			if lastPass || last == -1 {
				return -1
			}
			restarted = true
		}
		lastPass = s.cw <= s.di
		if lastPass && restarted && last != -1 {
			stop = last
		}
	}
}

// lcSched is ip_vs_lc.c: the available destination with the least
// overhead (active<<8 + inactive); ties keep the first in list order.
type lcSched struct{}

func (lcSched) Name() string   { return "lc" }
func (lcSched) Update([]*Dest) {}
func (lcSched) Schedule(dests []*Dest, _ Conn) int {
	least := -1
	var loh int64
	for i, d := range dests {
		if d.Overloaded || d.Weight == 0 {
			continue
		}
		if doh := d.overhead(); least < 0 || doh < loh {
			least, loh = i, doh
		}
	}
	return least
}

// leastWeighted is the two-stage loop of ip_vs_wlc.c and ip_vs_sed.c:
// the first available destination with weight > 0, then any later one
// (not overloaded) with loh·w > doh·w_least.
func leastWeighted(dests []*Dest, oh func(*Dest) int64) int {
	least := -1
	var loh int64
	for i, d := range dests {
		if !d.Overloaded && d.Weight > 0 {
			least, loh = i, oh(d)
			break
		}
	}
	if least < 0 {
		return -1
	}
	for i := least + 1; i < len(dests); i++ {
		d := dests[i]
		if d.Overloaded {
			continue
		}
		doh := oh(d)
		if loh*int64(d.Weight) > doh*int64(dests[least].Weight) {
			least, loh = i, doh
		}
	}
	return least
}

// wlcSched is ip_vs_wlc.c: least overhead/weight.
type wlcSched struct{}

func (wlcSched) Name() string   { return "wlc" }
func (wlcSched) Update([]*Dest) {}
func (wlcSched) Schedule(dests []*Dest, _ Conn) int {
	return leastWeighted(dests, (*Dest).overhead)
}

// sedSched is ip_vs_sed.c: shortest expected delay, (active+1)/weight.
type sedSched struct{}

func (sedSched) Name() string   { return "sed" }
func (sedSched) Update([]*Dest) {}
func (sedSched) Schedule(dests []*Dest, _ Conn) int {
	return leastWeighted(dests, func(d *Dest) int64 { return int64(d.Active) + 1 })
}

// nqSched is ip_vs_nq.c: an idle destination (no active connection) at
// once, else shortest expected delay.
type nqSched struct{}

func (nqSched) Name() string   { return "nq" }
func (nqSched) Update([]*Dest) {}
func (nqSched) Schedule(dests []*Dest, _ Conn) int {
	least := -1
	var loh int64
	for i, d := range dests {
		if d.Overloaded || d.Weight == 0 {
			continue
		}
		doh := int64(d.Active) + 1
		if d.Active == 0 {
			return i
		}
		if least < 0 || loh*int64(d.Weight) > doh*int64(dests[least].Weight) {
			least, loh = i, doh
		}
	}
	return least
}

// hash32 is the kernel's hash_32 (include/linux/hash.h): val·GOLDEN_RATIO_32
// >> (32 - bits).
func hash32(val uint32, bits uint) uint32 { return (val * 0x61C88647) >> (32 - bits) }

func addrU32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

// IPVS table sizes (CONFIG_IP_VS_SH_TAB_BITS, CONFIG_IP_VS_DH_TAB_BITS,
// CONFIG_IP_VS_LBLC_TAB_BITS defaults; CONFIG_IP_VS_MH_TAB_INDEX 12).
const (
	shTabBits = 8
	dhTabBits = 8
	// MHTableSize is IP_VS_MH_TAB_SIZE: primes[CONFIG_IP_VS_MH_TAB_INDEX - 8].
	MHTableSize = 4093
	mhTabBits   = 12 / 2
)

// fillBuckets is ip_vs_sh_assign: the buckets take the destinations in
// list order, each repeated weight times (weight 1 when weighted is
// false, as ip_vs_dh_assign).
func fillBuckets(dests []*Dest, size int, weighted bool) []int {
	b := make([]int, size)
	if len(dests) == 0 {
		for i := range b {
			b[i] = -1
		}
		return b
	}
	p, count := 0, 0
	for i := range b {
		b[i] = p
		count++
		w := 1
		if weighted {
			w = dests[p].Weight
		}
		if count >= w {
			p = (p + 1) % len(dests)
			count = 0
		}
	}
	return b
}

func unavailable(d *Dest) bool { return d.Weight <= 0 || d.Overloaded }

// shSched is ip_vs_sh.c without the fallback and port flags: the source
// address hashes (hash_32 over 8 bits) into 256 buckets filled by weight.
type shSched struct{ buckets []int }

func (s *shSched) Name() string         { return "sh" }
func (s *shSched) Update(dests []*Dest) { s.buckets = fillBuckets(dests, 1<<shTabBits, true) }
func (s *shSched) Schedule(dests []*Dest, c Conn) int {
	i := s.buckets[hash32(addrU32(c.Src), shTabBits)&(1<<shTabBits-1)]
	if i < 0 || unavailable(dests[i]) {
		return -1
	}
	return i
}

// dhSched is ip_vs_dh.c: the destination address (the ClusterIP, so one
// server per service) hashes as addr·2654435761 & mask into 256 buckets.
type dhSched struct{ buckets []int }

func (s *dhSched) Name() string         { return "dh" }
func (s *dhSched) Update(dests []*Dest) { s.buckets = fillBuckets(dests, 1<<dhTabBits, false) }
func (s *dhSched) Schedule(dests []*Dest, c Conn) int {
	i := s.buckets[(addrU32(c.Dst)*2654435761)&(1<<dhTabBits-1)]
	if i < 0 || unavailable(dests[i]) {
		return -1
	}
	return i
}

// lblcOverloaded is is_overloaded of ip_vs_lblc.c and ip_vs_lblcr.c.
func lblcOverloaded(d *Dest, dests []*Dest) bool {
	if d.Active > d.Weight {
		for _, o := range dests {
			if o.Active*2 < o.Weight {
				return true
			}
		}
	}
	return false
}

// lblcSched is ip_vs_lblc.c: a cache from destination address to server;
// a miss, or a cached server that is unavailable or overloaded, is
// scheduled as wlc and cached. (Cache expiry, 24 h idle, never happens in
// a benchmark.)
type lblcSched struct{ cache map[netip.Addr]int }

func (s *lblcSched) Name() string         { return "lblc" }
func (s *lblcSched) Update(dests []*Dest) { clear(s.cache) }
func (s *lblcSched) Schedule(dests []*Dest, c Conn) int {
	if i, ok := s.cache[c.Dst]; ok && i < len(dests) {
		d := dests[i]
		if d.Weight > 0 && !lblcOverloaded(d, dests) {
			return i
		}
	}
	i := leastWeighted(dests, (*Dest).overhead)
	if i >= 0 {
		s.cache[c.Dst] = i
	}
	return i
}

// lblcrSched is ip_vs_lblcr.c: a set of servers per destination address;
// the least loaded member (overhead/weight) unless overloaded, else a wlc
// choice added to the set. (The set shrinks only after
// lblcr_expiration, 24 h, so never within a benchmark.)
type lblcrSched struct{ sets map[netip.Addr][]int }

func (s *lblcrSched) Name() string         { return "lblcr" }
func (s *lblcrSched) Update(dests []*Dest) { clear(s.sets) }
func (s *lblcrSched) Schedule(dests []*Dest, c Conn) int {
	set, ok := s.sets[c.Dst]
	if ok {
		// ip_vs_dest_set_min: members in set order (newest first).
		least := -1
		var loh int64
		for _, i := range set {
			d := dests[i]
			if d.Overloaded || d.Weight <= 0 {
				continue
			}
			if least < 0 {
				least, loh = i, d.overhead()
				continue
			}
			if doh := d.overhead(); loh*int64(d.Weight) > doh*int64(dests[least].Weight) {
				least, loh = i, doh
			}
		}
		if least >= 0 && !lblcOverloaded(dests[least], dests) {
			return least
		}
	}
	i := leastWeighted(dests, (*Dest).overhead)
	if i < 0 {
		return -1
	}
	for _, j := range set {
		if j == i {
			return i
		}
	}
	s.sets[c.Dst] = append([]int{i}, set...)
	return i
}

// mhSched is ip_vs_mh.c (Maglev hashing) without the fallback and port
// flags: every destination gets a permutation of the 4093-entry table
// from two hsiphash values of its address and port; the table is filled
// round by round (turns = weight/gcd >> rshift entries per round), and a
// connection's source address hashes into it.
type mhSched struct{ table []int }

func (s *mhSched) Name() string { return "mh" }

// mh hash keys (generate_hash_secret).
var mhKey1 = [2]uint64{2654435761, 2654435761}
var mhKey2 = [2]uint64{2654446892, 2654446892}

// mhHash is ip_vs_mh_hashkey: hsiphash of the u32 offset + port + addr.
func mhHash(addr netip.Addr, port uint16, key [2]uint64, offset uint32) uint32 {
	return HSipHash32(offset+uint32(port)+addrU32(addr), key)
}

// Update is ip_vs_mh_dest_changed: gcd, rshift, permutate, populate.
func (s *mhSched) Update(dests []*Dest) {
	const size = MHTableSize
	s.table = make([]int, size)
	for i := range s.table {
		s.table[i] = -1
	}
	g := 0
	mw := 0
	for _, d := range dests {
		if d.Weight > 0 {
			if g > 0 {
				g = gcd(d.Weight, g)
			} else {
				g = d.Weight
			}
		}
		mw = max(mw, d.Weight)
	}
	if g < 1 {
		return
	}
	rshift := max(bits.Len(uint(mw/g))-mhTabBits, 0)
	type setup struct{ offset, skip, perm, turns int }
	ds := make([]setup, len(dests))
	for i, d := range dests {
		off := int(mhHash(d.Addr, d.Port, mhKey1, 0) % size)
		skip := int(mhHash(d.Addr, d.Port, mhKey2, 0)%(size-1)) + 1
		lw := d.Weight
		t := (lw / g) >> rshift
		if t == 0 && lw != 0 {
			t = 1
		}
		ds[i] = setup{off, skip, off, t}
	}
	used := make([]bool, size)
	n, dt := 0, 0
	p := 0
	for n < size {
		if p == len(dests) {
			p = 0
		}
		for p < len(dests) {
			d := &ds[p]
			if d.turns < 1 {
				p++
				continue
			}
			c := d.perm
			for used[c] {
				d.perm += d.skip
				if d.perm >= size {
					d.perm -= size
				}
				c = d.perm
			}
			used[c] = true
			s.table[c] = p
			n++
			if n == size {
				return
			}
			dt++
			if dt >= d.turns {
				dt = 0
				p++
			}
		}
	}
}

// Schedule is ip_vs_mh_get.
func (s *mhSched) Schedule(dests []*Dest, c Conn) int {
	i := s.table[mhHash(c.Src, 0, mhKey1, 0)%MHTableSize]
	if i < 0 || unavailable(dests[i]) {
		return -1
	}
	return i
}

// Table returns the Maglev lookup table (destination index per entry).
func (s *mhSched) Table() []int { return s.table }

// HSipHash32 is the kernel's hsiphash of one u32 (lib/siphash.c) on a
// 64-bit machine, where HalfSipHash is replaced by SipHash-1-3 with a
// 128-bit key: the message is the 4 bytes of v (little-endian memory
// order, as &v in C) and the result the low 32 bits of the 64-bit hash.
func HSipHash32(v uint32, key [2]uint64) uint32 {
	v0 := uint64(0x736f6d6570736575) ^ key[0]
	v1 := uint64(0x646f72616e646f6d) ^ key[1]
	v2 := uint64(0x6c7967656e657261) ^ key[0]
	v3 := uint64(0x7465646279746573) ^ key[1]
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13)
		v1 ^= v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16)
		v3 ^= v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21)
		v3 ^= v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17)
		v1 ^= v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	// Length 4: no full 8-byte word; the last word is len<<56 | bytes.
	b := uint64(4)<<56 | uint64(v)
	v3 ^= b
	round()
	v0 ^= b
	v2 ^= 0xff
	round()
	round()
	round()
	return uint32((v0 ^ v1) ^ (v2 ^ v3))
}
