// Package iptables is the iptables proxy mode: kube-proxy's iptables
// proxier (pkg/proxy/iptables, v1.28+) reproduced for one node namespace.
//
// Render turns services into iptables-restore input for the filter and nat
// tables in kube-proxy's layout (KUBE-SERVICES -> KUBE-SVC-<hash> ->
// KUBE-SEP-<hash>, statistic --mode random, KUBE-MARK-MASQ and
// KUBE-POSTROUTING). It is pure: no kernel, no root. A Proxier applies the
// rendered rules in one iptables-restore --noflush per Sync, with the legacy
// (x_tables) or the nft back end.
package iptables

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"hash/fnv"
	"net/netip"
	"strconv"
	"time"

	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// Back ends of Config.Backend.
const (
	// BackendLegacy programs x_tables through iptables-legacy-restore.
	BackendLegacy = "legacy"
	// BackendNft programs nf_tables through iptables-nft-restore.
	BackendNft = "nft"
)

// Chain names kube-proxy uses (pkg/proxy/iptables/proxier.go).
const (
	chainServices         = "KUBE-SERVICES"
	chainExternalServices = "KUBE-EXTERNAL-SERVICES"
	chainNodePorts        = "KUBE-NODEPORTS"
	chainPostrouting      = "KUBE-POSTROUTING"
	chainMarkMasq         = "KUBE-MARK-MASQ"
	chainForward          = "KUBE-FORWARD"
	chainProxyFirewall    = "KUBE-PROXY-FIREWALL"
	chainFirewall         = "KUBE-FIREWALL"

	prefixSVC = "KUBE-SVC-"
	prefixSEP = "KUBE-SEP-"
	prefixSVL = "KUBE-SVL-"
	prefixEXT = "KUBE-EXT-"

	// masqueradeMark is kube-proxy's default --iptables-masquerade-bit 14.
	masqueradeMark = "0x4000"

	// largeClusterEndpointsThreshold is kube-proxy's switch to "large
	// cluster mode": above this many endpoints in total the per-endpoint
	// comments are left out to keep the ruleset small.
	largeClusterEndpointsThreshold = 1000
)

// Config selects how a Proxier programs the kernel.
type Config struct {
	// Backend is BackendLegacy ("legacy") or BackendNft ("nft").
	Backend string
	// ClusterCIDR is kube-proxy's --cluster-cidr: traffic to a ClusterIP
	// from outside it is marked for masquerade (the "! -s <clusterCIDR>
	// -j KUBE-MARK-MASQ" rule of each KUBE-SVC chain). The zero Prefix
	// disables that rule, as kube-proxy does without a local detector.
	ClusterCIDR netip.Prefix
	// AffinityTimeout, when > 0, gives every service sessionAffinity
	// ClientIP with that timeout (whole seconds), as kube-proxy renders it:
	// each KUBE-SEP's DNAT rule records the client in the recent list
	// named after the chain (-m recent --name KUBE-SEP-X --set), and
	// KUBE-SVC first sends a client seen within the timeout back to its
	// endpoint (-m recent --name KUBE-SEP-X --rcheck --seconds T --reap).
	AffinityTimeout time.Duration
	// NoConntrackCleanup turns off the deletion of stale UDP conntrack
	// entries after each sync (kube-proxy always does it; see
	// proxymodes/conntrack), to measure what it prevents.
	NoConntrackCleanup bool
	// NodeName is the node the proxier runs on (kube-proxy's
	// hostnameOverride, scenarios.NodeName): an endpoint whose Node is
	// NodeName is local, the one externalTrafficPolicy and
	// internalTrafficPolicy Local keep traffic on.
	NodeName string
	// Zones maps node names to zones (scenarios.NodeZones; nil: no
	// zones): NodeName's zone is the one kube-proxy reads from its Node's
	// topology.kubernetes.io/zone label to follow the endpoints' hints
	// (workload.Service.KubeProxyOrderAt).
	Zones map[string]string
	// IPv6 makes the proxier kube-proxy's IPv6 proxier of a dual-stack
	// node: ip6tables-<backend>-restore, IPv6 ClusterIPs, endpoints and
	// ClusterCIDR, "[ip]:port" endpoints, and no KUBE-FIREWALL localnet
	// rule (kube-proxy writes it for IPv4 only: localhost node ports are
	// IPv4's, pkg/proxy/iptables/proxier.go syncProxyRules).
	IPv6 bool
}

// family is the proxier's IP family's name.
func (c Config) family() string { return scenarios.FamilyName(c.IPv6) }

// ofFamily reports whether a is of the proxier's family.
func (c Config) ofFamily(a netip.Addr) bool { return scenarios.AddrFamily(a) == c.family() }

// Validate reports a Config error: an unknown back end or an invalid
// ClusterCIDR or one of another family than the proxier's.
func (c Config) Validate() error {
	if c.Backend != BackendLegacy && c.Backend != BackendNft {
		return fmt.Errorf("iptables: backend %q: want %q or %q", c.Backend, BackendLegacy, BackendNft)
	}
	return c.validateCIDR()
}

func (c Config) validateCIDR() error {
	if c.ClusterCIDR != (netip.Prefix{}) && (!c.ClusterCIDR.IsValid() || !c.ofFamily(c.ClusterCIDR.Addr())) {
		return fmt.Errorf("iptables: clusterCIDR %q: want an %s prefix", c.ClusterCIDR, c.family())
	}
	return nil
}

// Ruleset is rendered iptables-restore input.
type Ruleset struct {
	// Data is the iptables-restore input: "*filter" ... "COMMIT" then
	// "*nat" ... "COMMIT", for use with --noflush.
	Data []byte
	// NatRules and FilterRules count the "-A" lines per table, as
	// kube-proxy's sync_proxy_rules_iptables_total metric does.
	NatRules, FilterRules int
	// Chains counts the chain declarations (":CHAIN - [0:0]") of both
	// tables.
	Chains int
}

// ServiceChainName is kube-proxy's KUBE-SVC chain of a service port:
// "KUBE-SVC-" + the first 16 characters of base32(sha256(portName +
// protocol)), with portName "ns/name:port" and protocol lower-case ("tcp").
func ServiceChainName(portName, protocol string) string {
	var h hasher
	return string(h.name(prefixSVC, portName, protocol, ""))
}

// EndpointChainName is kube-proxy's KUBE-SEP chain of one endpoint of a
// service port: "KUBE-SEP-" + 16 characters of base32(sha256(portName +
// protocol + endpoint)), endpoint being "ip:port".
func EndpointChainName(portName, protocol, endpoint string) string {
	var h hasher
	return string(h.name(prefixSEP, portName, protocol, endpoint))
}

// hasher computes chain names without allocating per call.
type hasher struct {
	scratch []byte
	out     [32]byte
}

func (h *hasher) name(prefix, portName, protocol, endpoint string) []byte {
	h.scratch = append(h.scratch[:0], portName...)
	h.scratch = append(h.scratch, protocol...)
	h.scratch = append(h.scratch, endpoint...)
	sum := sha256.Sum256(h.scratch)
	n := copy(h.out[:], prefix)
	// 10 bytes of hash encode to exactly 16 base32 characters, the same
	// as the first 16 of the encoding of all 32 bytes.
	base32.StdEncoding.Encode(h.out[n:n+16], sum[:10])
	return h.out[:n+16]
}

// portPlan is one service port as it will be written.
type portPlan struct {
	svc      *workload.Service
	port     *workload.ServicePort
	name     string // "ns/name:port"
	proto    string // "tcp", "udp", "sctp"
	svcChain string // KUBE-SVC (cluster policy): "" when not used or no ready endpoint
	epStart  int    // into plan.eps / plan.sepChains
	epEnd    int
	// The rest is the Service surface beyond a plain ClusterIP
	// (kube-proxy's syncProxyRules, v1.28+): svlChain is KUBE-SVL (local
	// policy, "" when not used or no local endpoint), extChain KUBE-EXT
	// (external destinations: node ports, external and LoadBalancer IPs;
	// "" when the service is not exposed or has no endpoint); local
	// lists the local endpoints as indices into plan.eps.
	svlChain, extChain string
	local              []int
	// hasInternal: the cluster IP rule is written (internal policy chain
	// has endpoints); hasExternal: external traffic has endpoints.
	hasInternal, hasExternal bool
}

// plain reports whether the port is a plain ClusterIP port (no local
// policy, not exposed), the only kind a partial sync leaves unwritten.
func (pp *portPlan) plain() bool {
	return !pp.svc.Exposed() && !pp.svc.InternalLocal
}

// internalChain is the chain the cluster IP rule jumps to.
func (pp *portPlan) internalChain() string {
	if pp.svc.InternalLocal {
		return pp.svlChain
	}
	return pp.svcChain
}

// externalPolicyChain is the chain external traffic ends in.
func (pp *portPlan) externalPolicyChain() string {
	if pp.svc.ExternalLocal {
		return pp.svlChain
	}
	return pp.svcChain
}

// plan is the result of the first render pass: names computed, nothing
// written yet.
type plan struct {
	cfg       Config
	ports     []portPlan
	eps       []netip.Addr // ready endpoints of every port, flattened
	sepChains []string
	large     bool // kube-proxy's large cluster mode
	size      int  // estimated output size in bytes
}

var protocols = map[string]string{"TCP": "tcp", "UDP": "udp", "SCTP": "sctp", "tcp": "tcp", "udp": "udp", "sctp": "sctp"}

// newPlan validates services and computes every chain name.
func newPlan(cfg Config, services []workload.Service) (*plan, error) {
	if err := cfg.validateCIDR(); err != nil {
		return nil, err
	}
	nports, neps := 0, 0
	for i := range services {
		s := &services[i]
		nports += len(s.Ports)
		ready := 0
		fb := s.ServingFallback()
		for _, e := range s.Endpoints {
			if e.Programmed(fb) {
				ready++
			}
		}
		neps += ready * len(s.Ports)
	}
	p := &plan{
		cfg:       cfg,
		ports:     make([]portPlan, 0, nports),
		eps:       make([]netip.Addr, 0, neps),
		sepChains: make([]string, 0, neps),
		large:     neps > largeClusterEndpointsThreshold,
	}
	var h hasher
	epBuf := make([]byte, 0, 64)
	size := 2048
	var perPort [3]int // port bytes, endpoints, endpoint bytes with comments
	for i := range services {
		s := &services[i]
		if cfg.IPv6 && (s.Exposed() || s.InternalLocal) {
			return nil, fmt.Errorf("iptables: service %s/%s: IPv6 node ports, external IPs, LoadBalancer IPs and traffic policies are not rendered yet", s.Namespace, s.Name)
		}
		if !cfg.ofFamily(s.ClusterIP) {
			return nil, fmt.Errorf("iptables: service %s/%s: clusterIP %q: want %s", s.Namespace, s.Name, s.ClusterIP, cfg.family())
		}
		if err := checkEndpoints(cfg, s); err != nil {
			return nil, err
		}
		// kube-proxy's endpoint order ("ip:port" text): the statistic
		// rules of KUBE-SVC follow it.
		eps := s.KubeProxyOrderAt(cfg.NodeName, cfg.Zones[cfg.NodeName])
		for j := range s.Ports {
			sp := &s.Ports[j]
			proto, ok := protocols[sp.Protocol]
			if !ok {
				return nil, fmt.Errorf("iptables: service port %q: protocol %q: want TCP, UDP or SCTP", s.PortName(*sp), sp.Protocol)
			}
			pp := portPlan{svc: s, port: sp, name: s.PortName(*sp), proto: proto, epStart: len(p.eps)}
			for _, e := range eps {
				epBuf = appendHostPort(epBuf[:0], e.IP, sp.TargetPort)
				p.eps = append(p.eps, e.IP)
				p.sepChains = append(p.sepChains, string(h.name(prefixSEP, pp.name, proto, string(epBuf))))
			}
			pp.epEnd = len(p.eps)
			n := pp.epEnd - pp.epStart
			pp.classify(cfg.NodeName, eps, &h)
			if n > 0 && !pp.svc.InternalLocal && !pp.svc.Exposed() {
				pp.svcChain = string(h.name(prefixSVC, pp.name, proto, ""))
			}
			p.ports = append(p.ports, pp)
			perPort[0] += 2*len(pp.name) + 320
			perPort[1] += n
			perPort[2] += n * (3*len(pp.name) + 360)
		}
	}
	// Per endpoint: about 300 bytes, plus three comments below the large
	// cluster threshold.
	if p.large {
		size += perPort[0] + 300*perPort[1]
	} else {
		size += perPort[0] + perPort[2]
	}
	p.size = size
	return p, nil
}

// classify fills the port's policy chains and flags from its service's
// traffic policies and which of eps (the port's programmed endpoints,
// plan.eps[epStart:epEnd] in order) sit on node, as kube-proxy's
// syncProxyRules does (pkg/proxy/iptables/proxier.go: the cluster policy
// chain KUBE-SVC is used unless internalTrafficPolicy is Local on a
// service that is not externally accessible, the local policy chain
// KUBE-SVL when either policy is Local, each only with endpoints of its
// kind; KUBE-EXT when the service is externally accessible and has any
// endpoint; pkg/proxy/servicechangetracker UsesClusterEndpoints and
// UsesLocalEndpoints).
func (pp *portPlan) classify(node string, eps []workload.Endpoint, h *hasher) {
	s := pp.svc
	n := pp.epEnd - pp.epStart
	for k, e := range eps {
		if node != "" && e.Node == node {
			pp.local = append(pp.local, pp.epStart+k)
		}
	}
	pp.hasInternal, pp.hasExternal = n > 0, n > 0
	if pp.plain() {
		return
	}
	exposed := s.Exposed()
	etpLocal := s.ExternalLocal && exposed
	if n > 0 && (!s.InternalLocal || exposed) {
		pp.svcChain = string(h.name(prefixSVC, pp.name, pp.proto, ""))
	}
	if len(pp.local) > 0 && (s.InternalLocal || etpLocal) {
		pp.svlChain = string(h.name(prefixSVL, pp.name, pp.proto, ""))
	}
	if s.InternalLocal {
		pp.hasInternal = len(pp.local) > 0
	}
	if etpLocal {
		pp.hasExternal = len(pp.local) > 0
	}
	if exposed && n > 0 {
		pp.extChain = string(h.name(prefixEXT, pp.name, pp.proto, ""))
	}
}

// checkEndpoints rejects a programmed endpoint IP listed twice (its
// KUBE-SEP chain would be declared twice) or one of another family than
// cfg's.
func checkEndpoints(cfg Config, s *workload.Service) error {
	var seen map[netip.Addr]struct{}
	if len(s.Endpoints) > 16 {
		seen = make(map[netip.Addr]struct{}, len(s.Endpoints))
	}
	fb := s.ServingFallback()
	for k, e := range s.Endpoints {
		if !e.Programmed(fb) {
			continue
		}
		if !cfg.ofFamily(e.IP) {
			return fmt.Errorf("iptables: service %s/%s: endpoint %q: want %s", s.Namespace, s.Name, e.IP, cfg.family())
		}
		dup := false
		if seen != nil {
			_, dup = seen[e.IP]
			seen[e.IP] = struct{}{}
		} else {
			for _, o := range s.Endpoints[:k] {
				if o.Programmed(fb) && o.IP == e.IP {
					dup = true
					break
				}
			}
		}
		if dup {
			return fmt.Errorf("iptables: service %s/%s: endpoint %s listed twice", s.Namespace, s.Name, e.IP)
		}
	}
	return nil
}

// chains returns the KUBE-SVC and KUBE-SEP chains the plan writes.
func (p *plan) chains() []string {
	out := make([]string, 0, len(p.ports)+len(p.sepChains))
	for i := range p.ports {
		for _, c := range []string{p.ports[i].svcChain, p.ports[i].svlChain, p.ports[i].extChain} {
			if c != "" {
				out = append(out, c)
			}
		}
	}
	return append(out, p.sepChains...)
}

// Render returns the iptables-restore input that programs services in
// kube-proxy's iptables layout (v1.28+, ClusterIP services, Cluster traffic
// policy, sessionAffinity ClientIP when Config.AffinityTimeout > 0), chain
// hashes included:
//
//	filter: KUBE-SERVICES (a REJECT rule per service port without ready
//	        endpoints), KUBE-FORWARD (drop INVALID, accept marked and
//	        RELATED,ESTABLISHED), KUBE-FIREWALL (block incoming localnet),
//	        KUBE-EXTERNAL-SERVICES, KUBE-NODEPORTS, KUBE-PROXY-FIREWALL;
//	nat:    KUBE-SERVICES (one rule per service port with ready endpoints,
//	        in the order given, then the KUBE-NODEPORTS rule last),
//	        KUBE-SVC-<hash> (masquerade from outside ClusterCIDR, then one
//	        rule per ready endpoint with statistic probability 1/(n-i)),
//	        KUBE-SEP-<hash> (hairpin masquerade and DNAT), KUBE-MARK-MASQ,
//	        KUBE-POSTROUTING, KUBE-NODEPORTS.
//
// Only Ready endpoints are used. Above 1000 endpoints in total the
// per-endpoint comments are left out, as kube-proxy's large cluster mode
// does. Every chain is declared, so under --noflush the restore replaces
// the chains' contents. It fails on a non-IPv4 address, an unknown
// protocol, or an endpoint listed twice in one service.
func Render(cfg Config, services []workload.Service) (*Ruleset, error) {
	p, err := newPlan(cfg, services)
	if err != nil {
		return nil, err
	}
	return p.write(nil, nil), nil
}

// fingerprints returns, per port of the plan, a hash of everything its
// KUBE-SVC and KUBE-SEP chains contain (ClusterIP, port, protocol, the
// masquerade CIDR, comment mode, and the endpoint chain names, which hash
// each endpoint's ip:port), so a partial sync can tell changed ports.
func (p *plan) fingerprints() map[string]uint64 {
	out := make(map[string]uint64, len(p.ports))
	h := fnv.New64a()
	var buf []byte
	for i := range p.ports {
		pp := &p.ports[i]
		h.Reset()
		buf = append(buf[:0], pp.svcChain...)
		if !pp.plain() {
			buf = append(buf, pp.svlChain...)
			buf = append(buf, pp.extChain...)
		}
		buf = pp.appendMatch(buf)
		buf = append(buf, p.cfg.ClusterCIDR.String()...)
		if p.large {
			buf = append(buf, 'L')
		}
		for _, c := range p.sepChains[pp.epStart:pp.epEnd] {
			buf = append(buf, c...)
		}
		h.Write(buf)
		out[pp.name] = h.Sum64()
	}
	return out
}

var probabilities []string

func init() {
	probabilities = make([]string, 65)
	for n := 1; n < len(probabilities); n++ {
		probabilities[n] = computeProbability(n)
	}
}

// computeProbability is kube-proxy's "%0.10f" of 1/n.
func computeProbability(n int) string {
	return strconv.FormatFloat(1/float64(n), 'f', 10, 64)
}

// write renders the plan; stale lists KUBE-SVC/KUBE-SEP chains to flush
// and delete ("-X") in the same restore. When unchanged is not nil, the
// KUBE-SVC and KUBE-SEP chains of port i with unchanged[i] set are neither
// declared nor written (kube-proxy's partial sync: under --noflush they
// keep their rules); KUBE-SERVICES and the fixed chains are always written
// whole.
func (p *plan) write(stale []string, unchanged []bool) *Ruleset {
	rs := &Ruleset{}
	b := make([]byte, 0, p.size+len(stale)*48)
	skip := func(i int) bool { return unchanged != nil && unchanged[i] && p.ports[i].plain() }

	// filter table.
	b = append(b, "*filter\n"...)
	for _, c := range []string{chainServices, chainExternalServices, chainForward, chainNodePorts, chainProxyFirewall} {
		b = appendChainLine(b, c)
		rs.Chains++
	}
	if !p.cfg.IPv6 {
		// IPv4 only, as kube-proxy: its IPv6 proxier neither declares
		// nor fills KUBE-FIREWALL (the chain exists, empty, from the
		// ensured jumps).
		b = appendChainLine(b, chainFirewall)
		rs.Chains++
		b = append(b, `-A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP`+"\n"...)
		rs.FilterRules++
	}
	for i := range p.ports {
		b = p.ports[i].appendFilter(b, rs)
	}
	b = append(b, "-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP\n"+
		`-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark `+masqueradeMark+"/"+masqueradeMark+" -j ACCEPT\n"+
		`-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`+"\n"+
		"COMMIT\n"...)
	rs.FilterRules += 3

	// nat table: chain declarations first (a jump needs its target).
	b = append(b, "*nat\n"...)
	for _, c := range []string{chainServices, chainNodePorts, chainPostrouting, chainMarkMasq} {
		b = appendChainLine(b, c)
		rs.Chains++
	}
	for i := range p.ports {
		pp := &p.ports[i]
		if skip(i) {
			continue
		}
		for _, c := range []string{pp.svcChain, pp.svlChain, pp.extChain} {
			if c != "" {
				b = appendChainLine(b, c)
				rs.Chains++
			}
		}
		for _, k := range pp.reachable() {
			b = appendChainLine(b, p.sepChains[k])
			rs.Chains++
		}
	}
	for _, c := range stale {
		b = appendChainLine(b, c)
	}
	b = append(b, "-A KUBE-POSTROUTING -m mark ! --mark "+masqueradeMark+"/"+masqueradeMark+" -j RETURN\n"+
		"-A KUBE-POSTROUTING -j MARK --xor-mark "+masqueradeMark+"\n"+
		`-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully`+"\n"+
		"-A KUBE-MARK-MASQ -j MARK --or-mark "+masqueradeMark+"\n"...)
	rs.NatRules += 4

	var cidr string
	if p.cfg.ClusterCIDR.IsValid() {
		cidr = p.cfg.ClusterCIDR.Masked().String()
	}
	for i := range p.ports {
		pp := &p.ports[i]
		if pp.hasInternal {
			// KUBE-SERVICES -> the internal policy chain.
			b = append(b, "-A KUBE-SERVICES"...)
			b = pp.appendClusterIPComment(b)
			b = pp.appendMatch(b)
			b = append(b, " -j "...)
			b = append(b, pp.internalChain()...)
			b = append(b, '\n')
			rs.NatRules++
		}
		if pp.extChain != "" {
			// External IPs and LoadBalancer IPs -> KUBE-EXT.
			for _, d := range []struct {
				ips  []netip.Addr
				what string
			}{{pp.svc.ExternalIPs, "external IP"}, {pp.svc.LoadBalancerIPs, "loadbalancer IP"}} {
				for _, ip := range d.ips {
					b = append(b, "-A KUBE-SERVICES"...)
					b = pp.appendComment(b, d.what)
					b = pp.appendMatchTo(b, ip, pp.port.Port)
					b = append(b, " -j "...)
					b = append(b, pp.extChain...)
					b = append(b, '\n')
					rs.NatRules++
				}
			}
		}
		if skip(i) {
			continue
		}
		// The internal policy chain: masquerade off-cluster sources.
		if pp.hasInternal && cidr != "" {
			b = append(b, "-A "...)
			b = append(b, pp.internalChain()...)
			b = pp.appendClusterIPComment(b)
			b = pp.appendMatch(b)
			b = append(b, " ! -s "...)
			b = append(b, cidr...)
			b = append(b, " -j KUBE-MARK-MASQ\n"...)
			rs.NatRules++
		}
		if pp.extChain != "" {
			b = pp.appendExternal(b, rs, cidr)
		}
		all := make([]int, 0, pp.epEnd-pp.epStart)
		for k := pp.epStart; k < pp.epEnd; k++ {
			all = append(all, k)
		}
		if pp.svcChain != "" {
			b = p.appendToEndpoints(b, rs, pp, pp.svcChain, all)
		}
		if pp.svlChain != "" {
			b = p.appendToEndpoints(b, rs, pp, pp.svlChain, pp.local)
		}
		// KUBE-SEP: hairpin masquerade and DNAT.
		for _, k := range pp.reachable() {
			sep, ip := p.sepChains[k], p.eps[k]
			b = append(b, "-A "...)
			b = append(b, sep...)
			if !p.large {
				b = append(b, " -m comment --comment "...)
				b = append(b, pp.name...)
			}
			b = append(b, " -s "...)
			b = ip.AppendTo(b)
			b = append(b, " -j KUBE-MARK-MASQ\n-A "...)
			b = append(b, sep...)
			if !p.large {
				b = append(b, " -m comment --comment "...)
				b = append(b, pp.name...)
			}
			if p.cfg.AffinityTimeout >= time.Second {
				b = append(b, " -m recent --name "...)
				b = append(b, sep...)
				b = append(b, " --set"...)
			}
			b = append(b, " -m "...)
			b = append(b, pp.proto...)
			b = append(b, " -p "...)
			b = append(b, pp.proto...)
			b = append(b, " -j DNAT --to-destination "...)
			b = pp.appendEndpoint(b, ip)
			b = append(b, '\n')
			rs.NatRules += 2
		}
	}
	for i := range p.ports {
		pp := &p.ports[i]
		if pp.extChain == "" || pp.port.NodePort == 0 {
			continue
		}
		// KUBE-NODEPORTS -> KUBE-EXT.
		b = append(b, "-A KUBE-NODEPORTS -m comment --comment "...)
		b = append(b, pp.name...)
		b = pp.appendProtoPort(b, pp.port.NodePort)
		b = append(b, " -j "...)
		b = append(b, pp.extChain...)
		b = append(b, '\n')
		rs.NatRules++
	}
	for _, c := range stale {
		b = append(b, "-X "...)
		b = append(b, c...)
		b = append(b, '\n')
	}
	b = append(b, `-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`+"\nCOMMIT\n"...)
	rs.NatRules++
	rs.Data = b
	return rs
}

// reachable lists the endpoints (indices into plan.eps) whose KUBE-SEP
// chains the port writes: every programmed one, but only the local ones
// for internalTrafficPolicy Local on a service that is not externally
// accessible (kube-proxy's allLocallyReachableEndpoints).
func (pp *portPlan) reachable() []int {
	if pp.svc.InternalLocal && !pp.svc.Exposed() {
		return pp.local
	}
	out := make([]int, 0, pp.epEnd-pp.epStart)
	for k := pp.epStart; k < pp.epEnd; k++ {
		out = append(out, k)
	}
	return out
}

// appendEndpointRuleHead appends the start of one of chain's endpoint
// rules: "-A chain" and, below the large-cluster threshold, kube-proxy's
// `-m comment --comment "<service port> -> <endpoint>"`.
func (p *plan) appendEndpointRuleHead(b []byte, pp *portPlan, chain string, k int) []byte {
	b = append(b, "-A "...)
	b = append(b, chain...)
	if !p.large {
		b = append(b, ` -m comment --comment "`...)
		b = append(b, pp.name...)
		b = append(b, " -> "...)
		b = pp.appendEndpoint(b, p.eps[k])
		b = append(b, '"')
	}
	return b
}

// appendToEndpoints writes chain's endpoint rules (kube-proxy's
// writeServiceToEndpointRules): with session affinity the recent-list
// checks first, then one rule per endpoint of eps (indices into plan.eps)
// with statistic probability 1/(n-i), the last without.
func (p *plan) appendToEndpoints(b []byte, rs *Ruleset, pp *portPlan, chain string, eps []int) []byte {
	n := len(eps)
	if secs := int64(p.cfg.AffinityTimeout / time.Second); secs > 0 {
		for _, k := range eps {
			b = p.appendEndpointRuleHead(b, pp, chain, k)
			b = append(b, " -m recent --name "...)
			b = append(b, p.sepChains[k]...)
			b = append(b, " --rcheck --seconds "...)
			b = strconv.AppendInt(b, secs, 10)
			b = append(b, " --reap -j "...)
			b = append(b, p.sepChains[k]...)
			b = append(b, '\n')
		}
		rs.NatRules += n
	}
	for i, k := range eps {
		b = p.appendEndpointRuleHead(b, pp, chain, k)
		if i < n-1 {
			b = append(b, " -m statistic --mode random --probability "...)
			if m := n - i; m < len(probabilities) {
				b = append(b, probabilities[m]...)
			} else {
				b = append(b, computeProbability(m)...)
			}
		}
		b = append(b, " -j "...)
		b = append(b, p.sepChains[k]...)
		b = append(b, '\n')
	}
	rs.NatRules += n
	return b
}

// appendExternal writes the KUBE-EXT chain of an exposed port
// (kube-proxy's external traffic chain): with externalTrafficPolicy
// Cluster, mark everything for masquerade (the endpoint may be on another
// node); with Local, send pod traffic (from clusterCIDR) and the node's
// own traffic (source type LOCAL, masqueraded: its source is the node's
// address) to the cluster policy chain, as if it went out to the load
// balancer and came back; then, when there are endpoints for external
// traffic, jump to the external policy chain.
func (pp *portPlan) appendExternal(b []byte, rs *Ruleset, cidr string) []byte {
	ext := pp.extChain
	if !pp.svc.ExternalLocal {
		b = append(b, "-A "...)
		b = append(b, ext...)
		b = append(b, ` -m comment --comment "masquerade traffic for `...)
		b = append(b, pp.name...)
		b = append(b, ` external destinations" -j KUBE-MARK-MASQ`+"\n"...)
		rs.NatRules++
	} else {
		if cidr != "" {
			b = append(b, "-A "...)
			b = append(b, ext...)
			b = append(b, ` -m comment --comment "pod traffic for `...)
			b = append(b, pp.name...)
			b = append(b, ` external destinations" -s `...)
			b = append(b, cidr...)
			b = append(b, " -j "...)
			b = append(b, pp.svcChain...)
			b = append(b, '\n')
			rs.NatRules++
		}
		b = append(b, "-A "...)
		b = append(b, ext...)
		b = append(b, ` -m comment --comment "masquerade LOCAL traffic for `...)
		b = append(b, pp.name...)
		b = append(b, ` external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ`+"\n-A "...)
		b = append(b, ext...)
		b = append(b, ` -m comment --comment "route LOCAL traffic for `...)
		b = append(b, pp.name...)
		b = append(b, ` external destinations" -m addrtype --src-type LOCAL -j `...)
		b = append(b, pp.svcChain...)
		b = append(b, '\n')
		rs.NatRules += 2
	}
	if pp.hasExternal {
		b = append(b, "-A "...)
		b = append(b, ext...)
		b = append(b, " -j "...)
		b = append(b, pp.externalPolicyChain()...)
		b = append(b, '\n')
		rs.NatRules++
	}
	return b
}

// appendFilter writes the port's filter rules (kube-proxy's
// syncProxyRules): REJECT in KUBE-SERVICES for a cluster IP without
// endpoints (DROP, "has no local endpoints", when internalTrafficPolicy
// Local finds none on this node); for an exposed port without endpoints
// for external traffic the same per external IP, LoadBalancer IP and
// node port in KUBE-EXTERNAL-SERVICES; and the health check node port's
// ACCEPT in KUBE-NODEPORTS.
func (pp *portPlan) appendFilter(b []byte, rs *Ruleset) []byte {
	someEndpoint := pp.epEnd > pp.epStart
	target := func() (string, string) {
		if !someEndpoint {
			return " has no endpoints", "REJECT"
		}
		return " has no local endpoints", "DROP"
	}
	if !pp.hasInternal {
		why, t := target()
		b = append(b, `-A KUBE-SERVICES -m comment --comment "`...)
		b = append(b, pp.name...)
		b = append(b, why...)
		b = append(b, '"')
		b = pp.appendMatch(b)
		b = append(b, " -j "...)
		b = append(b, t...)
		b = append(b, '\n')
		rs.FilterRules++
	}
	if pp.svc.Exposed() && !pp.hasExternal {
		why, t := target()
		head := func(b []byte) []byte {
			b = append(b, `-A KUBE-EXTERNAL-SERVICES -m comment --comment "`...)
			b = append(b, pp.name...)
			b = append(b, why...)
			return append(b, '"')
		}
		for _, ips := range [][]netip.Addr{pp.svc.ExternalIPs, pp.svc.LoadBalancerIPs} {
			for _, ip := range ips {
				b = head(b)
				b = pp.appendMatchTo(b, ip, pp.port.Port)
				b = append(b, " -j "...)
				b = append(b, t...)
				b = append(b, '\n')
				rs.FilterRules++
			}
		}
		if pp.port.NodePort != 0 {
			b = head(b)
			b = append(b, " -m addrtype --dst-type LOCAL"...)
			b = pp.appendProtoPort(b, pp.port.NodePort)
			b = append(b, " -j "...)
			b = append(b, t...)
			b = append(b, '\n')
			rs.FilterRules++
		}
	}
	if hc := pp.svc.HealthCheckNodePort; hc != 0 {
		b = append(b, `-A KUBE-NODEPORTS -m comment --comment "`...)
		b = append(b, pp.name...)
		b = append(b, ` health check node port"`...)
		b = append(b, " -m tcp -p tcp --dport "...)
		b = strconv.AppendUint(b, uint64(hc), 10)
		b = append(b, " -j ACCEPT\n"...)
		rs.FilterRules++
	}
	return b
}

func appendChainLine(b []byte, chain string) []byte {
	b = append(b, ':')
	b = append(b, chain...)
	return append(b, " - [0:0]\n"...)
}

// appendClusterIPComment appends ` -m comment --comment "ns/svc:port cluster IP"`.
func (pp *portPlan) appendClusterIPComment(b []byte) []byte {
	b = append(b, ` -m comment --comment "`...)
	b = append(b, pp.name...)
	return append(b, ` cluster IP"`...)
}

// appendMatch appends ` -m tcp -p tcp -d <clusterIP> --dport <port>`.
func (pp *portPlan) appendMatch(b []byte) []byte {
	return pp.appendMatchTo(b, pp.svc.ClusterIP, pp.port.Port)
}

// appendMatchTo appends ` -m tcp -p tcp -d <ip> --dport <port>`.
func (pp *portPlan) appendMatchTo(b []byte, ip netip.Addr, port uint16) []byte {
	b = append(b, " -m "...)
	b = append(b, pp.proto...)
	b = append(b, " -p "...)
	b = append(b, pp.proto...)
	b = append(b, " -d "...)
	b = ip.AppendTo(b)
	b = append(b, " --dport "...)
	return strconv.AppendUint(b, uint64(port), 10)
}

// appendProtoPort appends ` -m tcp -p tcp --dport <port>`.
func (pp *portPlan) appendProtoPort(b []byte, port uint16) []byte {
	b = append(b, " -m "...)
	b = append(b, pp.proto...)
	b = append(b, " -p "...)
	b = append(b, pp.proto...)
	b = append(b, " --dport "...)
	return strconv.AppendUint(b, uint64(port), 10)
}

// appendComment appends ` -m comment --comment "ns/svc:port <what>"`.
func (pp *portPlan) appendComment(b []byte, what string) []byte {
	b = append(b, ` -m comment --comment "`...)
	b = append(b, pp.name...)
	b = append(b, ' ')
	b = append(b, what...)
	return append(b, '"')
}

// appendEndpoint appends "ip:targetPort" ("[ip]:targetPort" for IPv6).
func (pp *portPlan) appendEndpoint(b []byte, ip netip.Addr) []byte {
	return appendHostPort(b, ip, pp.port.TargetPort)
}

// appendHostPort appends ip and port as net.JoinHostPort writes them
// (kube-proxy's Endpoint.String, hashed into KUBE-SEP names and written
// after --to-destination): "ip:port", "[ip]:port" for IPv6.
func appendHostPort(b []byte, ip netip.Addr, port uint16) []byte {
	if ip.Is6() {
		b = append(b, '[')
		b = ip.AppendTo(b)
		b = append(b, ']')
	} else {
		b = ip.AppendTo(b)
	}
	b = append(b, ':')
	return strconv.AppendUint(b, uint64(port), 10)
}
