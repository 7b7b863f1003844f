package scenarios

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestFamiliesRefused: each bad family setting is refused at its field,
// with a fix and a line, as kube-apiserver refuses it or the testbed
// cannot build it.
func TestFamiliesRefused(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, field, msg string
	}{
		{"unknown family", "network: {ipFamilies: [IPv5]}\n", "network.ipFamilies[0]", "unknown value"},
		{"family twice", "network: {ipFamilies: [IPv4, IPv4]}\n", "network.ipFamilies[1]", "listed twice"},
		{"empty families", "network: {ipFamilies: []}\n", "network.ipFamilies", "is empty"},
		{"unknown policy", "services: {count: 1, ipFamilyPolicy: DualStack}\n", "services.ipFamilyPolicy", "unknown value"},
		{"RequireDualStack single family", "services: {count: 1, ipFamilyPolicy: RequireDualStack}\n", "services.ipFamilyPolicy", "needs a dual-stack cluster"},
		{"IPv6 prefix in an IPv4-only run", "network: {ipv6Prefix: \"2001:2::/96\"}\n", "network.ipv6Prefix", "IPv4-only"},
		{"IPv6 prefix not a /96", "network:\n  ipFamilies: [IPv4, IPv6]\n  ipv6Prefix: \"2001:2::/64\"\n", "network.ipv6Prefix", "/64"},
		{"IPv6 prefix host bits", "network:\n  ipFamilies: [IPv4, IPv6]\n  ipv6Prefix: \"2001:2::1/96\"\n", "network.ipv6Prefix", "host bits"},
		{"IPv6 prefix IPv4", "network:\n  ipFamilies: [IPv4, IPv6]\n  ipv6Prefix: 198.18.0.0/16\n", "network.ipv6Prefix", "not IPv6"},
		{"IPv6 prefix IPv4-mapped", "network:\n  ipFamilies: [IPv4, IPv6]\n  ipv6Prefix: \"::ffff:0:0/96\"\n", "network.ipv6Prefix", "IPv4-mapped"},
		{"IPv6 prefix link-local", "network:\n  ipFamilies: [IPv4, IPv6]\n  ipv6Prefix: \"fe80::/96\"\n", "network.ipv6Prefix", "link-local"},
		{"IPv6 prefix multicast", "network:\n  ipFamilies: [IPv4, IPv6]\n  ipv6Prefix: \"ff02::/96\"\n", "network.ipv6Prefix", "multicast"},
		{"IPv6-only services", "network: {ipFamilies: [IPv6]}\n", "network.ipFamilies", "not run yet"},
		{"IPv6-primary single stack", "network: {ipFamilies: [IPv6, IPv4]}\n", "network.ipFamilies", "not run yet"},
		{"dual-stack NodePort", "network: {ipFamilies: [IPv4, IPv6]}\nservices: {count: 1, type: NodePort, ipFamilyPolicy: RequireDualStack}\n", "services.type", "not yet in a dual-stack run"},
		{"dual-stack isolated pods", "network: {ipFamilies: [IPv4, IPv6]}\ntopology: {pods: isolated}\nservices: {count: 1, ipFamilyPolicy: PreferDualStack}\n", "topology.pods", "not yet in a dual-stack run"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantRefused(t, tc.yaml, tc.field, tc.msg) })
	}
}

// TestFamiliesRefuseModeWithoutIPv6: a dual-stack run with a builtin row
// of a mode the catalog lists without IPv6 is refused at modes, its fix
// naming kube-proxy; a single-stack one is not, nor a dual-stack one
// running that mode with kube-proxy alone (kube-proxy's own IPv6
// proxier).
func TestFamiliesRefuseModeWithoutIPv6(t *testing.T) {
	cat := Catalog{Modes: []string{"none", "iptables", "ipvs"}, IPv6: []string{"none", "iptables"}}
	const y = "modes: [none, ipvs]\nnetwork: {ipFamilies: [IPv4, IPv6]}\nservices: {count: 1, ipFamilyPolicy: %s}\n"
	_, err := cat.Parse([]byte(strings.Replace(y, "%s", "RequireDualStack", 1)), "f.yaml")
	if err == nil {
		t.Fatal("dual-stack ipvs accepted")
	}
	found := false
	for _, fe := range fieldErrors(t, err) {
		found = found || fe.Field == "modes" && strings.Contains(fe.Msg, "builtin ipvs") && strings.Contains(fe.Msg, "IPv6") && strings.Contains(fe.Fix, "implementation: [kube-proxy]")
	}
	if !found {
		t.Errorf("no error at modes naming builtin ipvs with a kube-proxy fix: %v", err)
	}
	if _, err := cat.Parse([]byte(strings.Replace(y, "%s", "SingleStack", 1)), "f.yaml"); err != nil {
		t.Errorf("single-stack services in a dual-stack cluster refused: %v", err)
	}
	if _, err := cat.Parse([]byte("implementation: [kube-proxy]\n"+strings.Replace(y, "%s", "RequireDualStack", 1)), "f.yaml"); err != nil {
		t.Errorf("dual-stack kube-proxy ipvs refused: %v", err)
	}
}

// TestFamiliesPlan: a dual-stack scenario's service families follow the
// policy as kube-apiserver assigns them, the IPv6 prefix defaults to
// 2001:2::/96, and the IPv6 view's CIDRs are the twins of the IPv4 ones,
// inside 2001:2::/48 and as disjoint as the IPv4 ones.
func TestFamiliesPlan(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want []string
	}{
		{"services: {count: 1}\n", []string{IPv4}},
		{"services: {count: 1, ipFamilyPolicy: PreferDualStack}\n", []string{IPv4}},
		{"network: {ipFamilies: [IPv4, IPv6]}\nservices: {count: 1}\n", []string{IPv4}},
		{"network: {ipFamilies: [IPv4, IPv6]}\nservices: {count: 1, ipFamilyPolicy: PreferDualStack}\n", []string{IPv4, IPv6}},
		{"network: {ipFamilies: [IPv4, IPv6]}\nservices: {count: 1, ipFamilyPolicy: RequireDualStack}\n", []string{IPv4, IPv6}},
		{"network: {ipFamilies: [IPv6, IPv4]}\nservices: {count: 1, ipFamilyPolicy: RequireDualStack}\n", []string{IPv6, IPv4}},
	} {
		sc, err := Parse([]byte(tc.yaml), "f.yaml")
		if err != nil {
			t.Fatalf("%s: %v", tc.yaml, err)
		}
		if got := sc.ServiceFamilies(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: service families %v, want %v", tc.yaml, got, tc.want)
		}
	}
	sc, err := Parse([]byte("network: {ipFamilies: [IPv4, IPv6]}\nservices: {count: 1, ipFamilyPolicy: RequireDualStack}\n"), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if sc.Network.IPv6Prefix != DefaultIPv6Prefix {
		t.Errorf("ipv6Prefix %q, want the default %s", sc.Network.IPv6Prefix, DefaultIPv6Prefix)
	}
	v6 := sc.ForFamily(IPv6)
	if !v6.IsIPv6() || sc.IsIPv6() {
		t.Fatalf("ForFamily(IPv6) family %q, the scenario's own %q", v6.Family, sc.Family)
	}
	svc, pod, node, cluster := v6.Prefixes()
	bench := netip.MustParsePrefix("2001:2::/48")
	for _, p := range []netip.Prefix{svc, pod, node, cluster} {
		if !p.Addr().Is6() || !bench.Contains(p.Addr()) || p.Bits() < 96 {
			t.Errorf("IPv6 prefix %s not a /96+ of %s", p, bench)
		}
	}
	if svc.String() != "2001:2::c612:0/112" {
		t.Errorf("IPv6 serviceCIDR %s, want the twin of 198.18.0.0/16, 2001:2::c612:0/112", svc)
	}
	if svc.Overlaps(pod) || pod.Overlaps(node) || svc.Overlaps(cluster) {
		t.Errorf("IPv6 twins overlap: svc %s pod %s node %s cluster %s", svc, pod, node, cluster)
	}
	if !cluster.Contains(Twin6(sc.IPv6Prefix(), netip.MustParseAddr("198.19.0.7"))) {
		t.Errorf("the twin of a pod address is outside the IPv6 clusterCIDR %s", cluster)
	}
	if a := netip.MustParseAddr("2001:db8::1"); Twin6(sc.IPv6Prefix(), a) != a {
		t.Errorf("Twin6 of an IPv6 address changed it")
	}
	// An explicit prefix outside the benchmarking range is the user's
	// choice, as IPv4 CIDRs outside 198.18.0.0/15 are.
	if _, err := Parse([]byte("network: {ipFamilies: [IPv4, IPv6], ipv6Prefix: \"fd00:10::/96\"}\nservices: {count: 1, ipFamilyPolicy: RequireDualStack}\n"), "f.yaml"); err != nil {
		t.Errorf("explicit ULA /96 refused: %v", err)
	}
}
