//go:build linux

package ipvs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/moby/ipvs"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/proxybench/proxybench/internal/lib/xtables"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/conntrack"
	"github.com/proxybench/proxybench/workload"
)

// Binaries run inside the node namespace: kube-proxy's IPVS mode programs
// its iptables rules through the legacy back end.
const binIPSet = "ipset"

var (
	binRestore = xtables.Binary("legacy", "restore")
	binSave    = xtables.Binary("legacy", "save")
)

// backend is Config.Backend, legacy when unset.
func (c Config) backend() string {
	if c.Backend == "" {
		return "legacy"
	}
	return c.Backend
}

// restoreBin and saveBin are the iptables tools of the proxier's back
// end and family: iptables-legacy-restore, ip6tables-nft-save, ...
func (c Config) restoreBin() string { return c.xtBinary("restore") }

func (c Config) saveBin() string { return c.xtBinary("save") }

func (c Config) xtBinary(tool string) string {
	if c.IPv6 {
		return xtables.Binary6(c.backend(), tool)
	}
	return xtables.Binary(c.backend(), tool)
}

// af is the proxier's address family for IPVS (AF_INET, AF_INET6).
func (c Config) af() uint16 {
	if c.IPv6 {
		return unix.AF_INET6
	}
	return unix.AF_INET
}

// ipsetMaxElem is the KUBE-CLUSTER-IP maxelem: fixed (a different value
// would make "create -exist" of an existing set fail) and above the
// largest ServicePort count a /16 service CIDR can hold.
const ipsetMaxElem = 1 << 20

// NamespaceHandle is implemented by nodes that expose their namespace
// file descriptor (*topology.Netns); New needs it to bind netlink sockets
// to the namespace.
type NamespaceHandle interface {
	Handle() netns.NsHandle
}

// Proxier programs one node namespace in kube-proxy's IPVS layout. It is
// safe for concurrent use; calls are serialised.
type Proxier struct {
	cfg  Config
	node proxymodes.Node
	// open returns the IPVS and address handles of the namespace, and the
	// ipset netlink socket (nil: ipset restore only).
	open func() (Handle, Addresses, *ipsetNetlink, error)
	// sysctl writes a net.ipv4.vs sysctl inside the namespace.
	sysctl func(key, value string) error

	// perObject sends one netlink request per object and waits for its
	// answer (kube-proxy's and moby/ipvs's way) instead of batches; for
	// comparison benchmarks.
	perObject bool

	mu    sync.Mutex
	h     Handle
	addrs Addresses
	set   *ipsetNetlink
	full  bool
	// readAll makes the next Sync read every virtual server's real
	// servers and kube-ipvs0's addresses back (Resync; a full Sync does).
	readAll bool
	// synced maps each virtual server key to the real servers the last
	// successful Sync wanted; entries holds its ipset members by set. Both
	// are nil before the first successful Sync.
	synced      map[string][]RealServer
	entries     map[string]map[string]struct{}
	addrsSynced []netip.Addr // rs.Addresses of the last successful Sync
	// iptablesSynced is the rules the last successful restore wrote (nil:
	// the next Sync restores them).
	iptablesSynced []byte

	// grace holds the real servers in graceful termination by graceKey;
	// graceStop ends their periodic check, graceErr is its last error.
	grace     map[string]graceItem
	graceStop chan struct{}
	graceErr  error
}

var (
	_ proxymodes.Proxier    = (*Proxier)(nil)
	_ proxymodes.FullSyncer = (*Proxier)(nil)
	_ proxymodes.Resyncer   = (*Proxier)(nil)
)

// New returns a Proxier for cfg programming node, which must implement
// NamespaceHandle (as *topology.Netns does): IPVS and kube-ipvs0 are
// programmed through netlink sockets opened in its namespace, ipset and
// iptables-legacy-restore run in it with node.Run. cfg.NodeName is the
// namespace's when it knows it (proxymodes.NodeNamer); cfg.NodeIPs are
// read from the namespace before each sync that needs them. Nothing
// happens until Sync; an invalid cfg makes Sync fail.
func New(cfg Config, node proxymodes.Node) *Proxier {
	cfg.NodeName = proxymodes.NodeNameOf(node, cfg.NodeName)
	p := NewWithHandles(cfg, node, nil, nil)
	p.open = func() (Handle, Addresses, *ipsetNetlink, error) { return openNamespace(node, !p.perObject, cfg.IPv6) }
	p.sysctl = func(key, value string) error {
		return node.Do(func() error {
			path := "/proc/sys/net/ipv4/vs/" + key
			if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
				return fmt.Errorf("ipvs: sysctl net.ipv4.vs.%s=%s: %w", key, value, err)
			}
			return nil
		})
	}
	return p
}

// NewWithHandles returns a Proxier that programs IPVS through h and
// kube-ipvs0 through a, and runs ipset and iptables with node.Run (for
// tests with the fakes of proxymodes/ipvs/testing; the net.ipv4.vs sysctls are not
// written).
func NewWithHandles(cfg Config, node proxymodes.Node, h Handle, a Addresses) *Proxier {
	return &Proxier{
		cfg: cfg, node: node, full: true,
		open:   func() (Handle, Addresses, *ipsetNetlink, error) { return h, a, nil, nil },
		sysctl: func(string, string) error { return nil },
	}
}

// openNamespace opens IPVS generic netlink and rtnetlink sockets in node's
// namespace; with batch, changes go in batches (BatchHandle,
// OpenNetlinkAddresses) and ipset members over nfnetlink (ipsetNetlink).
// It fails with a message naming --kernel uml when the kernel has no
// IP_VS.
//
// With v6 (the IPv6 proxier) kube-ipvs0's addresses are its IPv6 ones,
// and ipset members go as `ipset restore` lines (the nfnetlink encoder
// writes IPv4 members only).
func openNamespace(node proxymodes.Node, batch, v6 bool) (Handle, Addresses, *ipsetNetlink, error) {
	nh, ok := node.(NamespaceHandle)
	if !ok {
		return nil, nil, nil, fmt.Errorf("ipvs: node %T exposes no namespace handle (want *topology.Netns)", node)
	}
	if ok, why := hasIPVS(node); !ok {
		return nil, nil, nil, errors.New("ipvs: " + why)
	}
	var h Handle
	if batch {
		b, err := NewBatchHandle(nh.Handle())
		if err != nil {
			return nil, nil, nil, fmt.Errorf("ipvs: open IPVS netlink socket: %w", err)
		}
		h = b
	} else {
		m, err := newMobyHandle(nh.Handle())
		if err != nil {
			return nil, nil, nil, fmt.Errorf("ipvs: open IPVS netlink socket: %w", err)
		}
		h = m
	}
	closeH := func() {
		if c, ok := h.(interface{ Close() }); ok {
			c.Close()
		}
	}
	a, err := OpenNetlinkAddresses(nh.Handle(), batch)
	if err != nil {
		closeH()
		return nil, nil, nil, err
	}
	a.v6 = v6
	if !batch || v6 {
		return h, a, nil, nil
	}
	set, err := openIPSetNetlink(nh.Handle())
	if err != nil {
		closeH()
		a.Close()
		return nil, nil, nil, err
	}
	return h, a, set, nil
}

// hasIPVS reports whether /proc/net/ip_vs exists in node's namespace
// (the ip_vs module registers it in every namespace), and why not.
func hasIPVS(node proxymodes.Node) (bool, string) {
	var found bool
	err := node.Do(func() error {
		_, err := os.Stat("/proc/thread-self/net/ip_vs")
		found = err == nil
		return nil
	})
	if err != nil {
		return false, err.Error()
	}
	if found {
		return true, ""
	}
	var u unix.Utsname
	_ = unix.Uname(&u)
	rel := unix.ByteSliceToString(u.Release[:])
	if os.Getenv("PROXYBENCH_IN_UML") == "1" {
		return false, fmt.Sprintf("guest kernel %s has no IP_VS loaded (modprobe %s)", rel, strings.Join(KernelModules(""), " "))
	}
	return false, fmt.Sprintf("host kernel %s has no IP_VS (CONFIG_IP_VS not set); available with --kernel uml", rel)
}

// ipvsVersion returns the first line of /proc/net/ip_vs of the calling
// thread's namespace ("IP Virtual Server version 1.2.1 (size=4096)").
func ipvsVersion() string {
	b, err := os.ReadFile("/proc/thread-self/net/ip_vs")
	if err != nil {
		return "unknown"
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line)
}

// Mode returns "ipvs".
func (p *Proxier) Mode() string { return "ipvs" }

// Info returns {"scheduler", "iptables": the back end, "ipvs": the first line
// of /proc/net/ip_vs, "ipset": ipset's version line}.
func (p *Proxier) Info() map[string]string {
	info := map[string]string{"backend": "netlink/" + p.cfg.scheduler(), "scheduler": p.cfg.scheduler(), "iptables": p.cfg.backend()}
	_ = p.node.Do(func() error {
		info["ipvs"] = ipvsVersion()
		return nil
	})
	if out, err := p.node.Run(context.Background(), nil, binIPSet, "version"); err == nil {
		line, _, _ := strings.Cut(string(out), "\n")
		info["ipset"] = strings.TrimSpace(line)
	}
	return info
}

// ForceFullSync makes the next Sync full: it re-ensures kube-ipvs0, the
// sysctls, timeouts, ipset and iptables rules, and re-reads every
// virtual server's real servers from the kernel.
func (p *Proxier) ForceFullSync() {
	p.mu.Lock()
	p.full = true
	p.mu.Unlock()
}

// Resync makes the next Sync read back every virtual server's real
// servers (GetDestinations of each) and kube-ipvs0's addresses, and
// repair what differs from the desired state, as every sync of
// kube-proxy's IPVS proxier does (v1.37.2 pkg/proxy/ipvs/proxier.go:
// syncProxyRules calls syncEndpoint, which lists GetRealServers, for every
// service port, and its runner syncs every syncPeriod with nothing
// changed). Unlike ForceFullSync it leaves kube-ipvs0's link, the
// sysctls, the ipset and the iptables rules as the last Sync wrote them.
// The Sync stays Kind "incremental".
func (p *Proxier) Resync() {
	p.mu.Lock()
	p.readAll = true
	p.mu.Unlock()
}

func (p *Proxier) handles() error {
	if p.h != nil {
		return nil
	}
	h, a, set, err := p.open()
	if err != nil {
		return err
	}
	if h == nil || a == nil {
		return errors.New("ipvs: no IPVS or address handle")
	}
	p.h, p.addrs, p.set = h, a, set
	return nil
}

// Sync programs services (see Render) into the namespace and returns what
// it cost. Steps and SyncStats.Phases:
//
//   - "render": Render (pure).
//   - "addresses": on a full sync ensure kube-ipvs0, the net.ipv4.vs
//     sysctls kube-proxy sets (conntrack=1, expire_nodest_conn=1,
//     expire_quiescent_template=1) and the non-zero timeouts (SetConfig);
//     then list kube-ipvs0's addresses (one dump) and add the missing
//     ClusterIPs and delete the others. An incremental sync whose
//     ClusterIPs equal the last successful sync's skips this step (unless
//     after Resync).
//   - "ipvs": dump the virtual servers (one GetServices), compare each with
//     the desired one, read the real servers of those that exist
//     (GetDestinations: every one on a full sync or after Resync, on an
//     incremental sync only those whose desired real servers changed since
//     the last successful Sync), then send only the differences: new, updated and
//     deleted virtual and real servers. Virtual servers that are not
//     desired are deleted unless their address is in ExcludeCIDRs.
//     A removed TCP real server with active or inactive connections is
//     not deleted but set to weight 0 and enters graceful termination
//     (kube-proxy's graceful_termination.go): GracefulCheck, run every
//     Config.GracefulInterval (kube-proxy: 1 min), deletes it once its
//     connections drain; one desired again is deleted and re-added. UDP
//     real servers, and drained ones, are deleted at once.
//   - "ipset": KUBE-CLUSTER-IP: on a full sync `ipset -exist restore` of
//     create and flush, then every entry; later only added and deleted
//     entries. Entries go over nfnetlink, up to 1000 per message and many
//     messages per sendmsg (New's default), or as `ipset restore` lines
//     (NewWithHandles and per-object mode, as kube-proxy), which the ipset
//     tool sends one netlink round trip each.
//   - "iptables": on a full sync (or after a failed one) one
//     iptables-legacy-restore --noflush of the nat chains, plus the jumps
//     from OUTPUT, PREROUTING and POSTROUTING that iptables-legacy-save
//     shows missing.
//
// SyncStats: Kind "full" for the first Sync, after Cleanup, after a
// failure or ForceFullSync, else "incremental"; Objects = virtual servers
// + real servers + addresses + ipset entries sent (added, updated or
// deleted) + nat rules restored; Bytes = netlink request bytes (computed
// from the message layout when a handle sends one request per object,
// counted when it batches) + ipset and iptables-restore input bytes. A
// failed Sync leaves the kernel partly updated and makes the next Sync
// full.
func (p *Proxier) Sync(ctx context.Context, services []workload.Service) (st proxymodes.SyncStats, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	start, cpu := time.Now(), proxymodes.StartSyncCPU(p.node)
	defer cpu.Stop() // the proxy's own CPU only: this thread and its programs
	full := p.full || p.synced == nil
	readAll := full || p.readAll
	st = proxymodes.SyncStats{Kind: "incremental", Phases: map[string]time.Duration{}}
	if full {
		st.Kind = "full"
	}
	defer func() {
		st.Wall = time.Since(start)
		st.CPU = cpu.Elapsed()
		if err != nil {
			p.full = true
			p.iptablesSynced = nil
		}
	}()

	if err := p.handles(); err != nil {
		return st, err
	}
	t := time.Now()
	cfg := p.cfg
	if needsNodeIPs(services) {
		if cfg.NodeIPs, err = p.addrs.NodeIPs(); err != nil {
			return st, err
		}
	}
	rs, err := Render(cfg, services)
	st.Phases["render"] = time.Since(t)
	if err != nil {
		return st, err
	}

	t = time.Now()
	err = p.syncAddresses(rs, full, readAll, &st)
	st.Phases["addresses"] = time.Since(t)
	if err != nil {
		return st, err
	}
	if err := ctx.Err(); err != nil {
		return st, err
	}

	t = time.Now()
	err = p.syncIPVS(rs, readAll, &st)
	st.Phases["ipvs"] = time.Since(t)
	if err != nil {
		return st, err
	}

	t = time.Now()
	entries, err := p.syncIPSet(ctx, rs, full, &st)
	st.Phases["ipset"] = time.Since(t)
	if err != nil {
		return st, err
	}

	t = time.Now()
	if full || !bytes.Equal(p.iptablesSynced, rs.IPTables) {
		err = p.syncIPTables(ctx, rs, &st)
	}
	st.Phases["iptables"] = time.Since(t)
	if err != nil {
		return st, err
	}

	if !p.cfg.NoConntrackCleanup {
		conntrack.AfterSync(p.node, services).Into(&st)
	}

	synced := make(map[string][]RealServer, len(rs.Virtual))
	for i := range rs.Virtual {
		synced[rs.Virtual[i].Key()] = rs.Virtual[i].Reals
	}
	p.synced, p.entries, p.full, p.iptablesSynced, p.readAll = synced, entries, false, rs.IPTables, false
	p.addrsSynced = rs.Addresses
	return st, nil
}

// syncAddresses ensures kube-ipvs0 and the sysctls on a full sync and
// brings the link's addresses to rs.Addresses, reading them back unless
// readAll is false and they equal the last successful sync's.
func (p *Proxier) syncAddresses(rs *Ruleset, full, readAll bool, st *proxymodes.SyncStats) error {
	if full {
		if err := p.addrs.EnsureLink(); err != nil {
			return err
		}
		for _, kv := range [][2]string{{"conntrack", "1"}, {"expire_nodest_conn", "1"}, {"expire_quiescent_template", "1"}} {
			if err := p.sysctl(kv[0], kv[1]); err != nil {
				return err
			}
		}
		c := ipvs.Config{TimeoutTCP: p.cfg.TCPTimeout, TimeoutTCPFin: p.cfg.TCPFinTimeout, TimeoutUDP: p.cfg.UDPTimeout}
		if c != (ipvs.Config{}) {
			if err := p.h.SetConfig(&c); err != nil {
				return fmt.Errorf("ipvs: set timeouts tcp %v tcpfin %v udp %v: %w", c.TimeoutTCP, c.TimeoutTCPFin, c.TimeoutUDP, err)
			}
		}
	}
	if !readAll && p.addrsSynced != nil && slices.Equal(p.addrsSynced, rs.Addresses) {
		return nil // unchanged since the last successful sync: not re-read
	}
	have, err := p.addrs.List()
	if err != nil {
		return err
	}
	add, del := diffAddrs(rs.Addresses, have)
	n, err := p.addrs.Add(add)
	st.Bytes += n
	st.Objects += n / addrMsgLen
	if err != nil {
		return err
	}
	n, err = p.addrs.Del(del)
	st.Bytes += n
	st.Objects += n / addrMsgLen
	return err
}

// diffAddrs returns the addresses of want missing from have, in want's
// order, and those of have not wanted, sorted.
func diffAddrs(want, have []netip.Addr) (add, del []netip.Addr) {
	h := make(map[netip.Addr]struct{}, len(have))
	for _, a := range have {
		h[a] = struct{}{}
	}
	for _, a := range want {
		if _, ok := h[a]; ok {
			delete(h, a)
			continue
		}
		add = append(add, a)
	}
	for a := range h {
		del = append(del, a)
	}
	slices.SortFunc(del, netip.Addr.Compare)
	return add, del
}

// Plan returns the IPVS changes that turn the kernel state read through h
// into rs: see Sync's "ipvs" step. synced (nil on a full sync) maps each
// virtual server key to the real servers last synced; a virtual server
// whose desired real servers equal them is not re-read. grace holds the
// graceKeys of real servers already in graceful termination (nil: none):
// an undesired one is left alone, a desired one is deleted and re-added
// (kube-proxy's MoveRSOutofGracefulDeleteList). Another undesired real
// server is deleted when drained (see drained), else set to weight 0 with
// Op.Graceful. Deterministic: desired virtual servers in rs order, each
// followed by its real server changes (deletions first), then deletions of
// unwanted virtual servers sorted by key.
func Plan(h Handle, cfg Config, rs *Ruleset, synced map[string][]RealServer, grace map[string]graceItem) ([]Op, error) {
	cur, err := h.GetServices()
	if err != nil {
		return nil, fmt.Errorf("ipvs: list virtual servers: %w", err)
	}
	have := make(map[string]*ipvs.Service, len(cur))
	for _, s := range cur {
		// The other family's virtual servers are its proxier's.
		if s.FWMark != 0 || s.AddressFamily != cfg.af() {
			continue
		}
		have[serviceKey(s)] = s
	}
	ops := make([]Op, 0, 16)
	if len(have) == 0 {
		ops = make([]Op, 0, len(rs.Virtual)+rs.RealServers)
	}
	for i := range rs.Virtual {
		v := &rs.Virtual[i]
		want := toService(v)
		k := v.Key()
		hs, ok := have[k]
		if !ok {
			ops = append(ops, Op{Kind: OpNewService, Service: want})
			for _, r := range v.Reals {
				ops = append(ops, Op{Kind: OpNewDestination, Service: want, Dest: toDest(r)})
			}
			continue
		}
		delete(have, k)
		if !serviceEqual(hs, want) {
			ops = append(ops, Op{Kind: OpUpdateService, Service: want})
		}
		if prev, ok := synced[k]; ok && slices.Equal(prev, v.Reals) {
			continue
		}
		ds, err := h.GetDestinations(want)
		if err != nil {
			return nil, fmt.Errorf("ipvs: list real servers of %s: %w", k, err)
		}
		haveD := make(map[string]*ipvs.Destination, len(ds))
		for _, d := range ds {
			haveD[destKey(addrOf(d.Address), d.Port)] = d
		}
		var adds []Op
		for _, r := range v.Reals {
			wd := toDest(r)
			dk := destKey(r.Address, r.Port)
			hd, ok := haveD[dk]
			_, terminating := grace[graceKey(want, wd)]
			switch {
			case !ok:
				adds = append(adds, Op{Kind: OpNewDestination, Service: want, Dest: wd})
			case terminating:
				ops = append(ops, Op{Kind: OpDelDestination, Service: want, Dest: hd})
				adds = append(adds, Op{Kind: OpNewDestination, Service: want, Dest: wd})
			case !destEqual(hd, wd):
				adds = append(adds, Op{Kind: OpUpdateDestination, Service: want, Dest: wd})
			}
			delete(haveD, dk)
		}
		stale := make([]string, 0, len(haveD))
		for dk := range haveD {
			stale = append(stale, dk)
		}
		sort.Strings(stale)
		for _, dk := range stale {
			hd := haveD[dk]
			if _, terminating := grace[graceKey(want, hd)]; terminating {
				continue // waits for GracefulCheck
			}
			if drained(want, hd) {
				ops = append(ops, Op{Kind: OpDelDestination, Service: want, Dest: hd})
				continue
			}
			zero := *hd
			zero.Weight = 0
			ops = append(ops, Op{Kind: OpUpdateDestination, Service: want, Dest: &zero, Graceful: true})
		}
		ops = append(ops, adds...)
	}
	stale := make([]string, 0, len(have))
	for k, s := range have {
		if !cfg.excluded(addrOf(s.Address)) {
			stale = append(stale, k)
		}
	}
	sort.Strings(stale)
	for _, k := range stale {
		ops = append(ops, Op{Kind: OpDelService, Service: have[k]})
	}
	return ops, nil
}

// describe names op's objects for an error: "TCP/198.18.0.1:80 -> 198.19.0.1:8080".
func describe(op Op) string {
	s := serviceKey(op.Service)
	if op.Dest != nil {
		s += " -> " + destKey(addrOf(op.Dest.Address), op.Dest.Port)
	}
	return s
}

// Apply sends ops through h: in batches when h implements Batcher, else one
// call per op. It returns the netlink bytes sent and the first error.
func Apply(h Handle, ops []Op) (int, error) {
	if b, ok := h.(Batcher); ok {
		return b.Apply(ops)
	}
	n := 0
	for _, op := range ops {
		if err := applyOne(h, op); err != nil {
			return n, fmt.Errorf("ipvs: %s %s: %w", op.Kind, describe(op), err)
		}
		n += opBytes(op)
	}
	return n, nil
}

// syncIPVS plans and applies the IPVS changes; readAll re-reads every
// virtual server's real servers (Plan with no synced map).
func (p *Proxier) syncIPVS(rs *Ruleset, readAll bool, st *proxymodes.SyncStats) error {
	synced := p.synced
	if readAll {
		synced = nil
	}
	ops, err := Plan(p.h, p.cfg, rs, synced, p.grace)
	if err != nil {
		return err
	}
	n, err := Apply(p.h, ops)
	if err == nil {
		p.noteGrace(ops)
	}
	st.Bytes += n
	st.Objects += len(ops)
	return err
}

// needsNodeIPs reports whether a service has node ports, external IPs or
// LoadBalancer IPs, the only objects the node's addresses change.
func needsNodeIPs(services []workload.Service) bool {
	for i := range services {
		if services[i].HasNodePorts() || len(services[i].ExternalIPs) > 0 || len(services[i].LoadBalancerIPs) > 0 {
			return true
		}
	}
	return false
}

func (p *Proxier) syncIPSet(ctx context.Context, rs *Ruleset, full bool, st *proxymodes.SyncStats) (map[string]map[string]struct{}, error) {
	full = full || p.entries == nil
	want := make(map[string]map[string]struct{}, len(SetNames))
	var b bytes.Buffer // the members' lines; a full sync's creates go before them
	creates := func(adopted map[string]int) []byte {
		var c bytes.Buffer
		for _, si := range SetNames {
			c.WriteString(createLine(p.cfg, si, adopted) + "\nflush " + p.cfg.SetName(si.Name) + "\n")
		}
		return c.Bytes()
	}
	var nlAdd, nlDel []string // KUBE-CLUSTER-IP's, over netlink
	for _, si := range SetNames {
		members := rs.Sets[si.Name]
		w := make(map[string]struct{}, len(members))
		for _, e := range members {
			w[e] = struct{}{}
		}
		want[si.Name] = w
		var add, del []string
		if full {
			add = members
		} else {
			have := p.entries[si.Name]
			for _, e := range members {
				if _, ok := have[e]; !ok {
					add = append(add, e)
				}
			}
			for e := range have {
				if _, ok := w[e]; !ok {
					del = append(del, e)
				}
			}
			sort.Strings(del)
		}
		st.Objects += len(add) + len(del)
		if si.Name == ClusterIPSet && p.set != nil {
			nlAdd, nlDel = add, del
			continue
		}
		name := p.cfg.SetName(si.Name)
		b.Grow((len(add) + len(del)) * (len(name) + 30))
		for _, e := range add {
			b.WriteString("add " + name + " " + e + "\n")
		}
		for _, e := range del {
			b.WriteString("del " + name + " " + e + "\n")
		}
	}
	if full || b.Len() > 0 {
		in := b.Bytes()
		if full {
			in = append(creates(nil), in...)
		}
		_, err := p.node.Run(ctx, in, binIPSet, "-exist", "restore")
		if err != nil && full && strings.Contains(err.Error(), "set with the same name already exists") {
			// A set another writer created (kube-proxy, maxelem 65536)
			// on this node: take it over with its maxelem and retry.
			out, lerr := p.node.Run(ctx, nil, binIPSet, "list", "-t")
			if lerr != nil {
				return nil, fmt.Errorf("ipvs: ipset restore: %w (and ipset list -t: %v)", err, lerr)
			}
			adopted, small := adoptMaxElem(p.cfg, string(out), rs.Sets)
			for name, m := range small {
				return nil, fmt.Errorf("ipvs: ipset %s exists with maxelem %d, fewer than its %d members, and is another writer's: remove it (proxybench cleanup, or kube-proxy --cleanup) and sync again", p.cfg.SetName(name), m, len(rs.Sets[name]))
			}
			if len(adopted) > 0 {
				in = append(creates(adopted), b.Bytes()...)
				_, err = p.node.Run(ctx, in, binIPSet, "-exist", "restore")
			}
		}
		if err != nil {
			return nil, fmt.Errorf("ipvs: ipset restore: %w", err)
		}
		st.Bytes += len(in)
	}
	for _, c := range []struct {
		del     bool
		entries []string
	}{{true, nlDel}, {false, nlAdd}} {
		if len(c.entries) == 0 {
			continue
		}
		n, err := p.set.change(ClusterIPSet, c.del, c.entries)
		st.Bytes += n
		if err != nil {
			return nil, err
		}
	}
	return want, nil
}

// restoreInput returns rules with, before each table's COMMIT, "-I
// <chain> 1 <jump>" for every jump rule of that table that its
// iptables-save output (saves by table) lacks, in jumpRules order.
func restoreInput(rules []byte, saves map[string][]byte) ([]byte, int) {
	out := make([]byte, 0, len(rules)+512)
	table, n := "", 0
	for _, l := range bytes.SplitAfter(rules, []byte("\n")) {
		if len(l) > 1 && l[0] == '*' {
			table = string(bytes.TrimSpace(l[1:]))
		}
		if string(l) == "COMMIT\n" {
			for _, j := range jumpRules {
				if j.table == table && !bytes.Contains(saves[table], []byte("-A "+j.chain+" "+j.spec+"\n")) {
					out = append(out, "-I "+j.chain+" 1 "+j.spec+"\n"...)
					n++
				}
			}
		}
		out = append(out, l...)
	}
	return out, n
}

// saveTables runs iptables-save for the nat and filter tables.
func (p *Proxier) saveTables(ctx context.Context) (map[string][]byte, error) {
	saves := map[string][]byte{}
	for _, t := range []string{"nat", "filter"} {
		out, err := p.node.Run(ctx, nil, p.cfg.saveBin(), "-t", t)
		if err != nil {
			return nil, fmt.Errorf("ipvs: %w", err)
		}
		saves[t] = out
	}
	return saves, nil
}

func (p *Proxier) syncIPTables(ctx context.Context, rs *Ruleset, st *proxymodes.SyncStats) error {
	saves, err := p.saveTables(ctx)
	if err != nil {
		return err
	}
	in, jumps := restoreInput(rs.IPTables, saves)
	if _, err := p.node.Run(ctx, in, p.cfg.restoreBin(), xtables.RestoreArgs("--noflush")...); err != nil {
		return fmt.Errorf("ipvs: restore nat and filter rules: %w", err)
	}
	st.Bytes += len(in)
	st.Objects += rs.IPTablesRules + jumps
	return nil
}

// Cleanup removes what the Proxier (or kube-proxy in IPVS mode) programmed
// in the namespace, as kube-proxy's CleanupLeftovers: the jump rules and
// the kube-proxy chains of the nat and filter tables, every ipset of
// SetNames (after the rules that match them), every IPVS virtual server
// outside ExcludeCIDRs and kube-ipvs0. It closes the netlink sockets (a
// later Sync reopens them and is full).
func (p *Proxier) Cleanup(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.full, p.synced, p.entries, p.iptablesSynced, p.addrsSynced = true, nil, nil, nil, nil
	p.stopGraceLoop()
	p.grace, p.graceErr = nil, nil
	var errs []error
	saves, err := p.saveTables(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("ipvs: cleanup: %w", err))
	} else if in := cleanupInput(saves); in != nil {
		if _, err := p.node.Run(ctx, in, p.cfg.restoreBin(), xtables.RestoreArgs("--noflush")...); err != nil {
			errs = append(errs, fmt.Errorf("ipvs: cleanup nat and filter rules: %w", err))
		}
	}
	if out, err := p.node.Run(ctx, nil, binIPSet, "list", "-n"); err == nil {
		have := strings.Fields(string(out))
		for _, si := range SetNames {
			name := p.cfg.SetName(si.Name)
			if !slices.Contains(have, name) {
				continue
			}
			if _, err := p.node.Run(ctx, nil, binIPSet, "destroy", name); err != nil {
				errs = append(errs, fmt.Errorf("ipvs: cleanup: %w", err))
			}
		}
	}
	if err := p.handles(); err != nil {
		errs = append(errs, err)
		return errors.Join(errs...)
	}
	if svcs, err := p.h.GetServices(); err != nil {
		errs = append(errs, fmt.Errorf("ipvs: cleanup: list virtual servers: %w", err))
	} else {
		var ops []Op
		for _, s := range svcs {
			if s.AddressFamily == p.cfg.af() && !p.cfg.excluded(addrOf(s.Address)) {
				ops = append(ops, Op{Kind: OpDelService, Service: s})
			}
		}
		if _, err := Apply(p.h, ops); err != nil {
			errs = append(errs, fmt.Errorf("ipvs: cleanup: %w", err))
		}
	}
	if p.cfg.IPv6 {
		// kube-ipvs0 holds the IPv4 proxier's addresses too: unbind
		// the IPv6 ones only.
		if as, err := p.addrs.List(); err != nil {
			errs = append(errs, err)
		} else if _, err := p.addrs.Del(as); err != nil {
			errs = append(errs, err)
		}
	} else if err := p.addrs.DeleteLink(); err != nil {
		errs = append(errs, err)
	}
	p.close()
	return errors.Join(errs...)
}

// close releases the netlink sockets of handles New opened.
func (p *Proxier) close() {
	if c, ok := p.h.(interface{ Close() }); ok {
		c.Close()
	}
	if p.addrs != nil {
		p.addrs.Close()
	}
	if p.set != nil {
		p.set.close()
	}
	p.h, p.addrs, p.set = nil, nil, nil
}

// cleanupInput turns iptables-save output (by table) into restore input
// that deletes the IPVS jump rules present and flushes and deletes the
// kube-proxy chains present, table by table, or nil when there is none.
func cleanupInput(saves map[string][]byte) []byte {
	var out bytes.Buffer
	for _, t := range []struct {
		table  string
		chains []string
	}{{"nat", natChains}, {"filter", filterChains}} {
		save := saves[t.table]
		var b bytes.Buffer
		for _, j := range jumpRules {
			line := "-A " + j.chain + " " + j.spec + "\n"
			if j.table == t.table && bytes.Contains(save, []byte(line)) {
				b.WriteString("-D " + line[3:])
			}
		}
		var chains []string
		for _, c := range t.chains {
			if bytes.Contains(save, []byte("\n:"+c+" ")) {
				chains = append(chains, c)
			}
		}
		for _, c := range chains {
			b.WriteString(":" + c + " - [0:0]\n")
		}
		for _, c := range chains {
			b.WriteString("-X " + c + "\n")
		}
		if b.Len() > 0 {
			out.WriteString("*" + t.table + "\n")
			out.Write(b.Bytes())
			out.WriteString("COMMIT\n")
		}
	}
	if out.Len() == 0 {
		return nil
	}
	return out.Bytes()
}
