package ipvs

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
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

// TestRenderCounts pins the object counts for services x endpoints.
func TestRenderCounts(t *testing.T) {
	for _, tc := range []struct{ n, eps int }{{1, 1}, {100, 3}, {1000, 0}, {2000, 5}} {
		rs, err := Render(testCfg, genServices(tc.n, tc.eps))
		if err != nil {
			t.Fatal(err)
		}
		if len(rs.Virtual) != tc.n || rs.RealServers != tc.n*tc.eps || len(rs.Addresses) != tc.n || len(rs.SetEntries) != tc.n || rs.NATRules != 7 {
			t.Errorf("%d x %d: %d virtual, %d real, %d addresses, %d set entries, %d nat rules",
				tc.n, tc.eps, len(rs.Virtual), rs.RealServers, len(rs.Addresses), len(rs.SetEntries), rs.NATRules)
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
