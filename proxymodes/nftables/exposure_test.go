package nftables

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/proxybench/proxybench/workload"
)

// TestRenderExposure: node ports, LoadBalancer and external IPs and the
// traffic policies render as kube-proxy v1.37's nftables proxier writes
// them (rule shapes from its proxier_test.go expectations), and knftables'
// fake takes the whole transaction (no jump to a missing chain, no
// element of a missing map).
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
	}
	cfg := testCfg
	cfg.NodeName = "node-0"
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
		"add rule ip kube-proxy services fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports",
		"add rule ip kube-proxy external-" + h("np") + " jump mark-for-masquerade",
		"add rule ip kube-proxy external-" + h("np") + " goto service-" + h("np"),
		"add element ip kube-proxy service-nodeports { tcp . 30001 comment \"pb/np:p80\" : goto external-" + h("np") + " }",
		"add rule ip kube-proxy external-" + h("lbl") + " ip saddr 198.19.0.0/16 goto service-" + h("lbl") + " comment \"short-circuit pod traffic\"",
		"add rule ip kube-proxy external-" + h("lbl") + " fib saddr type local jump mark-for-masquerade comment \"masquerade local traffic\"",
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
	for _, absent := range []string{"local-" + h("lbr"), "service-" + h("itp"), "external-" + h("lbr") + " goto local"} {
		if strings.Contains(text, absent+" ") || strings.Contains(text, absent+"\n") {
			t.Errorf("unexpected %q", absent)
		}
	}
	if t.Failed() {
		t.Log(text)
	}
}
