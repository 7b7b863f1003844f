package workload

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Positions a driver can aim at, over the flat list of ServicePorts in the
// order the proxier rendered them (service 0 port 0 first): "first" is the
// first ServicePort, "middle" the one at index total/2, "last" the last,
// "random" a uniformly drawn one for every connection. In iptables mode the
// index is the rule's position in KUBE-SERVICES, which the kernel walks
// linearly.
const (
	PosFirst  = "first"
	PosMiddle = "middle"
	PosLast   = "last"
	PosRandom = "random"
)

// Target is one ServicePort: Services[Service].Ports[Port].
type Target struct{ Service, Port int }

// FlatTargets returns every ServicePort in render order.
func FlatTargets(services []Service) []Target {
	var out []Target
	for i, s := range services {
		for j := range s.Ports {
			out = append(out, Target{i, j})
		}
	}
	return out
}

// PositionTarget maps a fixed position to its ServicePort.
func PositionTarget(flat []Target, pos string) (Target, error) {
	if len(flat) == 0 {
		return Target{}, errors.New("no services")
	}
	switch pos {
	case PosFirst:
		return flat[0], nil
	case PosMiddle:
		return flat[len(flat)/2], nil
	case PosLast:
		return flat[len(flat)-1], nil
	}
	return Target{}, fmt.Errorf("position %q is not fixed", pos)
}

// ReadyEndpoints returns the endpoints the service's traffic goes to, in
// order: its ready ones, or, when none is ready, its serving terminating
// ones (Service.Programmed).
func (s *Service) ReadyEndpoints() []Endpoint {
	fb := s.ServingFallback()
	out := make([]Endpoint, 0, len(s.Endpoints))
	for _, e := range s.Endpoints {
		if e.Programmed(fb) {
			out = append(out, e)
		}
	}
	return out
}

// KubeProxyOrder returns ReadyEndpoints in the order kube-proxy programs
// them: sorted by their "ip:port" text (pkg/proxy's EndpointSliceCache
// sorts each service port's endpoints by Endpoint.String()). Every port of
// a Service here has the same endpoints and one target port, so the
// address's text followed by ":" decides: 198.19.1.10 comes before
// 198.19.1.9, and before 198.19.1.1 too ('0' sorts before ':'); an IPv6
// address is bracketed ("[2001:2::c613:a]:8080"). The iptables statistic
// rules and the nftables numgen map follow this order.
func (s *Service) KubeProxyOrder() []Endpoint {
	out := s.ReadyEndpoints()
	if len(out) < 2 {
		return out
	}
	keys := make(map[netip.Addr]string, len(out))
	for _, e := range out {
		if e.IP.Is6() {
			keys[e.IP] = "[" + e.IP.String() + "]:" // net.JoinHostPort
		} else {
			keys[e.IP] = e.IP.String() + ":"
		}
	}
	slices.SortStableFunc(out, func(a, b Endpoint) int { return strings.Compare(keys[a.IP], keys[b.IP]) })
	return out
}

// HasReadyEndpoint reports whether a is one of ReadyEndpoints.
func (s *Service) HasReadyEndpoint(a netip.Addr) bool {
	fb := s.ServingFallback()
	for _, e := range s.Endpoints {
		if e.IP == a && e.Programmed(fb) {
			return true
		}
	}
	return false
}

// ServingFallback reports whether the service has no ready endpoint but
// at least one serving terminating one: kube-proxy then sends its traffic
// to those (pkg/proxy/topology.go CategorizeEndpoints, KEP-1669
// ProxyTerminatingEndpoints, GA in 1.28) instead of rejecting it.
func (s *Service) ServingFallback() bool {
	fallback := false
	for _, e := range s.Endpoints {
		if e.Ready {
			return false
		}
		if e.Serving && e.Terminating {
			fallback = true
		}
	}
	return fallback
}

// Programmed reports whether a proxy mode programs e, given its service's
// ServingFallback: the ready endpoints, or with the fallback the serving
// terminating ones. Every builtin mode but userspace (removed before
// KEP-1669) follows it.
func (e Endpoint) Programmed(servingFallback bool) bool {
	if servingFallback {
		return e.Serving && e.Terminating
	}
	return e.Ready
}

// TargetPorts returns the distinct target ports of services (for the echo server).
func TargetPorts(services []Service) []uint16 {
	seen := map[uint16]bool{}
	var out []uint16
	for _, s := range services {
		for _, p := range s.Ports {
			if !seen[p.TargetPort] {
				seen[p.TargetPort] = true
				out = append(out, p.TargetPort)
			}
		}
	}
	return out
}

// UDPTargetPorts returns the distinct target ports of the UDP
// ServicePorts of services (for the UDP echo).
func UDPTargetPorts(services []Service) []uint16 {
	seen := map[uint16]bool{}
	var out []uint16
	for _, s := range services {
		for _, p := range s.Ports {
			if p.Protocol == "UDP" && !seen[p.TargetPort] {
				seen[p.TargetPort] = true
				out = append(out, p.TargetPort)
			}
		}
	}
	return out
}
