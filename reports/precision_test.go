package reports

import (
	"math/rand/v2"
	"testing"
)

// TestMedianDiffCI: a 30 µs shift between two noisy samples (lognormal
// spread like connect times) is found with an interval that holds 30 µs
// and excludes 0; two samples of one distribution get an interval
// holding 0.
func TestMedianDiffCI(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	draw := func(n int, shift float64) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(25e3*(1+0.5*rng.ExpFloat64()) + shift)
		}
		return out
	}
	a, b := draw(4000, 0), draw(4000, 30e3)
	d, lo, hi := MedianDiffCI(a, b, 0.95, 500, 1)
	if !(lo < 30e3 && 30e3 < hi) || lo <= 0 || d < 25e3 || d > 35e3 {
		t.Errorf("shift 30 µs: diff %.0f ns, 95%% CI [%.0f, %.0f]", d, lo, hi)
	}
	c := draw(4000, 0)
	if _, lo, hi := MedianDiffCI(a, c, 0.95, 500, 1); !(lo < 0 && 0 < hi) {
		t.Errorf("same distribution: 95%% CI [%.0f, %.0f] excludes 0", lo, hi)
	}
}
