//go:build linux

package conntrack_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/iptables"
	"github.com/proxybench/proxybench/proxymodes/nftables"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/traffic"
)

var (
	clusterIP = netip.MustParseAddr("198.18.0.10")
	epA       = netip.MustParseAddr("198.19.0.1")
	epB       = netip.MustParseAddr("198.19.0.2")
)

func dnsService(eps ...netip.Addr) []workload.Service {
	s := workload.Service{Namespace: "pb", Name: "dns", ClusterIP: clusterIP,
		Ports: []workload.ServicePort{{Name: "dns-udp", Port: 53, TargetPort: 5353, Protocol: "UDP"}}}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, workload.Endpoint{IP: e, Ready: true, Weight: 1})
	}
	return []workload.Service{s}
}

// udpClient is one fixed-source-port UDP client (one conntrack entry).
type udpClient struct {
	t   *testing.T
	c   *net.UDPConn
	seq uint64
}

// probe sends n datagrams and returns the endpoint that answered each
// (the zero Addr for no answer within 500 ms, or a refusal).
func (u *udpClient) probe(n int) []netip.Addr {
	out := make([]netip.Addr, n)
	for i := range out {
		u.seq++
		ap, _, err := traffic.UDPExchange(u.c, u.seq, 500*time.Millisecond)
		var ne net.Error
		switch {
		case err == nil:
			out[i] = ap.Addr()
		case errors.As(err, &ne) && ne.Timeout(), isRefused(err):
		default:
			u.t.Fatalf("UDP exchange: %v", err)
		}
	}
	return out
}

// first probes until an endpoint answers, at most 10 datagrams (5 s): the
// flow's first answer, which on a loaded machine can take longer than one
// probe's 500 ms (its retries use the same source port, so the same
// conntrack entry). The zero Addr when none answered.
func (u *udpClient) first() netip.Addr {
	for range 10 {
		if a := u.probe(1)[0]; a.IsValid() {
			return a
		}
	}
	return netip.Addr{}
}

func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

func all(got []netip.Addr, want netip.Addr) bool {
	for _, g := range got {
		if g != want {
			return false
		}
	}
	return len(got) > 0
}

type newProxier func(node *topology.Netns, cleanup bool) proxymodes.Proxier

var modes = map[string]struct {
	bins []string
	make newProxier
}{
	"iptables": {[]string{"iptables-legacy-restore", "iptables-legacy"}, func(n *topology.Netns, clean bool) proxymodes.Proxier {
		return iptables.New(iptables.Config{Backend: iptables.BackendLegacy, NoConntrackCleanup: !clean}, n)
	}},
	"nftables": {[]string{"nft"}, func(n *topology.Netns, clean bool) proxymodes.Proxier {
		return nftables.New(nftables.Config{NoConntrackCleanup: !clean}, n)
	}},
}

// testbed builds one client, one node programmed by the mode and the AnyIP
// backend with a UDP echo on 5353, and a client on fixed source port 5000.
func testbed(t *testing.T, mode string, clean bool) (proxymodes.Proxier, *udpClient) {
	m := modes[mode]
	testenv.RequireKernel(t, m.bins...)
	tb, err := topology.Build(context.Background(), topology.Spec{
		RunID: topology.NewRunID(), ClientPods: 1,
		ServiceCIDR: netip.MustParsePrefix("198.18.0.0/16"), PodCIDR: netip.MustParsePrefix("198.19.0.0/17"),
		NodeCIDR: netip.MustParsePrefix("198.19.255.0/24"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tb.Teardown(); err != nil {
			t.Error(err)
		}
	})
	echo, err := traffic.StartUDPEchoIn([]*topology.Netns{tb.Backend}, []uint16{5353})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(echo.Close)
	c, err := traffic.DialUDP(tb.Clients[0], 5000, netip.AddrPortFrom(clusterIP, 53))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	p := m.make(tb.Node, clean)
	t.Cleanup(func() { _ = p.Cleanup(context.Background()) })
	return p, &udpClient{t: t, c: c}
}

func sync(t *testing.T, p proxymodes.Proxier, svcs []workload.Service) proxymodes.SyncStats {
	t.Helper()
	st, err := p.Sync(context.Background(), svcs)
	if err != nil {
		t.Fatal(err)
	}
	if st.ConntrackError != "" {
		t.Fatalf("conntrack step: %s", st.ConntrackError)
	}
	return st
}

// TestKernelTransitions checks, per mode, the direction of each UDP
// transition with a fixed-source-port client on the real kernel: without
// kube-proxy's conntrack cleanup the client stays on a stale entry (black-
// holed, or answered by a removed endpoint's address); with it, the first
// datagram after the sync that made the change reaches a live endpoint.
func TestKernelTransitions(t *testing.T) {
	for _, mode := range []string{"iptables", "nftables"} {
		for _, clean := range []bool{false, true} {
			name := mode + "/no-cleanup"
			if clean {
				name = mode + "/cleanup"
			}
			t.Run(name+"/0to1-new-service", func(t *testing.T) {
				// The node already proxies another service (so its conntrack
				// hooks run); datagrams to a ClusterIP it does not know yet
				// are routed on un-NATed and dropped, and their entry stays.
				p, u := testbed(t, mode, clean)
				other := dnsService(epB)[0]
				other.Name, other.ClusterIP = "other", clusterIP.Next()
				sync(t, p, []workload.Service{other})
				if got := u.probe(3); !all(got, netip.Addr{}) {
					t.Fatalf("before the service exists: answers %v, want none", got)
				}
				st := sync(t, p, append(dnsService(epA), other))
				got := u.probe(5)
				if clean && (!all(got, epA) || st.ConntrackDeleted < 1) {
					t.Errorf("with cleanup: answers %v after a sync deleting %d entries, want all from %s", got, st.ConntrackDeleted, epA)
				}
				if !clean && !all(got, netip.Addr{}) {
					t.Errorf("without cleanup: answers %v, want none (stale un-NATed entry)", got)
				}
			})
			t.Run(name+"/endpoint-removal", func(t *testing.T) {
				p, u := testbed(t, mode, clean)
				sync(t, p, dnsService(epA, epB))
				first := u.first()
				if first != epA && first != epB {
					t.Fatalf("first answer from %v, want %s or %s", first, epA, epB)
				}
				other := epA
				if first == epA {
					other = epB
				}
				sync(t, p, dnsService(other))
				got := u.probe(5)
				if clean && !all(got, other) {
					t.Errorf("with cleanup: answers %v, want all from the live endpoint %s", got, other)
				}
				if !clean && !all(got, first) {
					t.Errorf("without cleanup: answers %v, want all still from the removed endpoint %s", got, first)
				}
			})
			t.Run(name+"/terminating", func(t *testing.T) {
				// A terminating endpoint still serves: kube-proxy's cleanup
				// keeps the flows to it (IsServing), new flows avoid it.
				p, u := testbed(t, mode, clean)
				sync(t, p, dnsService(epA, epB))
				first := u.first()
				if first != epA && first != epB {
					t.Fatalf("first answer from %v", first)
				}
				svcs := dnsService(epA, epB)
				for i := range svcs[0].Endpoints {
					if svcs[0].Endpoints[i].IP == first {
						svcs[0].Endpoints[i] = workload.Endpoint{IP: first, Serving: true, Terminating: true, Weight: 1}
					}
				}
				st := sync(t, p, svcs)
				if got := u.probe(5); !all(got, first) || st.ConntrackDeleted != 0 {
					t.Errorf("after marking %s terminating: answers %v, %d entries deleted; want its flow kept (still serving)", first, got, st.ConntrackDeleted)
				}
			})
			t.Run(name+"/restart-1to0to1", func(t *testing.T) {
				p, u := testbed(t, mode, clean)
				sync(t, p, dnsService(epA))
				if got := u.probe(1); !all(got, epA) {
					t.Fatalf("answers %v, want %s", got, epA)
				}
				sync(t, p, dnsService())
				// 0 endpoints: kube-proxy leaves the entries alone; the mode's
				// reject applies to new flows only.
				if got := u.probe(2); !all(got, epA) {
					t.Fatalf("with 0 endpoints: answers %v, want the stale entry to %s", got, epA)
				}
				sync(t, p, dnsService(epB))
				got := u.probe(5)
				if clean && !all(got, epB) {
					t.Errorf("with cleanup: answers %v, want all from the new endpoint %s", got, epB)
				}
				if !clean && !all(got, epA) {
					t.Errorf("without cleanup: answers %v, want all still from the old endpoint %s", got, epA)
				}
			})
		}
	}
}
