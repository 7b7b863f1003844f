package reports

import (
	"strings"
	"testing"
)

// TestServiceCellDiffers: a cell differs when its reachability or its
// source class is not the documented one, and the sections name the
// implementation that shows it.
func TestServiceCellDiffers(t *testing.T) {
	ok := ServiceCell{Row: "iptables (builtin)", Attempts: 2, OK: 2, Sources: map[string]int{"node-1": 2},
		Expected: Expected{Reachable: true, Source: "node", Why: "w"}}
	src := ok
	src.Row, src.Sources = "iptables (kube-proxy v1.37.2)", map[string]int{"client": 2}
	down := ServiceCell{Row: "iptables (builtin)", Path: "nodePort", Attempts: 3, Errors: map[string]int{"timeout": 3}, Expected: Expected{Reachable: true, Why: "w"}}
	mixed := ServiceCell{Attempts: 4, OK: 2, Expected: Expected{Reachable: true, Why: "w"}}
	for _, tc := range []struct {
		c    ServiceCell
		want string
	}{{ok, ""}, {src, "source client, documented node"}, {down, "unreachable, documented reachable"}, {mixed, "2 of 4 answered"}} {
		if got := tc.c.Differs(); got != tc.want {
			t.Errorf("%+v: Differs %q, want %q", tc.c, got, tc.want)
		}
	}
	secs := ServiceTypesSections(&ServiceTypes{Cells: []ServiceCell{ok, src, down}})
	if len(secs) != 2 || len(secs[0].Rows) != 3 || len(secs[1].Rows) != 2 {
		t.Fatalf("sections %+v", secs)
	}
	if r := secs[1].Rows[0]; !strings.HasPrefix(r.Cells[5].Text, "yes") || r.Cells[4].Text != "no" {
		t.Errorf("source difference: builtin %q kube-proxy %q, want no / yes", r.Cells[4].Text, r.Cells[5].Text)
	}
	if r := secs[1].Rows[1]; !strings.HasPrefix(r.Cells[4].Text, "yes") || r.Cells[5].Text != "no" {
		t.Errorf("node port difference: builtin %q kube-proxy %q, want yes / no (kube-proxy has iptables cells)", r.Cells[4].Text, r.Cells[5].Text)
	}
	ipvs := down
	ipvs.Row, ipvs.Kernel = "ipvs (builtin)", "uml:6.12"
	guest := ServiceTypesSections(&ServiceTypes{Cells: []ServiceCell{ok, ipvs}})
	if r := guest[1].Rows[0]; r.Cells[0].Text != "ipvs on uml:6.12" || !strings.HasPrefix(r.Cells[4].Text, "yes") || r.Cells[5].Text != "not measured" {
		t.Errorf("ipvs difference: mode %q builtin %q kube-proxy %q, want ipvs on uml:6.12, yes / not measured (no kube-proxy ipvs cell)", r.Cells[0].Text, r.Cells[4].Text, r.Cells[5].Text)
	}
	if secs[0].Rows[0].Fail != "" || secs[0].Rows[2].Fail == "" {
		t.Errorf("matrix rows' Fail: %q, %q", secs[0].Rows[0].Fail, secs[0].Rows[2].Fail)
	}
}
