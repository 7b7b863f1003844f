//go:build linux

package ipvs

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Addresses is the dummy interface kube-ipvs0 of one namespace and the
// ClusterIPs bound to it (kube-proxy's NetLinkHandle of
// pkg/proxy/ipvs/netlink.go). NetlinkAddresses is the kernel's,
// proxymodes/ipvs/testing.FakeAddresses a fake.
type Addresses interface {
	// EnsureLink creates kube-ipvs0 (type dummy, left down as kube-proxy
	// does: the kernel adds local routes for its addresses anyway) if it
	// does not exist. Equivalent to: `ip link add kube-ipvs0 type dummy`.
	EnsureLink() error
	// List returns the IPv4 addresses bound to kube-ipvs0 (`ip -4 addr
	// show dev kube-ipvs0`).
	List() ([]netip.Addr, error)
	// Add binds each address as /32 (`ip addr add A/32 dev kube-ipvs0`),
	// stopping at the first failure (EEXIST if bound); it returns the
	// netlink bytes sent.
	Add(addrs []netip.Addr) (int, error)
	// Del unbinds each address (EADDRNOTAVAIL if not bound).
	Del(addrs []netip.Addr) (int, error)
	// DeleteLink removes kube-ipvs0 and its addresses; a missing link is
	// not an error. Equivalent to: `ip link del kube-ipvs0`.
	DeleteLink() error
	// NodeIPs returns the namespace's IPv4 addresses on every link but
	// kube-ipvs0, loopback ones left out (kube-proxy's
	// GetAllLocalAddressesExcept("kube-ipvs0"): the node addresses node
	// ports are served on). Equivalent to: `ip -4 addr show` without lo
	// and kube-ipvs0.
	NodeIPs() ([]netip.Addr, error)
	// Close releases the netlink socket.
	Close()
}

// addrMsgLen is the size of one RTM_NEWADDR/RTM_DELADDR request for an
// IPv4 /32: nlmsghdr (16) + ifaddrmsg (8) + IFA_LOCAL (8) + IFA_ADDRESS (8).
const addrMsgLen = 40

// NetlinkAddresses programs kube-ipvs0 through a netlink handle bound to
// the node namespace (netlink.NewHandleAt), and, when opened with
// batching, sends address changes in batches on a second rtnetlink socket
// (see batchSocket).
type NetlinkAddresses struct {
	h    *netlink.Handle
	b    *batchSocket // nil: one netlink.AddrAdd/AddrDel round trip per address
	link netlink.Link
	// v6: the IPv6 proxier's (Config.IPv6): List, Add, Del and NodeIPs
	// work on IPv6 addresses (/128) instead of IPv4 ones (/32).
	v6 bool
}

// family is the netlink address family n lists.
func (n *NetlinkAddresses) family() int {
	if n.v6 {
		return netlink.FAMILY_V6
	}
	return netlink.FAMILY_V4
}

// NewNetlinkAddresses takes ownership of h; addresses change one request
// (and round trip) at a time, as kube-proxy does.
func NewNetlinkAddresses(h *netlink.Handle) *NetlinkAddresses { return &NetlinkAddresses{h: h} }

// OpenNetlinkAddresses opens an rtnetlink handle in ns and, with batch,
// a second socket that sends address changes in batches.
func OpenNetlinkAddresses(ns netns.NsHandle, batch bool) (*NetlinkAddresses, error) {
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("ipvs: open rtnetlink handle: %w", err)
	}
	n := NewNetlinkAddresses(h)
	if batch {
		if n.b, err = newBatchSocket(ns, unix.NETLINK_ROUTE); err != nil {
			h.Close()
			return nil, fmt.Errorf("ipvs: open rtnetlink socket: %w", err)
		}
	}
	return n, nil
}

// sendBatch adds or deletes addrs in batches.
func (n *NetlinkAddresses) sendBatch(typ uint16, verb string, l netlink.Link, addrs []netip.Addr) (int, error) {
	idx := l.Attrs().Index
	sent, failed, err := n.b.send(len(addrs), func(buf []byte, i int) []byte {
		return appendAddrMsg(buf, typ, idx, addrs[i])
	})
	if err != nil {
		if failed >= 0 && failed < len(addrs) {
			return sent, fmt.Errorf("ipvs: ip addr %s %s/32 dev %s: %w", verb, addrs[failed], DummyDevice, err)
		}
		return sent, fmt.Errorf("ipvs: ip addr %s: %w", verb, err)
	}
	return sent, nil
}

func (n *NetlinkAddresses) getLink() (netlink.Link, error) {
	if n.link != nil {
		return n.link, nil
	}
	l, err := n.h.LinkByName(DummyDevice)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			// netlink finds no link in its dump; the kernel's answer to
			// a request on a missing device is ENODEV.
			return nil, fmt.Errorf("ipvs: link %s: %v: %w", DummyDevice, err, unix.ENODEV)
		}
		return nil, fmt.Errorf("ipvs: link %s: %w", DummyDevice, err)
	}
	n.link = l
	return l, nil
}

// EnsureLink creates kube-ipvs0 if missing.
func (n *NetlinkAddresses) EnsureLink() error {
	n.link = nil
	if _, err := n.getLink(); err == nil {
		return nil
	}
	d := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: DummyDevice}}
	if err := n.h.LinkAdd(d); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("ipvs: ip link add %s type dummy: %w (kernel without CONFIG_DUMMY?)", DummyDevice, err)
	}
	_, err := n.getLink()
	return err
}

// List returns kube-ipvs0's IPv4 addresses.
func (n *NetlinkAddresses) List() ([]netip.Addr, error) {
	l, err := n.getLink()
	if err != nil {
		return nil, err
	}
	as, err := n.h.AddrList(l, n.family())
	if err != nil {
		return nil, fmt.Errorf("ipvs: list addresses of %s: %w", DummyDevice, err)
	}
	out := make([]netip.Addr, 0, len(as))
	for _, a := range as {
		out = append(out, addrOf(a.IP))
	}
	return out, nil
}

// addr32 is a as a host address: /32, or /128 for IPv6.
func addr32(a netip.Addr) *netlink.Addr {
	bits := a.BitLen()
	return &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(bits, bits)}}
}

// Add binds addrs, one netlink request each.
func (n *NetlinkAddresses) Add(addrs []netip.Addr) (int, error) {
	l, err := n.getLink()
	if err != nil {
		return 0, err
	}
	if n.b != nil && len(addrs) > 0 {
		return n.sendBatch(unix.RTM_NEWADDR, "add", l, addrs)
	}
	for i, a := range addrs {
		if err := n.h.AddrAdd(l, addr32(a)); err != nil {
			return i * addrMsgLen, fmt.Errorf("ipvs: ip addr add %s/32 dev %s: %w", a, DummyDevice, err)
		}
	}
	return len(addrs) * addrMsgLen, nil
}

// Del unbinds addrs, one netlink request each.
func (n *NetlinkAddresses) Del(addrs []netip.Addr) (int, error) {
	l, err := n.getLink()
	if err != nil {
		return 0, err
	}
	if n.b != nil && len(addrs) > 0 {
		return n.sendBatch(unix.RTM_DELADDR, "del", l, addrs)
	}
	for i, a := range addrs {
		if err := n.h.AddrDel(l, addr32(a)); err != nil {
			return i * addrMsgLen, fmt.Errorf("ipvs: ip addr del %s/32 dev %s: %w", a, DummyDevice, err)
		}
	}
	return len(addrs) * addrMsgLen, nil
}

// NodeIPs lists every IPv4 address of the namespace (one dump) and keeps
// those neither on kube-ipvs0 nor loopback, sorted.
func (n *NetlinkAddresses) NodeIPs() ([]netip.Addr, error) {
	dummy := -1
	if l, err := n.h.LinkByName(DummyDevice); err == nil {
		dummy = l.Attrs().Index
	}
	as, err := n.h.AddrList(nil, n.family())
	if err != nil {
		return nil, fmt.Errorf("ipvs: list the node's addresses: %w", err)
	}
	out := make([]netip.Addr, 0, 8)
	for _, a := range as {
		ip := addrOf(a.IP)
		if a.LinkIndex == dummy || ip.Is4() == n.v6 || ip.IsLoopback() || ip.IsLinkLocalUnicast() || slices.Contains(out, ip) {
			continue
		}
		out = append(out, ip)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out, nil
}

// DeleteLink removes kube-ipvs0.
func (n *NetlinkAddresses) DeleteLink() error {
	n.link = nil
	l, err := n.h.LinkByName(DummyDevice)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return fmt.Errorf("ipvs: link %s: %w", DummyDevice, err)
	}
	if err := n.h.LinkDel(l); err != nil {
		return fmt.Errorf("ipvs: ip link del %s: %w", DummyDevice, err)
	}
	return nil
}

// Close releases the handle and the batch socket.
func (n *NetlinkAddresses) Close() {
	n.h.Close()
	if n.b != nil {
		n.b.close()
	}
}
