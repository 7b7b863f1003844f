package nftables

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// TestRenderTopology: from a scenario (3 nodes, node-0 and node-1 in
// zone-a, node-2 in zone-b; one endpoint per node), each node's
// service-X numgen map holds only the endpoints its hints leave it, as
// kube-proxy's nftables proxier programs clusterEndpoints: PreferSameZone
// keeps the zone's, PreferSameNode the node's, none every endpoint.
func TestRenderTopology(t *testing.T) {
	sc, err := scenarios.Parse([]byte(`
services:
  count: 1
  endpoints: {count: 3}
  groups:
  - {count: 1, endpoints: {count: 3}, trafficDistribution: PreferSameZone}
  - {count: 1, endpoints: {count: 3}, trafficDistribution: PreferSameNode}
topology: {nodes: 3, pods: isolated, zones: [zone-a, zone-a, zone-b]}
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := workload.Services(sc)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ConfigFromScenario(sc)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		node string
		want [3][]string // per service, the nodes of the endpoints in its map
	}{
		{"node-0", [3][]string{{"node-0", "node-1", "node-2"}, {"node-0", "node-1"}, {"node-0"}}},
		{"node-2", [3][]string{{"node-0", "node-1", "node-2"}, {"node-2"}, {"node-2"}}},
	} {
		cfg.NodeName = c.node
		r, err := Render(cfg, svcs)
		if err != nil {
			t.Fatal(err)
		}
		fake := knftables.NewFake(Family, Table)
		tx := fake.NewTransaction()
		r.Full(tx)
		if err := fake.Run(context.Background(), tx); err != nil {
			t.Fatalf("%s: knftables' fake refuses the ruleset: %v", c.node, err)
		}
		text := fake.Dump()
		for i, s := range svcs {
			for _, e := range s.Endpoints {
				want := false
				for _, n := range c.want[i] {
					want = want || n == e.Node
				}
				// Its dnat names the address: "<ip> . <port>" in a numgen
				// map, "<ip>:<port>" alone.
				got := strings.Contains(text, e.IP.String()+" . 8080") || strings.Contains(text, e.IP.String()+":8080")
				if got != want {
					t.Errorf("%s, %s (%q): endpoint on %s programmed %v, want %v", c.node, s.Name, s.TrafficDistribution, e.Node, got, want)
				}
			}
		}
	}
}
