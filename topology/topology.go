//go:build linux

// Package topology builds the testbed out of network namespaces and veth
// pairs: one node namespace per fake node (where a proxy mode programs its
// rules), client pod namespaces that drive traffic, and one backend host
// namespace that answers for every pod IP through an AnyIP route. Every
// object carries the run ID; nothing in the host's root namespace changes.
//
//	client pod netns ──veth── node netns (proxy rules) ──veth── backend host netns
//	                                                             ip route add local <podCIDR> dev lo
package topology

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Prefix is the start of every namespace and link name the testbed creates.
const Prefix = "pb-"

// runIDPattern matches the namespaces of any run: pb-<6 hex>-<role>.
var runIDPattern = regexp.MustCompile(`^pb-([0-9a-f]{6})-[a-z0-9-]+$`)

// NewRunID returns a fresh random run ID: 6 lowercase hex characters, short
// enough that link names "pb<id>-n0c12" fit IFNAMSIZ (15).
func NewRunID() string {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// Spec is what Build builds.
type Spec struct {
	RunID       string
	ClientPods  int          // >= 1
	ServiceCIDR netip.Prefix // routed from clients to the node
	PodCIDR     netip.Prefix // answered by the backend host (AnyIP)
	// NodeCIDR is carved into a fabric block (scenarios.FabricSize(Nodes) addresses:
	// with one node the /30 node-backend link, else the bridge subnet of
	// every node and the backend host) followed by one /30 link per client pod.
	NodeCIDR netip.Prefix

	// Nodes is the number of node namespaces (0 or 1: one, joined to the
	// backend host by a veth; more: joined by a bridge in a fabric
	// namespace). Client pod i sits on node i mod Nodes.
	Nodes int
	// IsolatedPods, when not empty, replaces the AnyIP backend host by one
	// namespace per pod address (pods: isolated): pod k sits on node
	// k mod Nodes behind its own veth.
	IsolatedPods []netip.Addr
	// ClientAddresses (> 1) gives each client pod that many source
	// addresses from ClientCIDR (client i owns the i-th aligned block of
	// the next power of two), besides its link address.
	ClientAddresses int
	ClientCIDR      netip.Prefix
	// PodNodes[k], when given, is the node of IsolatedPods[k] (default
	// k mod Nodes): endpoints placed on named nodes.
	PodNodes []int
	// ExternalCIDR, when valid, adds the external client namespace
	// (pb-<id>-ext, Nodes >= 2): a client outside the cluster on the
	// fabric bridge at ExternalCIDR's first address, with on-link routes
	// to the nodes' fabric addresses and ExternalVia (LoadBalancer and
	// external IPs) through node 0 (Testbed.RouteExternal moves them);
	// every node routes ExternalCIDR on-link and NodeVia (what the node's
	// own host-network clients dial that no local route holds: the
	// service CIDR, LoadBalancer and external IPs) to the external
	// client, which does not forward, as a node's default gateway would
	// get them. Isolated pods route ExternalCIDR and ExternalVia back
	// through their node (an IPVS node's own connection to a LoadBalancer
	// IP has that IP as its source).
	ExternalCIDR netip.Prefix
	ExternalVia  []netip.Prefix
	NodeVia      []netip.Prefix
	// ClientNodeRoutes gives every client pod a route to NodeCIDR through
	// its node, as a pod's default route takes it to a node's primary IP
	// (with ExternalCIDR they have it anyway): the nodePortLookup phase
	// dials node ports there.
	ClientNodeRoutes bool
	// IPv6, when valid (a /96), gives every namespace the IPv6 twin of
	// its IPv4 addresses and routes (Testbed.AddIPv6) once the IPv4 plan
	// is built: a dual-stack run.
	IPv6 netip.Prefix
}

// Testbed is a built topology. Addresses are those of the /30 links.
type Testbed struct {
	RunID string
	// Node is Nodes[0].
	Node  *Netns
	Nodes []*Netns
	// Fabric holds the bridge joining the nodes (nil with one node).
	Fabric *Netns
	// Backend is the AnyIP backend host (nil with isolated pods).
	Backend *Netns
	Clients []*Netns
	// ClientNode[i] is the index of client pod i's node.
	ClientNode []int
	// NodeBackendAddr is the node's address on the backend link (the
	// source address of masqueraded traffic).
	NodeBackendAddr netip.Addr
	// NodeAddrs[n] is node n's address toward the backend (fabric).
	NodeAddrs []netip.Addr
	// ClientAddrs[i] is client pod i's address.
	ClientAddrs []netip.Addr
	// ClientSources[i] lists client pod i's source addresses: its link
	// address alone, or the ClientAddresses of its block.
	ClientSources [][]netip.Addr
	// Pods are the isolated pod namespaces, PodAddrs their addresses and
	// PodNode their nodes (empty with the shared backend host).
	Pods     []*Netns
	PodAddrs []netip.Addr
	PodNode  []int
	// External is the external client namespace (nil without
	// Spec.ExternalCIDR), ExternalAddr its address.
	External     *Netns
	ExternalAddr netip.Addr
	externalVia  []netip.Prefix
	// PodBuild is the wall time spent building the isolated pods, and
	// PodMemBytes the drop of MemAvailable (/proc/meminfo) across it.
	PodBuild    time.Duration
	PodMemBytes int64
	// IPv6 is the /96 of the IPv6 twins (AddIPv6), invalid without IPv6:
	// the IPv6 address of any IPv4 address above is
	// scenarios.Twin6(IPv6, addr).
	IPv6  netip.Prefix
	names []string
}

// NetnsName is the name of a namespace of this run: pb-<runID>-<role>.
func NetnsName(runID, role string) string { return Prefix + runID + "-" + role }

// linkAddrs returns the two host addresses of /30 link i in nodeCIDR
// (.4i+1 on the node side, .4i+2 on the far side).
func linkAddrs(nodeCIDR netip.Prefix, i int) (near, far netip.Addr) {
	b := nodeCIDR.Masked().Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(4*i + 1)
	near = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	return near, near.Next()
}

// anyIP makes the namespace of h answer for every address of pods:
// `ip route add local <pods> dev lo` (the AnyIP backend host).
func anyIP(h *netlink.Handle, pods netip.Prefix) error {
	lo, err := h.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := h.RouteAdd(&netlink.Route{
		LinkIndex: lo.Attrs().Index, Dst: ipnet(pods), Type: unix.RTN_LOCAL,
		Table: unix.RT_TABLE_LOCAL, Scope: netlink.SCOPE_HOST,
	}); err != nil {
		return fmt.Errorf("AnyIP route local %s dev lo: %w", pods, err)
	}
	return nil
}

// create makes the namespace pb-<runID>-<role> and records it for Teardown
// (before it exists, so a half-made one is removed too).
func (tb *Testbed) create(role string) (*Netns, error) {
	name := NetnsName(tb.RunID, role)
	tb.names = append(tb.names, name)
	return CreateNetns(name)
}

// nodeRoutes gives a node its routes toward the backend host: the pod CIDR,
// and the service CIDR, so that a packet to a ClusterIP no rule rewrote
// (a service without endpoints) is routed and meets the mode's REJECT in
// the forward path, as it does on a real node with a default route,
// instead of being dropped for want of a route. The backend host does not
// forward, so such a packet goes no further.
func nodeRoutes(h *netlink.Handle, spec Spec, backend netip.Addr) error {
	for _, dst := range []netip.Prefix{spec.PodCIDR, spec.ServiceCIDR} {
		if err := h.RouteAdd(&netlink.Route{Dst: ipnet(dst), Gw: net.IP(backend.AsSlice())}); err != nil {
			return fmt.Errorf("route %s via %s: %w", dst, backend, err)
		}
	}
	return nil
}

// veth creates a veth pair with end a in namespace na and end b in nb
// (created directly there: the link never exists in the root namespace),
// gives them addrA/30 and addrB/30 and sets both up.
func veth(na *Netns, a string, nb *Netns, b string, addrA, addrB netip.Addr) error {
	err := na.withNetlink(func(h *netlink.Handle) error {
		la := netlink.NewLinkAttrs()
		la.Name = a
		la.Namespace = netlink.NsFd(na.handle)
		v := &netlink.Veth{LinkAttrs: la, PeerName: b, PeerNamespace: netlink.NsFd(nb.handle)}
		if err := h.LinkAdd(v); err != nil {
			return fmt.Errorf("ip link add %s type veth peer %s netns %s: %w", a, b, nb.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, side := range []struct {
		ns   *Netns
		name string
		addr netip.Addr
	}{{na, a, addrA}, {nb, b, addrB}} {
		if err := side.ns.withNetlink(func(h *netlink.Handle) error {
			l, err := h.LinkByName(side.name)
			if err != nil {
				return err
			}
			if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipnet(netip.PrefixFrom(side.addr, 30))}); err != nil {
				return fmt.Errorf("ip addr add %s/30 dev %s: %w", side.addr, side.name, err)
			}
			return h.LinkSetUp(l)
		}); err != nil {
			return fmt.Errorf("netns %q: %w", side.ns.Name, err)
		}
	}
	return nil
}

func ipnet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func (n *Netns) withNetlink(fn func(h *netlink.Handle) error) error {
	h, err := n.Netlink()
	if err != nil {
		return fmt.Errorf("netlink handle in %q: %w", n.Name, err)
	}
	defer h.Close()
	return fn(h)
}

// Sysctl writes value to /proc/sys/<key> inside the namespace (key like
// "net/ipv4/ip_forward"). Only per-namespace net.* keys are allowed, so the
// root namespace's sysctls can never change through this call.
func (n *Netns) Sysctl(key, value string) error {
	if !strings.HasPrefix(key, "net/") {
		return fmt.Errorf("sysctl %q: only per-namespace net/ keys may be set", key)
	}
	return n.Do(func() error {
		if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644); err != nil {
			return fmt.Errorf("sysctl %s=%s in netns %q: %w", key, value, n.Name, err)
		}
		return nil
	})
}

// ReadSysctl reads /proc/sys/<key> inside the namespace (key like
// "net/ipv4/icmp_ratelimit"), trimmed; a missing key is fs.ErrNotExist.
func (n *Netns) ReadSysctl(key string) (string, error) {
	var v string
	err := n.Do(func() error {
		b, err := os.ReadFile(filepath.Join("/proc/sys", key))
		v = strings.TrimSpace(string(b))
		return err
	})
	return v, err
}

// Names lists the namespaces of the testbed.
func (tb *Testbed) Names() []string { return append([]string(nil), tb.names...) }

// Teardown deletes every namespace of the testbed (and with them their
// links, routes and rules). It is safe to call more than once.
func (tb *Testbed) Teardown() error {
	if tb == nil {
		return nil
	}
	var errs []error
	for _, n := range tb.namespaces() {
		n.Close()
	}
	for _, name := range tb.names {
		errs = append(errs, DeleteNetns(name))
	}
	tb.names = nil
	return errors.Join(errs...)
}

// Leftovers lists the namespaces of any run (pb-<6 hex>-<role>) present
// under /run/netns, sorted.
func Leftovers() ([]string, error) {
	ents, err := os.ReadDir("/run/netns")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if runIDPattern.MatchString(e.Name()) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// Cleanup deletes the leftover namespaces of every earlier run (or only of
// runID when it is not empty) and returns their names. Links, routes,
// rules and IPVS/nftables state live inside those namespaces and go with
// them. A run that is still going (some process holds one of its
// namespaces open, or has a thread inside one) is never touched: its
// namespaces are returned in skipped. Before the namespaces it kills the
// orphaned children of dead runs (KillOrphans; returned as "process PID
// (comm, run ID)") and then removes their temporary folders
// (pb-<runID>-* in each of ScratchRoots, returned as "folder PATH").
func Cleanup(runID string) (done, skipped []string, err error) {
	var errs []error
	// Orphaned children first: a process inside a namespace keeps it (and
	// its links and rules) alive after the name is deleted.
	killed, err := KillOrphans(runID)
	for _, k := range killed {
		done = append(done, "process "+k)
	}
	errs = append(errs, err)
	names, err := Leftovers()
	if err != nil {
		return done, nil, err
	}
	live := LiveRuns(names)
	var dirs []string
	for _, root := range ScratchRoots() {
		m, _ := filepath.Glob(filepath.Join(root, Prefix+runID+"*"))
		dirs = append(dirs, m...)
	}
	for _, d := range dirs {
		id := RunIDOf(filepath.Base(d))
		if id == "" || live[id] || (runID != "" && id != runID) || len(ChildProcesses(id)) > 0 {
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, "folder "+d)
	}
	for _, n := range names {
		if runID != "" && !strings.HasPrefix(n, Prefix+runID+"-") {
			continue
		}
		if live[RunIDOf(n)] {
			skipped = append(skipped, n)
			continue
		}
		if err := DeleteNetns(n); err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, n)
	}
	return done, skipped, errors.Join(errs...)
}

// ShmDir is the memory-backed folder (tmpfs) a run keeps throwaway data in
// when it exists, e.g. etcd's store (topology/controlplane).
const ShmDir = "/dev/shm"

// ScratchRoots are the folders a run creates its pb-<runID>-* folders in:
// os.TempDir() and ShmDir. Cleanup looks in each.
func ScratchRoots() []string {
	roots := []string{os.TempDir()}
	if st, err := os.Stat(ShmDir); err == nil && st.IsDir() && filepath.Clean(os.TempDir()) != ShmDir {
		roots = append(roots, ShmDir)
	}
	return roots
}

// Stale lists the leftover namespaces of runs that are no longer going
// (see LiveRuns): what Cleanup would remove.
func Stale() ([]string, error) {
	names, err := Leftovers()
	if err != nil {
		return nil, err
	}
	live := LiveRuns(names)
	var out []string
	for _, n := range names {
		if !live[RunIDOf(n)] {
			out = append(out, n)
		}
	}
	return out, nil
}

// RunIDOf returns the run ID of a testbed namespace name ("" if none).
func RunIDOf(name string) string {
	if m := runIDPattern.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	return ""
}

// LiveRuns returns the run IDs among names whose namespace some process
// still uses: an open file descriptor on it (a running proxybench keeps
// one per namespace) or a thread inside it, found by matching the
// namespace's nsfs inode against /proc/*/fd/* and /proc/*/task/*/ns/net.
// The testbed's own children (ChildEnv set: etcd, kube-apiserver,
// kube-proxy, and the programs Netns.Run runs) do not count, nor do
// threads that are exiting (PF_EXITING: killed, on their way out).
func LiveRuns(names []string) map[string]bool {
	byIno := map[string]string{}
	for _, n := range names {
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/run/netns", n), &st) == nil {
			byIno[fmt.Sprintf("net:[%d]", st.Ino)] = RunIDOf(n)
		}
	}
	live := map[string]bool{}
	if len(byIno) == 0 {
		return live
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if p.Name()[0] < '0' || p.Name()[0] > '9' {
			continue
		}
		if env, err := os.ReadFile(filepath.Join("/proc", p.Name(), "environ")); err != nil || len(env) == 0 {
			// Exiting (its memory is gone, e.g. a child killed with its
			// proxybench a moment ago) or a kernel thread: not a run.
			continue
		}
		if childRun(p.Name()) != "" {
			// etcd, kube-apiserver, kube-proxy (and what they run) live
			// inside the namespaces but do not keep a run alive: with
			// their proxybench gone they are orphans (KillOrphans).
			continue
		}
		// A thread that is exiting (a killed run's program: its
		// environ, and so ChildEnv, is gone before its namespace is
		// released) is leaving, not using, the namespace.
		var links []string
		if !exiting(filepath.Join("/proc", p.Name(), "stat")) {
			fds, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
			for _, fd := range fds {
				links = append(links, filepath.Join("/proc", p.Name(), "fd", fd.Name()))
			}
		}
		tasks, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "task"))
		for _, t := range tasks {
			if !exiting(filepath.Join("/proc", p.Name(), "task", t.Name(), "stat")) {
				links = append(links, filepath.Join("/proc", p.Name(), "task", t.Name(), "ns", "net"))
			}
		}
		for _, l := range links {
			if target, err := os.Readlink(l); err == nil {
				if id, ok := byIno[target]; ok {
					live[id] = true
				}
			}
		}
	}
	return live
}

// pfExiting is the kernel's PF_EXITING task flag (include/linux/sched.h),
// set at the start of do_exit (kernel/exit.c), before the task drops its
// memory (environ), files and namespaces.
const pfExiting = 0x4

// exiting reports whether the task of the /proc stat file is exiting
// (flags, field 9, has PF_EXITING), or is gone.
func exiting(stat string) bool {
	b, err := os.ReadFile(stat)
	if err != nil {
		return true
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 7 {
		return true
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err == nil && flags&pfExiting != 0
}

// NetCounters reads the namespace's IPv4 protocol counters: the
// "Header: names" / "Header: values" line pairs of /proc/net/snmp and
// /proc/net/netstat (net/ipv4/proc.c), keyed "Icmp.OutRateLimitHost",
// "TcpExt.LockDroppedIcmps" and so on. They are read from
// /proc/thread-self/net, which follows the calling thread's namespace.
// A file whose lines do not pair up is an error.
func (n *Netns) NetCounters() (map[string]int64, error) {
	out := map[string]int64{}
	err := n.Do(func() error {
		for _, f := range []string{"/proc/thread-self/net/snmp", "/proc/thread-self/net/netstat"} {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			if err := parseNetCounters(string(b), out); err != nil {
				return fmt.Errorf("%s in netns %q: %w", f, n.Name, err)
			}
		}
		return nil
	})
	return out, err
}

// parseNetCounters adds the counters of one /proc/net/snmp-style text to
// out: each header line ("Icmp: InMsgs InErrors ...") is followed by a
// value line with the same prefix and as many fields.
func parseNetCounters(text string, out map[string]int64) error {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines)%2 != 0 {
		return fmt.Errorf("%d lines, want header/value pairs", len(lines))
	}
	for i := 0; i < len(lines); i += 2 {
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) == 0 || len(names) != len(values) || names[0] != values[0] || !strings.HasSuffix(names[0], ":") {
			return fmt.Errorf("line %d: header and values do not pair up", i+1)
		}
		group := strings.TrimSuffix(names[0], ":")
		for j := 1; j < len(names); j++ {
			v, err := strconv.ParseInt(values[j], 10, 64)
			if err != nil {
				return fmt.Errorf("line %d: %s.%s: %w", i+2, group, names[j], err)
			}
			out[group+"."+names[j]] = v
		}
	}
	return nil
}
