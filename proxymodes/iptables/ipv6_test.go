package iptables

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// TestRenderIPv6: the IPv6 proxier renders the IPv6 twins of the fixture
// as kube-proxy's IPv6 proxier does: the same rules and chain counts but
// for KUBE-FIREWALL's localnet rule (IPv4 only), "[ip]:port" after
// --to-destination and in the KUBE-SEP hash, the IPv6 clusterCIDR in the
// masquerade rules; addresses of the other family are refused.
func TestRenderIPv6(t *testing.T) {
	p := netip.MustParsePrefix(scenarios.DefaultIPv6Prefix)
	v4, err := Render(testCfg, fixture())
	if err != nil {
		t.Fatal(err)
	}
	cfg6 := testCfg
	cfg6.IPv6, cfg6.ClusterCIDR = true, scenarios.TwinPrefix6(p, testCfg.ClusterCIDR)
	svcs6 := workload.Twin6(p, fixture())
	v6, err := Render(cfg6, svcs6)
	if err != nil {
		t.Fatal(err)
	}
	if v6.NatRules != v4.NatRules || v6.FilterRules != v4.FilterRules-1 || v6.Chains != v4.Chains-1 {
		t.Errorf("IPv6 counts nat=%d filter=%d chains=%d, want %d, %d, %d (IPv4's without KUBE-FIREWALL)",
			v6.NatRules, v6.FilterRules, v6.Chains, v4.NatRules, v4.FilterRules-1, v4.Chains-1)
	}
	text := string(v6.Data)
	for _, bad := range []string{"KUBE-FIREWALL", "127.0.0.0/8", "198.18.", "198.19."} {
		if strings.Contains(text, bad) {
			t.Errorf("IPv6 rules contain %q:\n%s", bad, text)
		}
	}
	ep := "[" + scenarios.Twin6(p, netip.MustParseAddr("198.19.0.1")).String() + "]:8080"
	sep := EndpointChainName("pb/single:p80", "tcp", ep)
	for _, want := range []string{
		"-j DNAT --to-destination " + ep,
		"-d " + svcs6[0].ClusterIP.String() + " --dport 80",
		"! -s " + cfg6.ClusterCIDR.String() + " -j KUBE-MARK-MASQ",
		":" + sep + " - [0:0]",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("IPv6 rules lack %q:\n%s", want, text)
		}
	}
	// The same service port hashes to the same KUBE-SVC chain in both
	// families (kube-proxy's names do not carry the family).
	svc := ServiceChainName("pb/single:p80", "tcp")
	if !strings.Contains(text, ":"+svc+" ") || !strings.Contains(string(v4.Data), ":"+svc+" ") {
		t.Errorf("KUBE-SVC chain %s not in both families' rules", svc)
	}
	if _, err := Render(cfg6, fixture()); err == nil || !strings.Contains(err.Error(), "want IPv6") {
		t.Errorf("IPv4 services in an IPv6 proxier: %v, want a refusal naming IPv6", err)
	}
	if _, err := Render(testCfg, svcs6); err == nil || !strings.Contains(err.Error(), "want IPv4") {
		t.Errorf("IPv6 services in an IPv4 proxier: %v, want a refusal naming IPv4", err)
	}
	bad := testCfg
	bad.ClusterCIDR = cfg6.ClusterCIDR
	if err := bad.Validate(); err == nil {
		t.Errorf("an IPv6 clusterCIDR in an IPv4 proxier validated")
	}
}

// TestEndpointOrderIPv6: IPv6 endpoints follow kube-proxy's "[ip]:port"
// text order.
func TestEndpointOrderIPv6(t *testing.T) {
	mk := func(a string) workload.Endpoint { return workload.NewEndpoint(netip.MustParseAddr(a)) }
	s := workload.Service{Endpoints: []workload.Endpoint{mk("2001:2::c613:9"), mk("2001:2::c613:10"), mk("2001:2::c613:1")}}
	var got []string
	for _, e := range s.KubeProxyOrder() {
		got = append(got, e.IP.String())
	}
	// "[...:10]" < "[...:1]" < "[...:9]": '0' < ']'.
	if want := "2001:2::c613:10 2001:2::c613:1 2001:2::c613:9"; strings.Join(got, " ") != want {
		t.Errorf("order %v, want %s", got, want)
	}
}
