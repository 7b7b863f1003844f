//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/proxybench/proxybench/internal/lib/nspool"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/conntrack"
	"github.com/proxybench/proxybench/proxymodes/leftovers"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/traffic"
)

// env is what the phases do to the testbed beyond a mode's proxiers: the
// traffic driver's calls, probes and connections from client namespaces,
// echo servers in the backend host, conntrack flushes and reads, sysctls,
// scratch namespaces, a second proxier and failure injection. newEnv
// binds each to a built testbed; the phases' unit tests substitute fakes,
// so the phases run without root. A phase reaches the kernel only through
// env and its proxiers.
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
	// probeNode is the node of probe worker w's client pod (nil: node 0
	// for every worker, one node).
	probeNode func(w int) int
	// dial makes one probe connection from the calling thread (a probe
	// worker, or inClient: the transitions' DNS check): where it landed
	// and when it started (traffic.DialEcho).
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

	// The connReuse, lifecycle and transitions phases' kernel touches.

	// nodeSysctls writes sc's node.sysctls whose keys start with prefix,
	// override's values replacing the scenario's, in every node
	// namespace where the value differs, and returns what node0 reads
	// back (applyNodeSysctls: /proc/sys through topology.Netns.Sysctl
	// and ReadSysctl).
	nodeSysctls func(sc *scenarios.Scenario, prefix string, override map[string]string) (map[string]string, error)
	// realServers lists the IPVS real servers of virtual server
	// dst:port (TCP) in node0's namespace, "address weight active
	// inactive" each (ipvsadm -Ln -t); nil: not read (the fakes).
	realServers func(ctx context.Context, dst netip.Addr, port uint16) ([]string, error)
	// nodeSysctl reads sysctl key (dotted: net.ipv4.vs.expire_nodest_conn)
	// in node0's namespace (topology.Netns.ReadSysctl).
	nodeSysctl func(key string) (string, error)
	// clientSysctl writes sysctl key (a /proc/sys path such as
	// net/ipv4/tcp_tw_reuse) in client pod 0's namespace
	// (topology.Netns.Sysctl).
	clientSysctl func(key, value string) error
	// inClient runs fn on an OS thread locked into client pod 0's
	// namespace (topology.Netns.Do): where dial and dialFIN run, for a
	// run of connections from one thread.
	inClient func(fn func() error) error
	// dialFIN makes one TCP connection from the calling thread (in a
	// client namespace: inClient) and closes it with FIN, leaving it in
	// TIME_WAIT on the client: its source port (0: unknown), where it
	// landed and its connect latency (traffic.OpenEcho, getsockname(2),
	// SO_LINGER off, close(2)).
	dialFIN func(dst netip.Addr, port uint16, timeout time.Duration) (srcPort int, landed netip.AddrPort, latency time.Duration, err error)
	// open makes one TCP connection from client pod 0 and keeps it open
	// (traffic.OpenEcho in the pod's namespace): its socket (-1 on
	// error), where it landed and when its connect started.
	open func(dst netip.Addr, port uint16, timeout time.Duration) (fd int, landed netip.AddrPort, start time.Time, err error)
	// alive says whether connection fd of open is still open: no reset,
	// hang-up or error pending (traffic.Alive).
	alive func(fd int) bool
	// closeConn closes connection fd of open with RST (close(2) with
	// OpenEcho's SO_LINGER 0).
	closeConn func(fd int)
	// listen starts TCP echo servers on ports in the shared backend host
	// (traffic.StartEcho), listenUDP UDP ones (traffic.StartUDPEchoIn);
	// stop closes them. Both fail with errNoBackend when the testbed
	// has no shared backend host (pods: isolated).
	listen    func(ports []uint16) (stop func(), err error)
	listenUDP func(ports []uint16) (stop func(), err error)
	// udpClient opens a UDP socket in client pod 0 from source port
	// srcPort (0: an ephemeral one) connected to dst (traffic.DialUDP).
	udpClient func(srcPort uint16, dst netip.AddrPort) (udpConn, error)
	// udpFlows lists node0's UDP conntrack entries (conntrack.List: a
	// ctnetlink dump in the node namespace).
	udpFlows func() ([]conntrack.Flow, error)
	// newProxier makes a new proxier of m with sc's settings on node0
	// (m.New on the node namespace): a second proxier beside the row's,
	// which is neither started nor cleaned up here.
	newProxier func(sc *scenarios.Scenario, m proxymodes.Mode) (proxymodes.Proxier, error)
	// kernel is the running kernel's release (uname(2): kernelRelease).
	kernel func() string
	// conntrackCount reads node n's conntrack entry count
	// (net/netfilter/nf_conntrack_count of its namespace: the kernel's
	// per-namespace count, nf_conntrack_standalone.c); nil: not read.
	conntrackCount func(node int) (int, error)
	// self reads proxybench's own process (readSelf); nil: readSelf.
	self func() selfStats
	// kernelObjects reads back every proxy object in node n's kernel
	// (leftovers.Read: iptables and ip6tables KUBE-* chains and jumps of
	// both back ends, nft tables named kube-proxy, IPVS virtual servers,
	// kube-ipvs0 addresses, KUBE-* ipsets) and sums their rules (a
	// chain's rules, a virtual server's real servers, a set's entries, a
	// table's chains); nil: not read.
	kernelObjects func(ctx context.Context, node int) (int, error)
	// ruleEndpoints reads the endpoint addresses of mode's rules in
	// node0 (ruleEndpoints: the fault phases' read-back); nil: not read.
	ruleEndpoints func(ctx context.Context, mode string) (map[netip.Addr]bool, error)
	// udpEntries lists node0's UDP conntrack entries with their source
	// port and start time (udpEntriesOf); stampConntrack turns on
	// nf_conntrack_timestamp in node0 (so entries carry their start)
	// and returns the undo. nil: not read.
	udpEntries     func() ([]udpEntry, error)
	stampConntrack func() (undo func() error, err error)
	// kernelTimer starts lookup.kernel's in-kernel timer over the node
	// namespaces (startNodeTimer); its error's kerneltime.Reason says
	// why it cannot run. nil: the traffic phase records no lookup.kernel
	// (the phases' fakes).
	kernelTimer func() (kernelTimer, error)
	// oob makes the outOfBand phase's changes in node0's kernel and reads
	// them back (nodeOOB); nil: the phase cannot run.
	oob oobKernel
}

// errNoBackend: the testbed has no shared backend host to listen in
// (pods: isolated).
var errNoBackend = errors.New("need the shared backend host (pods: shared)")

// udpConn is a connected UDP socket of a client pod (env.udpClient).
type udpConn interface {
	// Exchange sends datagram seq and waits up to timeout for the UDP
	// echo's answer: the endpoint that answered (traffic.UDPExchange;
	// an error: no answer, or a refusal).
	Exchange(seq uint64, timeout time.Duration) (netip.AddrPort, error)
	Close() error
}

// udpSocket is a udpConn over a kernel socket.
type udpSocket struct{ *net.UDPConn }

func (s udpSocket) Exchange(seq uint64, timeout time.Duration) (netip.AddrPort, error) {
	ap, _, err := traffic.UDPExchange(s.UDPConn, seq, timeout)
	return ap, err
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
		probeNode: func(w int) int { return tb.ClientNode[w%len(tb.Clients)] },
		dial: func(dst netip.Addr, port uint16, timeout time.Duration) (netip.AddrPort, time.Time, error) {
			landed, start, _, err := traffic.DialEcho(dst, port, timeout)
			return landed, start, err
		},
		down: func(ctx context.Context, ips []netip.Addr, how string) (func() error, error) {
			return traffic.DownEndpoints(ctx, tb.Backend, ips, how)
		},
		nodeSysctls: func(sc *scenarios.Scenario, prefix string, override map[string]string) (map[string]string, error) {
			return applyNodeSysctls(sc, tb, prefix, override)
		},
		realServers: func(ctx context.Context, dst netip.Addr, port uint16) ([]string, error) {
			out, err := tb.Nodes[0].Run(ctx, nil, "ipvsadm", "-Ln", "-t", netip.AddrPortFrom(dst, port).String())
			if err != nil {
				return nil, err
			}
			return parseRealServers(out), nil
		},
		nodeSysctl: func(key string) (string, error) {
			return tb.Nodes[0].ReadSysctl(strings.ReplaceAll(key, ".", "/"))
		},
		clientSysctl: func(key, value string) error { return tb.Clients[0].Sysctl(key, value) },
		inClient:     func(fn func() error) error { return tb.Clients[0].Do(fn) },
		dialFIN:      dialFIN,
		open: func(dst netip.Addr, port uint16, timeout time.Duration) (fd int, landed netip.AddrPort, start time.Time, err error) {
			derr := tb.Clients[0].Do(func() error {
				fd, landed, start, _, err = traffic.OpenEcho(netip.Addr{}, dst, port, timeout)
				return nil
			})
			if derr != nil {
				return -1, landed, start, derr
			}
			return fd, landed, start, err
		},
		alive:     traffic.Alive,
		closeConn: func(fd int) { unix.Close(fd) },
		listen: func(ports []uint16) (func(), error) {
			if tb.Backend == nil {
				return nil, errNoBackend
			}
			s, err := traffic.StartEcho(tb.Backend, ports)
			if err != nil {
				return nil, err
			}
			return s.Close, nil
		},
		listenUDP: func(ports []uint16) (func(), error) {
			if tb.Backend == nil {
				return nil, errNoBackend
			}
			s, err := traffic.StartUDPEchoIn([]*topology.Netns{tb.Backend}, ports)
			if err != nil {
				return nil, err
			}
			return s.Close, nil
		},
		udpClient: func(srcPort uint16, dst netip.AddrPort) (udpConn, error) {
			c, err := traffic.DialUDP(tb.Clients[0], srcPort, dst)
			if err != nil {
				return nil, err
			}
			return udpSocket{c}, nil
		},
		udpFlows: func() ([]conntrack.Flow, error) { return conntrack.List(tb.Node) },
		newProxier: func(sc *scenarios.Scenario, m proxymodes.Mode) (proxymodes.Proxier, error) {
			return m.New(sc, tb.Node)
		},
		kernel:      kernelRelease,
		oob:         nodeOOB{ns: tb.Node},
		kernelTimer: func() (kernelTimer, error) { return startNodeTimer(tb) },
		ruleEndpoints: func(ctx context.Context, mode string) (map[netip.Addr]bool, error) {
			return ruleEndpoints(ctx, tb.Node, mode)
		},
		udpEntries:     func() ([]udpEntry, error) { return udpEntriesOf(tb.Node) },
		stampConntrack: func() (func() error, error) { return stampConntrack(tb.Node) },
		kernelObjects: func(ctx context.Context, n int) (int, error) {
			inv, err := leftovers.Read(ctx, tb.Nodes[n])
			if err != nil {
				return 0, err
			}
			total := 0
			for _, o := range inv {
				total += o.Rules
			}
			return total, nil
		},
		conntrackCount: func(n int) (int, error) {
			v, err := tb.Nodes[n].ReadSysctl("net/netfilter/nf_conntrack_count")
			if err != nil {
				return 0, err
			}
			return strconv.Atoi(v)
		},
	}
}

// dialFIN makes one TCP connection from the calling thread to dst:port
// and closes it with FIN (see env.dialFIN).
func dialFIN(dst netip.Addr, port uint16, timeout time.Duration) (srcPort int, landed netip.AddrPort, latency time.Duration, err error) {
	fd, landed, _, latency, err := traffic.OpenEcho(netip.Addr{}, dst, port, timeout)
	if err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		return 0, landed, latency, err
	}
	if sa, serr := unix.Getsockname(fd); serr == nil {
		if in4, ok := sa.(*unix.SockaddrInet4); ok {
			srcPort = in4.Port
		}
	}
	// Close with FIN: undo OpenEcho's SO_LINGER 0.
	_ = unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{})
	unix.Close(fd)
	return srcPort, landed, latency, nil
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
// dsts that no rule translated (untranslatedFilter) and returns how many;
// dsts of both families are looked for in each family's table.
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
	families := map[netlink.InetFamily]bool{}
	for _, d := range dsts {
		f[d] = true
		if d.Addr().Is6() && !d.Addr().Is4In6() {
			families[unix.AF_INET6] = true // a dual-stack row's IPv6 ClusterIPs
		} else {
			families[unix.AF_INET] = true
		}
	}
	h, err := node.Netlink()
	if err != nil {
		return 0, err
	}
	defer h.Close()
	total := 0
	for _, fam := range []netlink.InetFamily{unix.AF_INET, unix.AF_INET6} {
		if !families[fam] {
			continue
		}
		n, err := h.ConntrackDeleteFilters(netlink.ConntrackTable, fam, f)
		total += int(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
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

// parseRealServers reads the real servers of `ipvsadm -Ln -t VIP:PORT`:
// each "  -> ADDR:PORT  Forward Weight ActiveConn InActConn" line as
// "ADDR:PORT w<weight> a<active> i<inactive>" (the header's "->
// RemoteAddress" line left out).
func parseRealServers(out []byte) []string {
	var rs []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 6 || f[0] != "->" || f[1] == "RemoteAddress:Port" {
			continue
		}
		rs = append(rs, fmt.Sprintf("%s w%s a%s i%s", f[1], f[3], f[4], f[5]))
	}
	return rs
}

// udpEntry is one UDP conntrack entry of a node: the original
// direction's source port and destination, the reply's source (the
// endpoint it was DNATed to) and its start (ns since the epoch, from
// nf_conntrack_timestamp; 0 without it).
type udpEntry struct {
	SrcPort  uint16
	Dst      netip.AddrPort
	ReplySrc netip.Addr
	Start    uint64
}

// udpEntriesOf lists node's IPv4 UDP conntrack entries (a ctnetlink
// dump in the node namespace, as `conntrack -L -p udp` there).
func udpEntriesOf(node *topology.Netns) ([]udpEntry, error) {
	h, err := node.Netlink()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	flows, err := h.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
	if err != nil {
		return nil, fmt.Errorf("conntrack list in %s: %w", node.Name, err)
	}
	var out []udpEntry
	for _, f := range flows {
		if f.Forward.Protocol != unix.IPPROTO_UDP {
			continue
		}
		dst, _ := netip.AddrFromSlice(f.Forward.DstIP)
		rs, _ := netip.AddrFromSlice(f.Reverse.SrcIP)
		out = append(out, udpEntry{SrcPort: f.Forward.SrcPort, Dst: netip.AddrPortFrom(dst.Unmap(), f.Forward.DstPort),
			ReplySrc: rs.Unmap(), Start: f.TimeStart})
	}
	return out, nil
}

// stampConntrack sets net.netfilter.nf_conntrack_timestamp to 1 in
// node (a per-namespace setting: nf_conntrack_standalone.c), so new
// conntrack entries carry their start time, and returns the undo that
// puts the old value back.
func stampConntrack(node *topology.Netns) (func() error, error) {
	const key = "net/netfilter/nf_conntrack_timestamp"
	old, err := node.ReadSysctl(key)
	if err != nil {
		return nil, err
	}
	if old == "1" {
		return func() error { return nil }, nil
	}
	if err := node.Sysctl(key, "1"); err != nil {
		return nil, err
	}
	return func() error { return node.Sysctl(key, old) }, nil
}
