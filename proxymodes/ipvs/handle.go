//go:build linux

package ipvs

import (
	"net"
	"net/netip"
	"strconv"

	"github.com/moby/ipvs"
	"golang.org/x/sys/unix"
)

// Handle is the part of an IPVS netlink handle a Proxier uses; *ipvs.Handle
// (github.com/moby/ipvs, generic netlink family "IPVS" of
// net/netfilter/ipvs/ip_vs_ctl.c) satisfies it, and ipvs/testing.FakeHandle
// is a stateful fake. Errors are the kernel's: EEXIST when adding what exists,
// ESRCH for a missing virtual server, ENOENT for a missing real server or
// scheduler.
type Handle interface {
	// GetServices dumps every virtual server (IPVS_CMD_GET_SERVICE, NLM_F_DUMP).
	GetServices() ([]*ipvs.Service, error)
	// GetDestinations dumps the real servers of s (IPVS_CMD_GET_DEST).
	GetDestinations(s *ipvs.Service) ([]*ipvs.Destination, error)
	NewService(s *ipvs.Service) error
	UpdateService(s *ipvs.Service) error
	DelService(s *ipvs.Service) error
	NewDestination(s *ipvs.Service, d *ipvs.Destination) error
	UpdateDestination(s *ipvs.Service, d *ipvs.Destination) error
	DelDestination(s *ipvs.Service, d *ipvs.Destination) error
	// SetConfig sets the connection timeouts; a zero field is left as is.
	SetConfig(c *ipvs.Config) error
}

var _ Handle = (*ipvs.Handle)(nil)

// Service flags of include/uapi/linux/ip_vs.h.
const (
	flagPersistent = 0x0001 // IP_VS_SVC_F_PERSISTENT
	flagHashed     = 0x0002 // IP_VS_SVC_F_HASHED: set by the kernel on every service it holds
)

// Batcher is implemented by handles that can send many changes at once
// (see NewBatchHandle); a Proxier then sends a sync's changes through
// Apply instead of one call per object.
type Batcher interface {
	// Apply performs ops in order and returns how many bytes it sent. It
	// stops at the first failed op and returns its error.
	Apply(ops []Op) (int, error)
}

// OpKind is the kind of one IPVS change.
type OpKind uint8

// The changes a sync sends (IPVS_CMD_NEW_SERVICE ... IPVS_CMD_DEL_DEST).
const (
	OpNewService OpKind = iota
	OpUpdateService
	OpDelService
	OpNewDestination
	OpUpdateDestination
	OpDelDestination
)

var opNames = [...]string{"new-service", "update-service", "del-service", "new-destination", "update-destination", "del-destination"}

func (k OpKind) String() string { return opNames[k] }

// Op is one IPVS change: Dest is nil for service ops.
type Op struct {
	Kind    OpKind
	Service *ipvs.Service
	Dest    *ipvs.Destination
	// Graceful marks an OpUpdateDestination to weight 0 of a removed real
	// server that still has connections: it enters graceful termination.
	Graceful bool
}

// applyOne performs op with h's per-object methods.
func applyOne(h Handle, op Op) error {
	switch op.Kind {
	case OpNewService:
		return h.NewService(op.Service)
	case OpUpdateService:
		return h.UpdateService(op.Service)
	case OpDelService:
		return h.DelService(op.Service)
	case OpNewDestination:
		return h.NewDestination(op.Service, op.Dest)
	case OpUpdateDestination:
		return h.UpdateDestination(op.Service, op.Dest)
	default:
		return h.DelDestination(op.Service, op.Dest)
	}
}

// opBytes is the size of op's netlink request as moby/ipvs builds it:
// nlmsghdr (16) + genlmsghdr (4) + the nested service attribute (+ the
// nested destination attribute).
func opBytes(op Op) int {
	n := 16 + 4 + serviceAttrLen(op.Service)
	if op.Dest != nil {
		n += destAttrLen
	}
	return n
}

func nlaAlign(n int) int { return (n + 3) &^ 3 }

// serviceAttrLen: IPVS_CMD_ATTR_SERVICE holding af, protocol, address,
// port, scheduler name, flags, timeout and netmask (fillService).
func serviceAttrLen(s *ipvs.Service) int {
	addr := 4
	if s.AddressFamily == unix.AF_INET6 {
		addr = 16
	}
	return 4 + 8 + 8 + nlaAlign(4+addr) + 8 + nlaAlign(4+len(s.SchedName)+1) + 12 + 8 + 8
}

// destAttrLen: IPVS_CMD_ATTR_DEST holding address, port, forwarding
// method, weight, thresholds (fillDestination, IPv4).
const destAttrLen = 4 + 8 + 8 + 8 + 8 + 8 + 8

func protoNumber(p string) uint16 {
	if p == "UDP" {
		return unix.IPPROTO_UDP
	}
	return unix.IPPROTO_TCP
}

func protoName(n uint16) string {
	switch n {
	case unix.IPPROTO_TCP:
		return "TCP"
	case unix.IPPROTO_UDP:
		return "UDP"
	case unix.IPPROTO_SCTP:
		return "SCTP"
	}
	return "proto-" + strconv.Itoa(int(n))
}

// toService converts a desired virtual server to moby/ipvs's form, as
// kube-proxy's libipvs toIPVSService does (netmask 0xffffffff for IPv4,
// 128 for IPv6).
func toService(v *VirtualServer) *ipvs.Service {
	s := &ipvs.Service{
		Address: net.IP(v.Address.AsSlice()), Protocol: protoNumber(v.Protocol), Port: v.Port,
		SchedName: v.Scheduler, AddressFamily: unix.AF_INET, Netmask: 0xffffffff,
	}
	if v.Address.Is6() {
		s.AddressFamily, s.Netmask = unix.AF_INET6, 128 // libipvs: netmask 128 for IPv6
	}
	if v.Persistent {
		s.Flags = flagPersistent
		s.Timeout = v.Timeout
	}
	s.Flags |= v.SchedFlags
	return s
}

// toDest converts a desired real server (masquerade forwarding).
func toDest(r RealServer) *ipvs.Destination {
	d := &ipvs.Destination{
		Address: net.IP(r.Address.AsSlice()), Port: r.Port, Weight: r.Weight,
		ConnectionFlags: ipvs.ConnectionFlagMasq, AddressFamily: unix.AF_INET,
	}
	if r.Address.Is6() {
		d.AddressFamily = unix.AF_INET6
	}
	return d
}

func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

func serviceKey(s *ipvs.Service) string {
	return vsKey(protoName(s.Protocol), addrOf(s.Address), s.Port)
}

func destKey(a netip.Addr, port uint16) string {
	b := a.AppendTo(make([]byte, 0, 24))
	b = append(b, ':')
	return string(strconv.AppendUint(b, uint64(port), 10))
}

// serviceEqual compares a kernel virtual server with a desired one as
// kube-proxy does before UpdateVirtualServer: scheduler, flags (without
// the kernel's hashed bit) and persistence timeout.
func serviceEqual(have, want *ipvs.Service) bool {
	return have.SchedName == want.SchedName && have.Flags&^flagHashed == want.Flags && have.Timeout == want.Timeout
}

// destEqual compares a kernel real server with a desired one: weight and
// forwarding method.
func destEqual(have, want *ipvs.Destination) bool {
	return have.Weight == want.Weight && have.ConnectionFlags&ipvs.ConnectionFlagFwdMask == want.ConnectionFlags&ipvs.ConnectionFlagFwdMask
}
