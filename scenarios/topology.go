package scenarios

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Traffic distributions (core/v1 ServiceTrafficDistribution) of
// services.trafficDistribution. PreferClose is the older name of
// PreferSameZone (the API keeps both, with one meaning); PreferSameNode
// is GA since v1.35 (feature gate PreferSameTrafficDistribution).
const (
	DistPreferClose    = "PreferClose"
	DistPreferSameZone = "PreferSameZone"
	DistPreferSameNode = "PreferSameNode"
)

// TrafficDistributions are the values validate accepts; leaving the
// field out is "none" (cluster-wide, no hints).
var TrafficDistributions = []string{DistPreferClose, DistPreferSameZone, DistPreferSameNode}

// ZoneLabel is the Node label a node's zone is read from
// (topology.kubernetes.io/zone, core/v1 LabelTopologyZone): kube-proxy
// reads it from its own Node object, the EndpointSlice controller from
// each endpoint's node.
const ZoneLabel = "topology.kubernetes.io/zone"

// labelValueRE is a Kubernetes label value (apimachinery
// validation.IsValidLabelValue), not empty: at most 63 characters of
// alphanumerics, '-', '_' and '.', beginning and ending alphanumeric.
var labelValueRE = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)

// ZoneOf returns the zone of the node named node (NodeName) from
// topology.zones, or "" when zones are not given or node is not a node
// of the testbed.
func (s *Scenario) ZoneOf(node string) string {
	for i, z := range s.Topology.Zones {
		if NodeName(i) == node {
			return z
		}
	}
	return ""
}

// NodeZones maps every node name to its zone (topology.zones); nil when
// zones are not given.
func (s *Scenario) NodeZones() map[string]string {
	if len(s.Topology.Zones) == 0 {
		return nil
	}
	out := make(map[string]string, len(s.Topology.Zones))
	for i, z := range s.Topology.Zones {
		out[NodeName(i)] = z
	}
	return out
}

// UsesTrafficDistribution reports whether any service (main list or
// group) sets trafficDistribution.
func (s *Scenario) UsesTrafficDistribution() bool {
	for _, sp := range s.ServiceSpecs() {
		if sp.TrafficDistribution != "" {
			return true
		}
	}
	return false
}

// trafficDistribution checks topology.zones (one valid label value per
// node) and every services.trafficDistribution: a known value, endpoints
// placed on nodes (topology.pods: isolated: the hints name an endpoint's
// node and zone), and for PreferClose and PreferSameZone zones to hint
// (the EndpointSlice controller writes a zone hint only for an endpoint
// whose node has a zone label; without one kube-proxy ignores the
// distribution, pkg/proxy/topology.go topologyModeFromHints).
func (c *checker) trafficDistribution() {
	s := c.s
	zones := s.Topology.Zones
	if len(zones) > 0 || s.has("topology.zones") {
		if n := s.Topology.NodeCount(); len(zones) != n {
			c.add("topology.zones", fmt.Sprintf("%d zones given for %d nodes", len(zones), n),
				"give one zone per node (entry i is node-i's topology.kubernetes.io/zone), such as [zone-a, zone-a, zone-b] for topology.nodes: 3")
		}
		for i, z := range zones {
			if len(z) > 63 || !labelValueRE.MatchString(z) {
				c.add(fmt.Sprintf("topology.zones[%d]", i), fmt.Sprintf("%q is not a label value", z),
					"use at most 63 letters, digits, '-', '_' or '.', beginning and ending with a letter or digit, such as zone-a")
			}
		}
	}
	paths := []string{"services"}
	for i := range s.Services.Groups {
		paths = append(paths, fmt.Sprintf("services.groups[%d]", i))
	}
	for k, sp := range s.ServiceSpecs() {
		f := paths[k] + ".trafficDistribution"
		td := sp.TrafficDistribution
		if td == "" && !s.has(f) {
			continue
		}
		if !c.oneOf(f, td, TrafficDistributions) {
			continue
		}
		if s.Topology.PodModel() != "isolated" {
			c.add(f, "the hints name each endpoint's node and zone, and endpoints sit on nodes only with topology.pods: isolated",
				"set topology.pods: isolated (and topology.nodes: 2 or more)")
		}
		if td != DistPreferSameNode && len(zones) == 0 {
			c.add(f, td+" is decided from zone hints, and without topology.zones no node has a zone, so there are no hints to write (kube-proxy would ignore the distribution)",
				"set topology.zones (one zone per node, such as [zone-a, zone-b]), or use PreferSameNode, whose node hints need no zones")
		}
	}
	c.hintModes(paths)
}

// hintModes checks, with the build's catalog, that every mode whose
// builtin proxier runs under a trafficDistribution (a builtin row, or the
// serviceTypes phase, whose passes run builtin in every mode with rules)
// follows the hints (Catalog.TopologyHints): one that does not programs
// every endpoint on every node, and its same-node and same-zone shares
// would be cluster-wide where kube-proxy's are not. Refused at the first
// trafficDistribution set (paths: services, then each group).
func (c *checker) hintModes(paths []string) {
	s := c.s
	if c.cat == nil || c.cat.TopologyHints == nil {
		return
	}
	field := ""
	for k, sp := range s.ServiceSpecs() {
		if sp.TrafficDistribution != "" {
			field = paths[k] + ".trafficDistribution"
			break
		}
	}
	if field == "" {
		return
	}
	var lack []string
	for _, m := range s.Modes {
		builtin := slices.Contains(s.Implementations(m), ImplBuiltin) || s.ServiceTypes != nil
		if m != BaselineMode && builtin && slices.Contains(c.cat.Modes, m) && !slices.Contains(c.cat.TopologyHints, m) {
			lack = append(lack, m)
		}
	}
	if len(lack) == 0 {
		return
	}
	why := fmt.Sprintf("builtin %s does not narrow its endpoints by the EndpointSlice hints in this build (modes whose builtin does: %s), so it would send every node's traffic cluster-wide",
		strings.Join(lack, ", "), strings.Join(c.cat.TopologyHints, ", "))
	if kp := kubeProxyOnly(lack); len(kp) > 0 {
		why += fmt.Sprintf(", where kube-proxy's %s follows them (pkg/proxy/topology.go CategorizeEndpoints serves every mode)", strings.Join(kp, ", "))
	}
	if len(kubeProxyOnly(lack)) < len(lack) {
		why += "; kube-proxy v1.37 has no userspace mode to follow (removed in v1.26)"
	}
	fix := "remove " + strings.Join(lack, ", ") + " from modes"
	if kp := kubeProxyOnly(lack); len(kp) > 0 && s.ServiceTypes == nil {
		fix += ", or run " + strings.Join(kp, ", ") + " with kube-proxy alone (implementation: [kube-proxy])"
	}
	c.add(field, why, fix+", or remove trafficDistribution")
}
