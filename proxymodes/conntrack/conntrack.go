// Package conntrack clears stale UDP conntrack entries of a node namespace
// after a sync, as kube-proxy's pkg/proxy/conntrack (CleanStaleEntries):
// a UDP flow whose original destination is the ClusterIP:port of a UDP
// ServicePort that has serving endpoints, and whose reply source is none of
// them, is deleted. That one rule covers both transitions behind kubernetes
// #48370: a service going from 0 to 1 endpoints (flows sent while nothing
// DNATed them have the ClusterIP as reply source) and an endpoint removed
// (flows DNATed to it have its address as reply source). A service without
// serving endpoints is left alone, as kube-proxy does. UDP conntrack entries
// are otherwise kept alive by every packet of a client with a fixed source
// port, which would stay black-holed forever.
//
// The rule is pure (Stale); Clean applies it to the kernel's table through
// the conntrack netlink API (github.com/vishvananda/netlink: one dump, one
// IPCTNL_MSG_CT_DELETE per matching flow), in the node namespace only.
package conntrack

import (
	"net/netip"

	"github.com/proxybench/proxybench/workload"
)

// Flow is the part of a conntrack entry the rule looks at.
type Flow struct {
	// Protocol is the IP protocol number (17 for UDP).
	Protocol uint8
	// OrigDst and OrigDstPort are the original direction's destination
	// (--orig-dst, --orig-port-dst): the ClusterIP and port a client sent to.
	OrigDst     netip.Addr
	OrigDstPort uint16
	// ReplySrc is the reply direction's source (--reply-src): the endpoint
	// the flow was DNATed to, or OrigDst when nothing DNATed it.
	ReplySrc netip.Addr
}

// protoUDP is IPPROTO_UDP.
const protoUDP = 17

type frontend struct {
	ip   netip.Addr
	port uint16
}

// Rule is the desired conntrack state of a set of services: for every UDP
// ServicePort with serving endpoints, the endpoint addresses a flow to its
// ClusterIP:port may have as reply source.
type Rule struct {
	serving map[frontend]map[netip.Addr]struct{}
}

// NewRule builds the Rule of services. An endpoint serves when it is
// Serving (kube-proxy's IsServing: ready, or terminating but still
// serving) or Ready.
func NewRule(services []workload.Service) Rule {
	r := Rule{serving: map[frontend]map[netip.Addr]struct{}{}}
	for i := range services {
		s := &services[i]
		var eps map[netip.Addr]struct{}
		for _, e := range s.Endpoints {
			if !e.Ready && !e.Serving {
				continue
			}
			if eps == nil {
				eps = map[netip.Addr]struct{}{}
			}
			eps[e.IP] = struct{}{}
		}
		if eps == nil {
			continue // no serving endpoint: nothing to clean
		}
		for _, p := range s.Ports {
			if p.Protocol != "UDP" {
				continue
			}
			r.serving[frontend{s.ClusterIP, p.Port}] = eps
		}
	}
	return r
}

// Empty reports whether the rule can match no flow (no UDP ServicePort
// with serving endpoints); Clean then skips the table dump.
func (r Rule) Empty() bool { return len(r.serving) == 0 }

// Stale reports whether f is to be deleted: a UDP flow to a ClusterIP:port
// of the rule whose reply source is not one of its serving endpoints.
func (r Rule) Stale(f Flow) bool {
	if f.Protocol != protoUDP {
		return false
	}
	eps, ok := r.serving[frontend{f.OrigDst.Unmap(), f.OrigDstPort}]
	if !ok {
		return false
	}
	_, live := eps[f.ReplySrc.Unmap()]
	return !live
}
