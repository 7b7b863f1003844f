//go:build linux

package topology

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/vishvananda/netlink"
)

// HostOverlaps reads the addresses and routes of the calling process's
// network namespace (the host's root namespace for a run on the host; it
// only reads, over netlink) and returns, per field of prefixes (such as
// "network.serviceCIDR"), a sentence naming the host addresses and routes
// that prefix overlaps. Isolation holds either way (no testbed namespace
// routes out); the testbed's namespaces shadow those host addresses: a
// connection from inside the testbed to one reaches the testbed, never
// the host. Default routes (0.0.0.0/0, ::/0) are not counted. The
// result is sorted by field; nil when nothing overlaps or netlink cannot
// be read (the check is advisory).
func HostOverlaps(prefixes map[string]netip.Prefix) []string {
	var host []string
	var hostP []netip.Prefix
	if addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL); err == nil {
		for _, a := range addrs {
			if a.IPNet == nil {
				continue
			}
			ip, ok := netip.AddrFromSlice(a.IP)
			if !ok {
				continue
			}
			ones, _ := a.Mask.Size()
			hostP = append(hostP, netip.PrefixFrom(ip.Unmap(), ones))
			host = append(host, "address "+netip.PrefixFrom(ip.Unmap(), ones).String()+linkName(a.LinkIndex))
		}
	}
	if routes, err := netlink.RouteList(nil, netlink.FAMILY_ALL); err == nil {
		for _, r := range routes {
			if r.Dst == nil {
				continue
			}
			ip, ok := netip.AddrFromSlice(r.Dst.IP)
			if !ok {
				continue
			}
			ones, _ := r.Dst.Mask.Size()
			if ones == 0 {
				continue
			}
			hostP = append(hostP, netip.PrefixFrom(ip.Unmap(), ones))
			host = append(host, "route "+netip.PrefixFrom(ip.Unmap(), ones).String()+linkName(r.LinkIndex))
		}
	}
	return overlapSentences(prefixes, hostP, host)
}

// overlapSentences is HostOverlaps' pure part: hostP[i] is described by
// host[i].
func overlapSentences(prefixes map[string]netip.Prefix, hostP []netip.Prefix, host []string) []string {
	var out []string
	for field, p := range prefixes {
		var hits []string
		for i, h := range hostP {
			if h.Addr().Is4() == p.Addr().Is4() && h.Overlaps(p) && !contains(hits, host[i]) {
				hits = append(hits, host[i])
			}
		}
		if len(hits) > 0 {
			out = append(out, fmt.Sprintf("%s %s overlaps the host's %s: isolation still holds (no testbed namespace routes out), but inside the testbed these host addresses are shadowed by the testbed's own",
				field, p, strings.Join(hits, ", ")))
		}
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func linkName(index int) string {
	if l, err := netlink.LinkByIndex(index); err == nil {
		return " (" + l.Attrs().Name + ")"
	}
	return ""
}
