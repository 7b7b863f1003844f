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

func sortedFloats(xs []int64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	slices.Sort(out)
	return out
}

// countedQuantile is the empirical q-quantile (the smallest value whose
// cumulative share reaches q, as stat.Empirical) of a resample given as
// draw counts per rank of sorted.
func countedQuantile(sorted []float64, counts []int, q float64) float64 {
	n := len(sorted)
	need := max(int(math.Ceil(q*float64(n))), 1)
	cum := 0
	for i, c := range counts {
		cum += c
		if cum >= need {
			return sorted[i]
		}
	}
	return sorted[n-1]
}

// resampledQuantile draws len(sorted) values with replacement and returns
// their empirical q-quantile (the smallest value whose cumulative share
// reaches q, as stat.Empirical), counting draws per rank instead of
// sorting the resample. counts is scratch space of at least len(sorted).
func resampledQuantile(rng *rand.Rand, sorted []float64, q float64, counts []int) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	clear(counts[:n])
	for range n {
		counts[rng.IntN(n)]++
	}
	return countedQuantile(sorted, counts[:n], q)
}
