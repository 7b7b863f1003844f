//go:build linux

package runner

import (
	"testing"

	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// TestExpectShares: the documented shares per distribution and client
// node, and builtin's copy of kube-proxy's hint logic
// (KubeProxyOrderAt, over the hints the testbed writes) leaves each
// client exactly the endpoint mix the documentation gives.
func TestExpectShares(t *testing.T) {
	sc, err := scenarios.Parse([]byte(`
topology: {nodes: 3, pods: isolated, zones: [zone-a, zone-a, zone-b]}
services:
  count: 1
  endpoints: {count: 3}
  groups:
  - {count: 1, endpoints: {count: 3}, trafficDistribution: PreferClose}
  - {count: 1, endpoints: {count: 3}, trafficDistribution: PreferSameNode}
  - {count: 1, endpoints: {count: 2}, endpointNodes: [node-0], trafficDistribution: PreferSameZone}
  - {count: 1, endpoints: {count: 2}, endpointNodes: [node-0], trafficDistribution: PreferSameNode}
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := workload.Services(sc)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]float64{ // service@node: same node, same zone
		"svc-00000@node-0": {1.0 / 3, 2.0 / 3}, "svc-00000@node-2": {1.0 / 3, 1.0 / 3},
		"svc-00001@node-0": {0.5, 1}, "svc-00001@node-2": {1, 1},
		"svc-00002@node-1": {1, 1}, "svc-00002@node-2": {1, 1},
		"svc-00003@node-1": {0, 1}, "svc-00003@node-2": {0, 0},
		"svc-00004@node-0": {1, 1}, "svc-00004@node-1": {0, 1}, "svc-00004@node-2": {0, 0},
	}
	for i := range svcs {
		s := &svcs[i]
		for n := 0; n < 3; n++ {
			node := scenarios.NodeName(n)
			zone := sc.ZoneOf(node)
			gn, gz := expectShares(s, node, zone)
			if w, ok := want[s.Name+"@"+node]; ok && (gn != w[0] || gz != w[1]) {
				t.Errorf("%s (%q) from %s: documented %.2f %.2f, want %.2f %.2f", s.Name, s.TrafficDistribution, node, gn, gz, w[0], w[1])
			}
			left := s.KubeProxyOrderAt(node, zone)
			var kn, kz int
			for _, e := range left {
				if e.Node == node {
					kn++
				}
				if e.Zone == zone {
					kz++
				}
			}
			if len(left) == 0 || float64(kn)/float64(len(left)) != gn || float64(kz)/float64(len(left)) != gz {
				t.Errorf("%s (%q) from %s: builtin leaves %d endpoints (%d on the node, %d in the zone), documented shares %.2f %.2f",
					s.Name, s.TrafficDistribution, node, len(left), kn, kz, gn, gz)
			}
		}
	}
	var cell reports.ServiceCell
	cell.Path = "clusterIP"
	topologyCell(sc, &cell, &svcs[2], 1)
	if cell.Zone != "zone-a" || cell.Distribution != scenarios.DistPreferSameNode || cell.Expected.SameNode == nil || *cell.Expected.SameNode != 1 {
		t.Errorf("topology cell %+v", cell)
	}
	cell = reports.ServiceCell{Path: "nodePort"}
	topologyCell(sc, &cell, &svcs[2], 1)
	if cell.Expected.SameNode != nil {
		t.Error("a node port cell has documented topology shares")
	}
}
