package ipvs

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// topologyFixture: services with one endpoint on each of node-0, node-1
// (zone-a) and node-2 (zone-b): PreferClose, PreferSameNode, no
// distribution, and PreferClose with internalTrafficPolicy Local, then
// PreferSameNode with two endpoints on node-0 only; endpoint k of service
// i is 198.19.0.(3i+k+1), its ClusterIP 198.18.0.(i+1).
func topologyFixture() ([]workload.Service, map[string]string) {
	all := []string{"node-0", "node-1", "node-2"}
	return testenv.TopologyServices("p80", []testenv.TopologyCase{
		{Distribution: scenarios.DistPreferClose, Nodes: all},
		{Distribution: scenarios.DistPreferSameNode, Nodes: all},
		{Nodes: all},
		{Distribution: scenarios.DistPreferClose, InternalLocal: true, Nodes: all},
		{Distribution: scenarios.DistPreferSameNode, Nodes: []string{"node-0", "node-0"}},
	})
}

// TestRenderTopology: a node's ClusterIP virtual server holds as real
// servers only the endpoints its hints leave it, as kube-proxy v1.37's
// IPVS proxier takes them from CategorizeEndpoints (pkg/proxy/topology.go,
// the same call as its iptables and nftables proxiers): on node-1
// PreferClose keeps zone-a's two, PreferSameNode node-1's one, no
// distribution all three, internalTrafficPolicy Local node-1's own, and
// PreferSameNode with every endpoint on node-0 falls back to the zone
// (node-0's two); on node-2 PreferClose keeps zone-b's one, and
// PreferSameNode on node-0 only falls back to every endpoint (zone-b has
// none).
func TestRenderTopology(t *testing.T) {
	svcs, zones := topologyFixture()
	for _, c := range []struct {
		node string
		want [5][]int // per service, the endpoint indices programmed
	}{
		{"node-1", [5][]int{{0, 1}, {1}, {0, 1, 2}, {1}, {0, 1}}},
		{"node-2", [5][]int{{2}, {2}, {0, 1, 2}, {2}, {0, 1}}},
		{"node-0", [5][]int{{0, 1}, {0}, {0, 1, 2}, {0}, {0, 1}}},
	} {
		cfg := testCfg
		cfg.NodeName, cfg.Zones = c.node, zones
		rs, err := Render(cfg, svcs)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs.Virtual) != len(svcs) {
			t.Fatalf("%s: %d virtual servers, want %d (one per ClusterIP)", c.node, len(rs.Virtual), len(svcs))
		}
		for i, s := range svcs {
			vs := rs.Virtual[i]
			if vs.Address != s.ClusterIP {
				t.Fatalf("%s: virtual server %d on %s, want %s", c.node, i, vs.Address, s.ClusterIP)
			}
			var got []netip.Addr
			for _, r := range vs.Reals {
				got = append(got, r.Address)
			}
			var want []netip.Addr
			for _, k := range c.want[i] {
				want = append(want, s.Endpoints[k].IP)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s, %s (%q, internal Local %v): real servers %v, want %v", c.node, s.Name, s.TrafficDistribution, s.InternalLocal, got, want)
			}
		}
	}
}

// TestRenderTopologyNodePort: hints narrow the cluster-policy endpoints of
// every virtual server of a service, the node port's on each node address
// too (kube-proxy's syncEndpoint takes the same clusterEndpoints for
// them), while externalTrafficPolicy Local takes the node's own endpoints:
// on node-1 under PreferClose, zone-a's two for the ClusterIP and the
// cluster-policy node port, node-1's one for the Local node port.
func TestRenderTopologyNodePort(t *testing.T) {
	svcs, zones := topologyFixture()
	s := svcs[0] // PreferClose, one endpoint per node
	s.Type, s.Ports = scenarios.TypeNodePort, []workload.ServicePort{{Name: "p80", Port: 80, TargetPort: 8080, Protocol: "TCP", NodePort: 30080}}
	local := s
	local.Name, local.ClusterIP, local.ExternalLocal = "etp-local", netip.MustParseAddr("198.18.0.9"), true
	local.Ports = []workload.ServicePort{{Name: "p80", Port: 80, TargetPort: 8080, Protocol: "TCP", NodePort: 30081}}
	cfg := testCfg
	cfg.NodeName, cfg.Zones = "node-1", zones
	node := netip.MustParseAddr("198.18.255.2")
	cfg.NodeIPs = []netip.Addr{node}
	rs, err := Render(cfg, []workload.Service{s, local})
	if err != nil {
		t.Fatal(err)
	}
	reals := map[string][]netip.Addr{}
	for _, vs := range rs.Virtual {
		for _, r := range vs.Reals {
			reals[vs.Key()] = append(reals[vs.Key()], r.Address)
		}
	}
	ep := func(svc workload.Service, ks ...int) []netip.Addr {
		var out []netip.Addr
		for _, k := range ks {
			out = append(out, svc.Endpoints[k].IP)
		}
		return out
	}
	for _, c := range []struct {
		vs   VirtualServer
		want []netip.Addr
	}{
		{VirtualServer{Address: s.ClusterIP, Protocol: "TCP", Port: 80}, ep(s, 0, 1)},
		{VirtualServer{Address: node, Protocol: "TCP", Port: 30080}, ep(s, 0, 1)},
		{VirtualServer{Address: local.ClusterIP, Protocol: "TCP", Port: 80}, ep(local, 0, 1)},
		{VirtualServer{Address: node, Protocol: "TCP", Port: 30081}, ep(local, 1)},
	} {
		if got := reals[c.vs.Key()]; !slices.Equal(got, c.want) {
			t.Errorf("%s: real servers %v, want %v", c.vs.Key(), got, c.want)
		}
	}
}
