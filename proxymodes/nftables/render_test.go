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
	"time"

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
	// Without affinity: the fixed chains, one chain per service port with
	// endpoints (single: 2 ports; triple: 1) and no endpoint chain; one
	// rule per service chain. Elements: a cluster IP per service, a
	// service-ips element per port with endpoints, a no-endpoint element
	// per port without.
	fixed := fixedCounts(testCfg)
	ports, withEps := 0, 0
	for _, s := range fixture() {
		ports += len(s.Ports)
		if len(s.KubeProxyOrder()) > 0 {
			withEps += len(s.Ports)
		}
	}
	wantC := Counts{Chains: fixed.Chains + withEps, Rules: fixed.Rules + withEps, Elements: len(fixture()) + ports}
	if c := rs.Counts(); c != wantC {
		t.Errorf("counts %+v, want %+v", c, wantC)
	}
}

// fixedCounts are the chains and rules of a table without services.
func fixedCounts(cfg Config) Counts {
	rs, err := Render(cfg, nil)
	if err != nil {
		panic(err)
	}
	return rs.Counts()
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

// countsFormula is the object count for n services x eps ready endpoints
// with one port each under cfg: the fixed chains and rules, and per service
// one service chain, one cluster-ips and one service-ips element. Without
// affinity the service chain has one rule (the numgen map DNAT) and there
// is no endpoint chain; with affinity it has one rule per endpoint plus
// the numgen vmap, and each endpoint has a chain of 2 rules (update the
// affinity set, DNAT).
func countsFormula(cfg Config, n, eps int) Counts {
	f := fixedCounts(cfg)
	if cfg.AffinityTimeout > 0 {
		return Counts{Chains: f.Chains + n*(1+eps), Rules: f.Rules + n*(1+eps+2*eps), Elements: 2 * n}
	}
	return Counts{Chains: f.Chains + n, Rules: f.Rules + n, Elements: 2 * n}
}

func TestObjectCounts(t *testing.T) {
	aff := testCfg
	aff.AffinityTimeout = 3 * time.Hour
	for _, tc := range []struct {
		cfg    Config
		n, eps int
	}{{testCfg, 1, 1}, {testCfg, 10, 3}, {testCfg, 1000, 3}, {testCfg, 1000, 1}, {testCfg, 100, 10}, {aff, 10, 3}, {aff, 100, 1}} {
		fake, rs := applyFake(t, tc.cfg, genServices(tc.n, tc.eps))
		want := countsFormula(tc.cfg, tc.n, tc.eps)
		if got := rs.Counts(); got != want {
			t.Errorf("%dx%d affinity %v: Counts %+v, want %+v", tc.n, tc.eps, tc.cfg.AffinityTimeout, got, want)
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
			t.Errorf("%dx%d affinity %v: fake holds %+v, want %+v", tc.n, tc.eps, tc.cfg.AffinityTimeout, got, want)
		}
	}
	// No ClusterCIDR: no masquerade rule in chain services.
	_, rs := applyFake(t, Config{}, genServices(10, 3))
	if got, want := rs.Counts().Rules, fixedCounts(testCfg).Rules-1+10; got != want {
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
	numgenRe  = regexp.MustCompile(`^numgen random mod (\d+) vmap \{ (.*) \}$`)
	dnatRe    = regexp.MustCompile(`^meta l4proto (\w+) dnat to ([\d.]+):(\d+)$`)
	dnatMapRe = regexp.MustCompile(`^meta l4proto (\w+) dnat ip to numgen random mod (\d+) map \{ (.*) \}$`)
)

// trace follows a new packet to vip:port/proto through the fake's table as
// nat-prerouting would: services' vmap lookup in service-ips, then the
// service chain: its numgen map DNAT (no session affinity; a plain DNAT
// for one endpoint), or its numgen
// vmap to an endpoint chain and that chain's DNAT (ClientIP affinity). It
// returns each reachable "ip:port" with its probability, or the verdict of
// no-endpoint-services ("reject") when the service has no endpoints. It
// also returns the number of chains the packet visits from the service
// chain on (1 without affinity, 2 with).
func trace(t *testing.T, fake *knftables.Fake, vip, proto string, port uint16) (map[string]float64, string) {
	got, verdict, _ := traceChains(t, fake, vip, proto, port)
	return got, verdict
}

func traceChains(t *testing.T, fake *knftables.Fake, vip, proto string, port uint16) (map[string]float64, string, int) {
	t.Helper()
	tab := fake.Table
	key := []string{vip, proto, strconv.Itoa(int(port))}
	// The masquerade mark for traffic from outside the cluster, then the
	// lookup (kube-proxy 1.37).
	// (The node port lookup after them takes node addresses only.)
	if rules := tab.Chains["services"].Rules; len(rules) != 3 || !strings.HasPrefix(rules[0].Rule, "ip daddr @cluster-ips ip saddr != ") ||
		rules[1].Rule != "ip daddr . meta l4proto . th dport vmap @service-ips" ||
		rules[2].Rule != "ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports" {
		t.Fatalf("services chain: %q %q", rules[0].Rule, rules[len(rules)-1].Rule)
	}
	e := tab.Maps[MapServiceIPs].FindElement(key...)
	if e == nil {
		ne := tab.Maps[MapNoEndpointServices].FindElement(key...)
		if ne == nil {
			return nil, "accept", 0
		}
		target := strings.TrimPrefix(ne.Value[0], "goto ")
		return nil, tab.Chains[target].Rules[0].Rule, 0
	}
	svc := tab.Chains[strings.TrimPrefix(e.Value[0], "goto ")]
	if svc == nil {
		t.Fatalf("service-ips %v -> missing chain %q", key, e.Value[0])
	}
	last := svc.Rules[len(svc.Rules)-1].Rule
	out := map[string]float64{}
	seen := map[int]bool{}
	index := func(idx string, n int) {
		i, err := strconv.Atoi(idx)
		if err != nil || i < 0 || i >= n || seen[i] {
			t.Fatalf("map index %q of mod %d (dup %v)", idx, n, seen[i])
		}
		seen[i] = true
	}
	if d := dnatRe.FindStringSubmatch(last); d != nil && len(svc.Rules) == 1 {
		// One endpoint, no affinity: the service chain DNATs to it.
		if d[1] != proto {
			t.Fatalf("service chain %s DNATs %s, want %s", svc.Name, d[1], proto)
		}
		return map[string]float64{d[2] + ":" + d[3]: 1}, "", 1
	}
	if m := dnatMapRe.FindStringSubmatch(last); m != nil {
		if m[1] != proto {
			t.Fatalf("service chain %s DNATs %s, want %s", svc.Name, m[1], proto)
		}
		n, _ := strconv.Atoi(m[2])
		for _, part := range strings.Split(m[3], ", ") {
			idx, dst, ok := strings.Cut(part, " : ")
			ip, p, ok2 := strings.Cut(dst, " . ")
			if !ok || !ok2 {
				t.Fatalf("map entry %q", part)
			}
			index(idx, n)
			out[ip+":"+p] += 1 / float64(n)
		}
		if len(seen) != n {
			t.Fatalf("map covers %d of mod %d", len(seen), n)
		}
		return out, "", 1
	}
	m := numgenRe.FindStringSubmatch(last)
	if m == nil {
		t.Fatalf("service chain %s ends %q", svc.Name, last)
	}
	n, _ := strconv.Atoi(m[1])
	for _, part := range strings.Split(m[2], " , ") {
		idx, target, ok := strings.Cut(part, " : goto ")
		if !ok {
			t.Fatalf("vmap entry %q", part)
		}
		index(idx, n)
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
	return out, "", 2
}

// TestPacketTrace follows packets through both layouts: without session
// affinity the service chain DNATs itself (one chain from the service on,
// kube-proxy 1.37), with ClientIP affinity through one endpoint chain (two).
func TestPacketTrace(t *testing.T) {
	aff := testCfg
	aff.AffinityTimeout = time.Hour
	for _, c := range []struct {
		name   string
		cfg    Config
		chains int
	}{{"no affinity", testCfg, 1}, {"ClientIP affinity", aff, 2}} {
		t.Run(c.name, func(t *testing.T) { packetTrace(t, c.cfg, c.chains) })
	}
}

func packetTrace(t *testing.T, cfg Config, chains int) {
	fake, _ := applyFake(t, cfg, fixture())
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
		got, verdict, n := traceChains(t, fake, tc.vip, tc.proto, tc.port)
		if verdict != tc.verdict || len(got) != len(tc.want) {
			t.Errorf("%s %s:%d: %v %q, want %v %q", tc.proto, tc.vip, tc.port, got, verdict, tc.want, tc.verdict)
			continue
		}
		if verdict == "" && n != chains {
			t.Errorf("%s %s:%d: %d chains from the service chain on, want %d", tc.proto, tc.vip, tc.port, n, chains)
		}
		for _, w := range tc.want {
			if p := got[w]; p < 1/float64(len(tc.want))-1e-9 || p > 1/float64(len(tc.want))+1e-9 {
				t.Errorf("%s:%d -> %s with probability %v, want 1/%d", tc.vip, tc.port, w, p, len(tc.want))
			}
		}
	}
	// At scale every service resolves to exactly its own endpoints.
	svcs := genServices(500, 4)
	fake, _ = applyFake(t, cfg, svcs)
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

// TestNoEndpointChainsWithoutAffinity: a service without session affinity
// gets its service chain only, whose one rule DNATs through the numgen map
// (kube-proxy 1.37); with ClientIP affinity every endpoint keeps its chain
// and affinity set. Map indexes follow kube-proxy's endpoint order, the
// "ip:port" text sorted (198.19.1.10 before 198.19.1.9).
func TestNoEndpointChainsWithoutAffinity(t *testing.T) {
	svcs := genServices(200, 3)
	svcs[0].Endpoints = []workload.Endpoint{
		workload.NewEndpoint(netip.MustParseAddr("198.19.1.9")), workload.NewEndpoint(netip.MustParseAddr("198.19.1.10")),
		{IP: netip.MustParseAddr("198.19.1.8"), Serving: true, Terminating: true, Weight: 1}, // not programmed: ready ones exist
	}
	rs, err := Render(testCfg, svcs)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range rs.ChainNames() {
		if strings.HasPrefix(name, prefixEndpoint) {
			t.Fatalf("endpoint chain %s without session affinity", name)
		}
	}
	if got, want := len(rs.ChainNames()), fixedCounts(testCfg).Chains+len(svcs); got != want {
		t.Errorf("%d chains, want the fixed ones plus one per service: %d", got, want)
	}
	svc := rs.Chain(ServiceChainName("pb", "svc-00000", "tcp", "p80"))
	if want := "meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 198.19.1.10 . 8080, 1 : 198.19.1.9 . 8080 }"; len(svc.Rules) != 1 || svc.Rules[0] != want {
		t.Errorf("service chain %q, want [%q]", svc.Rules, want)
	}

	aff := testCfg
	aff.AffinityTimeout = time.Hour
	rs, err = Render(aff, svcs)
	if err != nil {
		t.Fatal(err)
	}
	epChains := 0
	for _, name := range rs.ChainNames() {
		if strings.HasPrefix(name, prefixEndpoint) {
			epChains++
		}
	}
	if want := 2 + 3*(len(svcs)-1); epChains != want {
		t.Errorf("with affinity: %d endpoint chains, want one per programmed endpoint: %d", epChains, want)
	}
	svc = rs.Chain(ServiceChainName("pb", "svc-00000", "tcp", "p80"))
	first := EndpointChainName("pb", "svc-00000", "tcp", "p80", netip.MustParseAddr("198.19.1.10"), 8080)
	if last := svc.Rules[len(svc.Rules)-1]; !strings.HasPrefix(last, "numgen random mod 2 vmap { 0 : goto "+first+" , ") {
		t.Errorf("with affinity: service chain ends %q, want index 0 -> %s", last, first)
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

	// Replace one endpoint of service 42: its service chain changes (its
	// one rule names the endpoints); no chain is added or deleted and no
	// map element changes.
	svcs[42].Endpoints = append([]workload.Endpoint(nil), svcs[42].Endpoints...)
	oldIP := svcs[42].Endpoints[1].IP
	svcs[42].Endpoints[1].IP = netip.MustParseAddr("198.19.200.1")
	next, _ := Render(testCfg, svcs)
	d, txt := applyDiff(t, fake, old, next)
	svcChain := ServiceChainName("pb", "svc-00042", "tcp", "p80")
	if len(d.ChainsAdded) != 0 || len(d.ChainsChanged) != 1 || d.ChainsChanged[0] != svcChain || len(d.ChainsDeleted) != 0 ||
		d.ElementsAdded+d.ElementsDeleted != 0 {
		t.Errorf("diff %+v", d)
	}
	if strings.Contains(fake.Dump(), oldIP.String()+" . ") || !strings.Contains(fake.Dump(), "198.19.200.1 . 8080") {
		t.Errorf("service chain after the change: %q", next.Chain(svcChain).Rules)
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
	// 7: service-ips element removed, no-endpoint added, its chain
	// deleted; 99 -> 100: cluster-ips and service-ips elements swapped,
	// one service chain deleted and one added.
	if d.ElementsAdded != 3 || d.ElementsDeleted != 3 || len(d.ChainsDeleted) != 2 || len(d.ChainsAdded) != 1 {
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
	if n := len(rs.ChainNames()); len(txs) != 1+(n+63)/64 {
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
