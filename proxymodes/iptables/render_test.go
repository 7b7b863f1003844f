package iptables

import (
	"bytes"
	"flag"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/workload"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

var testCfg = Config{Backend: BackendLegacy, ClusterCIDR: netip.MustParsePrefix("198.19.0.0/16")}

// fixture: one service with one endpoint and two ports (TCP and UDP), one
// with three ready endpoints and one not ready, one with none.
func fixture() []workload.Service {
	ep := func(ip string, ready bool) workload.Endpoint {
		return workload.Endpoint{IP: netip.MustParseAddr(ip), Ready: ready, Weight: 1}
	}
	return []workload.Service{
		{
			Namespace: "pb", Name: "single", ClusterIP: netip.MustParseAddr("198.18.0.1"),
			Ports: []workload.ServicePort{
				{Name: "p80", Port: 80, TargetPort: 8080, Protocol: "TCP"},
				{Name: "p53", Port: 53, TargetPort: 5353, Protocol: "UDP"},
			},
			Endpoints: []workload.Endpoint{ep("198.19.0.1", true)},
		},
		{
			Namespace: "pb", Name: "triple", ClusterIP: netip.MustParseAddr("198.18.0.2"),
			Ports:     []workload.ServicePort{{Name: "p80", Port: 80, TargetPort: 8080, Protocol: "TCP"}},
			Endpoints: []workload.Endpoint{ep("198.19.0.2", true), ep("198.19.0.3", true), ep("198.19.0.4", false), ep("198.19.0.5", true)},
		},
		{
			Namespace: "pb", Name: "empty", ClusterIP: netip.MustParseAddr("198.18.0.3"),
			Ports: []workload.ServicePort{{Name: "p80", Port: 80, TargetPort: 8080, Protocol: "TCP"}},
		},
	}
}

func TestRenderGolden(t *testing.T) {
	rs, err := Render(testCfg, fixture())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "render.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, rs.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(rs.Data, want) {
		t.Errorf("Render output differs from %s (go test -update rewrites it):\n--- got\n%s", path, rs.Data)
	}
	// single: 2 ports x (1 + 1 masq + 3x1); triple: 1 + 1 + 3x3; + 5 fixed.
	if rs.NatRules != 2*5+11+5 || rs.FilterRules != 4+1 || rs.Chains != 10+2*2+4 {
		t.Errorf("counts nat=%d filter=%d chains=%d, want 26, 5, 18", rs.NatRules, rs.FilterRules, rs.Chains)
	}
}

// TestEndpointOrder: KUBE-SVC's statistic rules follow kube-proxy's
// endpoint order, the "ip:port" text sorted (198.19.1.10 before
// 198.19.1.9), as kube-proxy v1.37.2 writes them (dump --diff of
// 1k-services showed it).
func TestEndpointOrder(t *testing.T) {
	svcs := genServices(1, 3)
	svcs[0].Endpoints = []workload.Endpoint{
		workload.NewEndpoint(netip.MustParseAddr("198.19.1.9")),
		workload.NewEndpoint(netip.MustParseAddr("198.19.1.10")),
		workload.NewEndpoint(netip.MustParseAddr("198.19.1.11")),
	}
	rs, err := Render(testCfg, svcs)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, l := range strings.Split(string(rs.Data), "\n") {
		if strings.HasPrefix(l, "-A KUBE-SVC-") && strings.Contains(l, "-j KUBE-SEP-") {
			for _, ip := range []string{"198.19.1.9", "198.19.1.10", "198.19.1.11"} {
				if strings.Contains(l, ip+":") {
					order = append(order, ip)
				}
			}
		}
	}
	if want := []string{"198.19.1.10", "198.19.1.11", "198.19.1.9"}; strings.Join(order, " ") != strings.Join(want, " ") {
		t.Errorf("KUBE-SVC jumps to %v, want %v\n%s", order, want, rs.Data)
	}
}

func TestChainNamesMatchKubeProxy(t *testing.T) {
	// Values computed with kube-proxy's portProtoHash and
	// servicePortEndpointChainName (sha256, base32, 16 characters).
	for _, tc := range []struct{ got, want string }{
		{ServiceChainName("ns1/svc1:p80", "tcp"), "KUBE-SVC-XPGD46QRK7WJZT7O"},
		{EndpointChainName("ns1/svc1:p80", "tcp", "10.180.0.1:80"), "KUBE-SEP-SXIVWICOYRO3J4NJ"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}
}

// natRulesFormula is the number of nat rules for services x endpoints
// (one port each): KUBE-SERVICES jump, masquerade rule, one rule per
// endpoint in KUBE-SVC, two per KUBE-SEP; plus the nodeports rule,
// KUBE-MARK-MASQ and three KUBE-POSTROUTING rules.
func natRulesFormula(services, endpoints int) int {
	if endpoints == 0 {
		return 5
	}
	return services*(2+3*endpoints) + 5
}

// TestNumberGeneratedRules pins the rule counts like kube-proxy's
// number_generated_rules_test.go: 10k services x 3 endpoints is 110,005
// nat rules.
func TestNumberGeneratedRules(t *testing.T) {
	for _, tc := range []struct{ services, endpoints, nat, filter int }{
		{10000, 3, 110005, 4},    // kube-proxy's figure
		{1, 1, 10, 4},            // smallest
		{1000, 1, 5005, 4},       // one endpoint: no statistic
		{100, 10, 3205, 4},       // many endpoints
		{2000, 0, 5, 2000 + 4},   // no endpoints: REJECT in filter
		{5000, 2, 40005, 4},      // large cluster mode
		{500, 2, 4005, 4},        // below the large cluster threshold
		{10, 101, 10*305 + 5, 4}, // probabilities beyond the precomputed ones
	} {
		rs, err := Render(testCfg, genServices(tc.services, tc.endpoints))
		if err != nil {
			t.Fatal(err)
		}
		if rs.NatRules != tc.nat || rs.NatRules != natRulesFormula(tc.services, tc.endpoints) {
			t.Errorf("%d services x %d endpoints: %d nat rules, want %d (formula %d)", tc.services, tc.endpoints, rs.NatRules, tc.nat, natRulesFormula(tc.services, tc.endpoints))
		}
		if rs.FilterRules != tc.filter {
			t.Errorf("%d services x %d endpoints: %d filter rules, want %d", tc.services, tc.endpoints, rs.FilterRules, tc.filter)
		}
		// The counts agree with the text.
		tables := parseRestore(t, rs.Data)
		if tables["nat"].nrules != rs.NatRules || tables["filter"].nrules != rs.FilterRules {
			t.Errorf("%d x %d: text holds %d nat and %d filter rules, Ruleset says %d and %d", tc.services, tc.endpoints, tables["nat"].nrules, tables["filter"].nrules, rs.NatRules, rs.FilterRules)
		}
		if got := len(tables["nat"].declared) + len(tables["filter"].declared); got != rs.Chains {
			t.Errorf("%d x %d: %d chains declared, Ruleset says %d", tc.services, tc.endpoints, got, rs.Chains)
		}
		// Large cluster mode (over 1000 endpoints) drops per-endpoint comments.
		large := tc.services*tc.endpoints > largeClusterEndpointsThreshold
		if hasSEPComment := bytes.Contains(rs.Data, []byte(" -> ")); tc.endpoints > 0 && hasSEPComment == large {
			t.Errorf("%d x %d: endpoint comments present=%v, want %v", tc.services, tc.endpoints, hasSEPComment, !large)
		}
	}
	// Without a ClusterCIDR the masquerade rule goes away.
	rs, err := Render(Config{Backend: BackendNft}, genServices(10, 3))
	if err != nil {
		t.Fatal(err)
	}
	if rs.NatRules != 10*(1+3*3)+5 {
		t.Errorf("no clusterCIDR: %d nat rules, want %d", rs.NatRules, 10*(1+3*3)+5)
	}
}

func TestRenderErrors(t *testing.T) {
	for name, mutate := range map[string]func(s []workload.Service, c *Config){
		"ipv6 clusterIP": func(s []workload.Service, c *Config) { s[0].ClusterIP = netip.MustParseAddr("fd00::1") },
		"bad protocol": func(s []workload.Service, c *Config) {
			s[1].Ports = []workload.ServicePort{{Name: "x", Port: 1, Protocol: "ICMP"}}
		},
		"duplicate endpoint": func(s []workload.Service, c *Config) { s[1].Endpoints[1].IP = s[1].Endpoints[0].IP },
		"ipv6 clusterCIDR":   func(s []workload.Service, c *Config) { c.ClusterCIDR = netip.MustParsePrefix("fd00::/64") },
	} {
		s, c := fixture(), testCfg
		mutate(s, &c)
		if _, err := Render(c, s); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
	if err := (Config{Backend: "ebpf"}).Validate(); err == nil {
		t.Errorf("backend ebpf: want an error")
	}
}

// TestPacketTrace traces a packet to every ClusterIP:port through the
// rendered nat table: it reaches exactly the service's ready endpoints,
// each with probability 1/n, after k+1 KUBE-SERVICES rules for service k.
func TestPacketTrace(t *testing.T) {
	for _, svcs := range [][]workload.Service{fixture(), genServices(50, 7), genServices(400, 3)} {
		rs, err := Render(testCfg, svcs)
		if err != nil {
			t.Fatal(err)
		}
		nat := parseRestore(t, rs.Data)["nat"]
		k := 0 // position in KUBE-SERVICES
		for _, s := range svcs {
			for _, sp := range s.Ports {
				var want []string
				for _, e := range s.Endpoints {
					if e.Ready {
						want = append(want, e.IP.String()+":"+strconv.Itoa(int(sp.TargetPort)))
					}
				}
				proto := strings.ToLower(sp.Protocol)
				// From inside the cluster CIDR (a client pod).
				tr := traceNAT(t, nat, packet{src: netip.MustParseAddr("198.19.255.250"), dst: s.ClusterIP, proto: proto, dport: sp.Port})
				if len(want) == 0 {
					if len(tr.dnat) != 0 || math.Abs(tr.through-1) > 1e-9 {
						t.Errorf("%s: no endpoints but traced to %v", s.PortName(sp), tr.dnat)
					}
					continue
				}
				if len(tr.dnat) != len(want) {
					t.Errorf("%s: reached %v, want %v", s.PortName(sp), tr.dnat, want)
				}
				for _, w := range want {
					if p := tr.dnat[w]; math.Abs(p-1/float64(len(want))) > 1e-9 {
						t.Errorf("%s: endpoint %s reached with probability %.12f, want 1/%d", s.PortName(sp), w, p, len(want))
					}
				}
				if tr.walked != k+1 {
					t.Errorf("%s: %d KUBE-SERVICES rules walked, want %d", s.PortName(sp), tr.walked, k+1)
				}
				if tr.masq > 1e-9 {
					t.Errorf("%s: in-cluster source marked for masquerade (%.3f)", s.PortName(sp), tr.masq)
				}
				// From outside the cluster CIDR: always masqueraded.
				tr = traceNAT(t, nat, packet{src: netip.MustParseAddr("10.1.2.3"), dst: s.ClusterIP, proto: proto, dport: sp.Port})
				if math.Abs(tr.masq-1) > 1e-9 {
					t.Errorf("%s: off-cluster source masqueraded with probability %.3f, want 1", s.PortName(sp), tr.masq)
				}
				k++
			}
		}
		// Wrong port or address: nothing happens.
		tr := traceNAT(t, nat, packet{src: netip.MustParseAddr("10.1.2.3"), dst: svcs[0].ClusterIP, proto: "tcp", dport: 1})
		if len(tr.dnat) != 0 {
			t.Errorf("port 1: traced to %v", tr.dnat)
		}
	}
}
