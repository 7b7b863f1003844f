// Package workload is the pure service model the proxy modes serve:
// services, ServicePorts and endpoints generated from a scenario, the driver
// positions over them, and the churn generator that mutates them. It touches
// no kernel; the traffic that exercises it (echo server, driver, probes) is
// in package workload/traffic.
package workload

import (
	"fmt"
	"net/netip"

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
}

// ServicePort is one port of a Service (Kubernetes' ServicePort).
type ServicePort struct {
	Name       string // "p80", "dns-tcp"; "" only on a service's single port
	Port       uint16 // port on the ClusterIP
	TargetPort uint16 // port on every endpoint
	Protocol   string // "TCP", "UDP" or "SCTP"
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
func Services(sc *scenarios.Scenario) ([]Service, error) {
	svcNet, podNet, _, _ := sc.Prefixes()
	counts := sc.EndpointCounts()
	out := make([]Service, sc.Services.Count)
	vip := svcNet.Addr().Next()
	pod := podNet.Addr().Next()
	spec := sc.Services.PortList()
	ports := make([]ServicePort, len(spec))
	for j, p := range spec {
		ports[j] = ServicePort{Name: p.Name, Port: uint16(p.Port), TargetPort: uint16(p.TargetPort), Protocol: p.Protocol}
	}
	for i := range out {
		if !svcNet.Contains(vip) {
			return nil, fmt.Errorf("services: %d services do not fit serviceCIDR %s", sc.Services.Count, svcNet)
		}
		eps := make([]Endpoint, counts[i])
		for k := range eps {
			if !podNet.Contains(pod) {
				return nil, fmt.Errorf("services: endpoints do not fit podCIDR %s", podNet)
			}
			eps[k] = NewEndpoint(pod)
			pod = pod.Next()
		}
		out[i] = Service{
			Namespace: Namespace,
			Name:      fmt.Sprintf("svc-%05d", i),
			ClusterIP: vip,
			Ports:     ports,
			Endpoints: eps,
		}
		vip = vip.Next()
	}
	return out, nil
}
