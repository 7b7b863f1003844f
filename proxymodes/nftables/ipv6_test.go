package nftables

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// TestRenderIPv6: the IPv6 proxier renders the IPv6 twins of the fixture
// into table "ip6 kube-proxy" as kube-proxy's IPv6 proxier does: the same
// chains, rules and elements as IPv4, "ip6 daddr"/"ip6 saddr" matches,
// ipv6_addr sets and maps, "dnat ip6 to" over the numgen map and
// "[ip]:port" for one endpoint; knftables' fake of family ip6 accepts the
// whole transaction, and addresses of the other family are refused.
func TestRenderIPv6(t *testing.T) {
	p := netip.MustParsePrefix(scenarios.DefaultIPv6Prefix)
	cfg4 := testCfg
	cfg4.ServiceCIDR = netip.MustParsePrefix("198.18.0.0/16")
	cfg6 := Config{IPv6: true, ClusterCIDR: scenarios.TwinPrefix6(p, cfg4.ClusterCIDR), ServiceCIDR: scenarios.TwinPrefix6(p, cfg4.ServiceCIDR)}
	if cfg6.TableFamily() != knftables.IPv6Family || cfg4.TableFamily() != knftables.IPv4Family {
		t.Fatalf("table families %s, %s", cfg4.TableFamily(), cfg6.TableFamily())
	}
	svcs6 := workload.Twin6(p, fixture())
	rs4, err := Render(cfg4, fixture())
	if err != nil {
		t.Fatal(err)
	}
	rs6, err := Render(cfg6, svcs6)
	if err != nil {
		t.Fatal(err)
	}
	if rs6.Counts() != rs4.Counts() {
		t.Errorf("IPv6 counts %+v, want IPv4's %+v", rs6.Counts(), rs4.Counts())
	}
	fake := knftables.NewFake(knftables.IPv6Family, Table)
	tx := fake.NewTransaction()
	rs6.Full(tx)
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatalf("the ip6 fake rejects the full sync: %v", err)
	}
	dump := fake.Dump()
	for _, bad := range []string{" ip daddr", " ip saddr", "ipv4_addr", "198.18.", "198.19.", "dnat ip to"} {
		if strings.Contains(dump, bad) {
			t.Errorf("IPv6 table holds %q:\n%s", bad, dump)
		}
	}
	one := "[" + scenarios.Twin6(p, netip.MustParseAddr("198.19.0.1")).String() + "]:8080"
	for _, want := range []string{
		"add table ip6 kube-proxy",
		"type ipv6_addr . inet_proto . inet_service : verdict",
		"ip6 daddr @cluster-ips ip6 saddr != " + cfg6.ClusterCIDR.String(),
		"ip6 daddr { " + cfg6.ServiceCIDR.String() + " } drop",
		"meta l4proto tcp dnat to " + one,
		"dnat ip6 to numgen random mod 3 map { 0 : " + scenarios.Twin6(p, netip.MustParseAddr("198.19.0.2")).String() + " . 8080",
	} {
		if !strings.Contains(dump, want) {
			t.Errorf("IPv6 table lacks %q:\n%s", want, dump)
		}
	}
	if _, err := Render(cfg6, fixture()); err == nil || !strings.Contains(err.Error(), "want IPv6") {
		t.Errorf("IPv4 services in an IPv6 proxier: %v, want a refusal naming IPv6", err)
	}
	if _, err := Render(cfg4, svcs6); err == nil || !strings.Contains(err.Error(), "want IPv4") {
		t.Errorf("IPv6 services in an IPv4 proxier: %v, want a refusal naming IPv4", err)
	}
}
