package scenarios

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Service types (core/v1 ServiceType) of services.type; ExternalName is
// not proxied and not accepted.
const (
	TypeClusterIP    = "ClusterIP"
	TypeNodePort     = "NodePort"
	TypeLoadBalancer = "LoadBalancer"
)

// Traffic policies (core/v1 ServiceExternalTrafficPolicy and
// ServiceInternalTrafficPolicy) of services.externalTrafficPolicy and
// services.internalTrafficPolicy.
const (
	PolicyCluster = "Cluster"
	PolicyLocal   = "Local"
)

// ServiceTypes and TrafficPolicies are the values validate accepts.
var (
	ServiceTypes    = []string{TypeClusterIP, TypeNodePort, TypeLoadBalancer}
	TrafficPolicies = []string{PolicyCluster, PolicyLocal}
)

// NodePortMin and NodePortMax bound node ports and health check node
// ports: kube-apiserver's default --service-node-port-range 30000-32767,
// the range its allocator gives them from and validation checks given
// ones against (pkg/registry/core/service/portallocator).
const (
	NodePortMin = 30000
	NodePortMax = 32767
)

// Defaults of network.loadBalancerCIDR and network.externalClientCIDR, and
// of network.serviceCIDR when a scenario exposes services beyond their
// ClusterIP (services.type, externalIPs, groups or topology.externalClient):
// the lower half of 198.18.0.0/16 for ClusterIPs, so LoadBalancer IPs and
// the external client take addresses of the same benchmarking range
// (RFC 2544) outside both serviceCIDR and clusterCIDR.
const (
	DefaultLoadBalancerCIDR   = "198.18.128.0/24"
	DefaultExternalClientCIDR = "198.18.192.0/24"
	DefaultExposedServiceCIDR = "198.18.0.0/17"
)

// NodeName is the name of node i in the API and in services.endpointNodes
// ("node-0"): kube-proxy's hostnameOverride, an EndpointSlice endpoint's
// nodeName, and what builtin proxiers compare an endpoint's node with.
func NodeName(i int) string { return "node-" + strconv.Itoa(i) }

// Exposure is one generated service's exposure, allocated from its
// ServicesSpec (main list or group) by Scenario.Exposures.
type Exposure struct {
	// Type is ClusterIP, NodePort or LoadBalancer.
	Type string
	// ExternalPolicy and InternalPolicy are Cluster or Local (Cluster
	// when not set, as the API defaults them); ExternalPolicy is "" for a
	// service that is not externally accessible (ClusterIP without
	// external IPs), as the API leaves it.
	ExternalPolicy, InternalPolicy string
	// NodePorts has one node port per ServicePort (NodePort and
	// LoadBalancer), nil for ClusterIP.
	NodePorts []int
	// HealthCheckNodePort is set for type LoadBalancer with
	// externalTrafficPolicy Local (the only case the API allocates one).
	HealthCheckNodePort int
	// ExternalIPs are spec.externalIPs; LoadBalancerIPs are the ingress
	// IPs the testbed writes into status.loadBalancer.ingress.
	ExternalIPs, LoadBalancerIPs []netip.Addr
	// EndpointNodes places endpoint k on EndpointNodes[k mod len] (node
	// names, NodeName); nil: endpoint k on node k mod topology.nodes.
	EndpointNodes []string
	// TrafficDistribution is spec.trafficDistribution ("": none).
	TrafficDistribution string
}

// Exposed reports whether the service is reached beyond its ClusterIP
// (core/v1's ExternallyAccessible: NodePort, LoadBalancer, or external IPs).
func (e Exposure) Exposed() bool {
	return e.Type == TypeNodePort || e.Type == TypeLoadBalancer || len(e.ExternalIPs) > 0
}

// Label describes the exposure for reports: "NodePort etp=Local",
// "ClusterIP itp=Local", "ClusterIP+externalIPs".
func (e Exposure) Label() string {
	l := e.Type
	if len(e.ExternalIPs) > 0 {
		l += "+externalIPs"
	}
	if e.ExternalPolicy != "" {
		l += " etp=" + e.ExternalPolicy
	}
	if e.InternalPolicy == PolicyLocal {
		l += " itp=Local"
	}
	if e.TrafficDistribution != "" {
		l += " td=" + e.TrafficDistribution
	}
	return l
}

// ServiceSpecs returns the main service list's spec followed by every
// group's, each with the main list's ports, protocol and session
// affinity (the fields a group shares).
func (s *Scenario) ServiceSpecs() []ServicesSpec {
	out := []ServicesSpec{s.Services}
	for _, g := range s.Services.Groups {
		sp := s.Services
		sp.Groups, sp.Endpoints = nil, EndpointsSpec{Distribution: "fixed", Count: g.Endpoints.Count}
		sp.Count, sp.Type, sp.ExternalTrafficPolicy, sp.InternalTrafficPolicy = g.Count, g.Type, g.ExternalTrafficPolicy, g.InternalTrafficPolicy
		sp.NodePorts, sp.HealthCheckNodePorts, sp.ExternalIPs, sp.LoadBalancerIPs, sp.EndpointNodes = g.NodePorts, g.HealthCheckNodePorts, g.ExternalIPs, g.LoadBalancerIPs, g.EndpointNodes
		sp.TrafficDistribution = g.TrafficDistribution
		out = append(out, sp)
	}
	return out
}

// ServiceTotal is the number of generated services: services.count plus
// every group's count.
func (s *Scenario) ServiceTotal() int {
	n := s.Services.Count
	for _, g := range s.Services.Groups {
		if g.Count >= 0 && g.Count <= MaxServices {
			n += g.Count
		}
	}
	return n
}

// ExposesServices reports whether the scenario reaches services beyond
// their ClusterIPs (a type other than ClusterIP, external IPs, groups) or
// has an external client; such a scenario's address defaults leave room
// for LoadBalancer IPs and the external client (DefaultExposedServiceCIDR).
func (s *Scenario) ExposesServices() bool {
	if len(s.Services.Groups) > 0 || s.Topology.ExternalClient {
		return true
	}
	sv := s.Services
	return (sv.Type != "" && sv.Type != TypeClusterIP) || len(sv.ExternalIPs) > 0
}

// Exposures allocates every generated service's exposure, in service
// order (the main list, then each group): node ports as kube-apiserver
// would, but in order (given ones first, services.nodePorts[j] for the
// group's j-th ServicePort in service order; the others the lowest free
// port of 30000-32767, so builtin and kube-proxy rows see the same
// numbers), health check node ports for LoadBalancer services with
// externalTrafficPolicy Local (healthCheckNodePorts[i], else the next
// free port), external IPs (externalIPs[i] for the group's service i),
// and LoadBalancer ingress IPs (loadBalancerIPs[i], else the next free
// address of network.loadBalancerCIDR). Valid only on a validated
// Scenario; it fails when the node port range or loadBalancerCIDR runs
// out (validate refuses that first).
func (s *Scenario) Exposures() ([]Exposure, error) {
	specs := s.ServiceSpecs()
	used := map[int]bool{}
	lbUsed := map[netip.Addr]bool{}
	for _, sp := range specs {
		for _, p := range sp.NodePorts {
			used[p] = true
		}
		for _, p := range sp.HealthCheckNodePorts {
			used[p] = true
		}
		for _, a := range sp.LoadBalancerIPs {
			if ip, err := netip.ParseAddr(a); err == nil {
				lbUsed[ip] = true
			}
		}
	}
	next := NodePortMin
	alloc := func() (int, error) {
		for ; next <= NodePortMax; next++ {
			if !used[next] {
				used[next] = true
				return next, nil
			}
		}
		return 0, fmt.Errorf("services: the node port range %d-%d is used up", NodePortMin, NodePortMax)
	}
	lbNet, _ := netip.ParsePrefix(s.LoadBalancerPrefixString())
	lbNext := lbNet.Addr().Next()
	allocLB := func() (netip.Addr, error) {
		for ; lbNet.Contains(lbNext); lbNext = lbNext.Next() {
			if !lbUsed[lbNext] {
				a := lbNext
				lbNext = lbNext.Next()
				return a, nil
			}
		}
		return netip.Addr{}, fmt.Errorf("services: network.loadBalancerCIDR %s is used up", lbNet)
	}
	nports := len(s.Services.PortList())
	out := make([]Exposure, 0, s.ServiceTotal())
	for _, sp := range specs {
		typ := sp.Type
		if typ == "" {
			typ = TypeClusterIP
		}
		given := 0
		for i := 0; i < min(sp.Count, MaxServices); i++ {
			e := Exposure{Type: typ, InternalPolicy: PolicyCluster, EndpointNodes: sp.EndpointNodes, TrafficDistribution: sp.TrafficDistribution}
			if sp.InternalTrafficPolicy != "" {
				e.InternalPolicy = sp.InternalTrafficPolicy
			}
			if i < len(sp.ExternalIPs) {
				e.ExternalIPs = []netip.Addr{netip.MustParseAddr(sp.ExternalIPs[i])}
			}
			if e.Exposed() {
				e.ExternalPolicy = PolicyCluster
				if sp.ExternalTrafficPolicy != "" {
					e.ExternalPolicy = sp.ExternalTrafficPolicy
				}
			}
			if typ == TypeNodePort || typ == TypeLoadBalancer {
				e.NodePorts = make([]int, nports)
				for j := range e.NodePorts {
					if given < len(sp.NodePorts) {
						e.NodePorts[j] = sp.NodePorts[given]
						given++
						continue
					}
					p, err := alloc()
					if err != nil {
						return nil, err
					}
					e.NodePorts[j] = p
				}
			}
			if typ == TypeLoadBalancer {
				if i < len(sp.LoadBalancerIPs) {
					e.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr(sp.LoadBalancerIPs[i])}
				} else {
					a, err := allocLB()
					if err != nil {
						return nil, err
					}
					e.LoadBalancerIPs = []netip.Addr{a}
				}
				if e.ExternalPolicy == PolicyLocal {
					if i < len(sp.HealthCheckNodePorts) {
						e.HealthCheckNodePort = sp.HealthCheckNodePorts[i]
					} else {
						p, err := alloc()
						if err != nil {
							return nil, err
						}
						e.HealthCheckNodePort = p
					}
				}
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// LoadBalancerPrefixString is network.loadBalancerCIDR or its default.
func (s *Scenario) LoadBalancerPrefixString() string {
	if s.Network.LoadBalancerCIDR == "" {
		return DefaultLoadBalancerCIDR
	}
	return s.Network.LoadBalancerCIDR
}

// ExternalClientPrefix is network.externalClientCIDR parsed, or its
// default. Valid only on a validated Scenario.
func (s *Scenario) ExternalClientPrefix() netip.Prefix {
	if s.Network.ExternalClientCIDR == "" {
		return netip.MustParsePrefix(DefaultExternalClientCIDR)
	}
	return netip.MustParsePrefix(s.Network.ExternalClientCIDR)
}

// exposure checks services' exposure fields and groups as Kubernetes
// validates a Service (pkg/apis/core/validation ValidateService: the type,
// node ports in the node port range and not used twice, the traffic
// policies, externalTrafficPolicy only on an externally accessible
// service, healthCheckNodePort only with type LoadBalancer and
// externalTrafficPolicy Local, IP addresses of the run's family), and what
// the testbed needs (LoadBalancer IPs outside the service and cluster
// ranges, endpoint nodes that exist).
func (c *checker) exposure() {
	s := c.s
	specs := s.ServiceSpecs()
	paths := []string{"services"}
	for i, g := range s.Services.Groups {
		f := fmt.Sprintf("services.groups[%d]", i)
		c.group(f, g)
		paths = append(paths, f)
	}
	ports := map[int]string{}
	total := 0
	nports := len(s.Services.PortList())
	for k, sp := range specs {
		c.exposureOf(paths[k], sp, nports, ports)
		if sp.Type == TypeNodePort || sp.Type == TypeLoadBalancer {
			total += sp.Count * nports
			if sp.Type == TypeLoadBalancer && sp.ExternalTrafficPolicy == PolicyLocal {
				total += sp.Count
			}
		}
	}
	if free := NodePortMax - NodePortMin + 1; total > free {
		c.add("services", fmt.Sprintf("%d node ports and health check node ports are needed but the node port range %d-%d has %d", total, NodePortMin, NodePortMax, free),
			"use fewer NodePort or LoadBalancer services or ports")
	}
	if s.Topology.ExternalClient && s.Topology.NodeCount() < 2 {
		c.add("topology.externalClient", "the external client joins the nodes' fabric bridge, which needs topology.nodes >= 2", "set topology.nodes: 2 or more")
	}
	if s.ExposesServices() {
		lb, lbOK := c.prefix("network.loadBalancerCIDR", s.LoadBalancerPrefixString())
		ext, extOK := c.prefix("network.externalClientCIDR", s.ExternalClientPrefix().String())
		for _, o := range []struct {
			name string
			p    netip.Prefix
			ok   bool
		}{{"loadBalancerCIDR", lb, lbOK}, {"externalClientCIDR", ext, extOK}} {
			for _, q := range []struct {
				name string
				p    netip.Prefix
				ok   bool
			}{{"serviceCIDR", c.svc, c.svcOK}, {"clusterCIDR", c.cluster, c.clOK}, {"podCIDR", c.pod, c.podOK}, {"nodeCIDR", c.node, c.nodeOK}} {
				if o.ok && q.ok && o.p.Overlaps(q.p) {
					c.add("network."+o.name, fmt.Sprintf("%s overlaps %s %s", o.p, q.name, q.p), "pick a range disjoint from "+q.name)
				}
			}
		}
		if lbOK && extOK && lb.Overlaps(ext) {
			c.add("network.externalClientCIDR", fmt.Sprintf("%s overlaps loadBalancerCIDR %s", ext, lb), "pick a range disjoint from loadBalancerCIDR")
		}
	}
}

// group checks a services.groups entry's own fields.
func (c *checker) group(f string, g ServiceGroup) {
	c.between(f+".count", g.Count, 1, MaxServices)
	c.between(f+".endpoints.count", g.Endpoints.Count, 0, MaxEndpointsPerService)
}

// exposureOf checks one spec's exposure fields (path "services" or
// "services.groups[i]"); ports collects every given node port with its
// field, for duplicates across specs.
func (c *checker) exposureOf(path string, sp ServicesSpec, nports int, ports map[int]string) {
	s := c.s
	typ := sp.Type
	if typ != "" || s.has(path+".type") {
		if !c.oneOf(path+".type", typ, ServiceTypes) {
			return
		}
	}
	if typ == "" {
		typ = TypeClusterIP
	}
	nodePorts := typ == TypeNodePort || typ == TypeLoadBalancer
	exposed := nodePorts || len(sp.ExternalIPs) > 0
	if sp.ExternalTrafficPolicy != "" || s.has(path+".externalTrafficPolicy") {
		if c.oneOf(path+".externalTrafficPolicy", sp.ExternalTrafficPolicy, TrafficPolicies) && !exposed {
			c.add(path+".externalTrafficPolicy", fmt.Sprintf("%s applies to externally accessible services only, and %s is type ClusterIP without externalIPs", sp.ExternalTrafficPolicy, path),
				"set "+path+".type to NodePort or LoadBalancer, give externalIPs, or remove externalTrafficPolicy")
		}
	}
	if sp.InternalTrafficPolicy != "" || s.has(path+".internalTrafficPolicy") {
		c.oneOf(path+".internalTrafficPolicy", sp.InternalTrafficPolicy, TrafficPolicies)
	}
	for _, f := range []struct{ name, v string }{{"externalTrafficPolicy", sp.ExternalTrafficPolicy}, {"internalTrafficPolicy", sp.InternalTrafficPolicy}} {
		if f.v == PolicyLocal && s.Topology.PodModel() != "isolated" {
			c.add(path+"."+f.name, "Local keeps traffic on endpoints of the node it reaches, and endpoints sit on nodes only with topology.pods: isolated",
				"set topology.pods: isolated (and topology.nodes: 2 or more)")
		}
	}
	if len(sp.NodePorts) > 0 && !nodePorts {
		c.add(path+".nodePorts", fmt.Sprintf("type %s has no node ports", typ), "set "+path+".type to NodePort or LoadBalancer, or remove nodePorts")
	}
	if n := sp.Count * nports; len(sp.NodePorts) > n && sp.Count >= 0 {
		c.add(path+".nodePorts", fmt.Sprintf("%d node ports given for %d service ports", len(sp.NodePorts), n), "give at most one per ServicePort of the group's services")
	}
	for i, p := range sp.NodePorts {
		c.nodePort(fmt.Sprintf("%s.nodePorts[%d]", path, i), p, ports)
	}
	if len(sp.HealthCheckNodePorts) > 0 && !(typ == TypeLoadBalancer && sp.ExternalTrafficPolicy == PolicyLocal) {
		c.add(path+".healthCheckNodePorts", "a health check node port exists only for type LoadBalancer with externalTrafficPolicy Local",
			"set type: LoadBalancer and externalTrafficPolicy: Local, or remove healthCheckNodePorts")
	}
	if len(sp.HealthCheckNodePorts) > sp.Count && sp.Count >= 0 {
		c.add(path+".healthCheckNodePorts", fmt.Sprintf("%d given for %d services", len(sp.HealthCheckNodePorts), sp.Count), "give at most one per service")
	}
	for i, p := range sp.HealthCheckNodePorts {
		c.nodePort(fmt.Sprintf("%s.healthCheckNodePorts[%d]", path, i), p, ports)
	}
	if len(sp.LoadBalancerIPs) > 0 && typ != TypeLoadBalancer {
		c.add(path+".loadBalancerIPs", fmt.Sprintf("type %s has no LoadBalancer ingress", typ), "set "+path+".type: LoadBalancer, or remove loadBalancerIPs")
	}
	for _, l := range []struct {
		name string
		list []string
	}{{"externalIPs", sp.ExternalIPs}, {"loadBalancerIPs", sp.LoadBalancerIPs}} {
		if len(l.list) > sp.Count && sp.Count >= 0 {
			c.add(path+"."+l.name, fmt.Sprintf("%d given for %d services", len(l.list), sp.Count), "give at most one per service (service i gets entry i)")
		}
		seen := map[netip.Addr]int{}
		for i, a := range l.list {
			f := fmt.Sprintf("%s.%s[%d]", path, l.name, i)
			ip, ok := c.serviceAddr(f, a)
			if !ok {
				continue
			}
			if j, dup := seen[ip]; dup && l.name == "loadBalancerIPs" {
				c.add(f, fmt.Sprintf("%s is listed twice (also [%d])", ip, j), "give each service its own LoadBalancer IP")
			}
			seen[ip] = i
		}
	}
	nodes := s.Topology.NodeCount()
	for i, n := range sp.EndpointNodes {
		f := fmt.Sprintf("%s.endpointNodes[%d]", path, i)
		k, err := strconv.Atoi(strings.TrimPrefix(n, "node-"))
		if !strings.HasPrefix(n, "node-") || err != nil || k < 0 || k >= nodes || NodeName(k) != n {
			names := make([]string, nodes)
			for j := range names {
				names[j] = NodeName(j)
			}
			c.add(f, fmt.Sprintf("%q is not a node of this testbed", n), "use one of "+strings.Join(names, ", "))
		}
	}
	if len(sp.EndpointNodes) > 0 && s.Topology.PodModel() != "isolated" {
		c.add(path+".endpointNodes", "endpoints sit on a node only with topology.pods: isolated (shared pods answer from one backend host behind every node)",
			"set topology.pods: isolated")
	}
}

// nodePort checks one given node port: in range, not given twice.
func (c *checker) nodePort(f string, p int, ports map[int]string) {
	if p < NodePortMin || p > NodePortMax {
		c.add(f, fmt.Sprintf("%d is outside the node port range %d-%d", p, NodePortMin, NodePortMax),
			fmt.Sprintf("use a port of %d-%d (kube-apiserver's default --service-node-port-range), or leave it out to have one allocated", NodePortMin, NodePortMax))
		return
	}
	if first, dup := ports[p]; dup {
		c.add(f, fmt.Sprintf("node port %d is already used by %s", p, first), "give each node port once")
		return
	}
	ports[p] = f
}

// serviceAddr checks an external or LoadBalancer IP: an address of the
// run's family (IPv4: the testbed is IPv4-only), not special-purpose, and
// outside serviceCIDR, clusterCIDR, podCIDR and nodeCIDR.
func (c *checker) serviceAddr(f, a string) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(a)
	switch {
	case err != nil:
		c.add(f, fmt.Sprintf("%q is not an IP address", a), "write an IPv4 address such as 198.18.128.10")
		return ip, false
	case !ip.Is4():
		c.add(f, fmt.Sprintf("%s is IPv6 but this run is IPv4-only", ip), "write an IPv4 address such as 198.18.128.10")
		return ip, false
	}
	if sp, what := SpecialOverlap(netip.PrefixFrom(ip, 32)); what != "" {
		c.add(f, fmt.Sprintf("%s is in %s %s, which no Service can be reached at", ip, what, sp), "use an address of 198.18.0.0/15 outside serviceCIDR and clusterCIDR, such as 198.18.128.10")
		return ip, false
	}
	for _, q := range []struct {
		name string
		p    netip.Prefix
		ok   bool
	}{{"serviceCIDR", c.svc, c.svcOK}, {"clusterCIDR", c.cluster, c.clOK}, {"podCIDR", c.pod, c.podOK}, {"nodeCIDR", c.node, c.nodeOK}} {
		if q.ok && q.p.Contains(ip) {
			c.add(f, fmt.Sprintf("%s is inside network.%s %s", ip, q.name, q.p), "use an address outside "+q.name+", such as one of network.loadBalancerCIDR ("+c.s.LoadBalancerPrefixString()+")")
			return ip, false
		}
	}
	return ip, true
}

// exposureDefaults fills what exposing services changes (SetDefaults,
// before network's defaults): the smaller default serviceCIDR, and each
// group's endpoint count (the main list's fixed count, else 3).
func (s *Scenario) exposureDefaults() {
	if s.ExposesServices() && s.Network.ServiceCIDR == "" && !s.has("network.serviceCIDR") {
		s.Network.ServiceCIDR = DefaultExposedServiceCIDR
	}
	for i := range s.Services.Groups {
		g := &s.Services.Groups[i]
		if g.Endpoints.Count == 0 && !s.has(fmt.Sprintf("services.groups[%d].endpoints.count", i)) {
			g.Endpoints.Count = 3
			if s.Services.Endpoints.Distribution == "fixed" && s.Services.Endpoints.Count > 0 {
				g.Endpoints.Count = s.Services.Endpoints.Count
			}
		}
	}
}

// groupEndpointCounts appends every group's fixed endpoint counts to out
// (EndpointCounts).
func (s *Scenario) groupEndpointCounts(out []int) []int {
	for _, g := range s.Services.Groups {
		if g.Count < 0 || g.Count > MaxServices {
			continue // invalid: validate refuses it
		}
		out = append(out, slices.Repeat([]int{g.Endpoints.Count}, g.Count)...)
	}
	return out
}
