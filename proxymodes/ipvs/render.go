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

	chainServices    = "KUBE-SERVICES"
	chainPostrouting = "KUBE-POSTROUTING"
	chainMarkMasq    = "KUBE-MARK-MASQ"

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
	// from outside it is marked for masquerade. The zero Prefix leaves the
	// rule out, as kube-proxy does without a local traffic detector.
	ClusterCIDR netip.Prefix
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
	if c.ClusterCIDR != (netip.Prefix{}) && (!c.ClusterCIDR.IsValid() || !c.ClusterCIDR.Addr().Is4()) {
		return fmt.Errorf("ipvs: clusterCIDR %q: want an IPv4 prefix", c.ClusterCIDR)
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
	// Virtual holds one virtual server per ServicePort, in service order
	// then port order (the driver's render order).
	Virtual []VirtualServer
	// Addresses are the ClusterIPs to bind to kube-ipvs0, one per service,
	// in service order.
	Addresses []netip.Addr
	// SetEntries are the KUBE-CLUSTER-IP entries ("198.18.0.1,tcp:80"),
	// one per virtual server, in the same order.
	SetEntries []string
	// NAT is the iptables-restore input (nat table, for --noflush) of the
	// kube-proxy chains; it does not depend on the services.
	NAT []byte
	// NATRules counts the "-A" lines of NAT.
	NATRules int
	// RealServers counts the real servers of every virtual server.
	RealServers int
}

var protocols = map[string]string{"TCP": "TCP", "UDP": "UDP", "tcp": "TCP", "udp": "UDP"}

// Render computes the desired state of services under cfg. It is pure and
// deterministic. Not-ready endpoints get no real server; a service without
// ready endpoints keeps its virtual server (as kube-proxy does). It fails on
// an invalid cfg, a non-IPv4 ClusterIP or endpoint, a protocol other than
// TCP or UDP, or two ServicePorts with the same protocol, ClusterIP and port.
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
		Virtual:    make([]VirtualServer, 0, nports),
		Addresses:  make([]netip.Addr, 0, len(services)),
		SetEntries: make([]string, 0, nports),
	}
	reals := make([]RealServer, 0, neps)
	sched := cfg.scheduler()
	schedFlags, _ := cfg.flagBits() // validated above
	var timeout uint32
	if cfg.SessionAffinity {
		timeout = uint32(cfg.AffinityTimeout / time.Second)
	}
	seen := make(map[string]struct{}, nports)
	seenAddr := make(map[netip.Addr]struct{}, len(services))
	for i := range services {
		s := &services[i]
		if !s.ClusterIP.Is4() {
			return nil, fmt.Errorf("ipvs: service %s/%s: clusterIP %q: want IPv4", s.Namespace, s.Name, s.ClusterIP)
		}
		if _, dup := seenAddr[s.ClusterIP]; !dup && len(s.Ports) > 0 {
			seenAddr[s.ClusterIP] = struct{}{}
			rs.Addresses = append(rs.Addresses, s.ClusterIP)
		}
		for _, e := range s.Endpoints {
			if !e.IP.Is4() {
				return nil, fmt.Errorf("ipvs: service %s/%s: endpoint %q: want IPv4", s.Namespace, s.Name, e.IP)
			}
		}
		for j := range s.Ports {
			sp := &s.Ports[j]
			proto, ok := protocols[sp.Protocol]
			if !ok {
				return nil, fmt.Errorf("ipvs: service port %q: protocol %q: want TCP or UDP", s.PortName(*sp), sp.Protocol)
			}
			vs := VirtualServer{
				PortName: s.PortName(*sp), Address: s.ClusterIP, Protocol: proto, Port: sp.Port,
				Scheduler: sched, Persistent: cfg.SessionAffinity, Timeout: timeout, SchedFlags: schedFlags,
			}
			key := vs.Key()
			if _, dup := seen[key]; dup {
				return nil, fmt.Errorf("ipvs: service port %q: %s is served twice", vs.PortName, key)
			}
			seen[key] = struct{}{}
			start := len(reals)
			fb := s.ServingFallback()
			for _, e := range s.Endpoints {
				if !e.Programmed(fb) {
					continue
				}
				w := e.Weight
				if w < 1 {
					w = 1
				}
				reals = append(reals, RealServer{Address: e.IP, Port: sp.TargetPort, Weight: w})
			}
			vs.Reals = reals[start:len(reals):len(reals)]
			rs.RealServers += len(vs.Reals)
			rs.Virtual = append(rs.Virtual, vs)
			rs.SetEntries = append(rs.SetEntries, setEntry(s.ClusterIP, proto, sp.Port))
		}
	}
	rs.NAT, rs.NATRules = natRules(cfg)
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

// natRules renders kube-proxy's IPVS-mode nat chains (syncProxyRules of
// pkg/proxy/ipvs/proxier.go, ClusterIP services only): traffic to a
// ClusterIP from outside the cluster CIDR is marked, marked traffic is
// masqueraded on the way out, and ClusterIP traffic is accepted.
func natRules(cfg Config) ([]byte, int) {
	var b bytes.Buffer
	n := 0
	rule := func(s string) { b.WriteString(s); b.WriteByte('\n'); n++ }
	b.WriteString("*nat\n")
	for _, c := range []string{chainServices, chainPostrouting, chainMarkMasq} {
		b.WriteString(":" + c + " - [0:0]\n")
	}
	// Connections from the node's loopback are left alone, as kube-proxy
	// does (its first KUBE-SERVICES rule in IPVS mode).
	rule(`-A ` + chainServices + ` -s 127.0.0.0/8 -j RETURN`)
	if cfg.ClusterCIDR.IsValid() {
		rule(`-A ` + chainServices + ` -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set ` +
			ClusterIPSet + ` dst,dst ! -s ` + cfg.ClusterCIDR.Masked().String() + ` -j ` + chainMarkMasq)
	}
	rule(`-A ` + chainServices + ` -m set --match-set ` + ClusterIPSet + ` dst,dst -j ACCEPT`)
	rule(`-A ` + chainPostrouting + ` -m mark ! --mark ` + masqueradeMark + `/` + masqueradeMark + ` -j RETURN`)
	rule(`-A ` + chainPostrouting + ` -j MARK --xor-mark ` + masqueradeMark)
	rule(`-A ` + chainPostrouting + ` -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully`)
	rule(`-A ` + chainMarkMasq + ` -j MARK --or-mark ` + masqueradeMark)
	b.WriteString("COMMIT\n")
	return b.Bytes(), n
}

// jumpRule is a rule from a built-in nat chain into a kube-proxy chain
// (iptablesJumpChain of pkg/proxy/ipvs/proxier.go), without "-A <chain>".
type jumpRule struct{ chain, spec string }

var jumpRules = []jumpRule{
	{"OUTPUT", `-m comment --comment "kubernetes service portals" -j ` + chainServices},
	{"PREROUTING", `-m comment --comment "kubernetes service portals" -j ` + chainServices},
	{"POSTROUTING", `-m comment --comment "kubernetes postrouting rules" -j ` + chainPostrouting},
}

// Dump writes the ruleset as canonical text for golden tests: the
// addresses of kube-ipvs0, the virtual and real servers in the style of
// `ipvsadm -Ln` (weights, scheduler, persistence), the ipset members and
// the nat rules.
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
	b.WriteString("# ipset " + ClusterIPSet + " hash:ip,port\n")
	for _, e := range r.SetEntries {
		b.WriteString("add " + ClusterIPSet + " " + e + "\n")
	}
	b.Write(r.NAT)
	return b.String()
}
