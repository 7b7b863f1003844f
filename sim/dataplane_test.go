package sim

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/proxymodes/iptables"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

func testServices(t testing.TB, n, ports, eps int) ([]workload.Service, *scenarios.Scenario) {
	t.Helper()
	y := fmt.Sprintf("name: t\nservices:\n  count: %d\n  portsPerService: %d\n  endpoints:\n    count: %d\n", n, ports, eps)
	sc, err := scenarios.Parse([]byte(y), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := workload.Services(sc)
	if err != nil {
		t.Fatal(err)
	}
	return svcs, sc
}

// TestWalkerRuleCount: for the packet to service port k, the walker
// counts exactly the nat KUBE-SERVICES rules before k's rule in the
// rendered ruleset plus k's own, counted here independently by reading
// the restore input line by line.
func TestWalkerRuleCount(t *testing.T) {
	svcs, _ := testServices(t, 300, 2, 3)
	svcs[7].Endpoints = nil // a service without endpoints: a filter REJECT rule, no nat rule
	rs, err := iptables.Render(iptables.Config{Backend: "legacy"}, svcs)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewIPTablesWalker(rs)
	if err != nil {
		t.Fatal(err)
	}
	var nat []string
	table := ""
	sc := bufio.NewScanner(bytes.NewReader(rs.Data))
	sc.Buffer(nil, 1<<20)
	filterSvc := 0
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "*") {
			table = l[1:]
		}
		if strings.HasPrefix(l, "-A KUBE-SERVICES ") {
			if table == "nat" {
				nat = append(nat, l)
			} else {
				filterSvc++
			}
		}
	}
	if w.NatServices != len(nat) || w.FilterServices != filterSvc || filterSvc != 2 {
		t.Fatalf("walker saw %d nat / %d filter KUBE-SERVICES rules, file has %d / %d", w.NatServices, w.FilterServices, len(nat), filterSvc)
	}
	checked := 0
	for i := range svcs {
		s := &svcs[i]
		for _, p := range s.Ports {
			want := -1
			for k, l := range nat {
				if strings.Contains(l, fmt.Sprintf(" -d %s --dport %d ", s.ClusterIP, p.Port)) {
					want = k + 1 // the rules before it, plus its own
					break
				}
			}
			got, ok := w.RulesWalked(s.ClusterIP, p.Port)
			if want < 0 {
				if ok || got != len(nat) {
					t.Fatalf("%s: no nat rule, walker says %d %v", s.PortName(p), got, ok)
				}
				continue
			}
			if !ok || got != want {
				t.Fatalf("%s: walker %d, ruleset %d", s.PortName(p), got, want)
			}
			checked++
		}
	}
	if checked != 2*299 {
		t.Fatalf("checked %d ports", checked)
	}
}

// TestStatisticChoice: kube-proxy's 1/(n-i) chain is uniform.
func TestStatisticChoice(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, n := range []int{1, 2, 3, 7} {
		hits := make([]int, n)
		const N = 70000
		for i := 0; i < N; i++ {
			ep, rules := StatisticChoice(n, rng)
			if rules != ep+1 {
				t.Fatalf("rules %d for endpoint %d", rules, ep)
			}
			hits[ep]++
		}
		for k, h := range hits {
			if math.Abs(float64(h)-N/float64(n)) > 5*math.Sqrt(N/float64(n)) {
				t.Fatalf("n=%d: endpoint %d got %d of %d", n, k, h, N)
			}
		}
	}
	if p := statProb(2); p != 0x40000000 {
		t.Fatalf("probability 0.5 is %#x, want 0x40000000", p)
	}
}

// TestNumgenChoice: reciprocal_scale stays in [0, n) and is uniform.
func TestNumgenChoice(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	hits := make([]int, 3)
	for i := 0; i < 30000; i++ {
		hits[NumgenChoice(3, rng)]++
	}
	for _, h := range hits {
		if h < 9500 || h > 10500 {
			t.Fatalf("numgen hits %v", hits)
		}
	}
}
