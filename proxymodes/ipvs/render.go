// Package ipvs is the IPVS proxy mode: kube-proxy's IPVS proxier
// (pkg/proxy/ipvs) reproduced for one node namespace.
//
// The layout is kube-proxy's: a dummy interface kube-ipvs0 holds every
// ClusterIP (/32) so that packets to them are delivered locally, where
// IPVS (net/netfilter/ipvs) intercepts them; one IPVS virtual server per
// ServicePort with the configured scheduler (persistent when the service
// has ClientIP session affinity); one real server per ready endpoint with
// masquerade (NAT) forwarding and the endpoint's weight; the ipset
// KUBE-CLUSTER-IP (hash:ip,port) of every ClusterIP,proto:port and the few
// nat rules kube-proxy adds for masquerade (KUBE-SERVICES,
// KUBE-POSTROUTING, KUBE-MARK-MASQ).
//
// Render turns services into that desired state as data (pure, no kernel).
// A Proxier reads the kernel's state over netlink (github.com/moby/ipvs and
// vishvananda/netlink handles bound to the node namespace), diffs it with
// the desired state and sends only the differences; ipset and
// iptables-legacy-restore run inside the namespace.
package ipvs

import (
	"bytes"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxybench/proxybench/workload"
)

// Names kube-proxy uses (pkg/proxy/ipvs/proxier.go, pkg/proxy/ipvs/ipset.go).
const (
	// DummyDevice is the interface holding every ClusterIP.
	DummyDevice = "kube-ipvs0"
	// ClusterIPSet is the ipset of ClusterIP,proto:port entries.
	ClusterIPSet = "KUBE-CLUSTER-IP"

	chainServices      = "KUBE-SERVICES"
	chainPostrouting   = "KUBE-POSTROUTING"
	chainMarkMasq      = "KUBE-MARK-MASQ"
	chainNodePort      = "KUBE-NODE-PORT"
	chainLoadBalancer  = "KUBE-LOAD-BALANCER"
	chainForward       = "KUBE-FORWARD"
	chainProxyFirewall = "KUBE-PROXY-FIREWALL"
	chainSourceRanges  = "KUBE-SOURCE-RANGES-FIREWALL"
	chainIPVSFilter    = "KUBE-IPVS-FILTER"
	chainIPVSOutFilter = "KUBE-IPVS-OUT-FILTER"

	// masqueradeMark is kube-proxy's default --iptables-masquerade-bit 14.
	masqueradeMark = "0x4000"
)

// Schedulers are the IPVS schedulers the kernel ships, by the name
// ipvsadm and kube-proxy use (module ip_vs_<name>, source
// net/netfilter/ipvs/ip_vs_<name>.c).
var Schedulers = []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "mh"}

// Config is what a Proxier needs of the scenario (KubeProxyConfiguration's
// ipvs block, clusterCIDR and session affinity).
type Config struct {
	// Scheduler of every virtual server, one of Schedulers ("" means rr,
	// kube-proxy's default).
	Scheduler string
	// SchedulerFlags are scheduler options (ipvsadm -b, see
	// SchedulerFlagBits): "sh-fallback", "sh-port" with sh, "mh-fallback",
	// "mh-port" with mh.
	SchedulerFlags []string
	// ClusterCIDR is kube-proxy's --cluster-cidr: traffic to a ClusterIP
	// from outside it is marked for masquerade. With the zero Prefix
	// traffic from a ClusterIP is marked instead ("src,dst"), as
	// kube-proxy does without a local traffic detector.
	ClusterCIDR netip.Prefix
	// NodeName is the node the proxier runs on (kube-proxy's
	// hostnameOverride, scenarios.NodeName): its endpoints are the local
	// ones of the Local traffic policies and of KUBE-LOOP-BACK.
	NodeName string
	// Zones maps node names to zones (scenarios.NodeZones; nil: none), for
	// the endpoints' topology hints (workload.Service.KubeProxyOrderAt).
	Zones map[string]string
	// NodeIPs are the node's addresses: node ports get a virtual server
	// on each, and an external or LoadBalancer IP among them is not bound
	// to kube-ipvs0. kube-proxy (nodePortAddresses unset) takes every
	// local IPv4 address of the node but loopback ones and kube-ipvs0's
	// (GetAllLocalAddressesExcept); a Proxier reads them from the kernel
	// before each sync. Render takes them as given.
	NodeIPs []netip.Addr
	// ExcludeCIDRs: virtual servers whose address lies in one of them are
	// never removed by a sync (kube-proxy's --ipvs-exclude-cidrs).
	ExcludeCIDRs []netip.Prefix
	// SessionAffinity makes every virtual server persistent (ipvsadm -p)
	// for AffinityTimeout, as kube-proxy does for sessionAffinity ClientIP.
	SessionAffinity bool
	// AffinityTimeout is the persistence timeout, whole seconds, 1s to 24h
	// (Kubernetes' sessionAffinityConfig.clientIP.timeoutSeconds).
	AffinityTimeout time.Duration
	// TCPTimeout, TCPFinTimeout and UDPTimeout are the IPVS connection
	// timeouts (ipvsadm --set); 0 leaves the kernel's value.
	TCPTimeout, TCPFinTimeout, UDPTimeout time.Duration
	// NoConntrackCleanup turns off the deletion of stale UDP conntrack
	// entries after each sync (kube-proxy always does it; see
	// proxymodes/conntrack), to measure what it prevents.
	NoConntrackCleanup bool
	// IPv6 makes the proxier kube-proxy's IPv6 IPVS proxier (one per
	// family in a dual-stack cluster): IPv6 ClusterIPs, endpoints and
	// ClusterCIDR, virtual servers of family AF_INET6 (netmask 128),
	// kube-ipvs0's IPv6 addresses (/128), the ipsets of family inet6
	// named KUBE-6-* (SetName) and ip6tables-legacy-restore. It leaves
	// the IPv4 proxier's objects alone, kube-ipvs0 included.
	IPv6 bool
	// Backend is the iptables back end of the nat and filter rules beside
	// the virtual servers (iptables.backend): "legacy" (the default, ""
	// too) or "nft", as kube-proxy runs whichever iptables its PATH has.
	Backend string
	// GracefulInterval is how often real servers in graceful termination
	// are checked for deletion; 0 means GracefulCheckInterval (kube-proxy's
	// one minute).
	GracefulInterval time.Duration
}

// Validate reports a Config error: an unknown scheduler, a non-IPv4 CIDR
// or an affinity timeout out of range.
func (c Config) Validate() error {
	if c.Scheduler != "" && !slices.Contains(Schedulers, c.Scheduler) {
		return fmt.Errorf("ipvs: scheduler %q: want one of %s", c.Scheduler, strings.Join(Schedulers, ", "))
	}
	if _, err := c.flagBits(); err != nil {
		return err
	}
	if c.Backend != "" && c.Backend != "legacy" && c.Backend != "nft" {
		return fmt.Errorf("ipvs: iptables back end %q: want legacy or nft", c.Backend)
	}
	if c.ClusterCIDR != (netip.Prefix{}) && (!c.ClusterCIDR.IsValid() || !c.ofFamily(c.ClusterCIDR.Addr())) {
		return fmt.Errorf("ipvs: clusterCIDR %q: want an %s prefix", c.ClusterCIDR, c.familyName())
	}
	for _, p := range c.ExcludeCIDRs {
		if !p.IsValid() {
			return fmt.Errorf("ipvs: excludeCIDR %q is not a prefix", p)
		}
	}
	if c.SessionAffinity {
		if d := c.AffinityTimeout; d < time.Second || d > 24*time.Hour || d%time.Second != 0 {
			return fmt.Errorf("ipvs: session affinity timeout %v: want whole seconds in [1s, 24h]", d)
		}
	}
	for _, d := range []time.Duration{c.TCPTimeout, c.TCPFinTimeout, c.UDPTimeout} {
		if d < 0 {
			return fmt.Errorf("ipvs: negative timeout %v", d)
		}
	}
	return nil
}

// SchedulerFlagBits maps each scheduler flag to its service flag bit
// (include/uapi/linux/ip_vs.h: IP_VS_SVC_F_SCHED1 is the sh/mh fallback,
// IP_VS_SVC_F_SCHED2 the sh/mh port hash), by scheduler.
var SchedulerFlagBits = map[string]map[string]uint32{
	"sh": {"sh-fallback": 0x0008, "sh-port": 0x0010},
	"mh": {"mh-fallback": 0x0008, "mh-port": 0x0010},
}

// flagBits returns the service flag bits of c.SchedulerFlags, or an error
// naming a flag the scheduler does not take.
func (c Config) flagBits() (uint32, error) {
	var bits uint32
	for _, f := range c.SchedulerFlags {
		b, ok := SchedulerFlagBits[c.scheduler()][f]
		if !ok {
			return 0, fmt.Errorf("ipvs: scheduler flag %q: scheduler %s takes %v", f, c.scheduler(), slices.Sorted(maps.Keys(SchedulerFlagBits[c.scheduler()])))
		}
		bits |= b
	}
	return bits, nil
}

func (c Config) scheduler() string {
	if c.Scheduler == "" {
		return "rr"
	}
	return c.Scheduler
}

// ofFamily reports whether a is of the proxier's family (IPv4, or IPv6
// without IPv4-mapped addresses).
func (c Config) ofFamily(a netip.Addr) bool {
	if c.IPv6 {
		return a.Is6() && !a.Is4In6()
	}
	return a.Is4()
}

func (c Config) familyName() string {
	if c.IPv6 {
		return "IPv6"
	}
	return "IPv4"
}

// SetName is the name of ipset name (one of SetNames) for the proxier's
// family: as written for IPv4; for IPv6 "KUBE-" becomes "KUBE-6-", cut
// to ipset's 31 characters, as kube-proxy's NewIPSet names the IPv6
// proxier's sets (pkg/proxy/ipvs/ipset.go).
func (c Config) SetName(name string) string {
	if !c.IPv6 || !strings.HasPrefix(name, "KUBE-") {
		return name
	}
	n := "KUBE-6-" + strings.TrimPrefix(name, "KUBE-")
	if len(n) > 31 {
		n = n[:31]
	}
	return n
}

// excluded reports whether a lies in one of the ExcludeCIDRs.
func (c Config) excluded(a netip.Addr) bool {
	for _, p := range c.ExcludeCIDRs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// VirtualServer is one IPVS virtual service (ipvsadm -A -t|-u addr:port).
type VirtualServer struct {
	// PortName is the ServicePort it serves ("pb/svc-00000:p80").
	PortName string
	Address  netip.Addr
	// Protocol is "TCP" or "UDP".
	Protocol string
	Port     uint16
	// Scheduler is the scheduler name ("rr").
	Scheduler string
	// Persistent is set for ClientIP session affinity (IP_VS_SVC_F_PERSISTENT);
	// Timeout is then the persistence timeout in seconds, else 0.
	Persistent bool
	Timeout    uint32
	// SchedFlags are the scheduler flag bits (SchedulerFlagBits).
	SchedFlags uint32
	// Reals are the ready endpoints, in the service's endpoint order.
	Reals []RealServer
}

// Key identifies a virtual server: "TCP/198.18.0.1:80".
func (v *VirtualServer) Key() string { return vsKey(v.Protocol, v.Address, v.Port) }

func vsKey(proto string, a netip.Addr, port uint16) string {
	b := make([]byte, 0, 32)
	b = append(b, proto...)
	b = append(b, '/')
	b = a.AppendTo(b)
	b = append(b, ':')
	b = strconv.AppendUint(b, uint64(port), 10)
	return string(b)
}

// RealServer is one IPVS destination (ipvsadm -a ... -r addr:port -m -w weight).
type RealServer struct {
	Address netip.Addr
	Port    uint16
	// Weight is the endpoint's weight (>= 1; an endpoint weight below 1
	// counts as 1, kube-proxy's fixed weight).
	Weight int
}

// Ruleset is the desired state of one node.
type Ruleset struct {
	// Virtual holds the virtual servers in service order, then port
	// order; per ServicePort: its ClusterIP, its external IPs, its
	// LoadBalancer IPs, then its node port on every node address
	// (Config.NodeIPs), as kube-proxy's syncProxyRules creates them.
	Virtual []VirtualServer
	// Addresses are the addresses to bind to kube-ipvs0 in first-seen
	// order: every ClusterIP, and every external and LoadBalancer IP that
	// is not a node address (kube-proxy's activeBindAddrs).
	Addresses []netip.Addr
	// Sets are the members of every ipset of SetNames by name, in render
	// order, each once ("198.18.0.1,tcp:80", "30000",
	// "198.19.0.1,tcp:8080,198.19.0.1"); a set without members is there
	// with none.
	Sets map[string][]string
	// IPTables is the iptables-restore input (nat then filter, for
	// --noflush) of the kube-proxy chains, which declares (and so
	// flushes) every chain of both tables and writes their rules; the
	// jumps into them from the built-in chains are added apart
	// (jumpRules).
	IPTables []byte
	// IPTablesRules counts the "-A" lines of IPTables.
	IPTablesRules int
	// RealServers counts the real servers of every virtual server.
	RealServers int
}

// Members counts the members of every ipset.
func (r *Ruleset) Members() int {
	n := 0
	for _, m := range r.Sets {
		n += len(m)
	}
	return n
}

var protocols = map[string]string{"TCP": "TCP", "UDP": "UDP", "tcp": "TCP", "udp": "UDP"}

// The ipsets of kube-proxy v1.37's IPVS mode (pkg/proxy/ipvs/ipset.go and
// ipsetInfo of proxier.go), by name.
const (
	setLoopBack            = "KUBE-LOOP-BACK"
	setExternalIP          = "KUBE-EXTERNAL-IP"
	setExternalIPLocal     = "KUBE-EXTERNAL-IP-LOCAL"
	setLoadBalancer        = "KUBE-LOAD-BALANCER"
	setLoadBalancerFW      = "KUBE-LOAD-BALANCER-FW"
	setLoadBalancerLocal   = "KUBE-LOAD-BALANCER-LOCAL"
	setLBSourceIP          = "KUBE-LOAD-BALANCER-SOURCE-IP"
	setLBSourceCIDR        = "KUBE-LOAD-BALANCER-SOURCE-CIDR"
	setNodePortTCP         = "KUBE-NODE-PORT-TCP"
	setNodePortLocalTCP    = "KUBE-NODE-PORT-LOCAL-TCP"
	setNodePortUDP         = "KUBE-NODE-PORT-UDP"
	setNodePortLocalUDP    = "KUBE-NODE-PORT-LOCAL-UDP"
	setNodePortSCTP        = "KUBE-NODE-PORT-SCTP-HASH"
	setNodePortLocalSCTP   = "KUBE-NODE-PORT-LOCAL-SCTP-HASH"
	setHealthCheckNodePort = "KUBE-HEALTH-CHECK-NODE-PORT"
	setIPVSIPs             = "KUBE-IPVS-IPS"
)

// SetInfo is one ipset of the IPVS mode: its name, type and the comment
// its iptables rules carry.
type SetInfo struct{ Name, Type, Comment string }

// SetNames are the ipsets kube-proxy v1.37's IPVS mode creates on every
// sync whatever the services (ipsetInfo), in its order.
var SetNames = []SetInfo{
	{setLoopBack, "hash:ip,port,ip", "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose"},
	{ClusterIPSet, "hash:ip,port", "Kubernetes service cluster ip + port for masquerade purpose"},
	{setExternalIP, "hash:ip,port", "Kubernetes service external ip + port for masquerade and filter purpose"},
	{setExternalIPLocal, "hash:ip,port", "Kubernetes service external ip + port with externalTrafficPolicy=local"},
	{setLoadBalancer, "hash:ip,port", "Kubernetes service lb portal"},
	{setLoadBalancerFW, "hash:ip,port", "Kubernetes service load balancer ip + port for load balancer with sourceRange"},
	{setLoadBalancerLocal, "hash:ip,port", "Kubernetes service load balancer ip + port with externalTrafficPolicy=local"},
	{setLBSourceIP, "hash:ip,port,ip", "Kubernetes service load balancer ip + port + source IP for packet filter purpose"},
	{setLBSourceCIDR, "hash:ip,port,net", "Kubernetes service load balancer ip + port + source cidr for packet filter purpose"},
	{setNodePortTCP, "bitmap:port", "Kubernetes nodeport TCP port for masquerade purpose"},
	{setNodePortLocalTCP, "bitmap:port", "Kubernetes nodeport TCP port with externalTrafficPolicy=local"},
	{setNodePortUDP, "bitmap:port", "Kubernetes nodeport UDP port for masquerade purpose"},
	{setNodePortLocalUDP, "bitmap:port", "Kubernetes nodeport UDP port with externalTrafficPolicy=local"},
	{setNodePortSCTP, "hash:ip,port", "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'"},
	{setNodePortLocalSCTP, "hash:ip,port", "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'"},
	{setHealthCheckNodePort, "bitmap:port", "Kubernetes health check node port"},
	{setIPVSIPs, "hash:ip", "Addresses on the ipvs interface"},
}

// setComment returns the iptables comment of set name.
func setComment(name string) string {
	for _, si := range SetNames {
		if si.Name == name {
			return si.Comment
		}
	}
	return ""
}

// bigSets take more members than ipset's default maxelem 65536 (one per
// service port, one per bound address): builtin gives them maxelem
// ipsetMaxElem so that scenarios past 65,536 run (docs/modes.md,
// Fidelity: ipvs-ipset-maxelem).
var bigSets = map[string]bool{ClusterIPSet: true, setIPVSIPs: true}

// createLine is the `ipset restore` line that creates set si: kube-proxy's
// options (family inet, hashsize 1024, maxelem 65536; range 0-65535 for
// bitmap:port), maxelem ipsetMaxElem for bigSets, or adopted[si.Name]
// when it is set (a set found with that maxelem: adoptMaxElem).
func createLine(cfg Config, si SetInfo, adopted map[string]int) string {
	name := cfg.SetName(si.Name)
	if si.Type == "bitmap:port" {
		return "create " + name + " bitmap:port range 0-65535"
	}
	family := "inet"
	if cfg.IPv6 {
		family = "inet6"
	}
	max := 65536
	if bigSets[si.Name] {
		max = ipsetMaxElem
	}
	if m, ok := adopted[si.Name]; ok {
		max = m
	}
	return fmt.Sprintf("create %s %s family %s hashsize 1024 maxelem %d", name, si.Type, family, max)
}

// adoptMaxElem reads `ipset list -t` output (terse: each set's Name and
// Header lines) and returns, for each of bigSets that exists with a
// maxelem other than ipsetMaxElem and at least as large as its member
// count in members, that maxelem: a set kube-proxy created on the node
// (maxelem 65536) is taken over as it is, where creating it again with
// builtin's maxelem fails ("set with the same name already exists", even
// with -exist). A set too small for its members is returned in tooSmall
// with its maxelem.
func adoptMaxElem(cfg Config, list string, members map[string][]string) (adopted, tooSmall map[string]int) {
	adopted, tooSmall = map[string]int{}, map[string]int{}
	byName := map[string]string{}
	for n := range bigSets {
		byName[cfg.SetName(n)] = n
	}
	name := ""
	for _, l := range strings.Split(list, "\n") {
		switch {
		case strings.HasPrefix(l, "Name: "):
			name = byName[strings.TrimSpace(strings.TrimPrefix(l, "Name: "))]
		case strings.HasPrefix(l, "Header: ") && bigSets[name]:
			f := strings.Fields(strings.TrimPrefix(l, "Header: "))
			for i := 0; i+1 < len(f); i++ {
				if f[i] != "maxelem" {
					continue
				}
				m, err := strconv.Atoi(f[i+1])
				if err != nil || m == ipsetMaxElem {
					break
				}
				if len(members[name]) <= m {
					adopted[name] = m
				} else {
					tooSmall[name] = m
				}
			}
		}
	}
	return adopted, tooSmall
}

// sets collects ipset members in order, each once.
type sets struct {
	members map[string][]string
	seen    map[string]map[string]bool
}

func (st *sets) add(set, member string) {
	if st.seen[set][member] {
		return
	}
	st.seen[set][member] = true
	st.members[set] = append(st.members[set], member)
}

// clusterEndpoints returns the endpoints of s that kube-proxy programs
// for cluster traffic on node (workload.Service.KubeProxyOrderAt: ready
// ones, or serving terminating ones without any, by topology hints), in
// s's order, and those of them on node (the local ones of the Local
// policies, pkg/proxy/topology.go CategorizeEndpoints).
func clusterEndpoints(cfg Config, s *workload.Service) (cluster, local []workload.Endpoint) {
	in := map[netip.Addr]bool{}
	for _, e := range s.KubeProxyOrderAt(cfg.NodeName, cfg.Zones[cfg.NodeName]) {
		in[e.IP] = true
	}
	for _, e := range s.Endpoints {
		if !in[e.IP] {
			continue
		}
		cluster = append(cluster, e)
		if cfg.NodeName != "" && e.Node == cfg.NodeName {
			local = append(local, e)
		}
	}
	return cluster, local
}

// Render computes the desired state of services under cfg as kube-proxy
// v1.37's IPVS proxier does (pkg/proxy/ipvs/proxier.go syncProxyRules).
// It is pure and deterministic. Per ServicePort:
//
//   - virtual servers on the ClusterIP, each external IP, each
//     LoadBalancer IP and, for a node port, each address of
//     cfg.NodeIPs; the ClusterIP, and the external and LoadBalancer IPs
//     that are not node addresses, bound to kube-ipvs0;
//   - real servers: the ClusterIP's the local endpoints with
//     internalTrafficPolicy Local, the others' with
//     externalTrafficPolicy Local; the cluster endpoints otherwise, and
//     when a Local policy finds no local endpoint (kube-proxy
//     kubernetes#97081: none then for internalTrafficPolicy Local on a
//     service that is not externally accessible, which uses no cluster
//     endpoint). A service without endpoints keeps its virtual servers;
//   - ipset members: KUBE-CLUSTER-IP (ClusterIP,proto:port),
//     KUBE-EXTERNAL-IP or -LOCAL, KUBE-LOAD-BALANCER (and -LOCAL), the
//     node port in KUBE-NODE-PORT-<TCP|UDP> (and -LOCAL-) when there is a
//     node address, KUBE-HEALTH-CHECK-NODE-PORT, KUBE-LOOP-BACK
//     (endpoint,proto:port,endpoint) for every endpoint on cfg.NodeName,
//     and KUBE-IPVS-IPS of every bound address;
//   - the iptables rules of writeIptablesRules for the sets that have
//     members (iptablesRules).
//
// It fails on an invalid cfg, a non-IPv4 ClusterIP or endpoint, a
// protocol other than TCP or UDP, or two virtual servers with the same
// protocol, address and port.
func Render(cfg Config, services []workload.Service) (*Ruleset, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	nports, neps := 0, 0
	for i := range services {
		nports += len(services[i].Ports)
		neps += len(services[i].Endpoints) * len(services[i].Ports)
	}
	rs := &Ruleset{
		Virtual:   make([]VirtualServer, 0, nports),
		Addresses: make([]netip.Addr, 0, len(services)),
	}
	st := &sets{members: make(map[string][]string, len(SetNames)), seen: make(map[string]map[string]bool, len(SetNames))}
	for _, si := range SetNames {
		st.members[si.Name] = nil
		st.seen[si.Name] = map[string]bool{}
	}
	st.members[ClusterIPSet] = make([]string, 0, nports)
	reals := make([]RealServer, 0, neps)
	sched := cfg.scheduler()
	schedFlags, _ := cfg.flagBits() // validated above
	var timeout uint32
	if cfg.SessionAffinity {
		timeout = uint32(cfg.AffinityTimeout / time.Second)
	}
	nodeAddr := make(map[netip.Addr]bool, len(cfg.NodeIPs))
	nodeIPs := make([]netip.Addr, 0, len(cfg.NodeIPs))
	for _, a := range cfg.NodeIPs {
		if cfg.ofFamily(a) && !a.IsLoopback() && !a.IsLinkLocalUnicast() && !nodeAddr[a] {
			nodeAddr[a] = true
			nodeIPs = append(nodeIPs, a)
		}
	}
	slices.SortFunc(nodeIPs, netip.Addr.Compare)
	seen := make(map[string]struct{}, nports)
	bound := make(map[netip.Addr]struct{}, len(services))
	bind := func(a netip.Addr) {
		if _, dup := bound[a]; !dup {
			bound[a] = struct{}{}
			rs.Addresses = append(rs.Addresses, a)
			st.add(setIPVSIPs, a.String())
		}
	}
	for i := range services {
		s := &services[i]
		fam := cfg.familyName()
		if !cfg.ofFamily(s.ClusterIP) {
			return nil, fmt.Errorf("ipvs: service %s/%s: clusterIP %q: want %s", s.Namespace, s.Name, s.ClusterIP, fam)
		}
		for _, e := range s.Endpoints {
			if !cfg.ofFamily(e.IP) {
				return nil, fmt.Errorf("ipvs: service %s/%s: endpoint %q: want %s", s.Namespace, s.Name, e.IP, fam)
			}
		}
		for _, a := range append(slices.Clone(s.ExternalIPs), s.LoadBalancerIPs...) {
			if !cfg.ofFamily(a) {
				return nil, fmt.Errorf("ipvs: service %s/%s: external or LoadBalancer IP %q: want %s", s.Namespace, s.Name, a, fam)
			}
		}
		if len(s.Ports) > 0 {
			bind(s.ClusterIP)
		}
		cluster, local := clusterEndpoints(cfg, s)
		exposed := s.Exposed()
		if s.InternalLocal && !(exposed && !s.ExternalLocal) {
			cluster = nil // UsesClusterEndpoints is false
		}
		pick := func(onlyLocal bool) []workload.Endpoint {
			if onlyLocal && len(local) > 0 {
				return local
			}
			return cluster
		}
		internal, external := pick(s.InternalLocal), pick(s.ExternalLocal && exposed)
		for j := range s.Ports {
			sp := &s.Ports[j]
			proto, ok := protocols[sp.Protocol]
			if !ok {
				return nil, fmt.Errorf("ipvs: service port %q: protocol %q: want TCP or UDP", s.PortName(*sp), sp.Protocol)
			}
			lproto := strings.ToLower(proto)
			for _, e := range s.Endpoints {
				if cfg.NodeName != "" && e.Node == cfg.NodeName && (e.Ready || e.Serving) {
					st.add(setLoopBack, e.IP.String()+","+lproto+":"+strconv.Itoa(int(sp.TargetPort))+","+e.IP.String())
				}
			}
			add := func(a netip.Addr, port uint16, eps []workload.Endpoint) error {
				vs := VirtualServer{
					PortName: s.PortName(*sp), Address: a, Protocol: proto, Port: port,
					Scheduler: sched, Persistent: cfg.SessionAffinity, Timeout: timeout, SchedFlags: schedFlags,
				}
				key := vs.Key()
				if _, dup := seen[key]; dup {
					return fmt.Errorf("ipvs: service port %q: %s is served twice", vs.PortName, key)
				}
				seen[key] = struct{}{}
				start := len(reals)
				for _, e := range eps {
					w := e.Weight
					if w < 1 {
						w = 1
					}
					reals = append(reals, RealServer{Address: e.IP, Port: sp.TargetPort, Weight: w})
				}
				vs.Reals = reals[start:len(reals):len(reals)]
				rs.RealServers += len(vs.Reals)
				rs.Virtual = append(rs.Virtual, vs)
				return nil
			}
			st.add(ClusterIPSet, setEntry(s.ClusterIP, proto, sp.Port))
			if err := add(s.ClusterIP, sp.Port, internal); err != nil {
				return nil, err
			}
			for _, a := range s.ExternalIPs {
				if s.ExternalLocal {
					st.add(setExternalIPLocal, setEntry(a, proto, sp.Port))
				} else {
					st.add(setExternalIP, setEntry(a, proto, sp.Port))
				}
				if err := add(a, sp.Port, external); err != nil {
					return nil, err
				}
				if !nodeAddr[a] {
					bind(a)
				}
			}
			for _, a := range s.LoadBalancerIPs {
				st.add(setLoadBalancer, setEntry(a, proto, sp.Port))
				if s.ExternalLocal {
					st.add(setLoadBalancerLocal, setEntry(a, proto, sp.Port))
				}
				if err := add(a, sp.Port, external); err != nil {
					return nil, err
				}
				if !nodeAddr[a] {
					bind(a)
				}
			}
			if sp.NodePort != 0 {
				if len(nodeIPs) == 0 {
					continue // kube-proxy skips the rest of the port, health check port included
				}
				np := strconv.Itoa(int(sp.NodePort))
				set, localSet := setNodePortTCP, setNodePortLocalTCP
				if proto == "UDP" {
					set, localSet = setNodePortUDP, setNodePortLocalUDP
				}
				st.add(set, np)
				if s.ExternalLocal {
					st.add(localSet, np)
				}
				for _, a := range nodeIPs {
					if err := add(a, sp.NodePort, external); err != nil {
						return nil, err
					}
				}
			}
			if s.HealthCheckNodePort != 0 {
				st.add(setHealthCheckNodePort, strconv.Itoa(int(s.HealthCheckNodePort)))
			}
		}
	}
	rs.Sets = st.members
	rs.IPTables, rs.IPTablesRules = iptablesRules(cfg, st.members)
	return rs, nil
}

// setEntry is a hash:ip,port member: "198.18.0.1,tcp:80".
func setEntry(a netip.Addr, proto string, port uint16) string {
	b := make([]byte, 0, 28)
	b = a.AppendTo(b)
	b = append(b, ',')
	b = append(b, strings.ToLower(proto)...)
	b = append(b, ':')
	b = strconv.AppendUint(b, uint64(port), 10)
	return string(b)
}

// Chains of kube-proxy's IPVS mode (iptablesChains of
// pkg/proxy/ipvs/proxier.go), per table, in its order.
var (
	natChains    = []string{chainServices, chainPostrouting, chainNodePort, chainLoadBalancer, chainMarkMasq}
	filterChains = []string{chainForward, chainNodePort, chainProxyFirewall, chainSourceRanges, chainIPVSFilter, chainIPVSOutFilter}
)

// iptablesRules renders kube-proxy v1.37's IPVS-mode nat and filter
// chains for the ipset members of sets (writeIptablesRules and
// acceptIPVSTraffic of pkg/proxy/ipvs/proxier.go): a rule that matches a
// set is written only when the set has members, as kube-proxy does.
//
// nat KUBE-SERVICES returns traffic from 127.0.0.0/8 (IPv6: ::1), sends LoadBalancer
// IPs to KUBE-LOAD-BALANCER, marks ClusterIP traffic from outside the
// cluster CIDR (without one: traffic from a ClusterIP, "src,dst"),
// marks external IP traffic (Cluster policy) and accepts it from off the
// node or to a local address, sends local destinations to KUBE-NODE-PORT,
// then accepts ClusterIP and LoadBalancer traffic; KUBE-NODE-PORT returns
// Local node ports and marks the others; KUBE-LOAD-BALANCER returns
// Local ones and marks the rest; KUBE-POSTROUTING masquerades hairpin
// traffic (KUBE-LOOP-BACK) and what is marked. filter: KUBE-FORWARD
// accepts marked and established traffic; KUBE-NODE-PORT accepts the
// health check node ports; KUBE-PROXY-FIREWALL and
// KUBE-SOURCE-RANGES-FIREWALL (loadBalancerSourceRanges: never members
// here, so a lone DROP nothing reaches); KUBE-IPVS-FILTER rejects new
// connections to a kube-ipvs0 address on a port no service has.
func iptablesRules(cfg Config, members map[string][]string) ([]byte, int) {
	var b bytes.Buffer
	n := 0
	rule := func(parts ...string) {
		b.WriteString(strings.Join(parts, " "))
		b.WriteByte('\n')
		n++
	}
	has := func(set string) bool { return len(members[set]) > 0 }
	comment := func(set string) string { return `-m comment --comment "` + setComment(set) + `"` }
	match := func(set, dir string) string { return "-m set --match-set " + cfg.SetName(set) + " " + dir }

	b.WriteString("*nat\n")
	for _, c := range natChains {
		b.WriteString(":" + c + " - [0:0]\n")
	}
	if cfg.IPv6 {
		rule("-A", chainServices, "-s ::1/128 -j RETURN")
	} else {
		rule("-A", chainServices, "-s 127.0.0.0/8 -j RETURN")
	}
	// ipsetWithIptablesChain, nat entries, in kube-proxy's order.
	if has(setLoopBack) {
		rule("-A", chainPostrouting, comment(setLoopBack), match(setLoopBack, "dst,dst,src"), "-j MASQUERADE")
	}
	if has(setLoadBalancer) {
		rule("-A", chainServices, comment(setLoadBalancer), match(setLoadBalancer, "dst,dst"), "-j", chainLoadBalancer)
	}
	if has(setLoadBalancerLocal) {
		rule("-A", chainLoadBalancer, comment(setLoadBalancerLocal), match(setLoadBalancerLocal, "dst,dst"), "-j RETURN")
	}
	for _, np := range []struct{ local, set, proto string }{{setNodePortLocalTCP, setNodePortTCP, "tcp"}, {setNodePortLocalUDP, setNodePortUDP, "udp"}} {
		if has(np.local) {
			rule("-A", chainNodePort, "-p", np.proto, comment(np.local), match(np.local, "dst"), "-j RETURN")
		}
		if has(np.set) {
			rule("-A", chainNodePort, "-p", np.proto, comment(np.set), match(np.set, "dst"), "-j", chainMarkMasq)
		}
	}
	if has(ClusterIPSet) {
		if cfg.ClusterCIDR.IsValid() {
			rule("-A", chainServices, comment(ClusterIPSet), match(ClusterIPSet, "dst,dst"), "! -s", cfg.ClusterCIDR.Masked().String(), "-j", chainMarkMasq)
		} else {
			rule("-A", chainServices, comment(ClusterIPSet), match(ClusterIPSet, "src,dst"), "-j", chainMarkMasq)
		}
	}
	externalIPRules := func(set string) {
		rule("-A", chainServices, comment(set), match(set, "dst,dst"), "-m physdev ! --physdev-is-in -m addrtype ! --src-type LOCAL -j ACCEPT")
		rule("-A", chainServices, comment(set), match(set, "dst,dst"), "-m addrtype --dst-type LOCAL -j ACCEPT")
	}
	if has(setExternalIP) {
		rule("-A", chainServices, comment(setExternalIP), match(setExternalIP, "dst,dst"), "-j", chainMarkMasq)
		externalIPRules(setExternalIP)
	}
	if has(setExternalIPLocal) {
		externalIPRules(setExternalIPLocal)
	}
	rule("-A", chainServices, "-m addrtype --dst-type LOCAL -j", chainNodePort)
	rule("-A", chainLoadBalancer, "-j", chainMarkMasq)
	for _, set := range []string{ClusterIPSet, setLoadBalancer} {
		if has(set) {
			rule("-A", chainServices, match(set, "dst,dst"), "-j ACCEPT")
		}
	}
	rule("-A", chainPostrouting, "-m mark ! --mark "+masqueradeMark+"/"+masqueradeMark, "-j RETURN")
	rule("-A", chainPostrouting, "-j MARK --xor-mark", masqueradeMark)
	rule("-A", chainPostrouting, `-m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully`)
	rule("-A", chainMarkMasq, "-j MARK --or-mark", masqueradeMark)
	b.WriteString("COMMIT\n")

	b.WriteString("*filter\n")
	for _, c := range filterChains {
		b.WriteString(":" + c + " - [0:0]\n")
	}
	// ipsetWithIptablesChain, filter entries (loadBalancerSourceRanges).
	if has(setLoadBalancerFW) {
		rule("-A", chainProxyFirewall, comment(setLoadBalancerFW), match(setLoadBalancerFW, "dst,dst"), "-j", chainSourceRanges)
	}
	for _, set := range []string{setLBSourceCIDR, setLBSourceIP} {
		if has(set) {
			rule("-A", chainSourceRanges, comment(set), match(set, "dst,dst,src"), "-j RETURN")
		}
	}
	rule("-A", chainSourceRanges, "-j DROP")
	rule("-A", chainForward, `-m comment --comment "kubernetes forwarding rules" -m mark --mark `+masqueradeMark+"/"+masqueradeMark, "-j ACCEPT")
	rule("-A", chainForward, `-m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`)
	rule("-A", chainNodePort, comment(setHealthCheckNodePort), match(setHealthCheckNodePort, "dst"), "-j ACCEPT")
	for _, set := range []string{setLoadBalancer, ClusterIPSet, setExternalIP, setExternalIPLocal} {
		rule("-A", chainIPVSFilter, match(set, "dst,dst"), "-j RETURN")
	}
	rule("-A", chainIPVSFilter, match(setHealthCheckNodePort, "dst"), "-j RETURN")
	rule("-A", chainIPVSFilter, "-m conntrack --ctstate NEW", match(setIPVSIPs, "dst"), "-j REJECT")
	b.WriteString("COMMIT\n")
	return b.Bytes(), n
}

// jumpRule is a rule from a built-in chain into a kube-proxy chain
// (iptablesJumpChain of pkg/proxy/ipvs/proxier.go), without "-A <chain>".
type jumpRule struct{ table, chain, spec string }

// jumpRules are kube-proxy's, in its order: each one missing is inserted
// first in its chain, so the last of a chain ends up first, as
// kube-proxy's EnsureRule(Prepend) leaves them.
var jumpRules = []jumpRule{
	{"nat", "OUTPUT", `-m comment --comment "kubernetes service portals" -j ` + chainServices},
	{"nat", "PREROUTING", `-m comment --comment "kubernetes service portals" -j ` + chainServices},
	{"nat", "POSTROUTING", `-m comment --comment "kubernetes postrouting rules" -j ` + chainPostrouting},
	{"filter", "FORWARD", `-m comment --comment "kubernetes forwarding rules" -j ` + chainForward},
	{"filter", "INPUT", `-m comment --comment "kubernetes health check rules" -j ` + chainNodePort},
	{"filter", "INPUT", `-m comment --comment "kube-proxy firewall rules" -j ` + chainProxyFirewall},
	{"filter", "FORWARD", `-m comment --comment "kube-proxy firewall rules" -j ` + chainProxyFirewall},
	{"filter", "INPUT", `-m comment --comment "kubernetes ipvs access filter" -j ` + chainIPVSFilter},
	{"filter", "OUTPUT", `-m comment --comment "kubernetes ipvs access filter" -j ` + chainIPVSOutFilter},
}

// Dump writes the ruleset as canonical text for golden tests: the
// addresses of kube-ipvs0, the virtual and real servers in the style of
// `ipvsadm -Ln` (weights, scheduler, persistence), the members of each
// ipset that has some, and the iptables rules.
func (r *Ruleset) Dump() string {
	var b strings.Builder
	b.WriteString("# " + DummyDevice + "\n")
	for _, a := range r.Addresses {
		b.WriteString("addr " + a.String() + "/32\n")
	}
	b.WriteString("# ipvs\n")
	for i := range r.Virtual {
		v := &r.Virtual[i]
		fmt.Fprintf(&b, "%s %s:%d %s", v.Protocol, v.Address, v.Port, v.Scheduler)
		if v.SchedFlags != 0 {
			fmt.Fprintf(&b, " flags 0x%x", v.SchedFlags)
		}
		if v.Persistent {
			fmt.Fprintf(&b, " persistent %d", v.Timeout)
		}
		b.WriteString(" # " + v.PortName + "\n")
		for _, rl := range v.Reals {
			fmt.Fprintf(&b, "  -> %s:%d Masq %d\n", rl.Address, rl.Port, rl.Weight)
		}
	}
	for _, si := range SetNames {
		if len(r.Sets[si.Name]) == 0 {
			continue
		}
		b.WriteString("# ipset " + si.Name + " " + si.Type + "\n")
		for _, e := range r.Sets[si.Name] {
			b.WriteString("add " + si.Name + " " + e + "\n")
		}
	}
	b.Write(r.IPTables)
	return b.String()
}
