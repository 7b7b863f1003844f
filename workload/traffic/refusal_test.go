//go:build linux

package traffic_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload/traffic"
)

// TestRefusalTime pins down why a connection to a service without
// endpoints can take a second to be refused. The node REJECTs it with
// ICMP port unreachable (what every mode does for such a service):
//   - with the node's stock net.ipv4.icmp_ratelimit (1000 ms per
//     destination, burst 6) the first 6 refusals are immediate and the
//     following ones wait for the SYN retransmission at 1 s, and the
//     node's Icmp.OutRateLimitHost counter says it withheld answers;
//   - with net.ipv4.icmp_ratelimit = 0 in the node namespace every
//     refusal is immediate (< 50 ms) and nothing is withheld;
//   - a blocking connect(2) is refused only after about 1 s even then: the
//     answer arrives over veth in the same softirq while connect holds the
//     socket lock (the client's TcpExt.LockDroppedIcmps rises), so it is
//     kept as a soft error until the retransmitted SYN's answer. The
//     driver connects non-blocking and polls, as Go's net.Dial does.
func TestRefusalTime(t *testing.T) {
	testenv.RequireKernel(t, "iptables")
	before := testenv.RootSnapshot(t)
	tb, err := topology.Build(context.Background(), topology.Spec{
		RunID: topology.NewRunID(), ClientPods: 1,
		ServiceCIDR: netip.MustParsePrefix("198.18.0.0/16"), PodCIDR: netip.MustParsePrefix("198.19.0.0/17"),
		NodeCIDR: netip.MustParsePrefix("198.19.255.0/24"),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tb.Teardown(); err != nil {
			t.Error(err)
		}
		testenv.CompareRoot(t, before, testenv.RootSnapshot(t))
	}()
	vip := netip.MustParseAddr("198.18.0.1")
	if _, err := tb.Node.Run(context.Background(), nil, "iptables", "-w", "5", "-A", "FORWARD", "-d", vip.String()+"/32", "-p", "tcp", "--dport", "80", "-j", "REJECT"); err != nil {
		t.Fatal(err)
	}
	counter := func(n *topology.Netns, key string) int64 {
		t.Helper()
		m, err := n.NetCounters()
		if err != nil {
			t.Fatal(err)
		}
		return m[key]
	}
	// refusals makes n connections from the client and returns how long
	// each took to be refused.
	refusals := func(n int, blocking bool) []time.Duration {
		t.Helper()
		var out []time.Duration
		err := tb.Clients[0].Do(func() error {
			for i := 0; i < n; i++ {
				var lat time.Duration
				var err error
				if blocking {
					lat, err = blockingConnect(vip, 80, 3*time.Second)
				} else {
					_, _, lat, err = traffic.DialEcho(vip, 80, 3*time.Second)
				}
				if k := traffic.ErrorKind(err); k != "refused" {
					t.Fatalf("connection %d: %v (%s), want refused", i, err, k)
				}
				out = append(out, lat)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	// Stock first: the client's inet_peer entry in the node is new, so
	// its bucket holds the full burst.
	limited0 := counter(tb.Node, "Icmp.OutRateLimitHost")
	stock := refusals(10, false)
	for i, d := range stock[:6] {
		if d >= 50*time.Millisecond {
			t.Errorf("stock: refusal %d (within the burst of 6) took %v", i+1, d)
		}
	}
	slow := 0
	for _, d := range stock[6:] {
		if d >= 900*time.Millisecond {
			slow++
		}
	}
	if slow < 3 {
		t.Errorf("stock: %d of the 4 refusals after the burst took a SYN retransmission, want >= 3: %v", slow, stock)
	}
	if counter(tb.Node, "Icmp.OutRateLimitHost") == limited0 {
		t.Errorf("stock: the node withheld no ICMP answer (Icmp.OutRateLimitHost unchanged)")
	}

	if err := tb.Node.Sysctl("net/ipv4/icmp_ratelimit", "0"); err != nil {
		t.Fatal(err)
	}
	limited0 = counter(tb.Node, "Icmp.OutRateLimitHost")
	for i, d := range refusals(20, false) {
		if d >= 50*time.Millisecond {
			t.Errorf("icmp_ratelimit 0: refusal %d took %v, want < 50 ms", i+1, d)
		}
	}
	if got := counter(tb.Node, "Icmp.OutRateLimitHost"); got != limited0 {
		t.Errorf("icmp_ratelimit 0: the node still withheld %d answers", got-limited0)
	}

	dropped0 := counter(tb.Clients[0], "TcpExt.LockDroppedIcmps")
	for i, d := range refusals(2, true) {
		if d < 900*time.Millisecond {
			t.Errorf("blocking connect %d refused after %v: the answer was not lock-dropped, the driver's non-blocking connect may be unneeded", i+1, d)
		}
	}
	if counter(tb.Clients[0], "TcpExt.LockDroppedIcmps") == dropped0 {
		t.Errorf("blocking connect: TcpExt.LockDroppedIcmps unchanged")
	}
}

// blockingConnect is a connect(2) on a blocking socket bounded by
// SO_SNDTIMEO, from the calling thread.
func blockingConnect(dst netip.Addr, port int, timeout time.Duration) (time.Duration, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		return 0, err
	}
	start := time.Now()
	for {
		err = unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: dst.As4()})
		if err != unix.EINTR {
			break
		}
		// interrupted: the connect goes on; connecting again reports its state
	}
	return time.Since(start), err
}
