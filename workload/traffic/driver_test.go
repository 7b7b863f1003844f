//go:build linux

package traffic_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/traffic"
)

func testServices(t *testing.T, n, eps int) []workload.Service {
	t.Helper()
	sc := &scenarios.Scenario{Seed: 1}
	sc.Services = scenarios.ServicesSpec{Count: n, PortsPerService: 1, Protocol: "TCP", Port: 80, TargetPort: 8080,
		Endpoints: scenarios.EndpointsSpec{Distribution: "fixed", Count: eps}}
	sc.Network = scenarios.NetworkSpec{ServiceCIDR: "198.18.0.0/16", PodCIDR: "198.19.0.0/17", NodeCIDR: "198.19.255.0/24", ClusterCIDR: "198.19.0.0/16"}
	svcs, err := workload.Services(sc)
	if err != nil {
		t.Fatal(err)
	}
	return svcs
}

// TestDirectTrafficReachesEveryEndpoint builds a real testbed and drives
// mode none (direct to pod IPs) at every position: every connection lands
// on an endpoint of the dialled service, and every endpoint is reached.
func TestDirectTrafficReachesEveryEndpoint(t *testing.T) {
	testenv.RequireKernel(t)
	before := testenv.RootSnapshot(t)
	svcs := testServices(t, 100, 3)
	runID := topology.NewRunID()
	tb, err := topology.Build(context.Background(), topology.Spec{
		RunID: runID, ClientPods: 2,
		ServiceCIDR: netip.MustParsePrefix("198.18.0.0/16"), PodCIDR: netip.MustParsePrefix("198.19.0.0/17"),
		NodeCIDR: netip.MustParsePrefix("198.19.255.0/24"),
	})
	if err != nil {
		t.Fatal(err)
	}
	echo, err := traffic.StartEcho(tb.Backend, workload.TargetPorts(svcs))
	if err != nil {
		tb.Teardown()
		t.Fatal(err)
	}
	for _, pos := range []string{workload.PosFirst, workload.PosMiddle, workload.PosLast, workload.PosRandom} {
		res, err := traffic.Drive(context.Background(), traffic.DriveSpec{
			Clients: tb.Clients, Services: svcs, Direct: true, Position: pos,
			Connections: 300, Warmup: 10, Concurrency: 3, Timeout: 2 * time.Second, Seed: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Errors != 0 || res.Misses != 0 || len(res.LatenciesNs) != 300 {
			t.Fatalf("%s: errors %d misses %d samples %d: %v", pos, res.Errors, res.Misses, len(res.LatenciesNs), res.ErrorSamples)
		}
		if pos != workload.PosRandom {
			h := res.Hits[res.Target.Service]
			if len(res.Hits) != 1 || len(h) != 3 {
				t.Fatalf("%s: hits %v, want the 3 endpoints of service %d", pos, res.Hits, res.Target.Service)
			}
		}
		for _, l := range res.LatenciesNs {
			if l <= 0 {
				t.Fatalf("non-positive latency %d", l)
			}
		}
	}
	echo.Close()
	if err := tb.Teardown(); err != nil {
		t.Fatal(err)
	}
	left, _ := topology.Leftovers()
	for _, n := range left {
		if len(n) > 10 && n[3:9] == runID {
			t.Errorf("namespace %s left after teardown", n)
		}
	}
	testenv.CompareRoot(t, before, testenv.RootSnapshot(t))
}
