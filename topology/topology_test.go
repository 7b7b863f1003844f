//go:build linux

package topology_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/topology"
)

func spec(runID string, clients int) topology.Spec {
	return topology.Spec{RunID: runID, ClientPods: clients,
		ServiceCIDR: netip.MustParsePrefix("198.18.0.0/16"), PodCIDR: netip.MustParsePrefix("198.19.0.0/17"),
		NodeCIDR: netip.MustParsePrefix("198.19.255.0/24")}
}

// TestBuildIsolatedAndNamed: every namespace carries the run ID, no
// namespace has a default route (no route out of the testbed), the backend
// answers the whole pod CIDR locally, and Teardown removes everything.
func TestBuildIsolatedAndNamed(t *testing.T) {
	testenv.RequireKernel(t)
	before := testenv.RootSnapshot(t)
	id := topology.NewRunID()
	tb, err := topology.Build(context.Background(), spec(id, 3))
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Teardown()
	names := tb.Names()
	if len(names) != 5 {
		t.Fatalf("namespaces %v, want node, backend and 3 clients", names)
	}
	for _, n := range names {
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
		routes, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: 0}, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range routes {
			if r.Dst == nil || r.Dst.String() == "0.0.0.0/0" {
				t.Errorf("%s has a default route: %v", n, r)
			}
		}
		links, _ := h.LinkList()
		for _, l := range links {
			if l.Attrs().Name != "lo" && l.Attrs().Name != "eth0" && !strings.HasPrefix(l.Attrs().Name, "pb"+id) {
				t.Errorf("%s: link %q lacks the run ID", n, l.Attrs().Name)
			}
		}
		h.Close()
		ns.Close()
	}
	if len(tb.ClientAddrs) != 3 || !netip.MustParsePrefix("198.19.255.0/24").Contains(tb.ClientAddrs[2]) {
		t.Errorf("client addresses %v", tb.ClientAddrs)
	}
	if err := tb.Teardown(); err != nil {
		t.Fatal(err)
	}
	left, _ := topology.Leftovers()
	for _, n := range left {
		if strings.HasPrefix(n, "pb-"+id) {
			t.Errorf("left after teardown: %s", n)
		}
	}
	testenv.CompareRoot(t, before, testenv.RootSnapshot(t))
}

// TestBuildFailureCreatesNothing: a spec that fails half-way (a client
// count the node CIDR cannot hold) leaves no namespace.
func TestBuildFailureCreatesNothing(t *testing.T) {
	testenv.RequireKernel(t)
	id := topology.NewRunID()
	s := spec(id, 100)
	s.NodeCIDR = netip.MustParsePrefix("198.19.255.0/28")
	if _, err := topology.Build(context.Background(), s); err == nil {
		t.Fatal("Build accepted 101 links in a /28")
	}
	// A failure after namespaces exist: a cancelled context mid-build.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := topology.Build(ctx, spec(id, 2)); err == nil {
		t.Fatal("Build ignored a cancelled context")
	}
	left, _ := topology.Leftovers()
	for _, n := range left {
		if strings.HasPrefix(n, "pb-"+id) {
			t.Errorf("failed Build left %s", n)
		}
	}
}

// TestCleanupByRunID removes only the named run's namespaces, and never
// those of a run still going (a process holds one of its namespaces).
func TestCleanupByRunID(t *testing.T) {
	testenv.RequireKernel(t)
	a, b, c := topology.NewRunID(), topology.NewRunID(), topology.NewRunID()
	var held *topology.Netns
	for _, id := range []string{a, b, c} {
		ns, err := topology.CreateNetns(topology.NetnsName(id, "node0"))
		if err != nil {
			t.Fatal(err)
		}
		if id == c {
			held = ns // this process keeps c's namespace open: c is live
			continue
		}
		ns.Close()
	}
	defer topology.Cleanup(b)
	done, skipped, err := topology.Cleanup(a)
	if err != nil || len(done) != 1 || done[0] != topology.NetnsName(a, "node0") || len(skipped) != 0 {
		t.Fatalf("cleanup %s: %v %v %v", a, done, skipped, err)
	}
	left, _ := topology.Leftovers()
	found := false
	for _, n := range left {
		found = found || n == topology.NetnsName(b, "node0")
	}
	if !found {
		t.Errorf("cleanup of run %s removed run %s's namespace", a, b)
	}
	// A live run is skipped, whether named or not.
	done, skipped, err = topology.Cleanup(c)
	if err != nil || len(done) != 0 || len(skipped) != 1 {
		t.Errorf("cleanup of live run %s: removed %v, skipped %v, %v", c, done, skipped, err)
	}
	if stale, _ := topology.Stale(); containsName(stale, topology.NetnsName(c, "node0")) || !containsName(stale, topology.NetnsName(b, "node0")) {
		t.Errorf("Stale() = %v: want b's namespace and not live c's", stale)
	}
	held.Close()
	if done, _, err := topology.Cleanup(c); err != nil || len(done) != 1 {
		t.Errorf("cleanup after the run ended: %v %v", done, err)
	}
}

func containsName(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}
