//go:build linux

package topology

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/proxybench/proxybench/scenarios"
)

// ipv6Sysctls are written in every testbed namespace before its IPv6
// addresses: IPv6 on, and no duplicate address detection
// (Documentation/networking/ip-sysctl.rst: accept_dad), so an address
// works the moment it is added instead of after DAD's probe (about 1 s
// tentative, which a connect would fail on with EADDRNOTAVAIL). "default"
// covers links made later; the per-link keys are written as each link's
// addresses are twinned.
var ipv6Sysctls = [][2]string{
	{"net/ipv6/conf/all/disable_ipv6", "0"},
	{"net/ipv6/conf/default/disable_ipv6", "0"},
	{"net/ipv6/conf/all/accept_dad", "0"},
	{"net/ipv6/conf/default/accept_dad", "0"},
}

// IPv6Supported says whether this kernel has IPv6 (/proc/sys/net/ipv6:
// absent when it is built without it or booted with ipv6.disable=1), and
// why not in words.
func IPv6Supported() (bool, string) {
	if _, err := os.Stat("/proc/sys/net/ipv6"); err != nil {
		return false, "this kernel has no IPv6 (/proc/sys/net/ipv6 is missing: built without CONFIG_IPV6 or booted with ipv6.disable=1)"
	}
	return true, ""
}

// AddIPv6 gives the testbed the IPv6 twin of its IPv4 plan in the /96
// prefix p (scenarios.Twin6: p's 96 bits, then the IPv4 address): in
// every namespace it built, IPv6 on and DAD off (ipv6Sysctls), IPv6
// forwarding on the nodes (net/ipv6/conf/all/forwarding, beside their
// ip_forward), the twin of each IPv4 address on each link (a /30 link
// gets a /126; added with IFA_F_NODAD), then the twin of each IPv4 route
// the testbed added (not the kernel's own connected and local routes):
// same link, the twin gateway, the AnyIP `local` route of the pod CIDR
// in table local. No namespace gets a default route; the root namespace
// is not touched (every step runs inside a testbed namespace). Neighbours
// are found by NDP over the veths and the fabric bridge. It fails on the
// first step the kernel refuses, naming the namespace.
func (tb *Testbed) AddIPv6(p netip.Prefix) error {
	if ok, why := IPv6Supported(); !ok {
		return errors.New("topology: " + why)
	}
	all := tb.namespaces()
	for _, ns := range all {
		for _, kv := range ipv6Sysctls {
			if err := ns.Sysctl(kv[0], kv[1]); err != nil {
				return err
			}
		}
	}
	for _, nd := range tb.Nodes {
		if err := nd.Sysctl("net/ipv6/conf/all/forwarding", "1"); err != nil {
			return err
		}
	}
	for _, ns := range all {
		if err := twinAddrs(ns, p); err != nil {
			return fmt.Errorf("netns %q: %w", ns.Name, err)
		}
	}
	for _, ns := range all {
		if err := ns.withNetlink(func(h *netlink.Handle) error { return twinRoutes(h, p) }); err != nil {
			return fmt.Errorf("netns %q: %w", ns.Name, err)
		}
	}
	for _, nd := range tb.Nodes {
		if len(nd.nodeIPs) == 1 {
			nd.nodeIPs = append(nd.nodeIPs, scenarios.Twin6(p, nd.nodeIPs[0]))
		}
	}
	tb.IPv6 = p
	return nil
}

// namespaces lists every namespace of the testbed that exists.
func (tb *Testbed) namespaces() []*Netns {
	var out []*Netns
	all := append([]*Netns{tb.Fabric, tb.Backend, tb.External}, tb.Nodes...)
	for _, n := range append(append(all, tb.Clients...), tb.Pods...) {
		if n != nil {
			out = append(out, n)
		}
	}
	return out
}

// twinAddrs adds, on every link of ns, the IPv6 twin of each of its
// global IPv4 addresses (loopback's 127/8 is not twinned), after turning
// DAD off on that link.
func twinAddrs(ns *Netns, p netip.Prefix) error {
	type twin struct {
		link string
		addr netip.Prefix
	}
	var todo []twin
	if err := ns.withNetlink(func(h *netlink.Handle) error {
		links, err := h.LinkList()
		if err != nil {
			return err
		}
		for _, l := range links {
			addrs, err := h.AddrList(l, netlink.FAMILY_V4)
			if err != nil {
				return err
			}
			for _, a := range addrs {
				q, ok := prefixOf(a.IPNet)
				if !ok || q.Addr().IsLoopback() {
					continue
				}
				todo = append(todo, twin{l.Attrs().Name, scenarios.TwinPrefix6(p, q)})
			}
		}
		return nil
	}); err != nil {
		return err
	}
	done := map[string]bool{}
	for _, t := range todo {
		if !done[t.link] {
			done[t.link] = true
			for _, key := range []string{"disable_ipv6", "accept_dad"} {
				if err := ns.Sysctl("net/ipv6/conf/"+t.link+"/"+key, "0"); err != nil {
					return err
				}
			}
		}
	}
	return ns.withNetlink(func(h *netlink.Handle) error {
		for _, t := range todo {
			l, err := h.LinkByName(t.link)
			if err != nil {
				return err
			}
			if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipnet(t.addr), Flags: unix.IFA_F_NODAD}); err != nil {
				return fmt.Errorf("ip -6 addr add %s dev %s nodad: %w", t.addr, t.link, err)
			}
		}
		return settleLinkLocals(h)
	})
}

// settleLinkLocals re-adds, with IFA_F_NODAD, every link-local address
// of the namespace that is still tentative. The kernel made them when
// the links came up, before accept_dad was 0, so each is in DAD for
// about 1 to 2 s; and a neighbour solicitation for a forwarded packet
// (whose source is not this host's) is sent from a link-local address
// that is not tentative or not at all (net/ipv6/ndisc.c ndisc_send_ns,
// ipv6_get_lladdr with IFA_F_TENTATIVE): until DAD ends a node cannot
// resolve the backend's IPv6 twin and the first connect of a run waits
// for TCP's SYN retransmit. A link-local that finishes DAD between the
// list and the delete is re-added all the same.
func settleLinkLocals(h *netlink.Handle) error {
	addrs, err := h.AddrList(nil, netlink.FAMILY_V6)
	if err != nil {
		return fmt.Errorf("ip -6 addr show: %w", err)
	}
	for _, a := range addrs {
		if a.IP == nil || !a.IP.IsLinkLocalUnicast() || a.Flags&unix.IFA_F_TENTATIVE == 0 {
			continue
		}
		l, err := h.LinkByIndex(a.LinkIndex)
		if err != nil {
			return err
		}
		name := l.Attrs().Name
		if err := h.AddrDel(l, &netlink.Addr{IPNet: a.IPNet}); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			return fmt.Errorf("ip -6 addr del %s dev %s: %w", a.IPNet, name, err)
		}
		if err := h.AddrAdd(l, &netlink.Addr{IPNet: a.IPNet, Flags: unix.IFA_F_NODAD}); err != nil {
			return fmt.Errorf("ip -6 addr add %s dev %s nodad: %w", a.IPNet, name, err)
		}
	}
	return nil
}

// twinRoutes adds the IPv6 twin of every IPv4 route of tables main and
// local that the testbed added (protocol not kernel): the same type and
// link, the twin destination and gateway (on-link when the IPv4 one is).
func twinRoutes(h *netlink.Handle, p netip.Prefix) error {
	routes, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("ip route show table all: %w", err)
	}
	for _, r := range routes {
		if r.Protocol == unix.RTPROT_KERNEL || r.Dst == nil || (r.Table != unix.RT_TABLE_MAIN && r.Table != unix.RT_TABLE_LOCAL) {
			continue
		}
		dst, ok := prefixOf(r.Dst)
		if !ok {
			continue
		}
		t := &netlink.Route{LinkIndex: r.LinkIndex, Dst: ipnet(scenarios.TwinPrefix6(p, dst)), Type: r.Type, Table: r.Table, Flags: r.Flags}
		if r.Type == unix.RTN_LOCAL {
			t.Scope = netlink.SCOPE_HOST
		}
		if r.Gw != nil {
			gw, ok := netip.AddrFromSlice(r.Gw)
			if !ok {
				continue
			}
			t.Gw = net.IP(scenarios.Twin6(p, gw.Unmap()).AsSlice())
		}
		if err := h.RouteAdd(t); err != nil {
			return fmt.Errorf("ip -6 route add %s (twin of %s): %w", t.Dst, dst, err)
		}
	}
	return nil
}

// prefixOf converts an IPv4 net.IPNet to a netip.Prefix (false for
// another family).
func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	a = a.Unmap()
	ones, bits := n.Mask.Size()
	if !a.Is4() || bits != 32 {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, ones), true
}
