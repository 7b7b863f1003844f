//go:build linux

package runner

import (
	"context"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/proxymodes/ipvs"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/proxymodes/userspace"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/traffic"
)

func eightNodes(t *testing.T, order string) *scenarios.Scenario {
	t.Helper()
	sc, err := scenarios.Parse([]byte(`
seed: 3
modes: [ipvs]
services: {count: 1, endpoints: {count: 8}}
topology: {clientPods: 8, nodes: 8, clientAddresses: 4, endpointOrder: `+order+`}
`), "eight.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// distinct counts the distinct valid addresses of picks.
func distinct(picks []netip.Addr) int {
	m := map[netip.Addr]bool{}
	for _, p := range picks {
		if p.IsValid() {
			m[p] = true
		}
	}
	return len(m)
}

// TestEightNodesUserspaceRR: the userspace mode's round robin (its real
// Balancer, without the legacy shuffle) on 8 nodes given the same sorted
// endpoint list sends every node's first connection to the same endpoint;
// each node's shuffled order (nodeServices) spreads them.
func TestEightNodesUserspaceRR(t *testing.T) {
	for _, tc := range []struct {
		order string
		check func(int) bool
	}{{"sorted", func(d int) bool { return d == 1 }}, {"shuffled", func(d int) bool { return d >= 4 }}} {
		sc := eightNodes(t, tc.order)
		svcs, err := workload.Services(sc)
		if err != nil {
			t.Fatal(err)
		}
		var picks []netip.Addr
		for n := 0; n < 8; n++ {
			b := userspace.NewBalancer(userspace.Affinity{}, nil, func([]netip.AddrPort) {})
			var eps []netip.AddrPort
			for _, e := range nodeServices(sc, svcs, n)[0].Endpoints {
				eps = append(eps, netip.AddrPortFrom(e.IP, 8080))
			}
			b.Update(eps)
			ep, err := b.Next(netip.MustParseAddr("198.19.192.1"), false)
			if err != nil {
				t.Fatal(err)
			}
			picks = append(picks, ep.Addr())
		}
		if d := distinct(picks); !tc.check(d) {
			t.Errorf("%s: first picks %v (%d distinct)", tc.order, picks, d)
		}
	}
}

func hostHasIPVS() bool {
	_, err := os.Stat("/proc/net/ip_vs")
	return err == nil
}

// TestEightNodesIPVS (user-mode-linux, and then the slow tier, when the host lacks IP_VS): 8 node
// namespaces on the fabric bridge, each with its own IPVS proxier, one
// service with 8 endpoints. With sorted order and rr, the first connection
// through every node reaches the same endpoint; with shuffled order they
// spread. Then with sh, every source address of every client (4 each)
// reaches exactly one endpoint over repeated connections. Nothing is left
// behind.
func TestEightNodesIPVS(t *testing.T) {
	testenv.RequireKernel(t, "ipset", "iptables-legacy-restore")
	if !hostHasIPVS() {
		// In a guest it takes 30 s, the default suite's last margin
		// under 10 minutes (618 s with it, 2026-12-04, load 1).
		testenv.RequireSlow(t, "8 IPVS nodes in a user-mode-linux guest: about 30 s")
	}
	if testenv.InUML(t, hostHasIPVS(), append(ipvs.KernelModules(""), "bridge")...) {
		return
	}
	ctx := context.Background()
	m, err := modes.Lookup("ipvs")
	if err != nil {
		t.Fatal(err)
	}
	run := func(sc *scenarios.Scenario, fn func(tb *topology.Testbed, svcs []workload.Service)) {
		tb, svcs, teardown := echoTestbed(t, ctx, sc)
		defer teardown()
		for n, node := range tb.Nodes {
			p, err := m.New(sc, node)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Cleanup(context.Background())
			if _, err := p.Sync(ctx, nodeServices(sc, svcs, n)); err != nil {
				t.Fatalf("node%d: %v", n, err)
			}
		}
		fn(tb, svcs)
	}
	firstPicks := func(tb *topology.Testbed, svcs []workload.Service) []netip.Addr {
		var srcs []netip.Addr
		for _, s := range tb.ClientSources {
			srcs = append(srcs, s[0])
		}
		picks, err := traffic.FirstPicks(ctx, tb.Clients, srcs, svcs, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var out []netip.Addr
		for _, p := range picks {
			out = append(out, p[0])
		}
		return out
	}
	run(eightNodes(t, "sorted"), func(tb *topology.Testbed, svcs []workload.Service) {
		if p := firstPicks(tb, svcs); distinct(p) != 1 || !p[0].IsValid() {
			t.Errorf("sorted rr: first picks %v, want one endpoint for all 8 nodes", p)
		}
	})
	run(eightNodes(t, "shuffled"), func(tb *topology.Testbed, svcs []workload.Service) {
		if p := firstPicks(tb, svcs); distinct(p) < 4 {
			t.Errorf("shuffled rr: first picks %v, want them spread", p)
		}
	})
	sh := eightNodes(t, "sorted")
	sh.IPVS.Scheduler = "sh"
	run(sh, func(tb *topology.Testbed, svcs []workload.Service) {
		fr, err := traffic.DriveFairness(ctx, traffic.FairnessSpec{Clients: tb.Clients, Sources: tb.ClientSources,
			Services: svcs, PerService: 8 * 4 * 6, Concurrency: 8, Timeout: 2 * time.Second})
		if err != nil || fr.Errors > 0 {
			t.Fatalf("%v %+v", err, fr)
		}
		per := map[[2]int]map[netip.Addr]int{}
		for k, v := range fr.Hits {
			key := [2]int{k.Client, k.Source}
			if per[key] == nil {
				per[key] = map[netip.Addr]int{}
			}
			per[key][k.Endpoint] += v
		}
		if len(per) != 32 {
			t.Errorf("%d sources seen, want 32", len(per))
		}
		for k, eps := range per {
			if len(eps) != 1 {
				t.Errorf("sh: source %v reached %v", tb.ClientSources[k[0]][k[1]], eps)
			}
		}
	})
}

// echoTestbed builds sc's testbed with its services and starts the echo
// servers on their endpoints; teardown closes the echo servers and tears the
// testbed down (an error of the teardown fails t).
func echoTestbed(t *testing.T, ctx context.Context, sc *scenarios.Scenario) (tb *topology.Testbed, svcs []workload.Service, teardown func()) {
	t.Helper()
	svcs, err := workload.Services(sc)
	if err != nil {
		t.Fatal(err)
	}
	tb, err = topology.Build(ctx, topologySpec(sc, topology.NewRunID(), svcs))
	if err != nil {
		t.Fatal(err)
	}
	echo, err := startEcho(tb, svcs)
	if err != nil {
		if terr := tb.Teardown(); terr != nil {
			t.Error(terr)
		}
		t.Fatal(err)
	}
	return tb, svcs, func() {
		echo.Close()
		if err := tb.Teardown(); err != nil {
			t.Error(err)
		}
	}
}
