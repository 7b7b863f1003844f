package iptables

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

func walkServices(t testing.TB, n, ports, eps int) []workload.Service {
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
	return svcs
}

// TestWalkerRuleCount: for the packet to service port k, the walker
// counts exactly the nat KUBE-SERVICES rules before k's rule in the
// rendered ruleset plus k's own, counted here independently by reading
// the restore input line by line.
func TestWalkerRuleCount(t *testing.T) {
	svcs := walkServices(t, 300, 2, 3)
	svcs[7].Endpoints = nil // a service without endpoints: a filter REJECT rule, no nat rule
	rs, err := Render(Config{Backend: "legacy"}, svcs)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWalker(rs)
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
