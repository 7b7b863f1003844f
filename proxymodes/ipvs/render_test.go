package ipvs

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/workload"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

var testCfg = Config{Scheduler: "rr", ClusterCIDR: netip.MustParsePrefix("198.19.0.0/16")}

// fixture: one service with one endpoint and two ports (TCP and UDP), one
// with three ready endpoints (one weighted 3, one weight 0) and one not
// ready, one with none.
func fixture() []workload.Service {
	ep := func(ip string, ready bool, w int) workload.Endpoint {
		return workload.Endpoint{IP: netip.MustParseAddr(ip), Ready: ready, Weight: w}
	}
	return []workload.Service{
		{
			Namespace: "pb", Name: "single", ClusterIP: netip.MustParseAddr("198.18.0.1"),
			Ports: []workload.ServicePort{
				{Name: "p80", Port: 80, TargetPort: 8080, Protocol: "TCP"},
				{Name: "p53", Port: 53, TargetPort: 5353, Protocol: "UDP"},
			},
			Endpoints: []workload.Endpoint{ep("198.19.0.1", true, 1)},
		},
		{
			Namespace: "pb", Name: "triple", ClusterIP: netip.MustParseAddr("198.18.0.2"),
			Ports:     []workload.ServicePort{{Name: "p80", Port: 80, TargetPort: 8080, Protocol: "TCP"}},
			Endpoints: []workload.Endpoint{ep("198.19.0.2", true, 3), ep("198.19.0.3", true, 0), ep("198.19.0.4", false, 1), ep("198.19.0.5", true, 1)},
		},
		{
			Namespace: "pb", Name: "empty", ClusterIP: netip.MustParseAddr("198.18.0.3"),
			Ports: []workload.ServicePort{{Name: "p80", Port: 80, TargetPort: 8080, Protocol: "TCP"}},
		},
	}
}

// genServices returns n services with eps endpoints each, ClusterIPs from
// 198.18.0.1 and endpoints from 198.19.0.1.
func genServices(n, eps int) []workload.Service {
	out := make([]workload.Service, n)
	pod := netip.MustParseAddr("198.19.0.1")
	vip := netip.MustParseAddr("198.18.0.1")
	for i := range out {
		es := make([]workload.Endpoint, eps)
		for k := range es {
			es[k] = workload.Endpoint{IP: pod, Ready: true, Weight: 1}
			pod = pod.Next()
		}
		out[i] = workload.Service{
			Namespace: "pb", Name: fmt.Sprintf("svc-%05d", i), ClusterIP: vip,
			Ports:     []workload.ServicePort{{Name: "p80", Port: 80, TargetPort: 8080, Protocol: "TCP"}},
			Endpoints: es,
		}
		vip = vip.Next()
	}
	return out
}

func TestRenderGolden(t *testing.T) {
	cfg := testCfg
	cfg.Scheduler = "wrr"
	rs, err := Render(cfg, fixture())
	if err != nil {
		t.Fatal(err)
	}
	got := rs.Dump()
	path := filepath.Join("testdata", "render.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestRenderGolden -update)", err)
	}
	if got != string(want) {
		t.Errorf("render differs from %s (-update to accept):\n%s", path, got)
	}
	again, _ := Render(cfg, fixture())
	if again.Dump() != got {
		t.Error("Render is not deterministic")
	}
}

// exposedFixture: on node-0 with node addresses 198.19.255.1 and
// 198.19.1.254, a NodePort (Cluster) with a local and a remote endpoint,
// a LoadBalancer (Local, health check node port) with the same, one
// (Local) whose only endpoint is remote, an external IP (Cluster) whose
// address is also a node address, and an internalTrafficPolicy Local
// ClusterIP without a local endpoint.
func exposedFixture() (Config, []workload.Service) {
	ep := func(ip, node string) workload.Endpoint {
		e := workload.NewEndpoint(netip.MustParseAddr(ip))
		e.Node = node
		return e
	}
	port := func(np uint16) []workload.ServicePort {
		return []workload.ServicePort{{Name: "p80", Port: 80, TargetPort: 8080, Protocol: "TCP", NodePort: np}}
	}
	ip := netip.MustParseAddr
	cfg := testCfg
	cfg.NodeName = "node-0"
	cfg.NodeIPs = []netip.Addr{ip("198.19.255.1"), ip("198.19.1.254"), ip("127.0.0.1")}
	return cfg, []workload.Service{
		{Namespace: "pb", Name: "np", ClusterIP: ip("198.18.0.1"), Type: "NodePort", Ports: port(30001),
			Endpoints: []workload.Endpoint{ep("198.19.0.1", "node-0"), ep("198.19.0.2", "node-1")}},
		{Namespace: "pb", Name: "lbl", ClusterIP: ip("198.18.0.2"), Type: "LoadBalancer", Ports: port(30002), ExternalLocal: true, HealthCheckNodePort: 30100,
			LoadBalancerIPs: []netip.Addr{ip("198.18.128.1")}, Endpoints: []workload.Endpoint{ep("198.19.0.3", "node-0"), ep("198.19.0.4", "node-1")}},
		{Namespace: "pb", Name: "lbr", ClusterIP: ip("198.18.0.3"), Type: "LoadBalancer", Ports: port(30003), ExternalLocal: true, HealthCheckNodePort: 30101,
			LoadBalancerIPs: []netip.Addr{ip("198.18.128.2")}, Endpoints: []workload.Endpoint{ep("198.19.0.5", "node-1")}},
		{Namespace: "pb", Name: "ext", ClusterIP: ip("198.18.0.4"), Ports: port(0), ExternalIPs: []netip.Addr{ip("198.19.1.254")},
			Endpoints: []workload.Endpoint{ep("198.19.0.6", "node-1")}},
		{Namespace: "pb", Name: "itp", ClusterIP: ip("198.18.0.5"), Ports: port(0), InternalLocal: true,
			Endpoints: []workload.Endpoint{ep("198.19.0.7", "node-1")}},
	}
}

// TestRenderExposure pins builtin's IPVS rendering of the Service surface
// (testdata/exposure.golden) and checks what kube-proxy v1.37's
// syncProxyRules decides: which virtual servers exist and which real
// servers each gets by policy, what kube-ipvs0 binds, and which sets
// (and so which iptables rules) have members.
func TestRenderExposure(t *testing.T) {
	cfg, svcs := exposedFixture()
	rs, err := Render(cfg, svcs)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "exposure.golden", rs.Dump())
	reals := map[string][]string{}
	for _, v := range rs.Virtual {
		var r []string
		for _, x := range v.Reals {
			r = append(r, x.Address.String())
		}
		reals[v.Key()] = r
	}
	for _, c := range []struct {
		vs   string
		want []string // nil: a virtual server without real servers
	}{
		{"TCP/198.18.0.1:80", []string{"198.19.0.1", "198.19.0.2"}},
		{"TCP/198.19.1.254:30001", []string{"198.19.0.1", "198.19.0.2"}},
		{"TCP/198.19.255.1:30001", []string{"198.19.0.1", "198.19.0.2"}},
		{"TCP/198.18.0.2:80", []string{"198.19.0.3", "198.19.0.4"}}, // the ClusterIP keeps the Cluster policy
		{"TCP/198.18.128.1:80", []string{"198.19.0.3"}},             // Local: the local endpoint
		{"TCP/198.19.255.1:30002", []string{"198.19.0.3"}},
		{"TCP/198.18.128.2:80", []string{"198.19.0.5"}}, // Local without a local endpoint: every endpoint (kubernetes#97081)
		{"TCP/198.19.1.254:80", []string{"198.19.0.6"}},
		{"TCP/198.18.0.5:80", nil}, // internalTrafficPolicy Local without a local endpoint: none
	} {
		got, ok := reals[c.vs]
		if !ok || !slices.Equal(got, c.want) {
			t.Errorf("%s: real servers %v (exists %v), want %v", c.vs, got, ok, c.want)
		}
	}
	if _, ok := reals["TCP/127.0.0.1:30001"]; ok {
		t.Error("a node port on 127.0.0.1: loopback is not a node address")
	}
	if slices.Contains(rs.Addresses, netip.MustParseAddr("198.19.1.254")) {
		t.Error("the external IP that is a node address is bound to kube-ipvs0")
	}
	for set, want := range map[string][]string{
		setLoadBalancer:        {"198.18.128.1,tcp:80", "198.18.128.2,tcp:80"},
		setLoadBalancerLocal:   {"198.18.128.1,tcp:80", "198.18.128.2,tcp:80"},
		setNodePortTCP:         {"30001", "30002", "30003"},
		setNodePortLocalTCP:    {"30002", "30003"},
		setExternalIP:          {"198.19.1.254,tcp:80"},
		setHealthCheckNodePort: {"30100", "30101"},
		setLoopBack:            {"198.19.0.1,tcp:8080,198.19.0.1", "198.19.0.3,tcp:8080,198.19.0.3"},
		setIPVSIPs:             {"198.18.0.1", "198.18.0.2", "198.18.128.1", "198.18.0.3", "198.18.128.2", "198.18.0.4", "198.18.0.5"},
	} {
		if got := rs.Sets[set]; !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", set, got, want)
		}
	}
	// Without node addresses no node port is served, and kube-proxy skips
	// the health check node port with it.
	cfg.NodeIPs = nil
	rs, err = Render(cfg, svcs)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rs.Sets[setNodePortTCP]) + len(rs.Sets[setHealthCheckNodePort]); n != 0 {
		t.Errorf("without node addresses: %d node port and health check members, want 0", n)
	}
}

// golden compares got with testdata/name (-update rewrites it).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("render differs from %s (-update to accept):\n%s", path, got)
	}
}

// TestRenderCounts pins the object counts for services x endpoints.
func TestRenderCounts(t *testing.T) {
	for _, tc := range []struct{ n, eps int }{{1, 1}, {100, 3}, {1000, 0}, {2000, 5}} {
		rs, err := Render(testCfg, genServices(tc.n, tc.eps))
		if err != nil {
			t.Fatal(err)
		}
		// 9 nat rules (KUBE-SERVICES 4, KUBE-POSTROUTING 3, KUBE-MARK-MASQ
		// 1, KUBE-LOAD-BALANCER 1) and 10 filter rules (KUBE-IPVS-FILTER
		// 6, KUBE-FORWARD 2, KUBE-NODE-PORT 1, KUBE-SOURCE-RANGES-FIREWALL
		// 1) whatever the ClusterIP services (kube-proxy v1.37's layout).
		if len(rs.Virtual) != tc.n || rs.RealServers != tc.n*tc.eps || len(rs.Addresses) != tc.n || len(rs.Sets[ClusterIPSet]) != tc.n ||
			len(rs.Sets[setIPVSIPs]) != tc.n || rs.Members() != 2*tc.n || rs.IPTablesRules != 19 {
			t.Errorf("%d x %d: %d virtual, %d real, %d addresses, %d set members (%d in %s), %d iptables rules",
				tc.n, tc.eps, len(rs.Virtual), rs.RealServers, len(rs.Addresses), rs.Members(), len(rs.Sets[ClusterIPSet]), ClusterIPSet, rs.IPTablesRules)
		}
	}
}

func TestRenderPersistence(t *testing.T) {
	cfg := testCfg
	cfg.SessionAffinity, cfg.AffinityTimeout = true, 3*time.Hour
	rs, err := Render(cfg, fixture())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rs.Virtual {
		if !v.Persistent || v.Timeout != 10800 {
			t.Errorf("%s: persistent %v timeout %d, want true 10800", v.Key(), v.Persistent, v.Timeout)
		}
	}
}

// TestRenderErrors: each row is one bad input and a fragment of its error.
func TestRenderErrors(t *testing.T) {
	svc := func(mut func(*workload.Service)) []workload.Service {
		s := fixture()
		mut(&s[0])
		return s
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		svcs []workload.Service
		want string
	}{
		{"unknown scheduler", Config{Scheduler: "fo2"}, fixture(), `scheduler "fo2"`},
		{"IPv6 cluster CIDR", Config{ClusterCIDR: netip.MustParsePrefix("fd00::/64")}, fixture(), "clusterCIDR"},
		{"affinity timeout 0", Config{SessionAffinity: true}, fixture(), "session affinity timeout"},
		{"affinity timeout fraction", Config{SessionAffinity: true, AffinityTimeout: 1500 * time.Millisecond}, fixture(), "whole seconds"},
		{"SCTP", testCfg, svc(func(s *workload.Service) { s.Ports[0].Protocol = "SCTP" }), `protocol "SCTP"`},
		{"IPv6 ClusterIP", testCfg, svc(func(s *workload.Service) { s.ClusterIP = netip.MustParseAddr("fd00::1") }), "want IPv4"},
		{"IPv4 ClusterIP on the IPv6 proxier", testCfg6, svc(func(s *workload.Service) {}), "want IPv6"},
		{"IPv6 endpoint", testCfg, svc(func(s *workload.Service) { s.Endpoints[0].IP = netip.MustParseAddr("fd00::1") }), "want IPv4"},
		{"duplicate port", testCfg, svc(func(s *workload.Service) { s.Ports[1] = s.Ports[0] }), "served twice"},
	} {
		_, err := Render(tc.cfg, tc.svcs)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}

func TestKernelModules(t *testing.T) {
	m := KernelModules("mh")
	for _, want := range []string{"ip_vs", "ip_vs_mh", "dummy", "ip_set_hash_ipport", "xt_set", "xt_MASQUERADE", "nf_nat"} {
		found := false
		for _, x := range m {
			found = found || x == want
		}
		if !found {
			t.Errorf("KernelModules(mh) = %v lacks %s", m, want)
		}
	}
	if all := KernelModules(""); len(all) != len(baseModules)+len(Schedulers) {
		t.Errorf("KernelModules(\"\") = %v", all)
	}
}

func BenchmarkRender(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		svcs := genServices(n, 3)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Render(testCfg, svcs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestAdoptMaxElem: of `ipset list -t` output, a big set kube-proxy
// created (maxelem 65536) that holds the members is adopted with its
// maxelem, one too small for them is reported, builtin's own maxelem and
// the sets outside bigSets are left alone; createLine writes the adopted
// maxelem.
func TestAdoptMaxElem(t *testing.T) {
	list := "Name: KUBE-CLUSTER-IP\nType: hash:ip,port\nRevision: 6\nHeader: family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x1\nSize in memory: 200\nReferences: 2\nNumber of entries: 0\n\n" +
		"Name: KUBE-IPVS-IPS\nType: hash:ip\nHeader: family inet hashsize 1024 maxelem 2 bucketsize 12\n\n" +
		"Name: KUBE-LOOP-BACK\nType: hash:ip,port,ip\nHeader: family inet hashsize 1024 maxelem 8\n\n" +
		fmt.Sprintf("Name: OTHER\nHeader: family inet hashsize 1024 maxelem %d\n", ipsetMaxElem)
	members := map[string][]string{ClusterIPSet: {"198.18.0.1,tcp:80"}, setIPVSIPs: {"198.18.0.1", "198.18.0.2", "198.18.0.3"}, setLoopBack: make([]string, 9)}
	adopted, small := adoptMaxElem(testCfg, list, members)
	if len(adopted) != 1 || adopted[ClusterIPSet] != 65536 {
		t.Errorf("adopted %v, want KUBE-CLUSTER-IP:65536 only", adopted)
	}
	if len(small) != 1 || small[setIPVSIPs] != 2 {
		t.Errorf("too small %v, want KUBE-IPVS-IPS:2 only", small)
	}
	for _, si := range SetNames {
		if si.Name != ClusterIPSet {
			continue
		}
		if got, want := createLine(testCfg, si, adopted), "create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536"; got != want {
			t.Errorf("createLine adopted = %q, want %q", got, want)
		}
		if got := createLine(testCfg, si, nil); !strings.HasSuffix(got, fmt.Sprintf(" maxelem %d", ipsetMaxElem)) {
			t.Errorf("createLine = %q, want maxelem %d", got, ipsetMaxElem)
		}
	}
}

var testCfg6 = Config{Scheduler: "rr", ClusterCIDR: netip.MustParsePrefix("2001:2::c613:0/112"), IPv6: true}

// TestRenderIPv6: the IPv6 proxier (Config.IPv6) renders the IPv6 twins
// of the fixture as kube-proxy's IPv6 IPVS proxier does: the same
// virtual and real servers over IPv6 addresses, kube-ipvs0's IPv6
// ClusterIPs, members of the KUBE-6-* sets (names cut to 31 characters),
// `family inet6` sets, rules matching the KUBE-6-* sets with the IPv6
// cluster CIDR and ::1 in place of 127.0.0.0/8, and no IPv4 set name.
func TestRenderIPv6(t *testing.T) {
	p := netip.MustParsePrefix("2001:2::/96")
	svcs := workload.Twin6(p, fixture())
	rs, err := Render(testCfg6, svcs)
	if err != nil {
		t.Fatal(err)
	}
	rs4, err := Render(testCfg, fixture())
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Virtual) != len(rs4.Virtual) || rs.RealServers != rs4.RealServers || len(rs.Addresses) != len(rs4.Addresses) {
		t.Fatalf("IPv6: %d virtual, %d real servers, %d addresses; IPv4: %d, %d, %d", len(rs.Virtual), rs.RealServers, len(rs.Addresses), len(rs4.Virtual), rs4.RealServers, len(rs4.Addresses))
	}
	for i, v := range rs.Virtual {
		if !v.Address.Is6() || v.Address != svcs[slices.IndexFunc(svcs, func(s workload.Service) bool { return s.ClusterIP == v.Address })].ClusterIP {
			t.Errorf("virtual server %d on %s, want an IPv6 ClusterIP", i, v.Address)
		}
		for _, r := range v.Reals {
			if !r.Address.Is6() {
				t.Errorf("%s: real server %s, want IPv6", v.Key(), r.Address)
			}
		}
		if s := toService(&v); s.AddressFamily != 10 || s.Netmask != 128 {
			t.Errorf("%s: family %d netmask %d, want AF_INET6 (10) and 128", v.Key(), s.AddressFamily, s.Netmask)
		}
	}
	if got := rs.Sets[ClusterIPSet]; len(got) == 0 || !strings.HasPrefix(got[0], "2001:2::c612:1,tcp:80") {
		t.Errorf("KUBE-CLUSTER-IP members %v, want the IPv6 ClusterIP,proto:port", got)
	}
	for _, c := range []struct{ in, want string }{
		{ClusterIPSet, "KUBE-6-CLUSTER-IP"},
		{"KUBE-LOAD-BALANCER-SOURCE-CIDR", "KUBE-6-LOAD-BALANCER-SOURCE-CID"},
	} {
		if got := testCfg6.SetName(c.in); got != c.want {
			t.Errorf("SetName(%s) = %s, want %s", c.in, got, c.want)
		}
		if got := testCfg.SetName(c.in); got != c.in {
			t.Errorf("IPv4 SetName(%s) = %s", c.in, got)
		}
	}
	for _, si := range SetNames {
		if si.Name == ClusterIPSet {
			if got, want := createLine(testCfg6, si, nil), fmt.Sprintf("create KUBE-6-CLUSTER-IP hash:ip,port family inet6 hashsize 1024 maxelem %d", ipsetMaxElem); got != want {
				t.Errorf("createLine = %q, want %q", got, want)
			}
		}
	}
	rules := string(rs.IPTables)
	for _, want := range []string{"-A KUBE-SERVICES -s ::1/128 -j RETURN", "--match-set KUBE-6-CLUSTER-IP dst,dst ! -s 2001:2::c613:0/112 -j KUBE-MARK-MASQ", "--match-set KUBE-6-IPVS-IPS dst -j REJECT"} {
		if !strings.Contains(rules, want) {
			t.Errorf("rules lack %q:\n%s", want, rules)
		}
	}
	for _, bad := range []string{"127.0.0.0/8", "--match-set KUBE-CLUSTER-IP ", "198."} {
		if strings.Contains(rules, bad) {
			t.Errorf("IPv6 rules hold %q:\n%s", bad, rules)
		}
	}
}
