//go:build linux

package conntrack

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/workload"
)

// Doer runs fn inside a network namespace (proxymodes.Node and
// *topology.Netns satisfy it).
type Doer interface {
	Do(fn func() error) error
}

// Clean deletes the flows of the node namespace's conntrack table that
// rule finds stale (see Rule.Stale) and returns how many it deleted.
// Equivalent to one `conntrack -D -p udp --orig-dst <ClusterIP>
// --dport <port> --reply-src <ip>` per stale flow. kube-proxy dumps the
// table after every sync; Clean skips the dump when the rule is empty (no
// UDP ServicePort with serving endpoints), which deletes nothing either
// way. Errors are the netlink dump's or a delete's.
func Clean(node Doer, rule Rule) (int, error) {
	if rule.Empty() {
		return 0, nil
	}
	var n uint
	err := node.Do(func() error {
		var err error
		n, err = netlink.ConntrackDeleteFilters(netlink.ConntrackTable, netlink.FAMILY_V4, filter{rule})
		return err
	})
	if err != nil {
		return int(n), fmt.Errorf("conntrack: delete stale UDP flows: %w", err)
	}
	return int(n), nil
}

// filter adapts Rule to netlink.CustomConntrackFilter.
type filter struct{ r Rule }

func (f filter) MatchConntrackFlow(c *netlink.ConntrackFlow) bool {
	return f.r.Stale(FlowOf(c))
}

// FlowOf extracts a Flow from a netlink conntrack flow.
func FlowOf(c *netlink.ConntrackFlow) Flow {
	return Flow{
		Protocol:    c.Forward.Protocol,
		OrigDst:     addr(c.Forward.DstIP),
		OrigDstPort: c.Forward.DstPort,
		ReplySrc:    addr(c.Reverse.SrcIP),
	}
}

func addr(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// List returns the UDP flows of the node namespace's conntrack table
// (`conntrack -L -p udp`), for figures and tests.
func List(node Doer) ([]Flow, error) {
	var out []Flow
	err := node.Do(func() error {
		flows, err := netlink.ConntrackTableList(netlink.ConntrackTable, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		for _, c := range flows {
			if c.Forward.Protocol == protoUDP {
				out = append(out, FlowOf(c))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("conntrack: list: %w", err)
	}
	return out, nil
}

// Stats is what AfterSync reports into a SyncStats.
type Stats struct {
	// Wall is the time of the step (0 when skipped).
	Wall time.Duration
	// Deleted counts the flows deleted.
	Deleted int
	// Err is the step's error: recorded, never failing the sync (kube-proxy
	// logs it and carries on).
	Err error
	// Ran is false when the step was skipped (no UDP ServicePort with
	// serving endpoints).
	Ran bool
}

// AfterSync runs Clean for services in node, as kube-proxy does at the end
// of every successful sync of the iptables, IPVS and nftables proxiers.
func AfterSync(node Doer, services []workload.Service) Stats {
	rule := NewRule(services)
	if rule.Empty() {
		return Stats{}
	}
	t := time.Now()
	n, err := Clean(node, rule)
	return Stats{Wall: time.Since(t), Deleted: n, Err: err, Ran: true}
}

// Into records s in a sync's stats: phase "conntrack" (when the step ran),
// ConntrackDeleted and ConntrackError.
func (s Stats) Into(st *proxymodes.SyncStats) {
	if !s.Ran {
		return
	}
	if st.Phases == nil {
		st.Phases = map[string]time.Duration{}
	}
	st.Phases["conntrack"] = s.Wall
	st.ConntrackDeleted = s.Deleted
	if s.Err != nil {
		st.ConntrackError = s.Err.Error()
	}
}
