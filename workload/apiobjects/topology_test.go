package apiobjects

import (
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/proxybench/proxybench/workload"
)

// TestTopologyObjects: a Service with a trafficDistribution carries it in
// its spec, its EndpointSlice gives every ready endpoint its zone and the
// controller's hints (forZones, and forNodes for PreferSameNode), a not
// ready one no hints, and a Node its topology.kubernetes.io/zone label.
func TestTopologyObjects(t *testing.T) {
	ep := func(ip, node, zone string, ready bool) workload.Endpoint {
		e := workload.NewEndpoint(netip.MustParseAddr(ip))
		e.Node, e.Zone, e.Ready, e.Serving = node, zone, ready, ready
		return e
	}
	s := workload.Service{Namespace: "pb", Name: "t", ClusterIP: netip.MustParseAddr("198.18.0.1"), TrafficDistribution: "PreferSameNode",
		Ports:     []workload.ServicePort{{Port: 80, TargetPort: 8080, Protocol: "TCP"}},
		Endpoints: []workload.Endpoint{ep("198.19.0.1", "node-0", "zone-a", true), ep("198.19.0.2", "node-2", "zone-b", false)}}
	if td := ServiceWithAffinity(s, 0).Spec.TrafficDistribution; td == nil || *td != "PreferSameNode" {
		t.Errorf("spec.trafficDistribution = %v", td)
	}
	sl := EndpointSlice(s, time.Now())
	e0, e1 := sl.Endpoints[0], sl.Endpoints[1]
	if e0.Zone == nil || *e0.Zone != "zone-a" || e0.Hints == nil || len(e0.Hints.ForZones) != 1 || e0.Hints.ForZones[0].Name != "zone-a" ||
		len(e0.Hints.ForNodes) != 1 || e0.Hints.ForNodes[0].Name != "node-0" {
		t.Errorf("ready endpoint: zone %v hints %+v", e0.Zone, e0.Hints)
	}
	if e1.Zone == nil || *e1.Zone != "zone-b" || e1.Hints != nil {
		t.Errorf("not ready endpoint: zone %v hints %+v, want its zone and no hints", e1.Zone, e1.Hints)
	}
	s.TrafficDistribution = ""
	if h := EndpointSlice(s, time.Now()).Endpoints[0].Hints; h != nil {
		t.Errorf("no distribution: hints %+v", h)
	}
	if z := NodeObject(Node{Name: "node-0", InternalIP: netip.MustParseAddr("198.19.255.1"), Zone: "zone-a"}).Labels[corev1.LabelTopologyZone]; z != "zone-a" {
		t.Errorf("node zone label %q", z)
	}
	if _, ok := NodeObject(Node{Name: "node-1", InternalIP: netip.MustParseAddr("198.19.255.2")}).Labels[corev1.LabelTopologyZone]; ok {
		t.Error("a node without zone has a zone label")
	}
}
