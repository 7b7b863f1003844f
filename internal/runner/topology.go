//go:build linux

package runner

import (
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// topologyCell marks a serviceTypes cell as a topology cell when the
// scenario gives zones (topology.zones) and the cell is a cluster IP
// cell of a service without internalTrafficPolicy Local: its
// trafficDistribution, the entry node's zone, and the documented shares
// of connections landing on the entry node and in its zone
// (expectShares). Other cells get the distribution alone.
func topologyCell(sc *scenarios.Scenario, cell *reports.ServiceCell, svc *workload.Service, entry int) {
	cell.Distribution = svc.TrafficDistribution
	if len(sc.Topology.Zones) == 0 || cell.Path != "clusterIP" || svc.InternalLocal || entry < 0 {
		return
	}
	node := scenarios.NodeName(entry)
	cell.Zone = sc.ZoneOf(node)
	n, z := expectShares(svc, node, cell.Zone)
	cell.Expected.SameNode, cell.Expected.SameZone = &n, &z
	if svc.TrafficDistribution != "" {
		cell.Expected.Why += "; trafficDistribution " + svc.TrafficDistribution
	}
}

// expectShares is the documented share of a client's cluster IP
// connections that land on an endpoint of its node and of its zone, each
// connection picking one of the endpoints left to it at random
// (concepts/services-networking/service "Traffic distribution",
// KEP-3015): PreferSameNode leaves the node's ready endpoints, else its
// zone's, else all of them; PreferClose and PreferSameZone the zone's,
// else all; none all of them. It is written from the documentation's
// words, apart from workload.Service.KubeProxyOrderAt (builtin's copy of
// kube-proxy's hint logic), so the run checks one against the other.
func expectShares(svc *workload.Service, node, zone string) (sameNode, sameZone float64) {
	all := svc.ReadyEndpoints()
	var onNode, inZone []workload.Endpoint
	for _, e := range all {
		if e.Node == node {
			onNode = append(onNode, e)
		}
		if zone != "" && e.Zone == zone {
			inZone = append(inZone, e)
		}
	}
	left := all
	switch svc.TrafficDistribution {
	case scenarios.DistPreferSameNode:
		switch {
		case len(onNode) > 0:
			left = onNode
		case len(inZone) > 0:
			left = inZone
		}
	case scenarios.DistPreferClose, scenarios.DistPreferSameZone:
		if len(inZone) > 0 {
			left = inZone
		}
	}
	if len(left) == 0 {
		return 0, 0
	}
	var n, z int
	for _, e := range left {
		if e.Node == node {
			n++
		}
		if zone != "" && e.Zone == zone {
			z++
		}
	}
	return float64(n) / float64(len(left)), float64(z) / float64(len(left))
}
