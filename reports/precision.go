package reports

import (
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat"
)

// MedianDiffCI returns the difference of medians median(b) - median(a) of
// two raw samples (ns) and its percentile-bootstrap confidence interval
// at level conf (for example 0.95) from resamples draws with replacement
// of each sample (seeded, so a report is reproducible). It states how
// precise a lookup difference is: a difference whose interval excludes 0
// is real at that level, however noisy the machine. Quantiles are gonum's
// stat.Empirical. With an empty sample all three are NaN.
func MedianDiffCI(a, b []int64, conf float64, resamples int, seed uint64) (diff, lo, hi float64) {
	if len(a) == 0 || len(b) == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	as, bs := sortedFloats(a), sortedFloats(b)
	diff = stat.Quantile(0.5, stat.Empirical, bs, nil) - stat.Quantile(0.5, stat.Empirical, as, nil)
	rng := rand.New(rand.NewPCG(seed, 0x5851f42d4c957f2d))
	counts := make([]int, max(len(as), len(bs)))
	ds := make([]float64, resamples)
	for i := range ds {
		ds[i] = resampledQuantile(rng, bs, 0.5, counts) - resampledQuantile(rng, as, 0.5, counts)
	}
	slices.Sort(ds)
	alpha := (1 - conf) / 2
	return diff, stat.Quantile(alpha, stat.Empirical, ds, nil), stat.Quantile(1-alpha, stat.Empirical, ds, nil)
}
