package reports

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/proxybench/proxybench/proxymodes/ipvs"
)

// TestNoncentralAgainstNormal checks the Poisson-mixture survival against
// an independent closed form: with 1 degree of freedom a noncentral
// chi-squared variable is (Z+√λ)², so P(X > c²) = Φ(√λ−c) + Φ(−√λ−c).
func TestNoncentralAgainstNormal(t *testing.T) {
	n := distuv.UnitNormal
	for _, lambda := range []float64{0.5, 4, 7.85, 20, 60} {
		c := 1.959963984540054
		want := n.CDF(math.Sqrt(lambda)-c) + n.CDF(-math.Sqrt(lambda)-c)
		got := NoncentralChiSquaredSurvival(c*c, 1, lambda)
		if !near(got, want, 1e-9) {
			t.Errorf("λ=%v: %v, want %v", lambda, got, want)
		}
	}
}

// TestSamplesToDetectCohen checks the power analysis against Cohen (1988),
// Statistical Power Analysis for the Behavioral Sciences, 2nd ed., Table
// 7.4.6 (N for w = .10, α = .05, power .80): u=1: 785, u=2: 964, u=3: 1090,
// u=4: 1194. Cohen's table rounds λ; we allow 0.5%.
func TestSamplesToDetectCohen(t *testing.T) {
	for dof, want := range map[int]int{1: 785, 2: 964, 3: 1090, 4: 1194} {
		got := SamplesToDetect(dof, 0.10, 0.05, 0.80)
		if math.Abs(float64(got-want)) > 0.005*float64(want) {
			t.Errorf("dof %d: N = %d, want %d (Cohen)", dof, got, want)
		}
	}
	// N scales as 1/w²: w = 0.05 needs four times w = 0.10.
	if a, b := SamplesToDetect(2, 0.05, 0.05, 0.8), SamplesToDetect(2, 0.10, 0.05, 0.8); math.Abs(float64(a)-4*float64(b)) > 4 {
		t.Errorf("w=.05: %d, w=.10: %d; want a 4× ratio", a, b)
	}
}

// iptablesChain draws an endpoint as kube-proxy's KUBE-SVC chain does: rule
// i (0-based) of n matches with probability 1/(n-i); the last always.
func iptablesChain(rng *rand.Rand, n int) int {
	for i := 0; i < n-1; i++ {
		if rng.Float64() < 1/float64(n-i) {
			return i
		}
	}
	return n - 1
}

// TestIPTablesChainUniform: the 1/(n-i) chain gives equal shares, so the
// chi-square test does not reject at α = 0.001 over enough samples
// (more than SamplesToDetect for a 5% deviation).
func TestIPTablesChainUniform(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, n := range []int{2, 3, 5, 10} {
		need := SamplesToDetect(n-1, FairnessEffect, FairnessAlpha, FairnessPower)
		hits := make([]float64, n)
		for i := 0; i < need; i++ {
			hits[iptablesChain(rng, n)]++
		}
		f := ComputeFairness(hits, nil)
		if f.PValue < FairnessAlpha {
			t.Errorf("n=%d: %v over %d samples rejected (p=%g)", n, hits, need, f.PValue)
		}
	}
}

// TestSkewedRejected: a fake distribution 10% off on one endpoint of
// three is rejected with the needed number of samples, and the verdict
// says UNFAIR; the fair one is "fair".
func TestSkewedRejected(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	need := SamplesToDetect(2, FairnessEffect, FairnessAlpha, FairnessPower)
	draw := func(p []float64) [][]int {
		row := make([]int, len(p))
		for i := 0; i < 2*need; i++ {
			u, k := rng.Float64(), 0
			for u > p[k] && k < len(p)-1 {
				u -= p[k]
				k++
			}
			row[k]++
		}
		return [][]int{row}
	}
	run := func(p []float64) *FairnessRun {
		r := &FairnessRun{Mode: "fake", Expect: Expectation{Unit: UnitConnection}, Nodes: 1,
			Obs: []ServiceObs{{Service: "pb/s:p80", Endpoints: []string{"a", "b", "c"}, Weights: []float64{1, 1, 1}, Counts: draw(p), FirstPick: -1}}}
		r.Analyze()
		return r
	}
	if r := run([]float64{0.3667, 0.3167, 0.3166}); r.Verdict != "UNFAIR" {
		t.Errorf("skewed: verdict %s (%s)", r.Verdict, r.Why)
	}
	if r := run([]float64{1.0 / 3, 1.0 / 3, 1.0 / 3}); r.Verdict != "fair" {
		t.Errorf("even: verdict %s (%s)", r.Verdict, r.Why)
	}
}

// TestWRRKnownShares: IPVS wrr's definition over weights 1:2:3 is the
// sequence c b c a b c (ip_vs_wrr.c: the current weight steps down by
// gcd from max), i.e. shares 1/6, 2/6, 3/6, judged fair against weights
// and unfair against equal shares.
func TestWRRKnownShares(t *testing.T) {
	seq := wrrSequence([]int{1, 2, 3}, 600)
	counts := make([]int, 3)
	for _, k := range seq {
		counts[k]++
	}
	if counts[0] != 100 || counts[1] != 200 || counts[2] != 300 {
		t.Fatalf("wrr counts %v, want 100 200 300", counts)
	}
	obs := []ServiceObs{{Service: "s", Endpoints: []string{"a", "b", "c"}, Weights: []float64{1, 2, 3}, Counts: [][]int{counts}, FirstPick: -1}}
	r := &FairnessRun{Mode: "ipvs", Scheduler: "wrr", Expect: ipvs.Expectation("wrr"), Nodes: 1, Obs: obs}
	r.Analyze()
	if r.Cluster.PValue < 0.999 || r.Cluster.MeanJain < 0.999999 {
		t.Errorf("wrr against weights: %+v", r.Cluster)
	}
	r = &FairnessRun{Mode: "ipvs", Scheduler: "rr", Expect: ipvs.Expectation("rr"), Nodes: 1, Obs: obs}
	r.Analyze()
	if r.Verdict != "UNFAIR" {
		t.Errorf("1:2:3 against rr's equal shares: %s", r.Verdict)
	}
}

// wrrSequence is ip_vs_wrr.c's ip_vs_wrr_schedule over weights for n picks.
func wrrSequence(w []int, n int) []int {
	g, mx := 0, 0
	for _, x := range w {
		g, mx = gcd(g, x), max(mx, x)
	}
	cw, i := 0, -1
	var out []int
	for len(out) < n {
		i = (i + 1) % len(w)
		if i == 0 {
			cw -= g
			if cw <= 0 {
				cw = mx
			}
		}
		if w[i] >= cw {
			out = append(out, i)
		}
	}
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// TestSourceAndDestinationUnits: under sh each source lands on one
// endpoint (stickiness 1, counted once per source); under dh every
// connection of a ClusterIP reaches one endpoint (sticky).
func TestSourceAndDestinationUnits(t *testing.T) {
	var rows [][]int
	for s := 0; s < 30; s++ {
		row := make([]int, 3)
		row[s%3] = 10
		rows = append(rows, row)
	}
	r := &FairnessRun{Mode: "ipvs", Scheduler: "sh", Expect: ipvs.Expectation("sh"), Nodes: 1,
		Obs: []ServiceObs{{Service: "s", Endpoints: []string{"a", "b", "c"}, Weights: []float64{1, 1, 1}, Counts: rows, FirstPick: -1}}}
	r.Analyze()
	if r.Cluster.Samples != 30 || r.Cluster.Stickiness != 1 || r.PerService[0].Hits["a"] != 10 {
		t.Errorf("sh: %+v hits %v", r.Cluster, r.PerService[0].Hits)
	}
	one := [][]int{{0, 50, 0}, {0, 50, 0}}
	r = &FairnessRun{Mode: "ipvs", Scheduler: "dh", Expect: ipvs.Expectation("dh"), Nodes: 1,
		Obs: []ServiceObs{{Service: "s", Endpoints: []string{"a", "b", "c"}, Weights: []float64{1, 1, 1}, Counts: one, FirstPick: -1}}}
	r.Analyze()
	if r.Verdict != "sticky" {
		t.Errorf("dh: %s %s", r.Verdict, r.Why)
	}
}

// TestFirstPickShare: 8 nodes that all pick endpoint 0 first give share 1;
// 8 nodes spread over 4 endpoints two each give 0.25.
func TestFirstPickShare(t *testing.T) {
	mk := func(picks []int) float64 {
		r := &FairnessRun{Mode: "ipvs", Expect: ipvs.Expectation("rr"), Nodes: len(picks)}
		for n, p := range picks {
			r.Obs = append(r.Obs, ServiceObs{Node: n, Service: "s", Endpoints: []string{"a", "b", "c", "d"}, Weights: []float64{1, 1, 1, 1}, Counts: [][]int{{1, 1, 1, 1}}, FirstPick: p})
		}
		r.Analyze()
		return r.FirstPickMaxShare
	}
	if s := mk([]int{0, 0, 0, 0, 0, 0, 0, 0}); s != 1 {
		t.Errorf("sorted: %v", s)
	}
	if s := mk([]int{0, 1, 2, 3, 0, 1, 2, 3}); s != 0.25 {
		t.Errorf("spread: %v", s)
	}
}

func ExampleSamplesToDetect() {
	fmt.Println(SamplesToDetect(2, FairnessEffect, FairnessAlpha, FairnessPower) > 0)
	// Output: true
}

// TestOneClientUnderSourceHash: with one client address, sh sends every
// connection of a service to one endpoint. The source unit then has one
// sample per service, too few to test: the verdict says so (never "fair?")
// and names the concentration; with sh-port every connection is a draw.
func TestOneClientUnderSourceHash(t *testing.T) {
	var obs []ServiceObs
	for s := 0; s < 4; s++ {
		row := make([]int, 4)
		row[s%4] = 250
		obs = append(obs, ServiceObs{Service: fmt.Sprint("s", s), Endpoints: []string{"a", "b", "c", "d"},
			Weights: []float64{1, 1, 1, 1}, Sources: []int{0}, Counts: [][]int{row}, FirstPick: -1})
	}
	for _, sched := range []string{"sh", "mh"} {
		r := &FairnessRun{Mode: "ipvs", Scheduler: sched, Expect: ipvs.Expectation(sched), Nodes: 1, Obs: obs}
		r.Analyze()
		if r.Verdict != VerdictUntestable || !strings.Contains(r.Why, "all connections of a client on one endpoint") || !strings.Contains(r.Why, "12 endpoints starved") {
			t.Errorf("%s, one client: verdict %q, why %q; want untestable naming the concentration and 12 starved endpoints", sched, r.Verdict, r.Why)
		}
		var b strings.Builder
		writeFairnessMarkdown(&b, &Result{Modes: []ModeResult{{Mode: "ipvs", FairnessRun: r}}})
		if strings.Contains(b.String(), "fair?") && !strings.Contains(b.String(), "`fair?` means") {
			t.Errorf("%s: markdown says fair?:\n%s", sched, b.String())
		}
	}
	e := ipvs.Expectation("sh", "sh-port")
	if e.Unit != UnitConnection || !strings.Contains(e.Source, "sh-port") {
		t.Errorf("sh+sh-port expectation %+v, want the connection unit", e)
	}
	r := &FairnessRun{Mode: "ipvs", Scheduler: "sh+sh-port", Expect: e, Nodes: 1, Obs: obs}
	r.Analyze()
	if r.Verdict != "UNFAIR" {
		t.Errorf("sh+sh-port with every connection on one endpoint: %q (%s), want UNFAIR", r.Verdict, r.Why)
	}
}
