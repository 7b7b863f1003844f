package workload

import (
	"net/netip"
	"slices"

	"github.com/proxybench/proxybench/scenarios"
)

// Twin6 returns services as a dual-stack cluster's IPv6 side holds them:
// each service's ClusterIP, endpoint IPs, external IPs and LoadBalancer
// IPs replaced by their IPv6 twins in the /96 p (scenarios.Twin6), names,
// ports, readiness, nodes and policies unchanged, so that the IPv6
// proxier of a node gets the Service's IPv6 ClusterIP and the IPv6
// EndpointSlice's endpoints (addressType IPv6) as kube-proxy's IPv6
// proxier does. services is not modified.
func Twin6(p netip.Prefix, services []Service) []Service {
	out := make([]Service, len(services))
	tw := func(as []netip.Addr) []netip.Addr {
		if as == nil {
			return nil
		}
		r := slices.Clone(as)
		for i := range r {
			r[i] = scenarios.Twin6(p, r[i])
		}
		return r
	}
	for i, s := range services {
		s.ClusterIP = scenarios.Twin6(p, s.ClusterIP)
		s.Endpoints = slices.Clone(s.Endpoints)
		for k := range s.Endpoints {
			s.Endpoints[k].IP = scenarios.Twin6(p, s.Endpoints[k].IP)
		}
		s.ExternalIPs, s.LoadBalancerIPs = tw(s.ExternalIPs), tw(s.LoadBalancerIPs)
		out[i] = s
	}
	return out
}
