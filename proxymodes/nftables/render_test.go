package nftables

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/proxybench/proxybench/workload"

	nftablestest "github.com/proxybench/proxybench/proxymodes/nftables/testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

var testCfg = Config{ClusterCIDR: netip.MustParsePrefix("198.19.0.0/16")}

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

// genServices returns n services with one TCP port 80 -> 8080 and eps
// ready endpoints each, addressed as workload.Services does.
func genServices(n, eps int) []workload.Service {
	out := make([]workload.Service, n)
	vip := netip.MustParseAddr("198.18.0.1")
	pod := netip.MustParseAddr("198.19.0.1")
	ports := []workload.ServicePort{{Name: "p80", Port: 80, TargetPort: 8080, Protocol: "TCP"}}
	for i := range out {
		e := make([]workload.Endpoint, eps)
		for k := range e {
			e[k] = workload.Endpoint{IP: pod, Ready: true, Weight: 1}
			pod = pod.Next()
		}
		out[i] = workload.Service{Namespace: "pb", Name: fmt.Sprintf("svc-%05d", i), ClusterIP: vip, Ports: ports, Endpoints: e}
		vip = vip.Next()
	}
	return out
}

// applyFake renders services and runs a full sync into a new fake.
func applyFake(t testing.TB, cfg Config, services []workload.Service) (*knftables.Fake, *Ruleset) {
	t.Helper()
	rs, err := Render(cfg, services)
	if err != nil {
		t.Fatal(err)
	}
	fake := nftablestest.NewFake()
	tx := fake.NewTransaction()
	rs.Full(tx)
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatalf("fake rejects the full sync: %v", err)
	}
	return fake, rs
}

func TestRenderGolden(t *testing.T) {
	fake, rs := applyFake(t, testCfg, fixture())
	got := fake.Dump()
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
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("fake dump differs from %s (go test -update rewrites it):\n--- got\n%s", path, got)
	}
	// 11 fixed chains; single: 2 ports x (service + 1 endpoint); triple:
	// service + 3 endpoints. Rules: 15 fixed, 1 per service chain, 1 per
	// endpoint chain. Elements: 3 cluster IPs, 3 service-ips, 1 no-endpoint.
	if c := rs.Counts(); c != (Counts{Chains: 11 + 4 + 4, Rules: 15 + 3 + 5, Elements: 3 + 3 + 1}) {
		t.Errorf("counts %+v", c)
	}
}

func TestChainNamesMatchKubeProxy(t *testing.T) {
	// From kube-proxy's pkg/proxy/nftables/proxier_test.go.
	for _, tc := range []struct{ got, want string }{
		{ServiceChainName("ns1", "svc1", "tcp", "p80"), "service-ULMVA6XW-ns1/svc1/tcp/p80"},
		{EndpointChainName("ns1", "svc1", "tcp", "p80", netip.MustParseAddr("10.180.0.1"), 80), "endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80"},
		{ServiceChainName("ns2", "svc2", "tcp", "p80"), "service-42NFTM6N-ns2/svc2/tcp/p80"},
		{EndpointChainName("ns2", "svc2", "tcp", "p80", netip.MustParseAddr("10.180.0.2"), 80), "endpoint-SGOXE6O3-ns2/svc2/tcp/p80__10.180.0.2/80"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// countsFormula is the exact object count for n services x eps ready
// endpoints with one port each and a ClusterCIDR (no ServiceCIDR): 11
// fixed chains and 15 fixed rules; per service one service chain (1 rule),
// eps endpoint chains (1 rule each), one cluster-ips and one service-ips
// element.
func countsFormula(n, eps int) Counts {
	return Counts{Chains: 11 + n*(1+eps), Rules: 15 + n*(1+eps), Elements: 2 * n}
}

func TestObjectCounts(t *testing.T) {
	for _, tc := range []struct{ n, eps int }{{1, 1}, {10, 3}, {1000, 3}, {1000, 1}, {100, 10}} {
		fake, rs := applyFake(t, testCfg, genServices(tc.n, tc.eps))
		want := countsFormula(tc.n, tc.eps)
		if got := rs.Counts(); got != want {
			t.Errorf("%dx%d: Counts %+v, want %+v", tc.n, tc.eps, got, want)
		}
		// The fake holds exactly what was rendered.
		tab := fake.Table
		rules, elems := 0, 0
		for _, c := range tab.Chains {
			rules += len(c.Rules)
		}
		for _, m := range tab.Maps {
			elems += len(m.Elements)
		}
		for _, s := range tab.Sets {
			elems += len(s.Elements)
		}
		if got := (Counts{Chains: len(tab.Chains), Rules: rules, Elements: elems}); got != want {
			t.Errorf("%dx%d: fake holds %+v, want %+v", tc.n, tc.eps, got, want)
		}
	}
	// No ClusterCIDR: no masquerade rule in chain services.
	_, rs := applyFake(t, Config{}, genServices(10, 3))
	if got, want := rs.Counts().Rules, 14+10*(1+3); got != want {
		t.Errorf("without clusterCIDR: %d rules, want %d", got, want)
	}
}

func TestRenderErrors(t *testing.T) {
	bad := func(mut func(s []workload.Service)) []workload.Service {
		s := fixture()
		mut(s)
		return s
	}
	for name, svcs := range map[string][]workload.Service{
		"ipv6 clusterIP": bad(func(s []workload.Service) { s[0].ClusterIP = netip.MustParseAddr("fd00::1") }),
		"ipv6 endpoint": bad(func(s []workload.Service) {
			s[0].Endpoints = []workload.Endpoint{{IP: netip.MustParseAddr("fd00::1"), Ready: true}}
		}),
		"protocol":     bad(func(s []workload.Service) { s[0].Ports[0].Protocol = "ICMP" }),
		"dup endpoint": bad(func(s []workload.Service) { s[1].Endpoints[1].IP = s[1].Endpoints[0].IP }),
		"dup vip":      bad(func(s []workload.Service) { s[1].ClusterIP = s[0].ClusterIP }),
	} {
		if _, err := Render(testCfg, svcs); err == nil {
			t.Errorf("%s: Render succeeded", name)
		}
	}
	if _, err := Render(Config{ClusterCIDR: netip.MustParsePrefix("fd00::/64")}, fixture()); err == nil {
		t.Error("ipv6 clusterCIDR accepted")
	}
}

var (
	numgenRe = regexp.MustCompile(`^numgen random mod (\d+) vmap \{ (.*) \}$`)
	dnatRe   = regexp.MustCompile(`^meta l4proto (\w+) dnat to ([\d.]+):(\d+)$`)
)

// trace follows a new packet to vip:port/proto through the fake's table as
// nat-prerouting would: services' vmap lookup in service-ips, the service
// chain's numgen vmap, the endpoint chain's DNAT. It returns each
// reachable "ip:port" with its probability, or the verdict of
// no-endpoint-services ("reject") when the service has no endpoints.
func trace(t *testing.T, fake *knftables.Fake, vip, proto string, port uint16) (map[string]float64, string) {
	t.Helper()
	tab := fake.Table
	key := []string{vip, proto, strconv.Itoa(int(port))}
	// The masquerade mark for traffic from outside the cluster, then the
	// lookup (kube-proxy 1.37).
	if rules := tab.Chains["services"].Rules; len(rules) != 2 || !strings.HasPrefix(rules[0].Rule, "ip daddr @cluster-ips ip saddr != ") ||
		rules[1].Rule != "ip daddr . meta l4proto . th dport vmap @service-ips" {
		t.Fatalf("services chain: %v", rules)
	}
	e := tab.Maps[MapServiceIPs].FindElement(key...)
	if e == nil {
		ne := tab.Maps[MapNoEndpointServices].FindElement(key...)
		if ne == nil {
			return nil, "accept"
		}
		target := strings.TrimPrefix(ne.Value[0], "goto ")
		return nil, tab.Chains[target].Rules[0].Rule
	}
	svc := tab.Chains[strings.TrimPrefix(e.Value[0], "goto ")]
	if svc == nil {
		t.Fatalf("service-ips %v -> missing chain %q", key, e.Value[0])
	}
	last := svc.Rules[len(svc.Rules)-1].Rule
	m := numgenRe.FindStringSubmatch(last)
	if m == nil {
		t.Fatalf("service chain %s ends %q", svc.Name, last)
	}
	n, _ := strconv.Atoi(m[1])
	out := map[string]float64{}
	seen := map[int]bool{}
	for _, part := range strings.Split(m[2], " , ") {
		idx, target, ok := strings.Cut(part, " : goto ")
		if !ok {
			t.Fatalf("vmap entry %q", part)
		}
		i, _ := strconv.Atoi(idx)
		if i < 0 || i >= n || seen[i] {
			t.Fatalf("vmap index %d of mod %d (dup %v)", i, n, seen[i])
		}
		seen[i] = true
		ep := tab.Chains[target]
		if ep == nil {
			t.Fatalf("vmap -> missing chain %q", target)
		}
		d := dnatRe.FindStringSubmatch(ep.Rules[len(ep.Rules)-1].Rule)
		if d == nil || d[1] != proto {
			t.Fatalf("endpoint chain %s: %q", target, ep.Rules[len(ep.Rules)-1].Rule)
		}
		out[d[2]+":"+d[3]] += 1 / float64(n)
	}
	if len(seen) != n {
		t.Fatalf("vmap covers %d of mod %d", len(seen), n)
	}
	return out, ""
}

func TestPacketTrace(t *testing.T) {
	fake, _ := applyFake(t, testCfg, fixture())
	for _, tc := range []struct {
		vip, proto string
		port       uint16
		want       []string
		verdict    string
	}{
		{"198.18.0.1", "tcp", 80, []string{"198.19.0.1:8080"}, ""},
		{"198.18.0.1", "udp", 53, []string{"198.19.0.1:5353"}, ""},
		{"198.18.0.2", "tcp", 80, []string{"198.19.0.2:8080", "198.19.0.3:8080", "198.19.0.5:8080"}, ""},
		{"198.18.0.3", "tcp", 80, nil, "reject"},
		{"198.18.0.2", "udp", 80, nil, "accept"},
	} {
		got, verdict := trace(t, fake, tc.vip, tc.proto, tc.port)
		if verdict != tc.verdict || len(got) != len(tc.want) {
			t.Errorf("%s %s:%d: %v %q, want %v %q", tc.proto, tc.vip, tc.port, got, verdict, tc.want, tc.verdict)
			continue
		}
		for _, w := range tc.want {
			if p := got[w]; p < 1/float64(len(tc.want))-1e-9 || p > 1/float64(len(tc.want))+1e-9 {
				t.Errorf("%s:%d -> %s with probability %v, want 1/%d", tc.vip, tc.port, w, p, len(tc.want))
			}
		}
	}
	// At scale every service resolves to exactly its own endpoints.
	svcs := genServices(500, 4)
	fake, _ = applyFake(t, testCfg, svcs)
	for _, s := range svcs {
		got, _ := trace(t, fake, s.ClusterIP.String(), "tcp", 80)
		if len(got) != 4 {
			t.Fatalf("%s: %v", s.Name, got)
		}
		for _, e := range s.Endpoints {
			if got[e.IP.String()+":8080"] != 0.25 {
				t.Fatalf("%s: %v lacks %s at 1/4", s.Name, got, e.IP)
			}
		}
	}
}

// applyDiff runs an incremental sync from old to next into fake and
// returns the transaction text.
func applyDiff(t *testing.T, fake *knftables.Fake, old, next *Ruleset) (*Diff, string) {
	t.Helper()
	d := next.DiffFrom(old)
	tx := fake.NewTransaction()
	d.Chains(tx)
	d.Elements(tx)
	d.Deletes(tx)
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatalf("fake rejects the incremental sync: %v\n%s", err, tx)
	}
	return d, tx.String()
}

func TestDiffIncremental(t *testing.T) {
	svcs := genServices(100, 3)
	fake, old := applyFake(t, testCfg, svcs)

	// Nothing changed: nothing sent.
	same, _ := Render(testCfg, svcs)
	if d := same.DiffFrom(old); !d.Empty() {
		t.Errorf("no change, diff %+v", d)
	}

	// Replace one endpoint of service 42: its service chain changes, one
	// endpoint chain is added and one deleted; no map element changes.
	svcs[42].Endpoints = append([]workload.Endpoint(nil), svcs[42].Endpoints...)
	oldIP := svcs[42].Endpoints[1].IP
	svcs[42].Endpoints[1].IP = netip.MustParseAddr("198.19.200.1")
	next, _ := Render(testCfg, svcs)
	d, txt := applyDiff(t, fake, old, next)
	svcChain := ServiceChainName("pb", "svc-00042", "tcp", "p80")
	if len(d.ChainsAdded) != 1 || len(d.ChainsChanged) != 1 || d.ChainsChanged[0] != svcChain || len(d.ChainsDeleted) != 1 ||
		d.ElementsAdded+d.ElementsDeleted != 0 {
		t.Errorf("diff %+v", d)
	}
	if d.ChainsDeleted[0] != EndpointChainName("pb", "svc-00042", "tcp", "p80", oldIP, 8080) {
		t.Errorf("deleted %v", d.ChainsDeleted)
	}
	if strings.Contains(txt, "svc-00041") || strings.Contains(txt, "svc-00043") {
		t.Errorf("incremental sync touches other services:\n%s", txt)
	}
	check, _ := applyFake(t, testCfg, svcs)
	if fake.Dump() != check.Dump() {
		t.Error("fake after incremental sync differs from a full sync of the same services")
	}

	// Service 7 loses every endpoint, service 100 is added, 99 removed.
	old = next
	svcs[7].Endpoints = nil
	more := genServices(101, 3)
	svcs = append(svcs[:99], more[100])
	next, _ = Render(testCfg, svcs)
	d, _ = applyDiff(t, fake, old, next)
	// 7: service-ips element removed, no-endpoint added; 99 -> 100:
	// cluster-ips and service-ips elements swapped.
	if d.ElementsAdded != 3 || d.ElementsDeleted != 3 || len(d.ChainsDeleted) != 8 || len(d.ChainsAdded) != 4 {
		t.Errorf("diff added %v deleted %v elems +%d -%d", d.ChainsAdded, d.ChainsDeleted, d.ElementsAdded, d.ElementsDeleted)
	}
	check, _ = applyFake(t, testCfg, svcs)
	if fake.Dump() != check.Dump() {
		t.Error("fake after second incremental sync differs from a full sync")
	}
	if _, v := trace(t, fake, svcs[7].ClusterIP.String(), "tcp", 80); v != "reject" {
		t.Errorf("service without endpoints: verdict %q", v)
	}
}

func TestFullChainsSplit(t *testing.T) {
	svcs := genServices(100, 3)
	want, _ := applyFake(t, testCfg, svcs)
	rs, _ := Render(testCfg, svcs)
	fake := nftablestest.NewFake()
	txs := rs.FullChainsSplit(fake.NewTransaction, 64)
	if len(txs) != 1+(13+400+63)/64 {
		t.Errorf("%d transactions", len(txs))
	}
	el := fake.NewTransaction()
	rs.FullElements(el)
	for _, tx := range append(txs, el) {
		if err := fake.Run(context.Background(), tx); err != nil {
			t.Fatal(err)
		}
	}
	if fake.Dump() != want.Dump() {
		t.Error("split full sync differs from a single one")
	}
}
