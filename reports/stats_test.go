package reports

import (
	"math"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b)) }

// TestComputeFairnessKnownValues checks against closed forms computed by
// hand: Jain([1,2,3]) = 6²/(3·14) = 6/7; Pearson's χ² of [10,20,30] against
// [20,20,20] is (100+0+100)/20 = 10, and with 2 degrees of freedom the
// chi-squared survival function is exp(-x/2), so p = e^-5.
func TestComputeFairnessKnownValues(t *testing.T) {
	f := ComputeFairness([]float64{10, 20, 30}, nil)
	if !near(f.Jain, 6.0/7.0, 1e-12) {
		t.Errorf("Jain = %v, want 6/7", f.Jain)
	}
	if !near(f.ChiSquare, 10, 1e-12) || f.DoF != 2 {
		t.Errorf("chi2 = %v dof %d, want 10, 2", f.ChiSquare, f.DoF)
	}
	if !near(f.PValue, math.Exp(-5), 1e-9) {
		t.Errorf("p = %v, want e^-5 = %v", f.PValue, math.Exp(-5))
	}
	if !near(f.MaxMin, 3, 1e-12) {
		t.Errorf("max/min = %v, want 3", f.MaxMin)
	}
	// population CV of [10,20,30]: sd = sqrt(200/3), mean 20.
	if !near(f.CV, math.Sqrt(200.0/3)/20, 1e-12) {
		t.Errorf("CV = %v", f.CV)
	}
}

func TestComputeFairnessWeighted(t *testing.T) {
	// Weights 1:2:3 and hits exactly in proportion: perfectly fair.
	f := ComputeFairness([]float64{100, 200, 300}, []float64{1, 2, 3})
	if !near(f.Jain, 1, 1e-12) || f.ChiSquare > 1e-9 || !near(f.PValue, 1, 1e-9) {
		t.Errorf("proportional hits judged unfair: %+v", f)
	}
	// The same hits against equal weights are clearly unfair.
	g := ComputeFairness([]float64{100, 200, 300}, nil)
	if g.PValue > 1e-6 {
		t.Errorf("skewed hits not rejected: %+v", g)
	}
}

func TestComputeFairnessStarved(t *testing.T) {
	f := ComputeFairness([]float64{0, 50, 50}, nil)
	if f.Starved != 1 || f.MaxMin != 0 {
		t.Errorf("starved endpoint not reported: %+v", f)
	}
}

func TestPoolFairnessAddsChiSquare(t *testing.T) {
	a := ComputeFairness([]float64{10, 20, 30}, nil)
	p := PoolFairness([]Fairness{a, a})
	// χ² 20 on 4 dof: survival = e^-10 (1 + 10) for k=4.
	if p.DoF != 4 || !near(p.ChiSquare, 20, 1e-12) || !near(p.PValue, math.Exp(-10)*11, 1e-9) {
		t.Errorf("pooled = %+v", p)
	}
	if p.Services != 2 || p.Samples != 120 || !near(p.MinJain, 6.0/7.0, 1e-12) {
		t.Errorf("pooled = %+v", p)
	}
}

func TestSummarizePercentiles(t *testing.T) {
	var xs []int64
	for i := int64(1); i <= 10000; i++ {
		xs = append(xs, i*1000) // 1 µs .. 10 ms
	}
	s := Summarize(xs)
	if s.Count != 10000 || s.Min != 1000 {
		t.Fatalf("%+v", s)
	}
	for _, c := range []struct {
		got  int64
		want float64
	}{{s.P50, 5e6}, {s.P90, 9e6}, {s.P99, 9.9e6}, {s.P999, 9.99e6}, {s.Max, 1e7}} {
		if !near(float64(c.got), c.want, 1e-3) {
			t.Errorf("percentile %d, want %v within 0.1%%", c.got, c.want)
		}
	}
	if !near(s.Mean, 5000.5e3, 1e-12) {
		t.Errorf("mean %v", s.Mean)
	}
	if (Summarize(nil) != Summary{}) {
		t.Error("empty input must give a zero Summary")
	}
}
