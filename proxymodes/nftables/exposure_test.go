package nftables

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/proxybench/proxybench/workload"
)

// TestRenderExposure: node ports, LoadBalancer and external IPs and the
// traffic policies render as kube-proxy v1.37's nftables proxier writes
// them (rule shapes from its proxier_test.go expectations, then read back
// from kube-proxy v1.37.2 by TestKernelFidelity): node ports on the
// node's IPv4 address only, the masquerade mark set in the external
// chain, hairpin elements for the node's own endpoints, a NodePort
// without endpoints rejected at its node port; and knftables' fake takes
// the whole transaction (no jump to a missing chain, no element of a
// missing map).
func TestRenderExposure(t *testing.T) {
	ep := func(ip, node string) workload.Endpoint {
		e := workload.NewEndpoint(netip.MustParseAddr(ip))
		e.Node = node
		return e
	}
	port := func(np uint16) []workload.ServicePort {
		return []workload.ServicePort{{Name: "p80", Port: 80, TargetPort: 8080, Protocol: "TCP", NodePort: np}}
	}
	svcs := []workload.Service{
		{Namespace: "pb", Name: "np", ClusterIP: netip.MustParseAddr("198.18.0.1"), Type: "NodePort", Ports: port(30001),
			Endpoints: []workload.Endpoint{ep("198.19.0.1", "node-0"), ep("198.19.0.2", "node-1")}},
		{Namespace: "pb", Name: "lbl", ClusterIP: netip.MustParseAddr("198.18.0.2"), Type: "LoadBalancer", Ports: port(30002), ExternalLocal: true,
			LoadBalancerIPs: []netip.Addr{netip.MustParseAddr("198.18.128.1")}, Endpoints: []workload.Endpoint{ep("198.19.0.3", "node-0")}},
		{Namespace: "pb", Name: "lbr", ClusterIP: netip.MustParseAddr("198.18.0.3"), Type: "LoadBalancer", Ports: port(30003), ExternalLocal: true,
			LoadBalancerIPs: []netip.Addr{netip.MustParseAddr("198.18.128.2")}, Endpoints: []workload.Endpoint{ep("198.19.0.4", "node-1")}},
		{Namespace: "pb", Name: "itp", ClusterIP: netip.MustParseAddr("198.18.0.4"), Ports: port(0), InternalLocal: true,
			Endpoints: []workload.Endpoint{ep("198.19.0.5", "node-1")}},
		{Namespace: "pb", Name: "npe", ClusterIP: netip.MustParseAddr("198.18.0.5"), Type: "NodePort", Ports: port(30005)},
	}
	cfg := testCfg
	cfg.NodeName = "node-0"
	cfg.NodeIPs = []netip.Addr{netip.MustParseAddr("198.19.255.1"), netip.MustParseAddr("2001:2::c613:ff01")}
	r, err := Render(cfg, svcs)
	if err != nil {
		t.Fatal(err)
	}
	fake := knftables.NewFake(Family, Table)
	tx := fake.NewTransaction()
	r.Full(tx)
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatalf("knftables' fake refuses the ruleset: %v", err)
	}
	text := fake.Dump()
	h := func(name string) string {
		return strings.TrimPrefix(ServiceChainName("pb", name, "tcp", "p80"), prefixService)
	}
	for _, want := range []string{
		"add rule ip kube-proxy services ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports",
		"add rule ip kube-proxy nodeport-endpoints-check ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports",
		"add element ip kube-proxy nodeport-ips { 198.19.255.1 }",
		"add rule ip kube-proxy filter-prerouting-pre-dnat ct state new jump firewall-check",
		"add rule ip kube-proxy filter-output-pre-dnat ct state new jump firewall-check",
		"add rule ip kube-proxy firewall-check ip daddr . meta l4proto . th dport vmap @firewall-ips",
		"add rule ip kube-proxy external-" + h("np") + " meta mark set meta mark | 0x4000 comment \"masquerade\"",
		"add rule ip kube-proxy external-" + h("np") + " goto service-" + h("np"),
		"add element ip kube-proxy service-nodeports { tcp . 30001 : goto external-" + h("np") + " }",
		"add element ip kube-proxy hairpin-connections { 198.19.0.1 . 198.19.0.1 . tcp . 8080 }",
		"add element ip kube-proxy hairpin-connections { 198.19.0.3 . 198.19.0.3 . tcp . 8080 }",
		"add element ip kube-proxy no-endpoint-nodeports { tcp . 30005 comment \"pb/npe:p80\" : goto reject-chain }",
		"add element ip kube-proxy no-endpoint-services { 198.18.0.5 . tcp . 80 comment \"pb/npe:p80\" : goto reject-chain }",
		"add rule ip kube-proxy external-" + h("lbl") + " ip saddr 198.19.0.0/16 goto service-" + h("lbl") + " comment \"short-circuit pod traffic\"",
		"add rule ip kube-proxy external-" + h("lbl") + " fib saddr type local meta mark set meta mark | 0x4000 comment \"masquerade local traffic\"",
		"add rule ip kube-proxy external-" + h("lbl") + " goto local-" + h("lbl"),
		"add element ip kube-proxy service-ips { 198.18.128.1 . tcp . 80 : goto external-" + h("lbl") + " }",
		"add element ip kube-proxy no-endpoint-services { 198.18.128.2 . tcp . 80 comment \"pb/lbr:p80\" : drop }",
		"add element ip kube-proxy no-endpoint-nodeports { tcp . 30003 comment \"pb/lbr:p80\" : drop }",
		"add element ip kube-proxy no-endpoint-services { 198.18.0.4 . tcp . 80 comment \"pb/itp:p80\" : drop }",
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("missing:\n%s", want)
		}
	}
	for _, absent := range []string{"local-" + h("lbr"), "service-" + h("itp"), "external-" + h("lbr") + " goto local", "mark-for-masquerade",
		"2001:2::c613:ff01", "198.19.0.2 . 198.19.0.2", "external-" + h("npe")} {
		if strings.Contains(text, absent+" ") || strings.Contains(text, absent+"\n") {
			t.Errorf("unexpected %q", absent)
		}
	}
	if t.Failed() {
		t.Log(text)
	}
}

// TestRenderExposureAffinity: with ClientIP affinity an exposed port's
// service and local chains check and pick endpoint chains, the local
// endpoint's chain and affinity set rendered once for both.
func TestRenderExposureAffinity(t *testing.T) {
	ep := func(ip, node string) workload.Endpoint {
		e := workload.NewEndpoint(netip.MustParseAddr(ip))
		e.Node = node
		return e
	}
	svc := workload.Service{Namespace: "pb", Name: "npl", ClusterIP: netip.MustParseAddr("198.18.0.1"), Type: "NodePort", ExternalLocal: true,
		Ports:     []workload.ServicePort{{Name: "p80", Port: 80, TargetPort: 8080, Protocol: "TCP", NodePort: 30001}},
		Endpoints: []workload.Endpoint{ep("198.19.0.1", "node-0"), ep("198.19.0.2", "node-1")}}
	cfg := testCfg
	cfg.NodeName, cfg.AffinityTimeout = "node-0", 600*time.Second
	r, err := Render(cfg, []workload.Service{svc})
	if err != nil {
		t.Fatal(err)
	}
	fake := knftables.NewFake(Family, Table)
	tx := fake.NewTransaction()
	r.Full(tx)
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatalf("knftables' fake refuses the ruleset: %v", err)
	}
	hash := strings.TrimPrefix(ServiceChainName("pb", "npl", "tcp", "p80"), prefixService)
	local := EndpointChainName("pb", "npl", "tcp", "p80", netip.MustParseAddr("198.19.0.1"), 8080)
	remote := EndpointChainName("pb", "npl", "tcp", "p80", netip.MustParseAddr("198.19.0.2"), 8080)
	rules := func(c string) []string {
		var out []string
		for _, rl := range fake.Table.Chains[c].Rules {
			out = append(out, rl.Rule)
		}
		return out
	}
	wantSvc := []string{"ip saddr @" + affinitySetName(local) + " goto " + local, "ip saddr @" + affinitySetName(remote) + " goto " + remote,
		"numgen random mod 2 vmap { 0 : goto " + local + " , 1 : goto " + remote + " }"}
	wantLocal := []string{"ip saddr @" + affinitySetName(local) + " goto " + local, "numgen random mod 1 vmap { 0 : goto " + local + " }"}
	if got := rules(prefixService + hash); !slices.Equal(got, wantSvc) {
		t.Errorf("service chain %q, want %q", got, wantSvc)
	}
	if got := rules(prefixLocal + hash); !slices.Equal(got, wantLocal) {
		t.Errorf("local chain %q, want %q", got, wantLocal)
	}
	if n := strings.Count(strings.Join(r.affinity, "\n"), affinitySetName(local)); n != 1 {
		t.Errorf("the local endpoint's affinity set is declared %d times, want once", n)
	}
}
