package workload

import (
	"math/rand"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/proxybench/proxybench/scenarios"
)

func churnScenario(t *testing.T, n int) (*scenarios.Scenario, []Service) {
	t.Helper()
	sc, err := scenarios.Parse([]byte("services:\n  count: 50\n"), "churn.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sc.Services.Count = n
	svcs, err := Services(sc)
	if err != nil {
		t.Fatal(err)
	}
	return sc, svcs
}

func TestArrivals(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	if got := Arrivals(10, 60*time.Second, "constant", rng); len(got) != 599 || got[0] != 100*time.Millisecond {
		t.Errorf("constant: %d arrivals, first %v; want 599 (t < 60 s), first 100ms", len(got), got[0])
	}
	// Poisson: the count over 600 s at 10/s has mean 6000, sd ~77.
	got := Arrivals(10, 600*time.Second, "poisson", rng)
	if len(got) < 6000-400 || len(got) > 6000+400 {
		t.Errorf("poisson: %d arrivals over 600 s at 10/s", len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i] < got[i-1] {
			t.Fatal("arrivals not increasing")
		}
	}
}

// TestClusterChangesKeepServicesReachable applies many changes and checks
// each against the state: every live service keeps a ready endpoint, the
// changed endpoint is where the change says, busy services are not
// changed again until released, and deleted services leave the snapshot.
func TestClusterChangesKeepServicesReachable(t *testing.T) {
	sc, svcs := churnScenario(t, 20)
	c := NewCluster(sc, svcs)
	rng := rand.New(rand.NewSource(7))
	mix := scenarios.ChurnMix{EndpointAdd: 1, EndpointRemove: 1, ReadinessFlip: 1, ServiceCreate: 0.3, ServiceDelete: 0.3}
	kinds := map[string]int{}
	seen := map[string]bool{}
	for _, s := range svcs {
		for _, e := range s.Endpoints {
			seen[e.IP.String()] = true
		}
	}
	for i := 0; i < 500; i++ {
		before := append([]bool(nil), c.busy...)
		ch, ok := c.Next(rng, mix)
		if !ok {
			continue
		}
		kinds[ch.Kind]++
		if ch.Service < len(before) && before[ch.Service] {
			t.Fatalf("change %d hit busy service %d", i, ch.Service)
		}
		s := c.Services[ch.Service]
		has := func(ready bool) bool {
			for _, e := range s.Endpoints {
				if e.IP == ch.Endpoint && e.Ready == ready {
					return true
				}
			}
			return false
		}
		switch ch.Kind {
		case EndpointAdd:
			if !has(true) || seen[ch.Endpoint.String()] {
				t.Fatalf("add: %v not a fresh ready endpoint of %s", ch.Endpoint, s.Name)
			}
			seen[ch.Endpoint.String()] = true
		case EndpointRemove:
			if has(true) || has(false) {
				t.Fatalf("remove: %v still in %s", ch.Endpoint, s.Name)
			}
		case EndpointUnready:
			if !has(false) {
				t.Fatalf("unready: %v not unready", ch.Endpoint)
			}
		case EndpointReady:
			if !has(true) {
				t.Fatalf("ready: %v not ready", ch.Endpoint)
			}
		}
		if Appears(ch.Kind) != (ch.Kind == EndpointAdd || ch.Kind == EndpointReady || ch.Kind == ServiceCreate) {
			t.Fatal("Appears")
		}
		for _, live := range c.Snapshot() {
			if ready(&live) == 0 {
				t.Fatalf("service %s has no ready endpoint after %s", live.Name, ch.Kind)
			}
		}
		c.Release(ch.Service)
	}
	for _, k := range []string{EndpointAdd, EndpointRemove, EndpointUnready, EndpointReady, ServiceCreate, ServiceDelete} {
		if kinds[k] == 0 {
			t.Errorf("no %s in 500 changes: %v", k, kinds)
		}
	}
	live := c.Snapshot()
	if len(live) != len(c.Services)-kinds[ServiceDelete] {
		t.Errorf("snapshot has %d services, want %d", len(live), len(c.Services)-kinds[ServiceDelete])
	}
}

// TestEndpointConditions: generated endpoints start ready and serving, not
// terminating; churn keeps Serving equal to Ready (no endpoint it makes is
// terminating), through flips both ways.
func TestEndpointConditions(t *testing.T) {
	sc, svcs := churnScenario(t, 30)
	for _, s := range svcs {
		for _, e := range s.Endpoints {
			if !e.Ready || !e.Serving || e.Terminating || e.Weight != 1 {
				t.Fatalf("%s: generated endpoint %+v", s.Name, e)
			}
		}
	}
	c := NewCluster(sc, svcs)
	rng := rand.New(rand.NewSource(3))
	flips := map[string]int{}
	for range 2000 {
		ch, ok := c.Next(rng, scenarios.ChurnMix{ReadinessFlip: 1})
		if !ok {
			continue
		}
		flips[ch.Kind]++
		c.Release(ch.Service)
	}
	if flips[EndpointUnready] == 0 || flips[EndpointReady] == 0 {
		t.Fatalf("churn made no flips both ways: %v", flips)
	}
	for _, s := range c.Snapshot() {
		for _, e := range s.Endpoints {
			if e.Serving != e.Ready || e.Terminating {
				t.Fatalf("%s: endpoint %+v: serving must follow ready for a pod that is not terminating", s.Name, e)
			}
		}
	}
}

// TestClusterReusesFreedPodIPs: with a pod CIDR too small for the adds a
// long churn makes, adds go on past its fresh addresses by taking the
// pod IPs of removed endpoints, oldest first, and no pod IP is ever an
// endpoint of two live services, or twice of one, at once.
func TestClusterReusesFreedPodIPs(t *testing.T) {
	sc, err := scenarios.Parse([]byte("services: {count: 4, endpoints: {count: 3}}\nnetwork: {podCIDR: 198.19.0.0/27}\n"), "small.yaml")
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := Services(sc)
	if err != nil {
		t.Fatal(err)
	}
	c := NewCluster(sc, svcs)
	rng := rand.New(rand.NewSource(5))
	mix := scenarios.ChurnMix{EndpointAdd: 1, EndpointRemove: 1}
	var removed []string // in order
	adds, reused := 0, 0
	for i := 0; i < 400; i++ {
		ch, ok := c.Next(rng, mix)
		if !ok {
			continue
		}
		switch ch.Kind {
		case EndpointAdd:
			adds++
			if j := slices.Index(removed, ch.Endpoint.String()); j >= 0 {
				if j != 0 {
					t.Fatalf("add %d took %v, freed after %v", i, ch.Endpoint, removed[0])
				}
				removed = removed[1:]
				reused++
			}
		case EndpointRemove:
			removed = append(removed, ch.Endpoint.String())
		}
		inUse := map[netip.Addr]string{}
		for _, s := range c.Snapshot() {
			for _, e := range s.Endpoints {
				if other, dup := inUse[e.IP]; dup {
					t.Fatalf("after change %d (%s %v): %v is an endpoint of %s and %s", i, ch.Kind, ch.Endpoint, e.IP, other, s.Name)
				}
				inUse[e.IP] = s.Name
			}
		}
		c.Release(ch.Service)
	}
	// .1 to .30 (the last address is never a pod): 12 taken at start, so
	// at most 18 fresh adds.
	if adds < 60 || reused < adds-18 {
		t.Errorf("%d adds, %d of them reused pod IPs: want adds to go on past the /27's fresh addresses", adds, reused)
	}
}
