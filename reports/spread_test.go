package reports

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/scenarios"
)

// TestHolm: the adjusted p-values of Holm 1979's step-down procedure, as
// R's p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm") gives them: 0.03 0.06
// 0.06 0.02; NaN is left out of the family.
func TestHolm(t *testing.T) {
	got := Holm([]float64{0.01, 0.04, math.NaN(), 0.03, 0.005})
	want := []float64{0.03, 0.06, math.NaN(), 0.06, 0.02}
	for i := range want {
		if math.IsNaN(want[i]) != math.IsNaN(got[i]) || (!math.IsNaN(want[i]) && math.Abs(got[i]-want[i]) > 1e-12) {
			t.Errorf("Holm: %v, want %v", got, want)
			break
		}
	}
	if got := Holm([]float64{0.6, 0.9}); got[0] != 1 || got[1] != 1 {
		t.Errorf("Holm caps at 1: %v", got)
	}
}

// spreadRun is a run of rows × positions whose per-position χ² tests (2
// dof: 3 endpoints) have the p-values given, row by row.
func spreadRun(rows []string, ps [][]float64) *Result {
	sc := &scenarios.Scenario{Name: "spread", Modes: rows, Services: scenarios.ServicesSpec{Count: 10000}}
	sc.SetDefaults()
	r := &Result{Scenario: sc, Machine: Machine{KernelWhere: "host"}}
	r.Modes = spreadModes(rows, ps)
	return r
}

func spreadModes(rows []string, ps [][]float64) []ModeResult {
	var out []ModeResult
	for i, row := range rows {
		m := ModeResult{Mode: row, Services: 10000}
		var fs []Fairness
		for j, pos := range []string{"first", "middle", "last"} {
			// χ² on 2 dof has survival exp(-x/2).
			f := Fairness{Endpoints: 3, Samples: 6000, Jain: 0.999, MaxMin: 1.05, ChiSquare: -2 * math.Log(ps[i][j]), DoF: 2, PValue: ps[i][j]}
			m.Lookup = append(m.Lookup, PositionResult{Position: pos, Fairness: &f, SamplesNs: []int64{20000}})
			fs = append(fs, f)
		}
		m.Fairness = PoolFairness(fs)
		out = append(out, m)
	}
	return out
}

func findingOf(t *testing.T, r *Result, row string) string {
	t.Helper()
	for _, f := range Findings(r) {
		if strings.HasPrefix(f, row+":") {
			return f
		}
	}
	t.Fatalf("no finding for %s in %q", row, Findings(r))
	return ""
}

// TestSpreadVerdictHolm: kube-proxy-10k's case (issue 26): 5 rows × 3
// positions, both iptables rows with one position at p 0.004 and 0.0025
// and a pooled p below 0.01, which the uncorrected verdict called
// "uneven". Over 15 tests Holm's correction makes the smallest 0.0375:
// consistent with even shares, saying that a cell was significant alone.
// A p of 1e-5 at one position is significant after the correction
// (1.5e-4) and is worded as a lone cell; a row uneven at two positions is
// uneven; repeated runs (MoreRuns) are pooled, so a chance cell of run 1
// that the next runs do not repeat dissolves.
func TestSpreadVerdictHolm(t *testing.T) {
	rows := []string{"none", "iptables", "iptables (kube-proxy)", "nftables", "nftables (kube-proxy)"}
	ps := [][]float64{{0.5, 0.7, 0.3}, {0.004, 0.05, 0.02}, {0.3, 0.12, 0.0025}, {0.9, 0.4, 0.6}, {0.2, 0.8, 0.45}}
	r := spreadRun(rows, ps)
	if pooled := r.Modes[1].Fairness.PValue; pooled >= 0.01 {
		t.Fatalf("fixture: iptables' pooled p %.3g, want < 0.01 (what the old verdict called uneven)", pooled)
	}
	fam := SpreadFamily(r)
	if len(fam) != 15 {
		t.Fatalf("family of %d tests, want 15", len(fam))
	}
	for _, row := range []string{"iptables", "iptables (kube-proxy)"} {
		f := findingOf(t, r, row)
		if strings.Contains(f, "uneven") || !strings.Contains(f, "consistent with even shares") || !strings.Contains(f, "significant alone, but") || !strings.Contains(f, "after Holm's correction over 15 tests") {
			t.Errorf("%s: %q, want consistent, significant alone but not after Holm over 15 tests", row, f)
		}
	}
	if f := findingOf(t, r, "iptables (kube-proxy)"); !strings.Contains(f, "p = 0.0025 at last is significant alone, but 0.037 after") {
		t.Errorf("kube-proxy's finding does not give the cell and its adjusted p (0.0025 × 15): %q", f)
	}

	ps[3] = []float64{0.9, 0.4, 1e-5}
	r = spreadRun(rows, ps)
	if f := findingOf(t, r, "nftables"); !strings.Contains(f, "uneven at one position only (last: χ² p = 1e-05, 0.00015 after Holm's correction over 15 tests") ||
		!strings.Contains(f, "not a pattern") || !strings.Contains(f, "rerun") {
		t.Errorf("a lone significant cell: %q", f)
	}
	ps[4] = []float64{1e-6, 0.8, 1e-7}
	r = spreadRun(rows, ps)
	if f := findingOf(t, r, "nftables (kube-proxy)"); !strings.Contains(f, "uneven at first (p = 1e-06") || !strings.Contains(f, "last (p = 1e-07") || strings.Contains(f, "one position only") {
		t.Errorf("a row uneven at two positions: %q", f)
	}

	// nftables' last position at p 1e-4 in run 1 is significant after
	// the correction (0.0015); two more runs in which it is
	// unremarkable (0.9): pooled over three runs (χ² 18.8 on 6 dof, p
	// 0.0044, 0.066 after the correction) it is no longer significant.
	ps[3] = []float64{0.9, 0.4, 1e-4}
	r = spreadRun(rows, ps)
	if f := findingOf(t, r, "nftables"); !strings.Contains(f, "uneven at one position only") {
		t.Fatalf("fixture: nftables alone in run 1: %q, want uneven at one position", f)
	}
	ps2 := [][]float64{{0.5, 0.7, 0.3}, {0.4, 0.5, 0.6}, {0.3, 0.12, 0.5}, {0.9, 0.4, 0.9}, {1e-5, 0.8, 1e-6}}
	ps3 := [][]float64{{0.5, 0.7, 0.3}, {0.4, 0.5, 0.6}, {0.3, 0.12, 0.5}, {0.6, 0.4, 0.9}, {1e-4, 0.8, 1e-5}}
	r.MoreRuns = []Run{{Modes: spreadModes(rows, ps2)}, {Modes: spreadModes(rows, ps3)}}
	fam = SpreadFamily(r)
	if len(fam) != 15 || fam[0].Runs != 3 {
		t.Fatalf("pooled family: %d tests of %d runs, want 15 of 3", len(fam), fam[0].Runs)
	}
	f := findingOf(t, r, "nftables")
	if strings.Contains(f, "uneven") || !strings.Contains(f, "pooled over 3 runs") {
		t.Errorf("nftables pooled over 3 runs: %q, want consistent (its run-1 cell not repeated), pooled over 3 runs", f)
	}
	if f := findingOf(t, r, "nftables (kube-proxy)"); !strings.Contains(f, "uneven at first") || !strings.Contains(f, "pooled over 3 runs") {
		t.Errorf("a bias repeated in every run stays uneven: %q", f)
	}
}

// TestFairnessPhaseHolm: the fairness phase's rows are one family too:
// an UNFAIR verdict at p 0.0006, second smallest of three tested rows, is 0.0012 (× 2) after
// Holm's correction, above FairnessAlpha, and the report says so; one at
// 1e-6 stays UNFAIR without the note.
func TestFairnessPhaseHolm(t *testing.T) {
	row := func(sched string, p float64, verdict string) ModeResult {
		f := &FairnessRun{Mode: "ipvs", Scheduler: sched, Expect: Expectation{Unit: UnitConnection}, Nodes: 1, Verdict: verdict, Why: "pooled"}
		f.Cluster = FairnessAggregate{Services: 10, Samples: 10000, DoF: 20, PValue: p, MinJain: 0.99, MeanJain: 0.99}
		return ModeResult{Mode: "ipvs", Services: 10, FairnessRun: f, Info: map[string]string{"scheduler": sched}}
	}
	sc := &scenarios.Scenario{Name: "fairness", Modes: []string{"ipvs"}}
	sc.SetDefaults()
	r := &Result{Scenario: sc, Modes: []ModeResult{row("rr", 0.0006, "UNFAIR"), row("wrr", 0.5, "fair"), row("sh", 1e-6, "UNFAIR")}}
	var b strings.Builder
	writeFairnessMarkdown(&b, r)
	md := b.String()
	var rr, sh string
	for _, l := range strings.Split(md, "\n") {
		switch {
		case strings.HasPrefix(l, "- ipvs/rr:"):
			rr = l
		case strings.HasPrefix(l, "- ipvs/sh:"):
			sh = l
		}
	}
	if !strings.Contains(rr, "not after Holm's correction (Holm 1979) over the 3 tested rows of this table (p 0.0012") {
		t.Errorf("rr: %q, want the Holm note (0.0006 × 2)", rr)
	}
	if sh == "" || strings.Contains(sh, "Holm") {
		t.Errorf("sh: %q, want UNFAIR without the note", sh)
	}
	if !strings.Contains(md, "| 0.0006 | 0.0012 |") {
		t.Errorf("table lacks the adjusted p beside the raw one:\n%s", md)
	}
}

// TestSpreadFamilyAcrossKernels: a run on two kernels has one family of
// spread tests (every row and position of the run: 2 host rows and 3
// guest rows × 3 positions = 15), and both the findings and each
// kernel's fairness table state that one correction: "15 tests", never
// the kernel's own 6 or 9, with the same adjusted p (guest iptables' last
// at 0.001 is 0.015 after Holm over 15, not 0.009 over the guest's 9).
// The table's count column is the positions pooled, named so.
func TestSpreadFamilyAcrossKernels(t *testing.T) {
	sc := &scenarios.Scenario{Name: "spread", Modes: []string{"none", "iptables", "ipvs"}, Services: scenarios.ServicesSpec{Count: 10000}}
	sc.SetDefaults()
	host := spreadModes([]string{"none", "iptables"}, [][]float64{{0.5, 0.7, 0.3}, {0.4, 0.6, 0.2}})
	guest := spreadModes([]string{"none", "iptables", "ipvs"}, [][]float64{{0.5, 0.7, 0.3}, {0.4, 0.6, 0.001}, {0.9, 0.8, 0.7}})
	for i := range host {
		host[i].Kernel = "host"
	}
	for i := range guest {
		guest[i].Kernel = "uml:6.12"
	}
	r := &Result{RunID: "fam1", Engine: "real", Scenario: sc, Machine: Machine{Kernel: "6.18.0", KernelWhere: "host+uml:6.12"},
		Kernels: []KernelRun{{Name: "host", Release: "6.18.0", Where: "host", Modes: []string{"none", "iptables"}},
			{Name: "uml:6.12", Release: "6.12.118", Where: "uml", Modes: []string{"none", "iptables", "ipvs"}}},
		Modes: append(host, guest...)}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, r); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	if n := strings.Count(md, "Holm 1979) over the run's 15 tests"); n != 2 {
		t.Errorf("%d kernel sections state Holm over the run's 15 tests, want 2:\n%s", n, md)
	}
	for _, w := range []string{"over the run's 6 tests", "over the run's 9 tests"} {
		if strings.Contains(md, w) {
			t.Errorf("a kernel section states its own family: %q", w)
		}
	}
	if !strings.Contains(md, "| iptables | 3 | 18000 | ") || !strings.Contains(md, "| 0.015 |\n") {
		t.Errorf("guest iptables' row: want 3 positions and min p (Holm) 0.015 (0.001 × 15):\n%s", md)
	}
	if !strings.Contains(md, "| mode | positions | samples |") {
		t.Errorf("the fairness table's count column is not named positions:\n%s", md)
	}
	if f := findingOf(t, r, "iptables (uml:6.12)"); !strings.Contains(f, "after Holm's correction over 15 tests") {
		t.Errorf("finding %q, want Holm over 15 tests", f)
	}
}
