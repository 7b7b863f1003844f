package scenarios

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// IP families (core/v1 IPFamily) and family policies (core/v1
// IPFamilyPolicy), as network.ipFamilies and services.ipFamilyPolicy
// name them.
const (
	IPv4 = "IPv4"
	IPv6 = "IPv6"

	SingleStack      = "SingleStack"
	PreferDualStack  = "PreferDualStack"
	RequireDualStack = "RequireDualStack"
)

// IPFamilyPolicies are services.ipFamilyPolicy's values, as core/v1
// validates them (pkg/apis/core/validation: supportedServiceIPFamilyPolicy).
var IPFamilyPolicies = []string{SingleStack, PreferDualStack, RequireDualStack}

// DefaultIPv6Prefix is network.ipv6Prefix's default: a /96 of the IPv6
// benchmarking range 2001:2::/48 (RFC 5180), into whose last 32 bits
// every IPv4 address of the plan is embedded (RFC 6052, section 2.2).
const DefaultIPv6Prefix = "2001:2::/96"

// ipv4Mapped is ::ffff:0:0/96 (RFC 4291, 2.5.5.2): the kernel treats
// these as IPv4 addresses on an IPv6 socket, so no plan can use them.
var ipv4Mapped = netip.MustParsePrefix("::ffff:0:0/96")

// Families is network.ipFamilies, or [IPv4] when unset: the cluster's IP
// families, primary first (kube-apiserver's --service-cluster-ip-range
// order).
func (s *Scenario) Families() []string {
	if len(s.Network.IPFamilies) == 0 {
		return []string{IPv4}
	}
	return s.Network.IPFamilies
}

// HasIPv6 reports whether network.ipFamilies lists IPv6.
func (s *Scenario) HasIPv6() bool { return slices.Contains(s.Families(), IPv6) }

// FamilyPolicy is services.ipFamilyPolicy, or SingleStack (Kubernetes'
// default) when unset.
func (s *Scenario) FamilyPolicy() string {
	if s.Services.IPFamilyPolicy == "" {
		return SingleStack
	}
	return s.Services.IPFamilyPolicy
}

// ServiceFamilies are the IP families every Service gets, as
// kube-apiserver assigns them (pkg/registry/core/service/storage: a
// SingleStack service takes the cluster's primary family; PreferDualStack
// takes every family the cluster has; RequireDualStack both, which
// validate requires the cluster to have): one or two of IPv4, IPv6,
// primary first.
func (s *Scenario) ServiceFamilies() []string {
	fams := s.Families()
	if s.FamilyPolicy() == SingleStack {
		return fams[:1]
	}
	return fams
}

// DualStack reports whether the services have both families (the
// dualStack phase runs).
func (s *Scenario) DualStack() bool { return len(s.ServiceFamilies()) == 2 }

// IPv6Prefix is network.ipv6Prefix parsed, or DefaultIPv6Prefix. Valid
// only on a validated Scenario.
func (s *Scenario) IPv6Prefix() netip.Prefix {
	if s.Network.IPv6Prefix == "" {
		return netip.MustParsePrefix(DefaultIPv6Prefix)
	}
	return netip.MustParsePrefix(s.Network.IPv6Prefix)
}

// FamilyName is IPv6 for an IPv6 proxier (ipv6 set), else IPv4.
func FamilyName(ipv6 bool) string {
	if ipv6 {
		return IPv6
	}
	return IPv4
}

// AddrFamily is a's family: IPv4 for an IPv4 address, IPv6 for an IPv6
// one, "" for an IPv4-mapped IPv6 address (::ffff:a.b.c.d, RFC 4291
// 2.5.5.2), which neither family's proxier programs.
func AddrFamily(a netip.Addr) string {
	switch {
	case a.Is4():
		return IPv4
	case a.Is6() && !a.Is4In6():
		return IPv6
	}
	return ""
}

// Twin6 is the IPv6 twin of IPv4 address a in the /96 prefix p: p's first
// 96 bits followed by a's 32 (RFC 6052's /96 IPv4-embedded IPv6 address).
// An address that is not IPv4 is returned unchanged.
func Twin6(p netip.Prefix, a netip.Addr) netip.Addr {
	if !a.Is4() {
		return a
	}
	b := p.Masked().Addr().As16()
	v4 := a.As4()
	copy(b[12:], v4[:])
	return netip.AddrFrom16(b)
}

// TwinPrefix6 is the IPv6 twin of IPv4 prefix q in /96 prefix p: the twin
// of its address, 96 bits longer. A prefix that is not IPv4 is returned
// unchanged.
func TwinPrefix6(p, q netip.Prefix) netip.Prefix {
	if !q.Addr().Is4() {
		return q
	}
	return netip.PrefixFrom(Twin6(p, q.Addr()), q.Bits()+96)
}

// ForFamily returns s as a proxier of family fam sees it: for IPv4 s
// itself; for IPv6 a copy whose Family is IPv6 and whose network CIDRs
// are the IPv6 twins (TwinPrefix6 in IPv6Prefix) of s's, so a mode's
// ConfigFromScenario gives its IPv6 proxier the IPv6 clusterCIDR and
// serviceCIDR, as kube-proxy's IPv6 proxier gets the IPv6 half of each
// dual-stack setting. Valid only on a validated Scenario.
func (s *Scenario) ForFamily(fam string) *Scenario {
	if fam != IPv6 {
		return s
	}
	c := *s
	c.Family = IPv6
	p := s.IPv6Prefix()
	n := &c.Network
	for _, f := range []*string{&n.ServiceCIDR, &n.PodCIDR, &n.NodeCIDR, &n.ClusterCIDR, &n.ClientCIDR, &n.LoadBalancerCIDR, &n.ExternalClientCIDR} {
		if q, err := netip.ParsePrefix(*f); err == nil {
			*f = TwinPrefix6(p, q).String()
		}
	}
	return &c
}

// IsIPv6 reports whether s is the IPv6 view of a scenario (ForFamily).
func (s *Scenario) IsIPv6() bool { return s.Family == IPv6 }

// familiesDefaults fills network.ipv6Prefix when the run has IPv6
// (SetDefaults).
func (s *Scenario) familiesDefaults() {
	if s.HasIPv6() && s.Network.IPv6Prefix == "" && !s.has("network.ipv6Prefix") {
		s.Network.IPv6Prefix = DefaultIPv6Prefix
	}
}

// families checks network.ipFamilies, network.ipv6Prefix and
// services.ipFamilyPolicy, and what an IPv6 family needs of the rest of
// the scenario.
func (c *checker) families() {
	s, n := c.s, c.s.Network
	if len(n.IPFamilies) > 0 || s.has("network.ipFamilies") {
		c.list("network.ipFamilies", n.IPFamilies, []string{IPv4, IPv6})
		if len(n.IPFamilies) > 2 {
			c.add("network.ipFamilies", fmt.Sprintf("%d families listed", len(n.IPFamilies)), "list [IPv4], [IPv6] or both, [IPv4, IPv6]")
		}
	}
	pol := s.Services.IPFamilyPolicy
	if pol != "" || s.has("services.ipFamilyPolicy") {
		if c.oneOf("services.ipFamilyPolicy", pol, IPFamilyPolicies) && pol == RequireDualStack && len(s.Families()) < 2 {
			// kube-apiserver: "this cluster is not configured for dual-stack services".
			c.add("services.ipFamilyPolicy", fmt.Sprintf("RequireDualStack needs a dual-stack cluster, but network.ipFamilies is %v", s.Families()),
				"set network.ipFamilies: [IPv4, IPv6], or use PreferDualStack (which falls back to one family) or SingleStack")
		}
	}
	if !s.HasIPv6() {
		if n.IPv6Prefix != "" || s.has("network.ipv6Prefix") {
			c.add("network.ipv6Prefix", "is set but network.ipFamilies has no IPv6 (this run is IPv4-only)", "add IPv6 to network.ipFamilies ([IPv4, IPv6]), or remove network.ipv6Prefix")
		}
		return
	}
	c.ipv6Prefix()
	svcFams := s.ServiceFamilies()
	if !slices.Contains(svcFams, IPv4) {
		// The core phases (sync, lookup, fairness, churn) measure IPv4;
		// the dualStack phase measures IPv6 beside it.
		c.add("network.ipFamilies", fmt.Sprintf("services of family %v only (IPv6 single-stack) are not run yet: the core phases measure IPv4, the dualStack phase IPv6 beside it", svcFams),
			"use network.ipFamilies: [IPv4, IPv6] with services.ipFamilyPolicy: RequireDualStack (or PreferDualStack)")
	}
	if !s.DualStack() {
		return
	}
	for _, o := range []struct {
		on         bool
		field, why string
	}{
		{s.ExposesServices(), "services.type", "node ports, LoadBalancer and external IPs over IPv6 are not built yet"},
		{s.Topology.PodModel() == "isolated", "topology.pods", "isolated pods route through an IPv4 link-local gateway; IPv6 runs with pods: shared"},
		{s.Topology.ExternalClient, "topology.externalClient", "the external client has no IPv6 address yet"},
		{s.Topology.Addresses() > 1, "topology.clientAddresses", "the extra client source addresses are IPv4 only"},
		{!allTCP(s.Services.PortList()), "services.protocol", "the IPv6 echo answers TCP only (UDP and SCTP ports over IPv6 are not built yet)"},
	} {
		if o.on {
			c.add(o.field, "not yet in a dual-stack run: "+o.why, "remove it, or use services.ipFamilyPolicy: SingleStack")
		}
	}
	// Builtin rows only: a kube-proxy row runs kube-proxy's own IPv6
	// proxier in every mode it has (its ipvs included).
	if c.cat != nil && c.cat.IPv6 != nil {
		var lack []string
		for _, m := range s.builtinRows() {
			if slices.Contains(c.cat.Modes, m) && !slices.Contains(c.cat.IPv6, m) {
				lack = append(lack, m)
			}
		}
		if len(lack) > 0 {
			fix := "remove " + strings.Join(lack, ", ") + " from modes, or use services.ipFamilyPolicy: SingleStack"
			if kp := kubeProxyOnly(lack); len(kp) > 0 {
				fix += ", or run " + strings.Join(kp, ", ") + " with kube-proxy alone (implementation: [kube-proxy]; kube-proxy's " + strings.Join(kp, ", ") + " programs IPv6)"
			}
			c.add("modes", fmt.Sprintf("builtin %s has no IPv6 rendering in this build (modes whose builtin has one: %s)", strings.Join(lack, ", "), strings.Join(c.cat.IPv6, ", ")), fix)
		}
	}
}

// ipv6Prefix checks network.ipv6Prefix: a /96 without host bits, not
// special-purpose nor IPv4-mapped. A prefix outside the benchmarking
// range 2001:2::/48 is accepted when given, as IPv4 CIDRs outside
// 198.18.0.0/15 are: the testbed has no route out either way.
func (c *checker) ipv6Prefix() {
	f, v := "network.ipv6Prefix", c.s.Network.IPv6Prefix
	p, err := netip.ParsePrefix(v)
	fix := "write a /96 of the benchmarking range 2001:2::/48 (RFC 5180), such as the default " + DefaultIPv6Prefix
	switch {
	case err != nil:
		c.add(f, fmt.Sprintf("%q is not a CIDR prefix", v), fix)
	case !p.Addr().Is6() || p.Addr().Is4In6():
		if p.Addr().Is4In6() {
			c.add(f, fmt.Sprintf("%s is IPv4-mapped (%s), which the kernel treats as IPv4", p, ipv4Mapped), fix)
		} else {
			c.add(f, fmt.Sprintf("%s is not IPv6", p), fix)
		}
	case p.Bits() != 96:
		c.add(f, fmt.Sprintf("%s is a /%d: each IPv4 address of the plan is embedded in the last 32 bits of a /96 (RFC 6052)", p, p.Bits()), fix)
	case p.Masked() != p:
		c.add(f, fmt.Sprintf("%s has host bits set", p), "write "+p.Masked().String())
	default:
		if sp, what := SpecialOverlap(p); what != "" {
			c.add(f, fmt.Sprintf("%s overlaps %s %s, which no cluster can use for its addresses", p, what, sp), fix)
		}
	}
}

// allTCP reports whether every port is TCP.
func allTCP(ports []PortSpec) bool {
	for _, p := range ports {
		if p.Protocol != "TCP" {
			return false
		}
	}
	return true
}
