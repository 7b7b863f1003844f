//go:build linux

package topology_test

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload/traffic"
)

// dialFrom connects from client ns, bound to src, to dst:8080 and returns
// the address the echo server answered on.
func dialFrom(t *testing.T, cl *topology.Netns, src, dst netip.Addr) netip.Addr {
	t.Helper()
	var landed netip.AddrPort
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if err = netns.Set(cl.Handle()); err != nil {
			return
		}
		landed, _, _, err = traffic.DialEchoFrom(src, dst, 8080, 2*time.Second)
	}()
	<-done
	if err != nil {
		t.Fatalf("%s: %s -> %s: %v", cl.Name, src, dst, err)
	}
	return landed.Addr()
}

func checkNoDefaultRoute(t *testing.T, tb *topology.Testbed, id string) {
	t.Helper()
	for _, n := range tb.Names() {
		if !strings.HasPrefix(n, "pb-"+id+"-") {
			t.Errorf("namespace %q lacks the run ID", n)
		}
		ns, err := topology.OpenNetns(n)
		if err != nil {
			t.Fatal(err)
		}
		h, err := ns.Netlink()
		if err != nil {
			t.Fatal(err)
		}
		routes, _ := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: 0}, 0)
		for _, r := range routes {
			if r.Dst == nil || r.Dst.String() == "0.0.0.0/0" {
				t.Errorf("%s has a default route: %v", n, r)
			}
		}
		h.Close()
		ns.Close()
	}
}

func clusterSpec(id string, nodes, clients, addrs int, pods []netip.Addr) topology.Spec {
	s := spec(id, clients)
	s.Nodes, s.ClientAddresses, s.IsolatedPods = nodes, addrs, pods
	s.ClientCIDR = netip.MustParsePrefix("198.19.192.0/19")
	return s
}

// TestClusterShared: 3 nodes on a fabric bridge, 4 client pods (client 3
// back on node 0) with 4 source addresses each, the AnyIP backend host:
// every client reaches pod IPs from every source address through its own
// node, nothing has a default route, the root namespace is unchanged and
// Teardown leaves nothing.
func TestClusterShared(t *testing.T) {
	testenv.RequireKernel(t)
	before := testenv.RootSnapshot(t)
	id := topology.NewRunID()
	tb, err := topology.Build(context.Background(), clusterSpec(id, 3, 4, 4, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Teardown()
	if len(tb.Nodes) != 3 || tb.Fabric == nil || tb.Backend == nil || fmt.Sprint(tb.ClientNode) != "[0 1 2 0]" {
		t.Fatalf("nodes %d fabric %v backend %v clientNode %v", len(tb.Nodes), tb.Fabric, tb.Backend, tb.ClientNode)
	}
	checkNoDefaultRoute(t, tb, id)
	echo, err := traffic.StartEcho(tb.Backend, []uint16{8080})
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	pod := netip.MustParseAddr("198.19.0.7")
	for c, cl := range tb.Clients {
		if len(tb.ClientSources[c]) != 4 {
			t.Fatalf("client %d sources %v", c, tb.ClientSources[c])
		}
		for _, src := range tb.ClientSources[c] {
			if got := dialFrom(t, cl, src, pod); got != pod {
				t.Errorf("client %d from %s landed on %s", c, src, got)
			}
		}
	}
	if err := tb.Teardown(); err != nil {
		t.Fatal(err)
	}
	left, _ := topology.Leftovers()
	for _, n := range left {
		if strings.HasPrefix(n, "pb-"+id) {
			t.Errorf("left behind: %s", n)
		}
	}
	testenv.CompareRoot(t, before, testenv.RootSnapshot(t))
}

// TestClusterIsolatedPods: 2 nodes, 6 isolated pods (3 per node), 2
// clients: every client reaches every pod, across nodes too, and the
// pod's own namespace answers.
func TestClusterIsolatedPods(t *testing.T) {
	testenv.RequireKernel(t)
	id := topology.NewRunID()
	var pods []netip.Addr
	for i := 1; i <= 6; i++ {
		pods = append(pods, netip.AddrFrom4([4]byte{198, 19, 0, byte(i)}))
	}
	tb, err := topology.Build(context.Background(), clusterSpec(id, 2, 2, 2, pods))
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Teardown()
	if tb.Backend != nil || len(tb.Pods) != 6 || tb.PodNode[3] != 1 || tb.PodBuild <= 0 {
		t.Fatalf("backend %v pods %d podNode %v build %v", tb.Backend, len(tb.Pods), tb.PodNode, tb.PodBuild)
	}
	checkNoDefaultRoute(t, tb, id)
	echo, err := traffic.StartEchoIn(tb.Pods, []uint16{8080})
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	for c, cl := range tb.Clients {
		for _, p := range pods {
			for _, src := range tb.ClientSources[c] {
				if got := dialFrom(t, cl, src, p); got != p {
					t.Errorf("client %d -> %s landed on %s", c, p, got)
				}
			}
		}
	}
	t.Logf("6 isolated pods: %v build, %d bytes of MemAvailable", tb.PodBuild, tb.PodMemBytes)
}

// TestExternalClient: 2 nodes, 2 isolated pods (node-1 holds both), the
// external client on the fabric: it reaches a node's own address
// directly (the echo server in node 1 sees the external address, no
// NAT), a pod on node 1 answers the external address back through its
// node, nothing has a default route, and RouteExternal moves the
// LoadBalancer range between nodes.
func TestExternalClient(t *testing.T) {
	testenv.RequireKernel(t)
	before := testenv.RootSnapshot(t)
	id := topology.NewRunID()
	pods := []netip.Addr{netip.MustParseAddr("198.19.0.1"), netip.MustParseAddr("198.19.0.2")}
	s := clusterSpec(id, 2, 1, 1, pods)
	s.PodNodes = []int{1, 1}
	s.ExternalCIDR = netip.MustParsePrefix("198.18.192.0/24")
	lb := netip.MustParsePrefix("198.18.128.0/24")
	s.ExternalVia, s.NodeVia = []netip.Prefix{lb}, []netip.Prefix{lb, s.ServiceCIDR}
	tb, err := topology.Build(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Teardown()
	if tb.External == nil || tb.ExternalAddr != netip.MustParseAddr("198.18.192.1") || fmt.Sprint(tb.PodNode) != "[1 1]" {
		t.Fatalf("external %v at %s, pods on %v", tb.External, tb.ExternalAddr, tb.PodNode)
	}
	checkNoDefaultRoute(t, tb, id)
	echo, err := traffic.StartEcho(tb.Nodes[1], []uint16{8080})
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	var peer netip.AddrPort
	if err := tb.External.Do(func() error {
		var err error
		_, peer, _, err = traffic.DialEchoPeer(netip.Addr{}, tb.NodeAddrs[1], 8080, 2*time.Second)
		return err
	}); err != nil {
		t.Fatalf("external client to node1 %s: %v", tb.NodeAddrs[1], err)
	}
	if peer.Addr() != tb.ExternalAddr {
		t.Errorf("node1 saw %s, want the external client's %s", peer, tb.ExternalAddr)
	}
	// The pod's reply to the external address goes back through its node.
	pecho, err := traffic.StartEcho(tb.Pods[0], []uint16{8081})
	if err != nil {
		t.Fatal(err)
	}
	defer pecho.Close()
	if err := tb.Nodes[1].Do(func() error {
		// From the node, bound to nothing: proves the pod routes the
		// node's fabric address back; the external block's return path
		// is the route checked next.
		_, _, _, err := traffic.DialEchoPeer(netip.Addr{}, pods[0], 8081, 2*time.Second)
		return err
	}); err != nil {
		t.Errorf("node1 to its pod: %v", err)
	}
	out, err := tb.Pods[0].Run(context.Background(), nil, "ip", "route", "get", tb.ExternalAddr.String())
	if err != nil || !strings.Contains(string(out), "via 169.254.1.1") {
		t.Errorf("pod route to the external client: %s %v", out, err)
	}
	// And to a LoadBalancer IP (ExternalVia), the source of an IPVS
	// node's own unmasqueraded connection to it.
	out, err = tb.Pods[0].Run(context.Background(), nil, "ip", "route", "get", "198.18.128.9")
	if err != nil || !strings.Contains(string(out), "via 169.254.1.1") {
		t.Errorf("pod route to a LoadBalancer IP: %s %v", out, err)
	}
	if err := tb.RouteExternal(1); err != nil {
		t.Fatal(err)
	}
	out, err = tb.External.Run(context.Background(), nil, "ip", "route", "get", "198.18.128.9")
	if err != nil || !strings.Contains(string(out), "via "+tb.NodeAddrs[1].String()) {
		t.Errorf("after RouteExternal(1): %s %v", out, err)
	}
	if err := tb.Teardown(); err != nil {
		t.Fatal(err)
	}
	testenv.CompareRoot(t, before, testenv.RootSnapshot(t))
}
