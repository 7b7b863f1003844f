package reports

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/gonum/stat"
)

// CompareOptions configures Compare.
type CompareOptions struct {
	// Tolerance is the relative change below which nothing is flagged
	// (0.10 = 10%).
	Tolerance float64
	// Confidence is the level of the bootstrap interval (default 0.95).
	Confidence float64
	// Resamples is the number of bootstrap resamples (default 2000).
	Resamples int
	// Seed seeds the resampling, so a comparison is reproducible (default 1).
	Seed uint64
	// MinSamples is the fewest raw samples per side for a figure to be
	// judged significant (default 5); fewer gives a change without a verdict.
	MinSamples int
}

func (o CompareOptions) withDefaults() CompareOptions {
	if o.Confidence == 0 {
		o.Confidence = 0.95
	}
	if o.Resamples == 0 {
		o.Resamples = 2000
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.MinSamples == 0 {
		o.MinSamples = 5
	}
	return o
}

// Change is one figure's change from a base run to a new run.
type Change struct {
	Figure   string `json:"figure"`
	Mode     string `json:"mode"`
	Services int    `json:"services"`
	Position string `json:"position,omitempty"`
	// Base and New are the statistic (ns) of each run's raw samples.
	Base float64 `json:"base"`
	New  float64 `json:"new"`
	// Ratio is New/Base; Lo and Hi bound it at the chosen confidence
	// (percentile bootstrap, each run resampled independently).
	Ratio float64 `json:"ratio"`
	Lo    float64 `json:"lo"`
	Hi    float64 `json:"hi"`
	// NBase and NNew are the raw sample counts.
	NBase int `json:"nBase"`
	NNew  int `json:"nNew"`
	// Significant is true when the interval excludes 1.
	Significant bool `json:"significant"`
	// Verdict is "regression", "improvement" (both: larger than the
	// tolerance and significant), "" (no flag) or "too few samples".
	Verdict string `json:"verdict"`
}

// Regression reports whether the change is a flagged regression.
func (c Change) Regression() bool { return c.Verdict == "regression" }

// SameMachine returns nil when a and b ran on the same machine and
// kernel (hostname, kernel release, host or uml, CPU model), else an error
// naming every difference.
func SameMachine(a, b *Result) error {
	var diffs []string
	for _, d := range []struct{ what, x, y string }{
		{"hostname", a.Machine.Hostname, b.Machine.Hostname},
		{"kernel", a.Machine.Kernel, b.Machine.Kernel},
		{"kernelWhere", a.Machine.KernelWhere, b.Machine.KernelWhere},
		{"CPU model", a.Machine.CPUModel, b.Machine.CPUModel},
	} {
		if d.x != d.y {
			diffs = append(diffs, fmt.Sprintf("%s %q vs %q", d.what, d.x, d.y))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	return errors.New("runs come from different machines or kernels (" + strings.Join(diffs, "; ") + "), so their figures are not comparable")
}

type sampleSet struct {
	figure, mode, position string
	services               int
	q                      float64 // quantile compared
	samples                []int64
}

// sampleSets lists the figures Compare judges, with their raw samples:
// lookup.latency.p50 and .p99 per mode, size and position (SamplesNs), and
// sync.full (median of SyncFull walls).
func sampleSets(r *Result) []sampleSet {
	var out []sampleSet
	for _, m := range r.Modes {
		size := modeSize(r, m)
		mode := m.Mode
		if s := m.Info["scheduler"]; s != "" && r.Scenario != nil && len(r.Scenario.Sweep.Schedulers) > 0 {
			mode += "/" + s
		}
		if isGuest(kernelOf(m)) {
			mode += " (uml)" // a guest figure never matches a host one (any guest kernel matches any other: the upgrade question)
		}
		if len(m.SyncFull) > 0 {
			out = append(out, sampleSet{"sync.full", mode, "", size, 0.5, syncWalls(m)})
		}
		for _, p := range m.Lookup {
			if len(p.SamplesNs) == 0 {
				continue
			}
			out = append(out, sampleSet{"lookup.latency.p50", mode, p.Position, size, 0.5, p.SamplesNs},
				sampleSet{"lookup.latency.p99", mode, p.Position, size, 0.99, p.SamplesNs})
		}
	}
	return out
}

// Compare judges every figure present in both runs: the ratio new/base of
// the figure's quantile (median for p50 and sync.full, 0.99 for p99), with
// a percentile-bootstrap confidence interval from the raw samples (quantiles
// by gonum's stat.Quantile, Empirical). A change is flagged when it is both
// larger than the tolerance and significant (the interval excludes 1);
// higher is worse for every figure compared. Figures are matched by name,
// mode, size and position; those in one run only are skipped.
func Compare(base, cur *Result, opt CompareOptions) []Change {
	opt = opt.withDefaults()
	rng := rand.New(rand.NewPCG(opt.Seed, 0x9e3779b97f4a7c15))
	idx := map[string]sampleSet{}
	for _, s := range sampleSets(base) {
		idx[fmt.Sprint(s.figure, s.mode, s.position, s.services)] = s
	}
	var out []Change
	for _, n := range sampleSets(cur) {
		b, ok := idx[fmt.Sprint(n.figure, n.mode, n.position, n.services)]
		if !ok {
			continue
		}
		c := Change{Figure: n.figure, Mode: n.mode, Services: n.services, Position: n.position, NBase: len(b.samples), NNew: len(n.samples)}
		bs, ns := sortedFloats(b.samples), sortedFloats(n.samples)
		c.Base = stat.Quantile(n.q, stat.Empirical, bs, nil)
		c.New = stat.Quantile(n.q, stat.Empirical, ns, nil)
		c.Ratio = c.New / c.Base
		if c.Base == 0 {
			c.Ratio = math.NaN()
		}
		ratios := make([]float64, 0, opt.Resamples)
		counts := make([]int, max(len(bs), len(ns)))
		rb0, rn0 := ranksOf(b.samples), ranksOf(n.samples)
		for range opt.Resamples {
			rb := blockResampledQuantile(rng, bs, rb0, n.q, counts)
			rn := blockResampledQuantile(rng, ns, rn0, n.q, counts)
			if rb > 0 {
				ratios = append(ratios, rn/rb)
			}
		}
		slices.Sort(ratios)
		alpha := (1 - opt.Confidence) / 2
		if len(ratios) > 0 {
			c.Lo = stat.Quantile(alpha, stat.Empirical, ratios, nil)
			c.Hi = stat.Quantile(1-alpha, stat.Empirical, ratios, nil)
		} else {
			c.Lo, c.Hi = math.NaN(), math.NaN()
		}
		c.Significant = c.Lo > 1 || c.Hi < 1
		switch {
		case c.NBase < opt.MinSamples || c.NNew < opt.MinSamples,
			// A tail quantile needs enough samples beyond it for its
			// bootstrap interval to mean anything (p99: 2000 samples).
			n.q > 0.5 && float64(min(c.NBase, c.NNew))*(1-n.q) < MinTailSamples:
			c.Significant = false
			c.Verdict = "too few samples"
		case c.Significant && c.Ratio > 1+opt.Tolerance:
			c.Verdict = "regression"
		case c.Significant && c.Ratio < 1-opt.Tolerance:
			c.Verdict = "improvement"
		}
		out = append(out, c)
	}
	return out
}

func sortedFloats(xs []int64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	slices.Sort(out)
	return out
}

// MinTailSamples is the fewest samples beyond a tail quantile (for p99,
// 1% of the run) for Compare to judge it.
const MinTailSamples = 20

// BootstrapBlock is the block length of Compare's bootstrap: the traffic
// driver measures each position in chunks of this many connections, and
// resampling whole chunks (a moving-block bootstrap, circular) keeps the
// drift between chunks of a run in the interval, which resampling single
// connections would hide and so flag changes between identical runs.
const BootstrapBlock = 250

// ranksOf returns, for each sample in run order, its index in sorted order.
func ranksOf(xs []int64) []int {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(xs[a], xs[b]) })
	ranks := make([]int, len(xs))
	for r, i := range idx {
		ranks[i] = r
	}
	return ranks
}

// blockResampledQuantile is resampledQuantile over blocks: it draws
// len(sorted) samples as runs of BootstrapBlock consecutive samples (in run
// order, wrapping around) from random starts. ranks maps run order to
// sorted order (ranksOf).
func blockResampledQuantile(rng *rand.Rand, sorted []float64, ranks []int, q float64, counts []int) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	block := min(BootstrapBlock, max(1, n/10))
	clear(counts[:n])
	for drawn := 0; drawn < n; {
		start := rng.IntN(n)
		for k := 0; k < block && drawn < n; k++ {
			counts[ranks[(start+k)%n]]++
			drawn++
		}
	}
	return countedQuantile(sorted, counts[:n], q)
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

// WriteComparison prints a table of changes and a verdict line.
func WriteComparison(w io.Writer, cs []Change, opt CompareOptions) error {
	opt = opt.withDefaults()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "figure\tmode\tservices\tposition\tbase\tnew\tchange\t%.0f%% CI\tn\tverdict\n", opt.Confidence*100)
	regs, imps := 0, 0
	for _, c := range cs {
		pos := c.Position
		if pos == "" {
			pos = "-"
		}
		v := c.Verdict
		switch v {
		case "":
			v = "~"
			if c.Significant {
				v = "~ (within tolerance)"
			}
		case "regression":
			regs++
			v = "REGRESSION"
		case "improvement":
			imps++
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t[%s, %s]\t%d/%d\t%s\n", c.Figure, c.Mode, c.Services, pos,
			FormatNs(c.Base), FormatNs(c.New), pct(c.Ratio), pct(c.Lo), pct(c.Hi), c.NBase, c.NNew, v)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d figures compared: %d regressions, %d improvements (flagged when |change| > %.0f%% and the %.0f%% interval excludes 0%%; bootstrap, %d resamples, seed %d)\n",
		len(cs), regs, imps, opt.Tolerance*100, opt.Confidence*100, opt.Resamples, opt.Seed)
	return err
}

// pct writes a ratio as a signed percentage change: 1.3 -> "+30.0%".
func pct(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", (r-1)*100)
}
