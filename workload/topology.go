package workload

import (
	"slices"

	"github.com/proxybench/proxybench/scenarios"
)

// Topology-aware routing (trafficDistribution), as two parties of a
// cluster do it: the EndpointSlice controller writes hints into each
// endpoint from the Service's spec.trafficDistribution (Endpoint.Hints),
// and kube-proxy on each node reads only the hints, never the Service's
// field, to narrow the cluster-policy endpoints it programs
// (Service.TopologyMode, Service.KubeProxyOrderAt). There is no
// kube-controller-manager in the testbed: proxybench writes the hints
// (the builtin modes take them from here, kube-proxy rows from the
// EndpointSlices apiobjects builds with the same Hints).

// sliceReady is the endpoint's EndpointSlice ready condition as
// apiobjects writes it (ready and not terminating): the condition both
// the controller's hint heuristic and kube-proxy's IsReady read.
func (e Endpoint) sliceReady() bool { return e.Ready && !e.Terminating }

// Hints returns the hints the EndpointSlice controller writes for e under
// trafficDistribution td (k8s.io/endpointslice trafficdist,
// preferCloseHeuristic, v1.35+): for PreferClose, PreferSameZone and
// PreferSameNode, a ready endpoint gets forZones = [its zone] when it has
// one, and with PreferSameNode also forNodes = [its node] when it has
// one; with no distribution (td "") no endpoint has hints. An endpoint
// that is not ready gets none here (the controller leaves a not-ready
// endpoint's hints as they were, and kube-proxy reads hints of ready
// endpoints only, so none is what it would see of a new one). Each list
// is nil or holds one name.
func (e Endpoint) Hints(td string) (forZones, forNodes []string) {
	if !e.sliceReady() || !slices.Contains(scenarios.TrafficDistributions, td) {
		return nil, nil
	}
	if e.Zone != "" {
		forZones = []string{e.Zone}
	}
	if e.Node != "" && td == scenarios.DistPreferSameNode {
		forNodes = []string{e.Node}
	}
	return forZones, forNodes
}

// TopologyMode is the topology mode kube-proxy on node (its hostname) in
// zone (its Node's topology.kubernetes.io/zone label, "" without one)
// derives from s's hints (pkg/proxy/topology.go topologyModeFromHints,
// v1.35+ where PreferSameTrafficDistribution is GA): over the ready
// endpoints, PreferSameNode when every one has a node hint and one is
// hinted for node; else PreferSameZone when every one has a zone hint and
// one is hinted for zone; else "" (cluster-wide: no ready endpoint, a
// missing hint, or nothing hinted for this node or zone, the fallback).
func (s *Service) TopologyMode(node, zone string) string {
	hasReady, forNode, allNode, forZone, allZone := false, false, true, false, true
	for _, e := range s.Endpoints {
		if !e.sliceReady() {
			continue
		}
		hasReady = true
		zs, ns := e.Hints(s.TrafficDistribution)
		if len(ns) == 0 {
			allNode = false
		} else if slices.Contains(ns, node) {
			forNode = true
		}
		if len(zs) == 0 {
			allZone = false
		} else if slices.Contains(zs, zone) {
			forZone = true
		}
	}
	switch {
	case !hasReady:
		return ""
	case allNode && forNode:
		return scenarios.DistPreferSameNode
	case allZone && forZone:
		return scenarios.DistPreferSameZone
	}
	return ""
}

// availableFor reports whether e may take cluster-policy traffic on node
// in zone under topology mode (pkg/proxy/topology.go
// availableForTopology: no fallback here, it is in TopologyMode).
func (s *Service) availableFor(e Endpoint, mode, node, zone string) bool {
	zs, ns := e.Hints(s.TrafficDistribution)
	switch mode {
	case scenarios.DistPreferSameNode:
		return slices.Contains(ns, node)
	case scenarios.DistPreferSameZone:
		return slices.Contains(zs, zone)
	}
	return true
}

// KubeProxyOrderAt is KubeProxyOrder as kube-proxy on node in zone
// programs s's cluster-policy endpoints: with a topology mode
// (TopologyMode), only the endpoints hinted for node or zone, in the same
// order (pkg/proxy/topology.go CategorizeEndpoints' clusterEndpoints).
// Without hints it is KubeProxyOrder. The endpoints a Local policy uses
// are among them: an endpoint on node is hinted for node and for node's
// zone, so a caller that picks node's endpoints from this list finds
// every one (kube-proxy's localEndpoints come from the unfiltered list,
// the same set).
func (s *Service) KubeProxyOrderAt(node, zone string) []Endpoint {
	out := s.KubeProxyOrder()
	if s.TrafficDistribution == "" {
		return out
	}
	mode := s.TopologyMode(node, zone)
	if mode == "" {
		return out
	}
	return slices.DeleteFunc(out, func(e Endpoint) bool { return !s.availableFor(e, mode, node, zone) })
}
