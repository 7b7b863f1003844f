//go:build linux

package topology_test

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload/traffic"
)

// TestBuildIPv6Twins: a testbed built with Spec.IPv6 (two nodes on the
// fabric bridge, a client pod on each) answers IPv6 at once (DAD off):
// each client reaches the twin of a pod address through its node over
// IPv6, the backend sees the client's own IPv6 twin; no namespace has an
// IPv6 default route, the nodes forward IPv6, and the root namespace
// (IPv6 routes, rules and sysctls included) is unchanged.
func TestBuildIPv6Twins(t *testing.T) {
	testenv.RequireKernel(t)
	if ok, why := topology.IPv6Supported(); !ok {
		t.Skip(why)
	}
	before := testenv.RootSnapshot(t)
	p := netip.MustParsePrefix(scenarios.DefaultIPv6Prefix)
	sp := spec(topology.NewRunID(), 2)
	sp.Nodes, sp.IPv6 = 2, p
	tb, err := topology.Build(context.Background(), sp)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Teardown()
	if tb.IPv6 != p {
		t.Fatalf("Testbed.IPv6 %v, want %v", tb.IPv6, p)
	}
	echo, err := traffic.StartEcho(tb.Backend, []uint16{8080})
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	if err := echo.AddIPv6([]*topology.Netns{tb.Backend}, []uint16{8080}); err != nil {
		t.Fatal(err)
	}
	pod := scenarios.Twin6(p, netip.MustParseAddr("198.19.0.42"))
	for i, c := range tb.Clients {
		var landed, peer netip.AddrPort
		err := c.Do(func() error {
			var err error
			landed, peer, _, err = traffic.DialEchoPeer(netip.Addr{}, pod, 8080, 2*time.Second)
			return err
		})
		if err != nil {
			t.Fatalf("client %d: dial [%s]:8080: %v", i, pod, err)
		}
		if landed.Addr() != pod {
			t.Errorf("client %d landed on %s, want %s", i, landed, pod)
		}
		if want := scenarios.Twin6(p, tb.ClientAddrs[i]); peer.Addr() != want {
			t.Errorf("client %d: the backend saw %s, want the client's twin %s", i, peer.Addr(), want)
		}
	}
	for i, n := range tb.Nodes {
		// A node knows its primary addresses (proxymodes.NodeIPer): its
		// fabric address, then that address's twin.
		if got, want := n.NodeIPs(), []netip.Addr{tb.NodeAddrs[i], scenarios.Twin6(p, tb.NodeAddrs[i])}; !slices.Equal(got, want) {
			t.Errorf("%s: NodeIPs %v, want %v", n.Name, got, want)
		}
		if v, err := n.ReadSysctl("net/ipv6/conf/all/forwarding"); err != nil || v != "1" {
			t.Errorf("%s: IPv6 forwarding %q (%v), want 1", n.Name, v, err)
		}
	}
	for _, name := range tb.Names() {
		ns, err := topology.OpenNetns(name)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := ns.ReadSysctl("net/ipv6/conf/default/accept_dad"); err != nil || v != "0" {
			t.Errorf("%s: accept_dad %q (%v), want 0", name, v, err)
		}
		h, err := ns.Netlink()
		if err != nil {
			t.Fatal(err)
		}
		routes, err := h.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Table: 0}, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range routes {
			if r.Dst == nil || r.Dst.String() == "::/0" {
				t.Errorf("%s has an IPv6 default route: %v", name, r)
			}
		}
		h.Close()
		ns.Close()
	}
	echo.Close()
	if err := tb.Teardown(); err != nil {
		t.Fatal(err)
	}
	testenv.CompareRoot(t, before, testenv.RootSnapshot(t))
}
