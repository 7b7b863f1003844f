// Package workload is the pure service model the proxy modes serve:
// services, ServicePorts and endpoints generated from a scenario, the driver
// positions over them, and the churn generator that mutates them. It touches
// no kernel; the traffic that exercises it (echo server, driver, probes) is
// in package workload/traffic.
package workload

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/proxybench/proxybench/scenarios"
)

// Namespace is the Kubernetes namespace every generated service lives in.
const Namespace = "pb"

// Service is one ClusterIP Service with its EndpointSlice, as a proxier sees it.
type Service struct {
	Namespace string
	Name      string
	ClusterIP netip.Addr
	Ports     []ServicePort
	// Endpoints in the order the API returns them (sorted by IP).
	Endpoints []Endpoint

	// Type is ClusterIP ("" too), NodePort or LoadBalancer (core/v1
	// ServiceType); a NodePort or LoadBalancer service has
	// ServicePort.NodePort set on every port.
	Type string
	// ExternalIPs are spec.externalIPs; LoadBalancerIPs the ingress IPs of
	// status.loadBalancer.ingress (written by the testbed: there is no
	// cloud).
	ExternalIPs, LoadBalancerIPs []netip.Addr
	// ExternalLocal is externalTrafficPolicy Local: traffic to node
	// ports, external IPs and LoadBalancer IPs goes to endpoints on the
	// node it arrives at only, with the client's address kept;
	// HealthCheckNodePort (LoadBalancer only) answers on every node how
	// many such endpoints it has. InternalLocal is internalTrafficPolicy
	// Local: ClusterIP traffic goes to endpoints on the client's node only.
	ExternalLocal, InternalLocal bool
	HealthCheckNodePort          uint16
	// TrafficDistribution is spec.trafficDistribution (PreferClose,
	// PreferSameZone, PreferSameNode; "": none), from which the testbed
	// writes the EndpointSlice hints (Endpoint.Hints).
	TrafficDistribution string
}

// Exposed reports whether s is reached beyond its ClusterIP (NodePort,
// LoadBalancer or external IPs: core/v1's ExternallyAccessible).
func (s *Service) Exposed() bool {
	return s.Type == scenarios.TypeNodePort || s.Type == scenarios.TypeLoadBalancer || len(s.ExternalIPs) > 0
}

// HasNodePorts reports whether s's ports have node ports (NodePort and
// LoadBalancer).
func (s *Service) HasNodePorts() bool {
	return s.Type == scenarios.TypeNodePort || s.Type == scenarios.TypeLoadBalancer
}

// LocalEndpoints returns the endpoints of ReadyEndpoints that sit on node
// (Endpoint.Node): the ones externalTrafficPolicy and
// internalTrafficPolicy Local keep on that node (pkg/proxy/topology.go
// CategorizeEndpoints: local endpoints are those whose nodeName is the
// proxy's hostname).
func (s *Service) LocalEndpoints(node string) []Endpoint {
	var out []Endpoint
	for _, e := range s.ReadyEndpoints() {
		if e.Node == node {
			out = append(out, e)
		}
	}
	return out
}

// ServicePort is one port of a Service (Kubernetes' ServicePort).
type ServicePort struct {
	Name       string // "p80", "dns-tcp"; "" only on a service's single port
	Port       uint16 // port on the ClusterIP
	TargetPort uint16 // port on every endpoint
	Protocol   string // "TCP", "UDP" or "SCTP"
	// NodePort is the port every node answers for the service on
	// (30000-32767; 0: none, a ClusterIP service).
	NodePort uint16
}

// Endpoint is one backend pod address of a Service's EndpointSlice, with
// the slice's conditions (discovery.k8s.io/v1 EndpointConditions): Ready
// (the pod is ready and not terminating), Serving (ready, whether or not
// terminating) and Terminating. Generated endpoints start ready and
// serving (NewEndpoint); churn turns Ready and Serving off and on
// together, as the API does for a pod that is not terminating. The modes
// program Ready endpoints while a service has any, else its Serving and
// Terminating ones (kube-proxy's fallback, Service.ServingFallback;
// userspace, removed before it, programs Ready ones only).
type Endpoint struct {
	IP          netip.Addr
	Ready       bool
	Serving     bool
	Terminating bool
	Weight      int // relative weight for weighted schedulers (default 1)
	// Node is the name of the node the endpoint's pod runs on
	// (scenarios.NodeName; the EndpointSlice endpoint's nodeName), ""
	// when not placed.
	Node string
	// Zone is the zone of Node (topology.zones; the EndpointSlice
	// endpoint's zone field), "" when the node has none.
	Zone string
}

// NewEndpoint returns a ready, serving, not terminating endpoint of weight 1.
func NewEndpoint(ip netip.Addr) Endpoint {
	return Endpoint{IP: ip, Ready: true, Serving: true, Weight: 1}
}

// PortName is kube-proxy's ServicePortName string: "namespace/name:port",
// or "namespace/name" for an unnamed port (pkg/proxy/types.go,
// ServicePortName.String), which the modes hash into chain names.
func (s *Service) PortName(p ServicePort) string {
	if p.Name == "" {
		return s.Namespace + "/" + s.Name
	}
	return s.Namespace + "/" + s.Name + ":" + p.Name
}

// Services generates the scenario's services: service i gets ClusterIP
// serviceCIDR.base+1+i and its endpoints take the next free addresses of the
// pod CIDR (from base+1). Endpoint counts follow Services.Endpoints, drawn
// with the scenario's seed, so the same scenario always yields the same set.
// It fails when the addresses do not fit (Load already checks this).
//
// Services after the main list's count are those of services.groups, in
// order; each gets its exposure (type, node ports, external and
// LoadBalancer IPs, traffic policies) from scenarios.Exposures, and every
// endpoint its node: endpointNodes[k mod len] for endpoint k, else node
// k mod topology.nodes.
func Services(sc *scenarios.Scenario) ([]Service, error) {
	svcNet, podNet, _, _ := sc.Prefixes()
	counts := sc.EndpointCounts()
	exps, err := sc.Exposures()
	if err != nil {
		return nil, err
	}
	nodes, isolated := sc.Topology.NodeCount(), sc.Topology.PodModel() == "isolated"
	out := make([]Service, len(counts))
	vip := svcNet.Addr().Next()
	pod := podNet.Addr().Next()
	spec := sc.Services.PortList()
	ports := make([]ServicePort, len(spec))
	for j, p := range spec {
		ports[j] = ServicePort{Name: p.Name, Port: uint16(p.Port), TargetPort: uint16(p.TargetPort), Protocol: p.Protocol}
	}
	for i := range out {
		if !svcNet.Contains(vip) {
			return nil, fmt.Errorf("services: %d services do not fit serviceCIDR %s", len(counts), svcNet)
		}
		x := exps[i]
		eps := make([]Endpoint, counts[i])
		for k := range eps {
			if !podNet.Contains(pod) {
				return nil, fmt.Errorf("services: endpoints do not fit podCIDR %s", podNet)
			}
			eps[k] = NewEndpoint(pod)
			switch {
			case len(x.EndpointNodes) > 0:
				eps[k].Node = x.EndpointNodes[k%len(x.EndpointNodes)]
			case isolated:
				eps[k].Node = scenarios.NodeName(k % nodes)
			}
			eps[k].Zone = sc.ZoneOf(eps[k].Node)
			pod = pod.Next()
		}
		svcPorts := ports
		if len(x.NodePorts) > 0 {
			svcPorts = slices.Clone(ports)
			for j := range svcPorts {
				svcPorts[j].NodePort = uint16(x.NodePorts[j])
			}
		}
		out[i] = Service{
			Namespace:   Namespace,
			Name:        fmt.Sprintf("svc-%05d", i),
			ClusterIP:   vip,
			Ports:       svcPorts,
			Endpoints:   eps,
			Type:        x.Type,
			ExternalIPs: x.ExternalIPs, LoadBalancerIPs: x.LoadBalancerIPs,
			ExternalLocal: x.ExternalPolicy == scenarios.PolicyLocal, InternalLocal: x.InternalPolicy == scenarios.PolicyLocal,
			HealthCheckNodePort: uint16(x.HealthCheckNodePort),
			TrafficDistribution: x.TrafficDistribution,
		}
		vip = vip.Next()
	}
	return out, nil
}
