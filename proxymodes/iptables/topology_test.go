package iptables

import (
	"strings"
	"testing"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// topologyFixture: three services with one endpoint on each of node-0,
// node-1 (zone-a) and node-2 (zone-b): PreferClose, PreferSameNode and no
// distribution; endpoint k of service i is 198.19.0.(3i+k+1).
func topologyFixture() ([]workload.Service, map[string]string) {
	all := []string{"node-0", "node-1", "node-2"}
	return testenv.TopologyServices("", []testenv.TopologyCase{
		{Distribution: scenarios.DistPreferClose, Nodes: all},
		{Distribution: scenarios.DistPreferSameNode, Nodes: all},
		{Nodes: all},
	})
}

// TestRenderTopology: a node's KUBE-SVC chain and KUBE-SEP chains hold
// only the endpoints its hints leave it, as kube-proxy's
// CategorizeEndpoints gives them (clusterEndpoints =
// allReachableEndpoints): on node-1, PreferClose keeps zone-a's two,
// PreferSameNode node-1's one, no distribution all three; on node-2
// PreferClose keeps zone-b's one.
func TestRenderTopology(t *testing.T) {
	svcs, zones := topologyFixture()
	for _, c := range []struct {
		node string
		want [3][]int // per service, the endpoint indices programmed
	}{
		{"node-1", [3][]int{{0, 1}, {1}, {0, 1, 2}}},
		{"node-2", [3][]int{{2}, {2}, {0, 1, 2}}},
	} {
		cfg := testCfg
		cfg.NodeName, cfg.Zones = c.node, zones
		rs, err := Render(cfg, svcs)
		if err != nil {
			t.Fatal(err)
		}
		text := string(rs.Data)
		for i, s := range svcs {
			name := s.PortName(s.Ports[0])
			svc := ServiceChainName(name, "tcp")
			for k, e := range s.Endpoints {
				sep := EndpointChainName(name, "tcp", e.IP.String()+":8080")
				want := false
				for _, w := range c.want[i] {
					want = want || w == k
				}
				decl := ":" + sep + " - [0:0]"
				jump := " -j " + sep + "\n"
				if got := strings.Contains(text, decl) && strings.Contains(text, "-A "+svc) && strings.Contains(text, jump); got != want {
					t.Errorf("%s, %s (%q) endpoint on %s: programmed %v, want %v", c.node, s.Name, s.TrafficDistribution, e.Node, got, want)
				}
			}
			if n := strings.Count(text, "-A "+svc+" -m comment --comment \""+name+" -> "); n != len(c.want[i]) {
				t.Errorf("%s, %s: %d endpoint rules in %s, want %d", c.node, s.Name, n, svc, len(c.want[i]))
			}
		}
	}
}
