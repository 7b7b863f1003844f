package sim

import (
	"fmt"
	"math"
	"math/rand"
	"net/netip"
	"strconv"
	"time"

	"github.com/proxybench/proxybench/proxymodes/userspace/balance"
	"github.com/proxybench/proxybench/workload"
)

// StatisticChoice picks the endpoint a KUBE-SVC chain of n endpoints
// sends a new connection to: rule i (i < n-1) matches with
// "--probability 1/(n-i)" as rendered ("%0.10f", parsed by iptables into
// u32 = round(0x80000000·p)) when xt_statistic's get_random_u32() &
// 0x7FFFFFFF is below it (net/netfilter/xt_statistic.c); the last rule
// always matches. It also returns the KUBE-SVC rules evaluated.
func StatisticChoice(n int, rng *rand.Rand) (endpoint, rules int) {
	for i := 0; i < n-1; i++ {
		if rng.Uint32()&0x7FFFFFFF < statProb(n-i) {
			return i, i + 1
		}
	}
	return n - 1, n
}

// statProbs caches statProb for small n (read-only after init).
var statProbs = func() []uint32 {
	out := make([]uint32, 257)
	for m := 1; m < len(out); m++ {
		out[m] = computeStatProb(m)
	}
	return out
}()

func statProb(m int) uint32 {
	if m < len(statProbs) {
		return statProbs[m]
	}
	return computeStatProb(m)
}

// computeStatProb is iptables' parse of "--probability" (libxt_statistic:
// lround(0x80000000 * p)) applied to kube-proxy's "%0.10f" of 1/m.
func computeStatProb(m int) uint32 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(1/float64(m), 'f', 10, 64), 64)
	return uint32(math.Round(0x80000000 * f))
}

// NumgenChoice is nftables' "numgen random mod n" (net/netfilter/
// nft_numgen.c, nft_ng_random_gen): reciprocal_scale(get_random_u32(), n),
// that is (u64(r)·n) >> 32.
func NumgenChoice(n int, rng *rand.Rand) int {
	return int((uint64(rng.Uint32()) * uint64(n)) >> 32)
}

// chooser picks an endpoint index (into the service's ready endpoints)
// for each new connection of one fixed-position service, as the mode's
// data path does, and reports when a connection ends.
type chooser interface {
	choose(c Conn, now time.Duration) (int, error)
	done(ep int, now time.Duration)
}

type randomChooser struct {
	n   int
	rng *rand.Rand
	nft bool
}

func (r *randomChooser) choose(Conn, time.Duration) (int, error) {
	if r.n == 0 {
		return -1, fmt.Errorf("no ready endpoint")
	}
	if r.nft {
		return NumgenChoice(r.n, r.rng), nil
	}
	ep, _ := StatisticChoice(r.n, r.rng)
	return ep, nil
}
func (r *randomChooser) done(int, time.Duration) {}

// userspaceChooser is the legacy userspace proxier's round robin, the
// same balance.Balancer the real mode runs.
type userspaceChooser struct {
	b     *balance.Balancer
	index map[netip.AddrPort]int
}

func newUserspaceChooser(eps []workload.Endpoint, target uint16, rng *rand.Rand) *userspaceChooser {
	u := &userspaceChooser{index: map[netip.AddrPort]int{}}
	u.b = balance.NewBalancer(balance.Affinity{}, nil, func(a []netip.AddrPort) {
		rng.Shuffle(len(a), func(i, j int) { a[i], a[j] = a[j], a[i] })
	})
	var list []netip.AddrPort
	for i, e := range eps {
		ap := netip.AddrPortFrom(e.IP, target)
		list = append(list, ap)
		u.index[ap] = i
	}
	u.b.Update(list)
	return u
}

func (u *userspaceChooser) choose(c Conn, _ time.Duration) (int, error) {
	ap, err := u.b.Next(c.Src, false)
	if err != nil {
		return -1, err
	}
	return u.index[ap], nil
}
func (u *userspaceChooser) done(int, time.Duration) {}

// ipvsChooser runs an IPVS scheduler over the service's real servers with
// connection counters: a connection is active while open and inactive
// (TCP CLOSE state after the driver's RST) for ipvsCloseTimeout after.
type ipvsChooser struct {
	sched  Scheduler
	dests  []*Dest // kernel list order
	toEp   []int   // dests index -> endpoint index
	expiry []closed
}

type closed struct {
	at   time.Duration
	dest int
}

// ipvsCloseTimeout is IPVS's TCP CLOSE state timeout (ip_vs_proto_tcp.c,
// tcp_timeouts[IP_VS_TCP_S_CLOSE] = 10 s).
const ipvsCloseTimeout = 10 * time.Second

func newIPVSChooser(sched string, eps []workload.Endpoint, target uint16) (*ipvsChooser, error) {
	added := make([]*Dest, len(eps))
	for i, e := range eps {
		w := e.Weight
		if w < 1 {
			w = 1
		}
		added[i] = &Dest{Addr: e.IP, Port: target, Weight: w}
	}
	dests := KernelOrder(added)
	toEp := make([]int, len(dests))
	for i := range dests {
		toEp[i] = len(dests) - 1 - i
	}
	s, err := NewScheduler(sched, dests)
	if err != nil {
		return nil, err
	}
	return &ipvsChooser{sched: s, dests: dests, toEp: toEp}, nil
}

func (v *ipvsChooser) choose(c Conn, now time.Duration) (int, error) {
	for len(v.expiry) > 0 && v.expiry[0].at <= now {
		v.dests[v.expiry[0].dest].Inactive--
		v.expiry = v.expiry[1:]
	}
	i := v.sched.Schedule(v.dests, c)
	if i < 0 {
		return -1, fmt.Errorf("ipvs %s: no destination available", v.sched.Name())
	}
	v.dests[i].Active++
	return v.toEp[i], nil
}

func (v *ipvsChooser) done(ep int, now time.Duration) {
	i := len(v.dests) - 1 - ep
	v.dests[i].Active--
	v.dests[i].Inactive++
	v.expiry = append(v.expiry, closed{now + ipvsCloseTimeout, i})
}

// affinityChooser is ClientIP session affinity over another chooser: a
// client address whose last connection is less than timeout ago goes to
// the same endpoint, and each connection renews it (iptables' "-m recent
// --rcheck --seconds T" then --set, IPVS persistence templates, the
// userspace proxy's sessions); other connections ask the inner chooser.
type affinityChooser struct {
	inner   chooser
	timeout time.Duration
	last    map[netip.Addr]pin
	// pinned counts open pinned connections per endpoint: their done is
	// not the inner chooser's.
	pinned map[int]int
}

type pin struct {
	ep int
	at time.Duration
}

func newAffinityChooser(inner chooser, timeout time.Duration) *affinityChooser {
	return &affinityChooser{inner: inner, timeout: timeout, last: map[netip.Addr]pin{}, pinned: map[int]int{}}
}

func (a *affinityChooser) choose(c Conn, now time.Duration) (int, error) {
	if p, ok := a.last[c.Src]; ok && now-p.at < a.timeout {
		a.last[c.Src] = pin{p.ep, now}
		a.pinned[p.ep]++
		return p.ep, nil
	}
	ep, err := a.inner.choose(c, now)
	if err == nil {
		a.last[c.Src] = pin{ep, now}
	}
	return ep, err
}

func (a *affinityChooser) done(ep int, now time.Duration) {
	if a.pinned[ep] > 0 {
		a.pinned[ep]--
		return
	}
	a.inner.done(ep, now)
}
