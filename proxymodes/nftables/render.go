// Package nftables is the nftables proxy mode: kube-proxy's nftables
// proxier (pkg/proxy/nftables, Kubernetes 1.31+, GA in 1.33) reproduced for
// one node namespace with sigs.k8s.io/knftables.
//
// Render turns services into the desired contents of table "ip kube-proxy"
// (a Ruleset). It is pure: no kernel, no root. A Ruleset writes itself into
// a knftables Transaction either whole (Full) or as the difference from an
// earlier Ruleset (Diff), which is what a Proxier sends to the kernel: a
// full sync first, then only the changed chains and map elements, as
// kube-proxy does after its first full sync.
package nftables

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// Table is the table kube-proxy programs (family ip, for IPv4).
const (
	Family = knftables.IPv4Family
	Table  = "kube-proxy"
)

// Object names kube-proxy uses (pkg/proxy/nftables/proxier.go).
const (
	chainFilterInput    = "filter-input"
	chainFilterForward  = "filter-forward"
	chainFilterOutput   = "filter-output"
	chainNatPrerouting  = "nat-prerouting"
	chainNatOutput      = "nat-output"
	chainNatPostrouting = "nat-postrouting"

	chainServices              = "services"
	chainServiceEndpointsCheck = "service-endpoints-check"
	chainClusterIPsCheck       = "cluster-ips-check"
	chainMasquerading          = "masquerading"
	chainReject                = "reject-chain"
	chainNodePortEndpoints     = "nodeport-endpoints-check"
	chainFirewallCheck         = "firewall-check"
	chainPreroutingPreDNAT     = "filter-prerouting-pre-dnat"
	chainOutputPreDNAT         = "filter-output-pre-dnat"

	// MapServiceNodePorts dispatches protocol . node port to a service's
	// external chain; MapNoEndpointNodePorts drops or rejects node ports
	// without endpoints for external traffic.
	MapServiceNodePorts    = "service-nodeports"
	MapNoEndpointNodePorts = "no-endpoint-nodeports"
	nodePortKeyType        = "inet_proto . inet_service : verdict"
	// SetNodePortIPs holds the addresses node ports are answered on
	// (Config.NodeIPs); MapFirewallIPs the LoadBalancer IP . protocol .
	// port entries subject to loadBalancerSourceRanges (always empty
	// here: scenarios have no source ranges).
	SetNodePortIPs = "nodeport-ips"
	MapFirewallIPs = "firewall-ips"

	prefixExternal = "external-"
	prefixLocal    = "local-"

	// MapServiceIPs dispatches ClusterIP . protocol . port to a service chain.
	MapServiceIPs = "service-ips"
	// MapNoEndpointServices rejects ClusterIP . protocol . port of a service
	// port without ready endpoints.
	MapNoEndpointServices = "no-endpoint-services"
	// SetClusterIPs holds every ClusterIP (traffic to one on an unknown
	// port is rejected).
	SetClusterIPs = "cluster-ips"
	// SetHairpin holds endpoint . endpoint . proto . port of the node's own
	// endpoints (Endpoint.Node is Config.NodeName), whose connections to
	// themselves through a service are masqueraded (kube-proxy 1.37).
	SetHairpin = "hairpin-connections"

	prefixService  = "service-"
	prefixEndpoint = "endpoint-"

	// masqueradeMark is kube-proxy's default masquerade bit 14.
	masqueradeMark = "0x4000"
)

// Config selects what a Proxier renders.
type Config struct {
	// ClusterCIDR is kube-proxy's --cluster-cidr: traffic to a ClusterIP
	// from outside it is marked for masquerade (the "ip daddr @cluster-ips
	// ip saddr != <clusterCIDR> meta mark set ..." rule of chain
	// services). The zero Prefix leaves that rule out, as kube-proxy does
	// without a local traffic detector.
	ClusterCIDR netip.Prefix
	// ServiceCIDR is the service range: traffic to an address of it that
	// no service holds is dropped (chain cluster-ips-check, as kube-proxy
	// 1.37 does for every ServiceCIDR). The zero Prefix leaves that rule
	// out.
	ServiceCIDR netip.Prefix
	// AffinityTimeout, when positive, gives every service ClientIP session
	// affinity as kube-proxy's nftables proxier does: one dynamic set
	// "affinity-<endpoint>" per endpoint with this timeout, which the
	// endpoint chain updates with the client address
	// ("update @affinity-X { ip saddr }") and the service chain checks
	// before its numgen ("ip saddr @affinity-X goto endpoint-X"). These
	// services keep one chain per endpoint; without affinity a service
	// chain DNATs itself (see Render), as kube-proxy 1.37.
	AffinityTimeout time.Duration
	// ChainsPerTransaction, when positive, makes a full sync add rules in
	// transactions of at most this many chains' rules (after one that
	// declares every chain) instead of one transaction. The kernel's cost
	// per rule holding an anonymous map (numgen ... map or vmap) grows
	// with the transaction and the table, so smaller transactions are
	// faster at 10k services (see the package benchmarks). Zero: one
	// transaction, as kube-proxy.
	ChainsPerTransaction int
	// NoConntrackCleanup turns off the deletion of stale UDP conntrack
	// entries after each sync (kube-proxy always does it; see
	// proxymodes/conntrack), to measure what it prevents.
	NoConntrackCleanup bool
	// NodeName is the node the proxier runs on (scenarios.NodeName): its
	// endpoints are the local ones of the Local traffic policies.
	NodeName string
	// NodeIPs are the elements of nodeport-ips, the addresses node ports
	// are answered on: kube-proxy v1.37's nftables default
	// nodePortAddresses "primary", its node IP of the proxier's family
	// (New takes them from a node that knows them, proxymodes.NodeIPer).
	// Addresses of the other family are left out.
	NodeIPs []netip.Addr
	// Zones maps node names to zones (scenarios.NodeZones; nil: no
	// zones): NodeName's zone is the one kube-proxy reads from its Node's
	// topology.kubernetes.io/zone label to follow the endpoints' hints
	// (workload.Service.KubeProxyOrderAt).
	Zones map[string]string
	// IPv6 makes the proxier kube-proxy's IPv6 proxier of a dual-stack
	// node: table "ip6 kube-proxy", "ip6 daddr"/"ip6 saddr" matches,
	// ipv6_addr sets and maps, "dnat ip6 to" and "[ip]:port" endpoints,
	// IPv6 ClusterIPs, endpoints and CIDRs (pkg/proxy/nftables: one
	// proxier per family, the same layout).
	IPv6 bool
}

// TableFamily is the nft family of the proxier's table: ip, or ip6 for
// an IPv6 proxier.
func (c Config) TableFamily() knftables.Family {
	if c.IPv6 {
		return knftables.IPv6Family
	}
	return Family
}

// familyName is "IPv4" or "IPv6".
func (c Config) familyName() string { return scenarios.FamilyName(c.IPv6) }

// ofFamily reports whether a is of the proxier's family.
func (c Config) ofFamily(a netip.Addr) bool { return scenarios.AddrFamily(a) == c.familyName() }

// Validate reports an invalid ClusterCIDR or ServiceCIDR, or one of
// another family than the proxier's.
func (c Config) Validate() error {
	if c.ClusterCIDR != (netip.Prefix{}) && (!c.ClusterCIDR.IsValid() || !c.ofFamily(c.ClusterCIDR.Addr())) {
		return fmt.Errorf("nftables: clusterCIDR %q: want an %s prefix", c.ClusterCIDR, c.familyName())
	}
	if c.ServiceCIDR != (netip.Prefix{}) && (!c.ServiceCIDR.IsValid() || !c.ofFamily(c.ServiceCIDR.Addr())) {
		return fmt.Errorf("nftables: serviceCIDR %q: want an %s prefix", c.ServiceCIDR, c.familyName())
	}
	return nil
}

// Chain is one chain of the table with its rules (nft rule text, as
// knftables.Rule.Rule).
type Chain struct {
	Obj   knftables.Chain
	Rules []string
}

// Element is one element of a map or set of the table.
type Element struct {
	Key     []string
	Value   []string // nil in a set
	Comment string   // "" for none
}

// Ruleset is the rendered contents of table "ip kube-proxy": every chain
// (base chains, helper chains, one per service port with endpoints, and
// with ClientIP session affinity one per endpoint of such a port) and the
// elements of the service-ips and no-endpoint-services verdict maps and
// the cluster-ips set. Chains and
// elements are kept in the order rendered; lookups are by name and key.
type Ruleset struct {
	chainOrder []string
	chains     map[string]*Chain
	// elems holds, per map or set name, the elements by joined key, and
	// elemOrder their order.
	elems     map[string]map[string]*Element
	elemOrder map[string][]string
	// affinity lists the dynamic per-endpoint affinity sets, in render
	// order, and affinityTimeout their timeout.
	affinity        []string
	affinityTimeout time.Duration
	// hairpin holds the hairpin-connections keys rendered.
	hairpin map[string]bool
	// ip is the family's match word ("ip", "ip6") and addr its address
	// type ("ipv4_addr", "ipv6_addr").
	ip, addr string
}

// affinitySetName is kube-proxy's per-endpoint affinity set: "affinity-"
// and the endpoint chain's name after "endpoint-".
func affinitySetName(epChain string) string {
	return "affinity-" + strings.TrimPrefix(epChain, "endpoint-")
}

// addAffinitySets declares the affinity sets of names.
func (r *Ruleset) addAffinitySets(tx *knftables.Transaction, names []string) {
	for _, n := range names {
		tx.Add(&knftables.Set{Name: n, Type: r.addr, Flags: []knftables.SetFlag{knftables.DynamicFlag, knftables.TimeoutFlag}, Timeout: ptr(r.affinityTimeout)})
	}
}

// Counts of a Ruleset.
type Counts struct {
	// Chains counts every chain, base chains included.
	Chains int
	// Rules counts the rules of every chain.
	Rules int
	// Elements counts the elements of every set and map but the
	// affinity sets (cluster-ips, service-ips, no-endpoint-services,
	// service-nodeports, no-endpoint-nodeports, nodeport-ips,
	// hairpin-connections).
	Elements int
}

// Objects is Chains + Rules + Elements: what a full sync sends.
func (c Counts) Objects() int { return c.Chains + c.Rules + c.Elements }

// Counts returns the ruleset's chain, rule and element counts.
func (r *Ruleset) Counts() Counts {
	c := Counts{Chains: len(r.chainOrder)}
	for _, ch := range r.chains {
		c.Rules += len(ch.Rules)
	}
	for _, m := range r.elems {
		c.Elements += len(m)
	}
	return c
}

// Chain returns the named chain, or nil.
func (r *Ruleset) Chain(name string) *Chain { return r.chains[name] }

// ChainNames lists the chains in render order.
func (r *Ruleset) ChainNames() []string { return r.chainOrder }

// Elements lists the elements of the named map or set, in render order.
func (r *Ruleset) Elements(name string) []*Element {
	out := make([]*Element, 0, len(r.elemOrder[name]))
	for _, k := range r.elemOrder[name] {
		out = append(out, r.elems[name][k])
	}
	return out
}

func (r *Ruleset) addChain(c knftables.Chain, rules ...string) *Chain {
	ch := &Chain{Obj: c, Rules: rules}
	r.chains[c.Name] = ch
	r.chainOrder = append(r.chainOrder, c.Name)
	return ch
}

func (r *Ruleset) addElement(set string, e *Element) error {
	k := strings.Join(e.Key, " . ")
	m := r.elems[set]
	if _, dup := m[k]; dup {
		return fmt.Errorf("nftables: %s: key %q rendered twice", set, k)
	}
	m[k] = e
	r.elemOrder[set] = append(r.elemOrder[set], k)
	return nil
}

// hashAndTruncate is kube-proxy's chain-name base: the first 8 characters
// of base32(sha256(name)), "-", name (truncated to 200 characters with
// "..." should it be longer).
func hashAndTruncate(name string) string {
	sum := sha256.Sum256([]byte(name))
	var enc [56]byte
	base32.StdEncoding.Encode(enc[:], sum[:])
	out := string(enc[:8]) + "-" + name
	if len(out) > 200 {
		out = out[:197] + "..."
	}
	return out
}

// ServiceChainName is kube-proxy's chain of a service port:
// "service-<hash>-namespace/name/protocol/portname", protocol lower-case,
// <hash> the first 8 characters of base32(sha256("namespace/name/protocol/portname")).
func ServiceChainName(namespace, name, protocol, portName string) string {
	return prefixService + hashAndTruncate(namespace+"/"+name+"/"+protocol+"/"+portName)
}

// EndpointChainName is kube-proxy's chain of one endpoint of a service
// port: "endpoint-<hash>-namespace/name/protocol/portname__ip/port", hashed
// as ServiceChainName.
func EndpointChainName(namespace, name, protocol, portName string, ip netip.Addr, port uint16) string {
	return prefixEndpoint + hashAndTruncate(namespace+"/"+name+"/"+protocol+"/"+portName+"__"+ip.String()+"/"+strconv.Itoa(int(port)))
}

// hostPort is ip and port as net.JoinHostPort writes them (kube-proxy's
// Endpoint.String): "ip:port", "[ip]:port" for IPv6.
func hostPort(ip netip.Addr, port uint16) string {
	return netip.AddrPortFrom(ip, port).String()
}

var protocols = map[string]string{"TCP": "tcp", "UDP": "udp", "SCTP": "sctp", "tcp": "tcp", "udp": "udp", "sctp": "sctp"}

func ptr[T any](v T) *T { return &v }

func baseChain(name string, typ knftables.BaseChainType, hook knftables.BaseChainHook, prio knftables.BaseChainPriority) knftables.Chain {
	return knftables.Chain{Name: name, Type: ptr(typ), Hook: ptr(hook), Priority: ptr(prio)}
}

// Render returns the contents of table "ip kube-proxy" that program
// services in kube-proxy 1.37's nftables layout (ClusterIP services,
// Cluster traffic policy; with cfg.AffinityTimeout > 0, ClientIP session
// affinity: see Config.AffinityTimeout for its sets and rules):
//
//	base chains filter-input (filter, priority filter: "ct state new jump
//	service-endpoints-check"), filter-forward and filter-output (the same,
//	then cluster-ips-check), nat-prerouting and nat-output (nat, dstnat:
//	"jump services"), nat-postrouting (nat, srcnat: "jump masquerading");
//	services: "ip daddr @cluster-ips ip saddr != <clusterCIDR> meta mark
//	set meta mark | 0x4000" (masquerade traffic from outside the
//	cluster), "ip daddr . meta l4proto . th dport vmap @service-ips";
//	service-endpoints-check: the same lookup in @no-endpoint-services,
//	whose elements "goto reject-chain" ("reject");
//	cluster-ips-check: reject a ClusterIP's unserved ports, drop
//	unallocated addresses of cfg.ServiceCIDR;
//	masquerading: masquerade (fully-random) what is marked, clearing the
//	mark, and the hairpin connections of @hairpin-connections;
//	service-<hash>-ns/name/tcp/port per port with endpoints: "meta
//	l4proto tcp dnat ip to numgen random mod N map { 0 : <ip> . <port>,
//	1 : ... }", which picks an endpoint and DNATs in one rule ("meta
//	l4proto tcp dnat to <ip>:<port>" for a single endpoint); no
//	endpoint chain (kube-proxy 1.37 for services without session
//	affinity);
//	with ClientIP affinity instead, as kube-proxy 1.37 keeps it: the
//	service chain "ip saddr @affinity-X goto endpoint-X" per endpoint,
//	then "numgen random mod N vmap { 0 : goto endpoint-... , 1 : goto
//	... }"; endpoint-<hash>-ns/name/tcp/port__ip/port per endpoint:
//	"update @affinity-X { ip saddr }", "meta l4proto tcp dnat to
//	<ip>:<port>".
//
// Endpoints are in kube-proxy's order, their "ip:port" text sorted
// (workload.Service.KubeProxyOrder).
//
// kube-proxy's NodePort and LoadBalancer firewall plumbing is there
// whatever the services, as kube-proxy v1.37 creates it: the set
// nodeport-ips (cfg.NodeIPs), the maps service-nodeports,
// no-endpoint-nodeports and firewall-ips (empty: scenarios have no
// loadBalancerSourceRanges), the chains nodeport-endpoints-check (jumped
// to from filter-input) and firewall-check (from the base chains
// filter-prerouting-pre-dnat and filter-output-pre-dnat, priority dstnat
// - 10), and the node port lookup in services. Exposed services
// (NodePort, LoadBalancer, external IPs, Local policies) are rendered
// by addExposed. Every local endpoint (Endpoint.Node is cfg.NodeName)
// of a port gets its hairpin-connections element. The endpoints used
// are the ready ones, or a service's serving terminating ones when it
// has no ready one (workload.Service.ServingFallback); a port without
// any goes to no-endpoint-services instead of service-ips. It fails on
// a non-IPv4 address, an unknown protocol, an endpoint listed twice in
// one service or a ClusterIP:port listed twice.
func Render(cfg Config, services []workload.Service) (*Ruleset, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	nch := 16
	for i := range services {
		n := 1
		if cfg.AffinityTimeout > 0 {
			n += len(services[i].Endpoints)
		}
		nch += len(services[i].Ports) * n
	}
	r := &Ruleset{
		chains:     make(map[string]*Chain, nch),
		chainOrder: make([]string, 0, nch),
		elems: map[string]map[string]*Element{
			MapServiceIPs: {}, MapNoEndpointServices: {}, SetClusterIPs: {},
			MapServiceNodePorts: {}, MapNoEndpointNodePorts: {}, SetNodePortIPs: {}, SetHairpin: {},
		},
		elemOrder:       map[string][]string{},
		affinityTimeout: cfg.AffinityTimeout,
		ip:              "ip",
		addr:            "ipv4_addr",
	}
	if cfg.IPv6 {
		r.ip, r.addr = "ip6", "ipv6_addr"
	}
	ip := r.ip
	// Base chains and jumps (kube-proxy's nftablesBaseChains and
	// nftablesJumpChains), node-port and firewall ones included whatever
	// the services, as kube-proxy v1.37 creates them.
	for i := range services {
		if cfg.IPv6 && (services[i].Exposed() || services[i].InternalLocal) {
			return nil, fmt.Errorf("nftables: IPv6 node ports, external IPs, LoadBalancer IPs and traffic policies are not rendered yet")
		}
	}
	r.addChain(baseChain(chainFilterInput, knftables.FilterType, knftables.InputHook, knftables.FilterPriority),
		"ct state new jump "+chainNodePortEndpoints, "ct state new jump "+chainServiceEndpointsCheck)
	r.addChain(baseChain(chainFilterForward, knftables.FilterType, knftables.ForwardHook, knftables.FilterPriority),
		"ct state new jump "+chainServiceEndpointsCheck, "ct state new jump "+chainClusterIPsCheck)
	r.addChain(baseChain(chainFilterOutput, knftables.FilterType, knftables.OutputHook, knftables.FilterPriority),
		"ct state new jump "+chainServiceEndpointsCheck, "ct state new jump "+chainClusterIPsCheck)
	// Before DNAT: dstnat - 10 (-110; nft takes the keyword on prerouting only).
	r.addChain(baseChain(chainPreroutingPreDNAT, knftables.FilterType, knftables.PreroutingHook, knftables.BaseChainPriority(string(knftables.DNATPriority)+" - 10")),
		"ct state new jump "+chainFirewallCheck)
	r.addChain(baseChain(chainOutputPreDNAT, knftables.FilterType, knftables.OutputHook, "-110"), "ct state new jump "+chainFirewallCheck)
	r.addChain(baseChain(chainNatPrerouting, knftables.NATType, knftables.PreroutingHook, knftables.DNATPriority),
		"jump "+chainServices)
	r.addChain(baseChain(chainNatOutput, knftables.NATType, knftables.OutputHook, knftables.DNATPriority),
		"jump "+chainServices)
	r.addChain(baseChain(chainNatPostrouting, knftables.NATType, knftables.PostroutingHook, knftables.SNATPriority),
		"jump "+chainMasquerading)
	// Helper chains.
	var svcRules []string
	if cfg.ClusterCIDR.IsValid() {
		svcRules = append(svcRules, ip+" daddr @"+SetClusterIPs+" "+ip+" saddr != "+cfg.ClusterCIDR.Masked().String()+
			" meta mark set meta mark | "+masqueradeMark+` comment "masquerade clusterIP traffic from outside cluster"`)
	}
	svcRules = append(svcRules, ip+" daddr . meta l4proto . th dport vmap @"+MapServiceIPs,
		ip+" daddr @"+SetNodePortIPs+" meta l4proto . th dport vmap @"+MapServiceNodePorts)
	r.addChain(knftables.Chain{Name: chainServices}, svcRules...)
	r.addChain(knftables.Chain{Name: chainNodePortEndpoints}, ip+" daddr @"+SetNodePortIPs+" meta l4proto . th dport vmap @"+MapNoEndpointNodePorts)
	r.addChain(knftables.Chain{Name: chainFirewallCheck}, ip+" daddr . meta l4proto . th dport vmap @"+MapFirewallIPs)
	r.addChain(knftables.Chain{Name: chainServiceEndpointsCheck}, ip+" daddr . meta l4proto . th dport vmap @"+MapNoEndpointServices)
	check := []string{ip + " daddr @" + SetClusterIPs + ` reject comment "Reject traffic to invalid ports of ClusterIPs"`}
	if cfg.ServiceCIDR.IsValid() {
		check = append(check, ip+" daddr { "+cfg.ServiceCIDR.Masked().String()+` } drop comment "Drop traffic to unallocated ClusterIPs"`)
	}
	r.addChain(knftables.Chain{Name: chainClusterIPsCheck}, check...)
	r.addChain(knftables.Chain{Name: chainMasquerading},
		"meta mark & "+masqueradeMark+" != 0 meta mark set meta mark ^ "+masqueradeMark+" masquerade fully-random",
		"ct status dnat "+ip+" saddr . "+ip+" daddr . meta l4proto . th dport @"+SetHairpin+" masquerade fully-random")
	r.addChain(knftables.Chain{Name: chainReject, Comment: ptr("helper for @no-endpoint-services / @no-endpoint-nodeports")}, "reject")
	for _, a := range cfg.NodeIPs {
		if cfg.ofFamily(a) {
			if err := r.addElement(SetNodePortIPs, &Element{Key: []string{a.String()}}); err != nil {
				return nil, err
			}
		}
	}

	var rule strings.Builder
	for i := range services {
		s := &services[i]
		if !cfg.ofFamily(s.ClusterIP) {
			return nil, fmt.Errorf("nftables: service %s/%s: clusterIP %q: want %s", s.Namespace, s.Name, s.ClusterIP, cfg.familyName())
		}
		if err := checkEndpoints(cfg, s); err != nil {
			return nil, err
		}
		vip := s.ClusterIP.String()
		eps := s.KubeProxyOrderAt(cfg.NodeName, cfg.Zones[cfg.NodeName])
		if err := r.addElement(SetClusterIPs, &Element{Key: []string{vip}}); err != nil {
			return nil, err
		}
		for j := range s.Ports {
			sp := &s.Ports[j]
			proto, ok := protocols[sp.Protocol]
			if !ok {
				return nil, fmt.Errorf("nftables: service port %q: protocol %q: want TCP, UDP or SCTP", s.PortName(*sp), sp.Protocol)
			}
			portName := s.PortName(*sp)
			port := strconv.Itoa(int(sp.Port))
			key := []string{vip, proto, port}
			if err := r.addHairpin(cfg, proto, sp.TargetPort, eps); err != nil {
				return nil, err
			}
			if s.Exposed() || s.InternalLocal {
				if err := r.addExposed(cfg, s, sp, proto, key, eps, &rule); err != nil {
					return nil, err
				}
				continue
			}
			if len(eps) == 0 {
				if err := r.addElement(MapNoEndpointServices, &Element{Key: key, Value: []string{"goto " + chainReject}, Comment: portName}); err != nil {
					return nil, err
				}
				continue
			}
			svcChain := ServiceChainName(s.Namespace, s.Name, proto, sp.Name)
			if cfg.AffinityTimeout > 0 {
				r.addChain(knftables.Chain{Name: svcChain}, r.affinityRules(s, sp, proto, eps)...)
			} else {
				r.addChain(knftables.Chain{Name: svcChain}, dnatMapRule(&rule, ip, proto, sp.TargetPort, eps))
			}
			// No comment: kube-proxy 1.37 leaves service-ips elements bare.
			if err := r.addElement(MapServiceIPs, &Element{Key: key, Value: []string{"goto " + svcChain}}); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// addHairpin adds the hairpin-connections element "ip . ip . proto .
// port" of each endpoint of eps on cfg.NodeName (kube-proxy v1.37 adds one
// per locally reachable endpoint that is local, whatever the service's
// type); an element already added (an endpoint of two services) is kept
// once.
func (r *Ruleset) addHairpin(cfg Config, proto string, port uint16, eps []workload.Endpoint) error {
	if cfg.NodeName == "" {
		return nil
	}
	p := strconv.Itoa(int(port))
	for _, e := range eps {
		if e.Node != cfg.NodeName {
			continue
		}
		a := e.IP.String()
		key := []string{a, a, proto, p}
		k := strings.Join(key, " . ")
		if r.hairpin[k] {
			continue
		}
		if r.hairpin == nil {
			r.hairpin = map[string]bool{}
		}
		r.hairpin[k] = true
		if err := r.addElement(SetHairpin, &Element{Key: key}); err != nil {
			return err
		}
	}
	return nil
}

// checkEndpoints rejects a programmed endpoint IP listed twice (its chain
// would be declared twice) or one of another family than cfg's.
func checkEndpoints(cfg Config, s *workload.Service) error {
	seen := make(map[netip.Addr]struct{}, len(s.Endpoints))
	fb := s.ServingFallback()
	for _, e := range s.Endpoints {
		if !e.Programmed(fb) {
			continue
		}
		if !cfg.ofFamily(e.IP) {
			return fmt.Errorf("nftables: service %s/%s: endpoint %q: want %s", s.Namespace, s.Name, e.IP, cfg.familyName())
		}
		if _, dup := seen[e.IP]; dup {
			return fmt.Errorf("nftables: service %s/%s: endpoint %s listed twice", s.Namespace, s.Name, e.IP)
		}
		seen[e.IP] = struct{}{}
	}
	return nil
}

// dnatMapRule is the one rule of a service chain without session affinity
// in kube-proxy 1.37: "meta l4proto <proto> dnat ip to numgen random mod N
// map { 0 : <ip> . <port>, 1 : ... }", which picks an endpoint and DNATs
// to it in one rule, with no endpoint chain; with one endpoint "meta
// l4proto <proto> dnat to <ip>:<port>" (both as nft lists them back;
// TestKernelFidelity pins them against kube-proxy v1.37.2). ip is the
// family's word ("ip6 to", "[ip]:port" for IPv6). b is scratch space.
func dnatMapRule(b *strings.Builder, ip, proto string, targetPort uint16, eps []workload.Endpoint) string {
	port := strconv.Itoa(int(targetPort))
	b.Reset()
	b.WriteString("meta l4proto ")
	b.WriteString(proto)
	if len(eps) == 1 {
		b.WriteString(" dnat to ")
		b.WriteString(hostPort(eps[0].IP, targetPort))
		return b.String()
	}
	b.WriteString(" dnat ")
	b.WriteString(ip)
	b.WriteString(" to numgen random mod ")
	b.WriteString(strconv.Itoa(len(eps)))
	b.WriteString(" map { ")
	for k, e := range eps {
		if k > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(k))
		b.WriteString(" : ")
		b.WriteString(e.IP.String())
		b.WriteString(" . ")
		b.WriteString(port)
	}
	b.WriteString(" }")
	return b.String()
}

// affinityRules adds, for a service port with ClientIP session affinity,
// one endpoint chain per endpoint of eps ("update @affinity-X { ip saddr
// }", then the DNAT) with its affinity set, and returns the service
// chain's rules: "ip saddr @affinity-X goto endpoint-X" per endpoint, then
// "numgen random mod N vmap { 0 : goto endpoint-..., ... }" (kube-proxy
// 1.37 keeps endpoint chains for these services only). An endpoint chain
// already rendered (a local endpoint of both a service-X and a local-X
// chain) is used, not added again.
func (r *Ruleset) affinityRules(s *workload.Service, sp *workload.ServicePort, proto string, eps []workload.Endpoint) []string {
	chains := make([]string, len(eps))
	for k, e := range eps {
		epChain := EndpointChainName(s.Namespace, s.Name, proto, sp.Name, e.IP, sp.TargetPort)
		chains[k] = epChain
		if r.chains[epChain] != nil {
			continue
		}
		set := affinitySetName(epChain)
		r.affinity = append(r.affinity, set)
		r.addChain(knftables.Chain{Name: epChain}, "update @"+set+" { "+r.ip+" saddr }",
			"meta l4proto "+proto+" dnat to "+hostPort(e.IP, sp.TargetPort))
	}
	rules := make([]string, 0, len(eps)+1)
	for _, c := range chains {
		rules = append(rules, r.ip+" saddr @"+affinitySetName(c)+" goto "+c)
	}
	var vmap strings.Builder
	vmap.WriteString("numgen random mod ")
	vmap.WriteString(strconv.Itoa(len(eps)))
	vmap.WriteString(" vmap { ")
	for k, c := range chains {
		if k > 0 {
			vmap.WriteString(" , ")
		}
		vmap.WriteString(strconv.Itoa(k))
		vmap.WriteString(" : goto ")
		vmap.WriteString(c)
	}
	vmap.WriteString(" }")
	return append(rules, vmap.String())
}

// addExposed renders a port beyond a plain ClusterIP as kube-proxy
// v1.37's nftables proxier does (pkg/proxy/nftables/proxier.go): the
// cluster policy chain service-X (unless internalTrafficPolicy Local on a
// service that is not externally accessible) and the local policy chain
// local-X (a Local policy with endpoints on cfg.NodeName), both DNATing
// with numgen; the external chain external-X for node ports, external
// and LoadBalancer IPs, which marks for masquerade (Cluster) or sends pod
// traffic (from clusterCIDR) and the node's own (fib saddr type local,
// masqueraded) to service-X, then the rest to the external policy chain;
// service-ips elements for the cluster IP and the external and
// LoadBalancer IPs, service-nodeports for the node port, and
// no-endpoint-services / no-endpoint-nodeports elements ("goto
// reject-chain" without endpoints, "drop" without local ones). With
// ClientIP affinity (Config.AffinityTimeout) service-X and local-X check
// and pick endpoint chains as affinityRules (kube-proxy's layout for
// every affinity service), sharing the chains of local endpoints.
// kube-proxy marks for masquerade in the external chain itself ("meta
// mark set meta mark | 0x4000 comment "masquerade"") and leaves the
// service-nodeports elements without a comment.
func (r *Ruleset) addExposed(cfg Config, s *workload.Service, sp *workload.ServicePort, proto string, key []string, eps []workload.Endpoint, b *strings.Builder) error {
	var local []workload.Endpoint
	for _, e := range eps {
		if cfg.NodeName != "" && e.Node == cfg.NodeName {
			local = append(local, e)
		}
	}
	exposed := s.Exposed()
	etpLocal := s.ExternalLocal && exposed
	hash := strings.TrimPrefix(ServiceChainName(s.Namespace, s.Name, proto, sp.Name), prefixService)
	svcChain, localChain, extChain := prefixService+hash, prefixLocal+hash, prefixExternal+hash
	usesCluster := len(eps) > 0 && (!s.InternalLocal || exposed)
	usesLocal := len(local) > 0 && (s.InternalLocal || etpLocal)
	pick := func(eps []workload.Endpoint) []string {
		if cfg.AffinityTimeout > 0 {
			return r.affinityRules(s, sp, proto, eps)
		}
		return []string{dnatMapRule(b, r.ip, proto, sp.TargetPort, eps)}
	}
	if usesCluster {
		r.addChain(knftables.Chain{Name: svcChain}, pick(eps)...)
	}
	if usesLocal {
		r.addChain(knftables.Chain{Name: localChain}, pick(local)...)
	}
	reject := func() []string {
		if len(eps) == 0 {
			return []string{"goto " + chainReject}
		}
		return []string{"drop"}
	}
	portName := s.PortName(*sp)
	internal, hasInternal := svcChain, len(eps) > 0
	if s.InternalLocal {
		internal, hasInternal = localChain, len(local) > 0
	}
	if hasInternal {
		if err := r.addElement(MapServiceIPs, &Element{Key: key, Value: []string{"goto " + internal}}); err != nil {
			return err
		}
	} else if err := r.addElement(MapNoEndpointServices, &Element{Key: key, Value: reject(), Comment: portName}); err != nil {
		return err
	}
	if !exposed {
		return nil
	}
	external, hasExternal := svcChain, len(eps) > 0
	if etpLocal {
		external, hasExternal = localChain, len(local) > 0
	}
	if len(eps) > 0 {
		var rules []string
		markMasq := "meta mark set meta mark | " + masqueradeMark
		if !etpLocal {
			rules = append(rules, markMasq+` comment "masquerade"`)
		} else {
			if cfg.ClusterCIDR.IsValid() {
				rules = append(rules, "ip saddr "+cfg.ClusterCIDR.Masked().String()+" goto "+svcChain+` comment "short-circuit pod traffic"`)
			}
			rules = append(rules, "fib saddr type local "+markMasq+` comment "masquerade local traffic"`,
				"fib saddr type local goto "+svcChain+` comment "short-circuit local traffic"`)
		}
		if hasExternal {
			rules = append(rules, "goto "+external)
		}
		r.addChain(knftables.Chain{Name: extChain}, rules...)
	}
	port := strconv.Itoa(int(sp.Port))
	for _, ip := range append(slices.Clone(s.ExternalIPs), s.LoadBalancerIPs...) {
		k := []string{ip.String(), proto, port}
		if len(eps) > 0 {
			if err := r.addElement(MapServiceIPs, &Element{Key: k, Value: []string{"goto " + extChain}}); err != nil {
				return err
			}
		}
		if !hasExternal {
			if err := r.addElement(MapNoEndpointServices, &Element{Key: k, Value: reject(), Comment: portName}); err != nil {
				return err
			}
		}
	}
	if sp.NodePort != 0 {
		k := []string{proto, strconv.Itoa(int(sp.NodePort))}
		if len(eps) > 0 {
			if err := r.addElement(MapServiceNodePorts, &Element{Key: k, Value: []string{"goto " + extChain}}); err != nil {
				return err
			}
		}
		if !hasExternal {
			if err := r.addElement(MapNoEndpointNodePorts, &Element{Key: k, Value: reject(), Comment: portName}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *Ruleset) addSetsAndMaps(tx *knftables.Transaction) {
	keyType := r.addr + " . inet_proto . inet_service : verdict"
	tx.Add(&knftables.Set{Name: SetNodePortIPs, Type: r.addr, Comment: ptr("IPs that accept NodePort traffic")})
	tx.Add(&knftables.Map{Name: MapFirewallIPs, Type: keyType, Comment: ptr("destinations that are subject to LoadBalancerSourceRanges")})
	tx.Add(&knftables.Map{Name: MapServiceNodePorts, Type: nodePortKeyType, Comment: ptr("NodePort traffic")})
	tx.Add(&knftables.Map{Name: MapNoEndpointNodePorts, Type: nodePortKeyType, Comment: ptr("vmap to drop or reject packets to service nodeports with no endpoints")})
	tx.Add(&knftables.Set{Name: SetHairpin, Type: r.addr + " . " + r.addr + " . inet_proto . inet_service", Comment: ptr("service hairpin connections")})
	tx.Add(&knftables.Set{Name: SetClusterIPs, Type: r.addr, Comment: ptr("Active ClusterIPs")})
	tx.Add(&knftables.Map{Name: MapServiceIPs, Type: keyType, Comment: ptr("ClusterIP, ExternalIP and LoadBalancer IP traffic")})
	tx.Add(&knftables.Map{Name: MapNoEndpointServices, Type: keyType, Comment: ptr("vmap to drop or reject packets to services with no endpoints")})
}

// elementSets are the sets and maps whose elements a sync writes, in order.
var elementSets = []string{SetClusterIPs, SetNodePortIPs, SetHairpin, MapNoEndpointServices, MapServiceIPs, MapNoEndpointNodePorts, MapServiceNodePorts}

func addChain(tx *knftables.Transaction, ch *Chain) {
	c := ch.Obj
	tx.Add(&c)
}

// ruleObj is rule of chain as a knftables.Rule, a trailing ` comment
// "..."` of the text as its Comment (as the kernel lists it back).
func ruleObj(chain, rule string) *knftables.Rule {
	r := &knftables.Rule{Chain: chain, Rule: rule}
	if i := strings.LastIndex(rule, ` comment "`); i >= 0 && strings.HasSuffix(rule, `"`) {
		r.Rule = rule[:i]
		r.Comment = ptr(rule[i+len(` comment "`) : len(rule)-1])
	}
	return r
}

func addRules(tx *knftables.Transaction, ch *Chain) {
	for _, rule := range ch.Rules {
		tx.Add(ruleObj(ch.Obj.Name, rule))
	}
}

func (r *Ruleset) writeElement(tx *knftables.Transaction, set string, e *Element, del bool) {
	el := &knftables.Element{Key: e.Key, Value: e.Value}
	if set == SetClusterIPs || set == SetNodePortIPs || set == SetHairpin {
		el.Set = set
	} else {
		el.Map = set
	}
	if e.Comment != "" && !del {
		el.Comment = ptr(e.Comment)
	}
	if del {
		tx.Delete(el)
	} else {
		tx.Add(el)
	}
}

// FullChains writes the first part of a full sync into tx: it recreates
// the table empty ("add table", "delete table", "add table"), then adds the
// sets and maps (empty), every chain, then every rule (so a jump's target
// always exists, as kube-proxy orders it).
func (r *Ruleset) FullChains(tx *knftables.Transaction) {
	tx.Add(&knftables.Table{})
	tx.Delete(&knftables.Table{})
	tx.Add(&knftables.Table{Comment: ptr("rules for kube-proxy")})
	r.addSetsAndMaps(tx)
	r.addAffinitySets(tx, r.affinity)
	for _, name := range r.chainOrder {
		addChain(tx, r.chains[name])
	}
	for _, name := range r.chainOrder {
		addRules(tx, r.chains[name])
	}
}

// FullChainsSplit is FullChains spread over several transactions: the
// first recreates the table and declares the sets, maps and every chain;
// each following one adds the rules of at most perTx chains (in render
// order). perTx <= 0 gives FullChains' single transaction.
func (r *Ruleset) FullChainsSplit(newTx func() *knftables.Transaction, perTx int) []*knftables.Transaction {
	first := newTx()
	if perTx <= 0 {
		r.FullChains(first)
		return []*knftables.Transaction{first}
	}
	first.Add(&knftables.Table{})
	first.Delete(&knftables.Table{})
	first.Add(&knftables.Table{Comment: ptr("rules for kube-proxy")})
	r.addSetsAndMaps(first)
	r.addAffinitySets(first, r.affinity)
	for _, name := range r.chainOrder {
		addChain(first, r.chains[name])
	}
	out := []*knftables.Transaction{first}
	for i := 0; i < len(r.chainOrder); i += perTx {
		tx := newTx()
		for _, name := range r.chainOrder[i:min(i+perTx, len(r.chainOrder))] {
			addRules(tx, r.chains[name])
		}
		out = append(out, tx)
	}
	return out
}

// FullElements writes the second part of a full sync into tx: every map
// and set element (after FullChains, in the same or a later transaction).
func (r *Ruleset) FullElements(tx *knftables.Transaction) {
	for _, set := range elementSets {
		for _, k := range r.elemOrder[set] {
			r.writeElement(tx, set, r.elems[set][k], false)
		}
	}
}

// Full writes the whole table into tx: FullChains then FullElements.
func (r *Ruleset) Full(tx *knftables.Transaction) {
	r.FullChains(tx)
	r.FullElements(tx)
}

// Diff describes the difference from an applied Ruleset to a desired one,
// in the three steps kube-proxy's partial sync takes (in this order within
// one transaction, or as three transactions).
type Diff struct {
	// ChainsAdded and ChainsChanged are chains to add or to flush and
	// refill; ChainsDeleted are chains to delete (after Elements, which
	// removes the map elements that refer to them).
	ChainsAdded, ChainsChanged, ChainsDeleted []string
	// ElementsAdded and ElementsDeleted count map and set elements.
	ElementsAdded, ElementsDeleted int
	// SetsAdded and SetsDeleted are affinity sets to declare (before the
	// chains that use them) and to delete (after those chains).
	SetsAdded, SetsDeleted []string

	from, to *Ruleset
}

// Empty reports whether the diff changes nothing.
func (d *Diff) Empty() bool {
	return len(d.ChainsAdded)+len(d.ChainsChanged)+len(d.ChainsDeleted)+d.ElementsAdded+d.ElementsDeleted+len(d.SetsAdded)+len(d.SetsDeleted) == 0
}

// DiffFrom computes what turns the applied ruleset old into r.
func (r *Ruleset) DiffFrom(old *Ruleset) *Diff {
	d := &Diff{from: old, to: r}
	for _, name := range r.chainOrder {
		oc, ok := old.chains[name]
		if !ok {
			d.ChainsAdded = append(d.ChainsAdded, name)
			continue
		}
		if !equalRules(oc.Rules, r.chains[name].Rules) {
			d.ChainsChanged = append(d.ChainsChanged, name)
		}
	}
	for _, name := range old.chainOrder {
		if _, ok := r.chains[name]; !ok {
			d.ChainsDeleted = append(d.ChainsDeleted, name)
		}
	}
	have := make(map[string]bool, len(old.affinity))
	for _, n := range old.affinity {
		have[n] = true
	}
	want := make(map[string]bool, len(r.affinity))
	for _, n := range r.affinity {
		want[n] = true
		if !have[n] {
			d.SetsAdded = append(d.SetsAdded, n)
		}
	}
	for _, n := range old.affinity {
		if !want[n] {
			d.SetsDeleted = append(d.SetsDeleted, n)
		}
	}
	for set, m := range r.elems {
		om := old.elems[set]
		for k, e := range m {
			if oe, ok := om[k]; !ok || !equalRules(oe.Value, e.Value) {
				d.ElementsAdded++
				if ok {
					d.ElementsDeleted++
				}
			}
		}
		for k := range om {
			if _, ok := m[k]; !ok {
				d.ElementsDeleted++
			}
		}
	}
	return d
}

func equalRules(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Chains writes the first step into tx: add new chains with their rules,
// flush and refill changed ones. Returns the number of chains + rules sent.
func (d *Diff) Chains(tx *knftables.Transaction) int {
	d.to.addAffinitySets(tx, d.SetsAdded)
	n := len(d.SetsAdded)
	for _, name := range d.ChainsAdded {
		addChain(tx, d.to.chains[name])
	}
	for _, name := range d.ChainsAdded {
		ch := d.to.chains[name]
		addRules(tx, ch)
		n += 1 + len(ch.Rules)
	}
	for _, name := range d.ChainsChanged {
		ch := d.to.chains[name]
		tx.Flush(&knftables.Chain{Name: name})
		addRules(tx, ch)
		n += 1 + len(ch.Rules)
	}
	return n
}

// Elements writes the second step into tx: delete elements that are gone
// or whose verdict changed, add new ones. Returns the number of elements sent.
func (d *Diff) Elements(tx *knftables.Transaction) int {
	n := 0
	for _, set := range elementSets {
		m, om := d.to.elems[set], d.from.elems[set]
		for _, k := range d.from.elemOrder[set] {
			if e, ok := m[k]; !ok || !equalRules(e.Value, om[k].Value) {
				d.to.writeElement(tx, set, om[k], true)
				n++
			}
		}
		for _, k := range d.to.elemOrder[set] {
			if oe, ok := om[k]; !ok || !equalRules(oe.Value, m[k].Value) {
				d.to.writeElement(tx, set, m[k], false)
				n++
			}
		}
	}
	return n
}

// Deletes writes the third step into tx: delete the chains no longer
// wanted (their rules first, so no chain still jumps to another being
// deleted). Returns the number of chains sent.
func (d *Diff) Deletes(tx *knftables.Transaction) int {
	for _, name := range d.ChainsDeleted {
		tx.Flush(&knftables.Chain{Name: name})
	}
	for _, name := range d.ChainsDeleted {
		tx.Delete(&knftables.Chain{Name: name})
	}
	for _, name := range d.SetsDeleted {
		tx.Delete(&knftables.Set{Name: name})
	}
	return len(d.ChainsDeleted) + len(d.SetsDeleted)
}
