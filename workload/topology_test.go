package workload

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/proxybench/proxybench/scenarios"
)

// topoService: endpoints on the nodes listed (node-0 and node-1 in
// zone-a, node-2 in zone-b), addresses 198.19.0.1, .2, ...
func topoService(td string, nodes ...string) Service {
	zone := map[string]string{"node-0": "zone-a", "node-1": "zone-a", "node-2": "zone-b"}
	s := Service{Namespace: "pb", Name: "svc", ClusterIP: netip.MustParseAddr("198.18.0.1"), TrafficDistribution: td,
		Ports: []ServicePort{{Port: 80, TargetPort: 8080, Protocol: "TCP"}}}
	for k, n := range nodes {
		e := NewEndpoint(netip.MustParseAddr(fmt.Sprintf("198.19.0.%d", k+1)))
		e.Node, e.Zone = n, zone[n]
		s.Endpoints = append(s.Endpoints, e)
	}
	return s
}

func nodesOf(eps []Endpoint) []string {
	var out []string
	for _, e := range eps {
		out = append(out, e.Node)
	}
	slices.Sort(out)
	return out
}

// TestHintsAsTheController: the hints follow the EndpointSlice
// controller's preferCloseHeuristic: a zone hint for every distribution,
// a node hint for PreferSameNode only, none without a distribution, none
// for an endpoint that is not ready or has no zone.
func TestHintsAsTheController(t *testing.T) {
	s := topoService("", "node-0")
	e := s.Endpoints[0]
	for _, c := range []struct {
		td           string
		zones, nodes []string
	}{
		{"", nil, nil},
		{scenarios.DistPreferClose, []string{"zone-a"}, nil},
		{scenarios.DistPreferSameZone, []string{"zone-a"}, nil},
		{scenarios.DistPreferSameNode, []string{"zone-a"}, []string{"node-0"}},
		{"Bogus", nil, nil},
	} {
		z, n := e.Hints(c.td)
		if !slices.Equal(z, c.zones) || !slices.Equal(n, c.nodes) {
			t.Errorf("%q: hints %v %v, want %v %v", c.td, z, n, c.zones, c.nodes)
		}
	}
	nr := e
	nr.Ready = false
	if z, n := nr.Hints(scenarios.DistPreferSameNode); z != nil || n != nil {
		t.Errorf("not ready: hints %v %v, want none", z, n)
	}
	nz := e
	nz.Zone = ""
	if z, n := nz.Hints(scenarios.DistPreferSameNode); z != nil || !slices.Equal(n, []string{"node-0"}) {
		t.Errorf("no zone: hints %v %v, want only the node hint", z, n)
	}
}

// TestKubeProxyOrderAt: the cluster endpoints a proxy on each node
// programs, per distribution, with kube-proxy's fallbacks (pkg/proxy
// topology.go): PreferSameNode falls back to the zone, then to every
// endpoint; PreferClose / PreferSameZone fall back to every endpoint
// when the zone has none; an endpoint without a hint turns the hints off.
func TestKubeProxyOrderAt(t *testing.T) {
	zone := map[string]string{"node-0": "zone-a", "node-1": "zone-a", "node-2": "zone-b"}
	for _, c := range []struct {
		name     string
		td       string
		eps      []string
		node     string
		want     []string
		wantMode string
		notReady int // index of an endpoint made not ready (0: none)
		dropZone int // index of an endpoint without a zone (0: none)
	}{
		{name: "none", td: "", eps: []string{"node-0", "node-1", "node-2"}, node: "node-0", want: []string{"node-0", "node-1", "node-2"}},
		{name: "close, zone has endpoints", td: scenarios.DistPreferClose, eps: []string{"node-0", "node-1", "node-2"}, node: "node-0", want: []string{"node-0", "node-1"}, wantMode: scenarios.DistPreferSameZone},
		{name: "samezone, other zone", td: scenarios.DistPreferSameZone, eps: []string{"node-0", "node-1", "node-2"}, node: "node-2", want: []string{"node-2"}, wantMode: scenarios.DistPreferSameZone},
		{name: "close, zone without endpoint: all", td: scenarios.DistPreferClose, eps: []string{"node-0", "node-1"}, node: "node-2", want: []string{"node-0", "node-1"}},
		{name: "samenode, node has endpoint", td: scenarios.DistPreferSameNode, eps: []string{"node-0", "node-1", "node-2"}, node: "node-1", want: []string{"node-1"}, wantMode: scenarios.DistPreferSameNode},
		{name: "samenode, node without: its zone", td: scenarios.DistPreferSameNode, eps: []string{"node-0", "node-0", "node-2"}, node: "node-1", want: []string{"node-0", "node-0"}, wantMode: scenarios.DistPreferSameZone},
		{name: "samenode, neither: all", td: scenarios.DistPreferSameNode, eps: []string{"node-0", "node-1"}, node: "node-2", want: []string{"node-0", "node-1"}},
		{name: "an endpoint without zone: hints ignored", td: scenarios.DistPreferClose, eps: []string{"node-0", "node-1", "node-2"}, node: "node-0", want: []string{"node-0", "node-1", "node-2"}, dropZone: 2},
		{name: "not ready endpoints do not count", td: scenarios.DistPreferClose, eps: []string{"node-0", "node-2", "node-2"}, node: "node-2", want: []string{"node-2"}, wantMode: scenarios.DistPreferSameZone, notReady: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := topoService(c.td, c.eps...)
			if c.dropZone > 0 {
				s.Endpoints[c.dropZone].Zone = ""
			}
			if c.notReady > 0 {
				s.Endpoints[c.notReady].Ready, s.Endpoints[c.notReady].Serving = false, false
			}
			if got := s.TopologyMode(c.node, zone[c.node]); got != c.wantMode {
				t.Errorf("TopologyMode = %q, want %q", got, c.wantMode)
			}
			if got := nodesOf(s.KubeProxyOrderAt(c.node, zone[c.node])); !slices.Equal(got, c.want) {
				t.Errorf("endpoints on %s: %v, want %v", c.node, got, c.want)
			}
		})
	}
}

// TestServicesZones: generated endpoints carry their node's zone from
// topology.zones and the group's trafficDistribution.
func TestServicesZones(t *testing.T) {
	sc, err := scenarios.Parse([]byte(`
services:
  count: 1
  endpoints: {count: 3}
  groups:
  - {count: 1, endpoints: {count: 2}, trafficDistribution: PreferSameNode, endpointNodes: [node-2, node-1]}
topology: {nodes: 3, pods: isolated, zones: [zone-a, zone-a, zone-b]}
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := Services(sc)
	if err != nil {
		t.Fatal(err)
	}
	if svcs[0].TrafficDistribution != "" || svcs[1].TrafficDistribution != scenarios.DistPreferSameNode {
		t.Errorf("distributions %q %q", svcs[0].TrafficDistribution, svcs[1].TrafficDistribution)
	}
	for _, s := range svcs {
		for _, e := range s.Endpoints {
			if e.Zone != sc.ZoneOf(e.Node) || e.Zone == "" {
				t.Errorf("%s %s on %s: zone %q", s.Name, e.IP, e.Node, e.Zone)
			}
		}
	}
	if z := svcs[1].Endpoints[0].Zone; z != "zone-b" {
		t.Errorf("group endpoint 0 on node-2: zone %q, want zone-b", z)
	}
}
