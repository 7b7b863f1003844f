//go:build linux

package runner

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/proxybench/proxybench/internal/lib/nspool"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/traffic"
)

// env is what the phases do to the testbed beyond a mode's proxiers: the
// traffic driver's calls, probes from client namespaces, conntrack
// flushes, scratch namespaces and failure injection. newEnv binds each to
// a built testbed; the phases' unit tests substitute fakes, so the phases
// run without root.
type env struct {
	// flush empties node n's conntrack table, so no mode inherits
	// another's NAT decisions.
	flush func(node int) error
	// scratchSync measures one full sync of services by a fresh proxier
	// of m in a new namespace (named after rep), then removes it.
	scratchSync func(ctx context.Context, sc *scenarios.Scenario, m proxymodes.Mode, rep int, services []workload.Service) (proxymodes.SyncStats, error)
	// drive, firstPicks, driveFairness and hold are the traffic driver's
	// phases (traffic.Drive, FirstPicks, DriveFairness, HoldConnections).
	drive         func(ctx context.Context, spec traffic.DriveSpec) (*traffic.DriveResult, error)
	firstPicks    func(ctx context.Context, clients []*topology.Netns, sources []netip.Addr, services []workload.Service, timeout time.Duration) ([][]netip.Addr, error)
	driveFairness func(ctx context.Context, spec traffic.FairnessSpec) (*traffic.FairnessResult, error)
	hold          func(ctx context.Context, spec traffic.HoldSpec) (*traffic.HoldResult, error)
	// probes starts n probe workers, worker w pinned into client pod
	// namespace w mod the client count (an nspool.Workers); its error
	// says a worker could not enter its namespace.
	probes func(n int) (workerPool, error)
	// dial makes one probe connection from a probe worker: where it
	// landed and when it started (traffic.DialEcho).
	dial func(dst netip.Addr, port uint16, timeout time.Duration) (landed netip.AddrPort, start time.Time, err error)
	// down makes endpoints ips unreachable in the backend host until
	// undo (traffic.DownEndpoints).
	down func(ctx context.Context, ips []netip.Addr, how string) (undo func() error, err error)
	// forgetUntranslated removes from every node's conntrack table the
	// TCP entries to dsts that no rule translated (dropUntranslated) and
	// returns how many; nil: nothing is removed (the phases' fakes).
	forgetUntranslated func(dsts []netip.AddrPort) (int, error)
	// icmp reads the testbed's ICMP counters (icmpCounters); nil: none
	// are recorded.
	icmp func() (reports.ICMPCounters, error)
}

// workerPool runs functions on workers pinned into namespaces
// (nspool.Workers).
type workerPool interface {
	// Each runs fn(w) on every worker w at once and waits.
	Each(fn func(w int))
	// Close ends the workers.
	Close()
}

// newEnv binds the phases to testbed tb.
func newEnv(tb *topology.Testbed) *env {
	return &env{
		flush: func(n int) error { return flushConntrack(tb.Nodes[n]) },
		icmp:  func() (reports.ICMPCounters, error) { return icmpCounters(tb) },
		forgetUntranslated: func(dsts []netip.AddrPort) (int, error) {
			total := 0
			for _, n := range tb.Nodes {
				k, err := dropUntranslated(n, dsts)
				total += k
				if err != nil {
					return total, fmt.Errorf("%s: %w", n.Name, err)
				}
			}
			return total, nil
		},
		scratchSync: func(ctx context.Context, sc *scenarios.Scenario, m proxymodes.Mode, rep int, services []workload.Service) (proxymodes.SyncStats, error) {
			return scratchSync(ctx, sc, m, topology.NetnsName(tb.RunID, fmt.Sprintf("sync%d", rep)), services)
		},
		drive:         traffic.Drive,
		firstPicks:    traffic.FirstPicks,
		driveFairness: traffic.DriveFairness,
		hold:          traffic.HoldConnections,
		probes: func(n int) (workerPool, error) {
			p, err := nspool.Start(n, func(w int) nspool.Namespace { return tb.Clients[w%len(tb.Clients)] })
			if err != nil {
				return nil, err
			}
			return p, nil
		},
		dial: func(dst netip.Addr, port uint16, timeout time.Duration) (netip.AddrPort, time.Time, error) {
			landed, start, _, err := traffic.DialEcho(dst, port, timeout)
			return landed, start, err
		},
		down: func(ctx context.Context, ips []netip.Addr, how string) (func() error, error) {
			return traffic.DownEndpoints(ctx, tb.Backend, ips, how)
		},
	}
}

// scratchSync measures one full sync of services by a new proxier of mode
// m in a fresh namespace called name, then cleans up and deletes it.
func scratchSync(ctx context.Context, sc *scenarios.Scenario, m proxymodes.Mode, name string, services []workload.Service) (st proxymodes.SyncStats, err error) {
	ns, err := topology.CreateNetns(name)
	if err != nil {
		return st, err
	}
	defer func() {
		ns.Close()
		if derr := topology.DeleteNetns(name); derr != nil && err == nil {
			err = derr
		}
	}()
	p, err := m.New(sc, ns)
	if err != nil {
		return st, err
	}
	st, err = p.Sync(ctx, services)
	if cerr := p.Cleanup(context.WithoutCancel(ctx)); cerr != nil && err == nil {
		err = fmt.Errorf("cleanup of %s: %w", name, cerr)
	}
	return st, err
}

// untranslatedFilter matches the TCP conntrack entries whose original
// destination is one of dsts and whose reply comes from that same address
// and port: no NAT rule rewrote them (a NAT hook gave them a null
// binding), so every later packet of their 4-tuple goes untranslated.
type untranslatedFilter map[netip.AddrPort]bool

func (f untranslatedFilter) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool {
	if flow.Forward.Protocol != unix.IPPROTO_TCP {
		return false
	}
	dst, ok := netip.AddrFromSlice(flow.Forward.DstIP)
	if !ok || !f[netip.AddrPortFrom(dst.Unmap(), flow.Forward.DstPort)] {
		return false
	}
	return flow.Reverse.SrcIP.Equal(flow.Forward.DstIP) && flow.Reverse.SrcPort == flow.Forward.DstPort
}

// dropUntranslated deletes from node's conntrack table the TCP entries to
// dsts that no rule translated (untranslatedFilter) and returns how many.
//
// A connection to a ClusterIP tried before the node has its rules, while
// conntrack and NAT hooks are active there (another row's leftovers, or
// a proxier part-way through its first sync), leaves such an entry: in
// SYN_SENT it lives nf_conntrack_tcp_timeout_syn_sent (120 s), and a new
// SYN on the same 4-tuple counts as its retransmission
// (nf_conntrack_proto_tcp.c), keeps the null binding and is not DNATed:
// kube-proxy's nftables mode rejects it as traffic to an unknown port of a
// ClusterIP (connection refused), other modes let it go nowhere (timeout).
func dropUntranslated(node *topology.Netns, dsts []netip.AddrPort) (int, error) {
	if len(dsts) == 0 {
		return 0, nil
	}
	f := untranslatedFilter{}
	for _, d := range dsts {
		f[d] = true
	}
	h, err := node.Netlink()
	if err != nil {
		return 0, err
	}
	defer h.Close()
	n, err := h.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, f)
	return int(n), err
}

// flushConntrack empties the node namespace's conntrack table (like
// `conntrack -F` there), so no mode inherits another's NAT decisions.
func flushConntrack(node *topology.Netns) error {
	h, err := node.Netlink()
	if err != nil {
		return err
	}
	defer h.Close()
	return h.ConntrackTableFlush(netlink.ConntrackTable)
}
