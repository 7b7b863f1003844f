package reports

import (
	"strings"
	"testing"
)

// TestShareDiffers: a documented share of 0 or 1 must hold exactly; one
// between is judged by the binomial test, so a fair split passes and a
// lopsided one over many connections fails.
func TestShareDiffers(t *testing.T) {
	for _, tc := range []struct {
		k, n int
		p    float64
		bad  bool
	}{
		{100, 100, 1, false}, {99, 100, 1, true}, {0, 100, 0, false}, {1, 100, 0, true},
		{48, 100, 0.5, false}, {10, 100, 0.5, true}, {36, 100, 1.0 / 3, false}, {90, 100, 1.0 / 3, true}, {0, 0, 1, false},
	} {
		if got := shareDiffers("same-node", tc.k, tc.n, tc.p) != ""; got != tc.bad {
			t.Errorf("%d of %d against %.2f: differs %v, want %v", tc.k, tc.n, tc.p, got, tc.bad)
		}
	}
}

// TestTopologySections: the cells with documented shares pool per row
// and distribution, a cell that misses its share fails in both sections
// and in Differs (so the serviceTypes closing note lists it), and a run
// without topology cells has no topology section.
func TestTopologySections(t *testing.T) {
	one, half := 1.0, 0.5
	kept := ServiceCell{Row: "iptables (builtin)", Service: "svc-00001", Path: "clusterIP", Client: "pod@node-0", Distribution: "PreferSameNode", Zone: "zone-a",
		Attempts: 100, OK: 100, SameNode: 100, SameZone: 100, Expected: Expected{Reachable: true, Why: "w", SameNode: &one, SameZone: &one}}
	leaked := kept
	leaked.Row, leaked.SameNode = "iptables (kube-proxy v1.37.2)", 60
	spread := kept
	spread.Distribution, spread.SameNode, spread.SameZone = "", 50, 100
	spread.Expected.SameNode = &half
	secs := TopologySections(&ServiceTypes{Cells: []ServiceCell{kept, leaked, spread}})
	if len(secs) != 2 || len(secs[0].Rows) != 3 || len(secs[1].Rows) != 3 {
		t.Fatalf("sections %+v", secs)
	}
	if secs[0].Rows[0].Fail != "" || secs[0].Rows[1].Fail == "" || secs[0].Rows[2].Fail != "" {
		t.Errorf("summary Fail: %q %q %q", secs[0].Rows[0].Fail, secs[0].Rows[1].Fail, secs[0].Rows[2].Fail)
	}
	if got := secs[0].Rows[2].Cells[0].Text; got != "none" {
		t.Errorf("no distribution shows as %q, want none", got)
	}
	if d := leaked.Differs(); !strings.Contains(d, "same-node share 0.60") {
		t.Errorf("Differs %q", d)
	}
	if TopologySections(&ServiceTypes{Cells: []ServiceCell{{Row: "x", Path: "nodePort"}}}) != nil {
		t.Error("a topology section without topology cells")
	}
}
