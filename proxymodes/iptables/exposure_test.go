package iptables

import (
	"net/netip"
	"strings"
	"testing"

	iptest "github.com/proxybench/proxybench/proxymodes/iptables/testing"
	"github.com/proxybench/proxybench/workload"
)

// exposedFixture: the Service surface on node-0 (every service has one
// endpoint on node-0 and one on node-1 but where said): a NodePort
// service (externalTrafficPolicy Cluster), a LoadBalancer service with
// Local and a local endpoint and its health check port, the same with no
// local endpoint, a ClusterIP service with an external IP, and a
// ClusterIP service with internalTrafficPolicy Local and no local
// endpoint.
func exposedFixture() []workload.Service {
	ep := func(ip, node string) workload.Endpoint {
		e := workload.NewEndpoint(netip.MustParseAddr(ip))
		e.Node = node
		return e
	}
	port := func(np uint16) []workload.ServicePort {
		return []workload.ServicePort{{Name: "p80", Port: 80, TargetPort: 8080, Protocol: "TCP", NodePort: np}}
	}
	two := func(a, b string) []workload.Endpoint { return []workload.Endpoint{ep(a, "node-0"), ep(b, "node-1")} }
	return []workload.Service{
		{Namespace: "pb", Name: "np", ClusterIP: netip.MustParseAddr("198.18.0.1"), Type: "NodePort", Ports: port(30001),
			Endpoints: two("198.19.0.1", "198.19.0.2")},
		{Namespace: "pb", Name: "lbl", ClusterIP: netip.MustParseAddr("198.18.0.2"), Type: "LoadBalancer", Ports: port(30002),
			LoadBalancerIPs: []netip.Addr{netip.MustParseAddr("198.18.128.1")}, ExternalLocal: true, HealthCheckNodePort: 30100,
			Endpoints: two("198.19.0.3", "198.19.0.4")},
		{Namespace: "pb", Name: "lbr", ClusterIP: netip.MustParseAddr("198.18.0.3"), Type: "LoadBalancer", Ports: port(30003),
			LoadBalancerIPs: []netip.Addr{netip.MustParseAddr("198.18.128.2")}, ExternalLocal: true, HealthCheckNodePort: 30101,
			Endpoints: []workload.Endpoint{ep("198.19.0.5", "node-1")}},
		{Namespace: "pb", Name: "eip", ClusterIP: netip.MustParseAddr("198.18.0.4"), Type: "ClusterIP", Ports: port(0),
			ExternalIPs: []netip.Addr{netip.MustParseAddr("198.18.129.1")}, Endpoints: two("198.19.0.6", "198.19.0.7")},
		{Namespace: "pb", Name: "itp", ClusterIP: netip.MustParseAddr("198.18.0.5"), Type: "ClusterIP", Ports: port(0), InternalLocal: true,
			Endpoints: []workload.Endpoint{ep("198.19.0.8", "node-1")}},
	}
}

// TestRenderExposure: node ports, LoadBalancer and external IPs, the
// traffic policies and the health check port render as kube-proxy
// v1.37's syncProxyRules writes them (rule shapes from its
// proxier_test.go expectations), and the fake kernel takes the result
// (no jump to a chain that is not declared).
func TestRenderExposure(t *testing.T) {
	svcs := exposedFixture()
	cfg := testCfg
	cfg.NodeName = "node-0"
	rs, err := Render(cfg, svcs)
	if err != nil {
		t.Fatal(err)
	}
	text := string(rs.Data)
	ext := func(name string) string {
		return strings.Replace(ServiceChainName("pb/"+name+":p80", "tcp"), "KUBE-SVC-", "KUBE-EXT-", 1)
	}
	svl := func(name string) string {
		return strings.Replace(ServiceChainName("pb/"+name+":p80", "tcp"), "KUBE-SVC-", "KUBE-SVL-", 1)
	}
	svc := func(name string) string { return ServiceChainName("pb/"+name+":p80", "tcp") }
	for _, want := range []string{
		// NodePort, Cluster: the node port jumps to KUBE-EXT, which masquerades.
		"-A KUBE-NODEPORTS -m comment --comment pb/np:p80 -m tcp -p tcp --dport 30001 -j " + ext("np"),
		"-A " + ext("np") + ` -m comment --comment "masquerade traffic for pb/np:p80 external destinations" -j KUBE-MARK-MASQ`,
		"-A " + ext("np") + " -j " + svc("np"),
		// LoadBalancer, Local, a local endpoint: LB IP -> EXT; pods and
		// the node itself short-circuit to KUBE-SVC, the rest to KUBE-SVL.
		`-A KUBE-SERVICES -m comment --comment "pb/lbl:p80 loadbalancer IP" -m tcp -p tcp -d 198.18.128.1 --dport 80 -j ` + ext("lbl"),
		"-A " + ext("lbl") + ` -m comment --comment "pod traffic for pb/lbl:p80 external destinations" -s 198.19.0.0/16 -j ` + svc("lbl"),
		"-A " + ext("lbl") + ` -m comment --comment "masquerade LOCAL traffic for pb/lbl:p80 external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ`,
		"-A " + ext("lbl") + ` -m comment --comment "route LOCAL traffic for pb/lbl:p80 external destinations" -m addrtype --src-type LOCAL -j ` + svc("lbl"),
		"-A " + ext("lbl") + " -j " + svl("lbl"),
		"-A " + svl("lbl") + ` -m comment --comment "pb/lbl:p80 -> 198.19.0.3:8080" -j ` + EndpointChainName("pb/lbl:p80", "tcp", "198.19.0.3:8080"),
		`-A KUBE-NODEPORTS -m comment --comment "pb/lbl:p80 health check node port" -m tcp -p tcp --dport 30100 -j ACCEPT`,
		// LoadBalancer, Local, no local endpoint: external traffic is dropped in filter.
		`-A KUBE-EXTERNAL-SERVICES -m comment --comment "pb/lbr:p80 has no local endpoints" -m tcp -p tcp -d 198.18.128.2 --dport 80 -j DROP`,
		`-A KUBE-EXTERNAL-SERVICES -m comment --comment "pb/lbr:p80 has no local endpoints" -m addrtype --dst-type LOCAL -m tcp -p tcp --dport 30003 -j DROP`,
		// External IP, Cluster.
		`-A KUBE-SERVICES -m comment --comment "pb/eip:p80 external IP" -m tcp -p tcp -d 198.18.129.1 --dport 80 -j ` + ext("eip"),
		// internalTrafficPolicy Local without a local endpoint: DROP.
		`-A KUBE-SERVICES -m comment --comment "pb/itp:p80 has no local endpoints" -m tcp -p tcp -d 198.18.0.5 --dport 80 -j DROP`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("missing rule:\n%s", want)
		}
	}
	for _, absent := range []string{
		"-A " + ext("lbr") + " -j ",                  // no external endpoints: no jump to the policy chain
		":" + svl("lbr") + " ",                       // no local endpoint: no KUBE-SVL
		":" + svc("itp") + " ",                       // itp Local, not exposed: no cluster chain
		"198.18.0.5 --dport 80 -j KUBE-",             // no cluster IP rule in nat for it
		"KUBE-NODEPORTS -m comment --comment pb/eip", // a ClusterIP service has no node port
	} {
		if strings.Contains(text, absent) {
			t.Errorf("unexpected %q in:\n%s", absent, text)
		}
	}
	k := iptest.NewFakeKernel()
	if err := k.Restore(text); err != nil {
		t.Fatalf("the fake kernel refuses the ruleset: %v", err)
	}
	// On node-1 the LB Local service without a node-0 endpoint gets its
	// KUBE-SVL and loses its DROPs.
	cfg.NodeName = "node-1"
	rs1, err := Render(cfg, svcs)
	if err != nil {
		t.Fatal(err)
	}
	if t1 := string(rs1.Data); !strings.Contains(t1, "-A "+ext("lbr")+" -j "+svl("lbr")+"\n") || strings.Contains(t1, "pb/lbr:p80 has no local endpoints") {
		t.Errorf("node-1: want the local policy chain of lbr and no DROP:\n%s", t1)
	}
	// A partial sync writes exposed ports whole: incremental equals full.
	p, err := newPlan(cfg, svcs)
	if err != nil {
		t.Fatal(err)
	}
	all := make([]bool, len(p.ports))
	for i := range all {
		all[i] = true
	}
	if got := string(p.write(nil, all).Data); got != string(rs1.Data) {
		t.Errorf("a partial sync with every port unchanged differs from the full render for exposed ports:\n%s", got)
	}
}
