package testenv

import (
	"fmt"
	"net/netip"

	"github.com/proxybench/proxybench/workload"
)

// TopologyCase is one service of TopologyServices: its
// trafficDistribution ("" for none), whether its internalTrafficPolicy is
// Local, and the node of each of its endpoints.
type TopologyCase struct {
	Distribution  string
	InternalLocal bool
	Nodes         []string
}

// TopologyServices are the render tests' topology services, one per
// case, on three nodes in two zones (node-0 and node-1 in zone-a, node-2
// in zone-b; the zones map is returned): service i is pb/t<i> at
// ClusterIP 198.18.0.(i+1), one TCP ServicePort 80 → 8080 named
// portName, and its endpoint k is 198.19.0.(3i+k+1) on cases[i].Nodes[k]
// with that node's zone.
func TopologyServices(portName string, cases []TopologyCase) ([]workload.Service, map[string]string) {
	zones := map[string]string{"node-0": "zone-a", "node-1": "zone-a", "node-2": "zone-b"}
	var out []workload.Service
	for i, c := range cases {
		s := workload.Service{Namespace: "pb", Name: fmt.Sprintf("t%d", i), ClusterIP: netip.AddrFrom4([4]byte{198, 18, 0, byte(i + 1)}),
			Ports: []workload.ServicePort{{Name: portName, Port: 80, TargetPort: 8080, Protocol: "TCP"}}, TrafficDistribution: c.Distribution, InternalLocal: c.InternalLocal}
		for k, n := range c.Nodes {
			e := workload.NewEndpoint(netip.AddrFrom4([4]byte{198, 19, 0, byte(3*i + k + 1)}))
			e.Node, e.Zone = n, zones[n]
			s.Endpoints = append(s.Endpoints, e)
		}
		out = append(out, s)
	}
	return out, zones
}
