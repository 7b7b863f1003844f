package reports

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"

	"golang.org/x/perf/benchmath"
)

// CompareOptions configures CompareRuns.
type CompareOptions struct {
	// Tolerance is the relative change below which nothing is flagged
	// (0.10 = 10%).
	Tolerance float64
	// Alpha is the significance level of the rank test (default 0.05).
	Alpha float64
	// AnySize matches figures whatever their service count (a figure at
	// 2000 services against the same figure at 1000): for comparing a
	// deliberately resized run. Each side should hold one size.
	AnySize bool
	// Gate names the figures whose regression fails the gate (Change.Gated;
	// --fail-on-regression, JUnit). Empty: every figure compared.
	Gate []string
}

// RatioFigures are the figures measured against a baseline within one
// run (docs/gates.md recommends gating on them): `compare --gate ratios`.
var RatioFigures = []string{"lookup.vsnone.p50", "lookup.vsnone.p99", "sync.full.vsraw", "cpu.vsnone"}

// ParseGate reads --gate: "all" (nil), "ratios" (RatioFigures), or a
// comma-separated list of CompareFigures; an unknown name is an error
// naming the known ones.
func ParseGate(s string) ([]string, error) {
	switch strings.TrimSpace(s) {
	case "", "all":
		return nil, nil
	case "ratios":
		return slices.Clone(RatioFigures), nil
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "ratios" {
			out = append(out, RatioFigures...)
			continue
		}
		if !slices.Contains(CompareFigures, f) {
			return nil, fmt.Errorf("%q is not a compared figure; use all, ratios or names from %s", f, strings.Join(CompareFigures, ", "))
		}
		out = append(out, f)
	}
	return out, nil
}

func (o CompareOptions) withDefaults() CompareOptions {
	if o.Alpha == 0 {
		o.Alpha = 0.05
	}
	return o
}

// CompareFigures are the figures compare judges; for each, higher is
// worse. The lookup and CPU ratios against mode none and the sync ratio
// against the raw tool are measured within one run, so a noisy neighbour
// that slows a whole run cancels out of them (docs/gates.md).
//
// sync.incremental and the kube-proxy figures (scenarios.KubeProxyFigures:
// kube-proxy's own full and partial sync durations and network programming
// latency, its CPU, peak RSS and its rule programs' CPU) are what differs
// between two kube-proxy builds, e.g. `compare RUN.json --rows "nftables
// (kube-proxy v1.36.3)","nftables (kube-proxy v1.37.2)"`. The churn
// figures (churnFigures) are judged per churn phase (its minSyncPeriod):
// programming latency by the data plane and, for kube-proxy rows, by
// kube-proxy's own histogram, with its CPU and peak RSS over the phase.
var CompareFigures = []string{
	"lookup.latency.p50", "lookup.latency.p99", "lookup.vsnone.p50", "lookup.vsnone.p99",
	"lookup.kernel.p50", "lookup.kernel.p90", "lookup.kernel.p99", "lookup.kernel.other.p50", "lookup.kernel.other.p99",
	"sync.full", "sync.full.vsraw", "sync.incremental", "cpu.perconn", "cpu.vsnone",
	"kubeproxy.sync.full", "kubeproxy.sync.partial", "kubeproxy.programming",
	"kubeproxy.cpu", "kubeproxy.programs.cpu", "kubeproxy.rss",
	"churn.programming.p50", "churn.programming.p99",
	"kubeproxy.churn.programming.p50", "kubeproxy.churn.programming.p99", "kubeproxy.churn.programming.mean",
	"kubeproxy.churn.cpu", "kubeproxy.churn.rss",
}

// NotInBoth is the verdict of a figure only one side has (a kube-proxy
// figure against a builtin row, a mode one side did not run): shown, never
// judged.
const NotInBoth = "not in both"

// Basis says what one run's value of a figure is made of: the figure's
// statistic over the run's own samples (one per sync or connection), or,
// for kube-proxy's histograms, the run's mean (a result holds kube-proxy's
// scrapes, sum and count, not each sync's duration).
func Basis(figure string) string {
	switch figure {
	case "kubeproxy.sync.full", "kubeproxy.sync.partial", "kubeproxy.programming":
		return "per-run mean of kube-proxy's histogram (no per-sync samples in the result)"
	case "kubeproxy.cpu", "kubeproxy.programs.cpu", "kubeproxy.rss":
		return "per-run total (CPU) or peak (RSS) of the row"
	case "kubeproxy.churn.programming.p50", "kubeproxy.churn.programming.p99":
		return "per-run quantile of kube-proxy's histogram over the churn phase, interpolated in its buckets (histogram_quantile)"
	case "kubeproxy.churn.programming.mean":
		return "per-run mean of kube-proxy's histogram over the churn phase"
	case "kubeproxy.churn.cpu", "kubeproxy.churn.rss":
		return "per-run total (CPU, own + rule programs) or peak (VmRSS) over the churn phase"
	case "sync.incremental", "sync.full":
		return "per-run median over the run's syncs (per-sync samples)"
	}
	return "per-run statistic over the run's raw samples"
}

// Change is one figure's change from the base runs to the new runs.
type Change struct {
	Figure   string `json:"figure"`
	Mode     string `json:"mode"`
	Kernel   string `json:"kernel,omitempty"`
	Services int    `json:"services"`
	// BaseServices is the base side's size when it differs (AnySize).
	BaseServices int    `json:"baseServices,omitempty"`
	Position     string `json:"position,omitempty"`
	// MinSyncPeriod is a churn figure's phase's (Figure.MinSyncPeriod).
	MinSyncPeriod string `json:"minSyncPeriod,omitempty"`
	Unit          string `json:"unit"`
	// BaseRuns and NewRuns are the figure per run (each computed from
	// that run's raw samples only), in Unit.
	BaseRuns []float64 `json:"baseRuns"`
	NewRuns  []float64 `json:"newRuns"`
	// Base and New are the medians of BaseRuns and NewRuns; Ratio is
	// New/Base (NaN when Base is 0).
	Base  float64 `json:"base"`
	New   float64 `json:"new"`
	Ratio float64 `json:"ratio"`
	// P is the two-sided p-value of the Mann-Whitney U test of BaseRuns
	// against NewRuns (golang.org/x/perf/benchmath, AssumeNothing); Alpha
	// the level it is judged at.
	P     float64 `json:"p"`
	Alpha float64 `json:"alpha"`
	// Floor is the noise floor: the smallest relative change (0.05 = 5%)
	// the test would flag for certain given the spread between the base
	// runs, the machine when nothing changed (NoiseFloor). A change below
	// it is flagged only when the new runs happen to separate from the
	// base runs anyway. Meaningless under "too few runs". It is the floor
	// of an increase (new = base×(1+δ)); FloorDown is that of a decrease.
	Floor float64 `json:"floor"`
	// FloorDown is the noise floor of a decrease, as a relative change
	// below base (0.40 = new 40% below base): the smallest decrease the
	// test flags for certain (NoiseFloorDown). Always below 1, since a
	// decrease cannot exceed 100%.
	FloorDown float64 `json:"floorDown"`
	// NeedRuns is the fewest runs per side for which the test can reach
	// Alpha at all (4 at 0.05).
	NeedRuns int `json:"needRuns"`
	// Significant is P <= Alpha with enough runs.
	Significant bool `json:"significant"`
	// Verdict is "regression" or "improvement" (significant and larger
	// than the tolerance), "" (no verdict) or "too few runs". JSON writes
	// "" as VerdictText's "no verdict" or "within tolerance".
	Verdict string `json:"verdict"`
	// Gated is true when the figure is one the gate acts on
	// (CompareOptions.Gate); a regression of another figure is shown but
	// fails nothing.
	Gated bool `json:"gated"`
	// Basis says what each run's value is (Basis).
	Basis string `json:"basis"`
}

// Regression reports whether the change is a flagged regression.
func (c Change) Regression() bool { return c.Verdict == "regression" }

// Fails reports whether the change fails the gate: a regression of a
// gated figure.
func (c Change) Fails() bool { return c.Gated && c.Regression() }

// Flagged reports whether the change is a regression or an improvement.
func (c Change) Flagged() bool { return c.Verdict == "regression" || c.Verdict == "improvement" }

// Key names the figure as gates and reports do.
func (c Change) Key() string {
	f := Figure{Name: c.Figure, Mode: c.Mode, Kernel: c.Kernel, Position: c.Position, MinSyncPeriod: c.MinSyncPeriod, Services: c.Services}
	return f.Key()
}

// VerdictText is the verdict for people: "regression", "improvement",
// "no verdict" (not significant), "within tolerance" (significant but
// smaller than the tolerance), "too few runs: need ≥ 4 per side" or
// "not in both" (NotInBoth).
func (c Change) VerdictText() string {
	switch {
	case c.Verdict == NotInBoth:
		side := "base"
		if len(c.BaseRuns) == 0 {
			side = "new"
		}
		return NotInBoth + " (only " + side + " has it)"
	case c.Verdict == "too few runs":
		return fmt.Sprintf("too few runs: need ≥ %d per side", c.NeedRuns)
	case c.Verdict != "":
		return c.Verdict
	case c.Significant:
		return "within tolerance"
	}
	return "no verdict"
}

// String is one line: "lookup.latency.p50{…} +3.0% (floor 5.0%, p=0.421, n=5+5): no verdict".
func (c Change) String() string {
	return fmt.Sprintf("%s %s (floor %s, p=%.3f, n=%d+%d): %s", c.Key(), pct(c.Ratio), floorText(c), c.P, len(c.BaseRuns), len(c.NewRuns), c.VerdictText())
}

// DirFloor is the noise floor in the direction of the change: Floor
// for an increase (and no change), -FloorDown for a decrease, so that
// it compares with Ratio-1 (a change of -30% under a floor of -69% is
// below it).
func (c Change) DirFloor() float64 {
	if c.Ratio < 1 {
		return -c.FloorDown
	}
	return c.Floor
}

func floorText(c Change) string {
	f := c.DirFloor()
	if c.Verdict == "too few runs" || c.Verdict == NotInBoth || math.IsInf(f, 0) || math.IsNaN(f) {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", f*100)
}

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

// runFigures returns the judged figures of one run keyed for matching
// (name, mode with swept scheduler, kernel, position and, unless anySize,
// size), in the run's order. Ratios of mode none to itself and syncs of
// mode none (it programs nothing) are left out.
func runFigures(r *Result, anySize bool) (keys []string, figs map[string]Figure) {
	figs = map[string]Figure{}
	for _, f := range Figures(r) {
		if !slices.Contains(CompareFigures, f.Name) || isBaselineMode(f.Mode) && (strings.Contains(f.Name, ".vs") || strings.HasPrefix(f.Name, "sync.")) {
			continue
		}
		mode := f.Mode
		if f.variant != "" {
			mode += "/" + f.variant
		}
		// Any guest kernel matches any other (two runs on uml:6.1 and
		// uml:6.12: the upgrade question), never the host.
		kernel := f.Kernel
		if isGuest(kernel) {
			kernel = "uml"
		}
		k := fmt.Sprint(f.Name, "|", mode, "|", kernel, "|", f.Position, "|", f.MinSyncPeriod)
		if !anySize {
			k += fmt.Sprint("|", f.Services)
		}
		f.Mode = mode
		if _, dup := figs[k]; !dup {
			keys = append(keys, k)
		}
		figs[k] = f
	}
	return keys, figs
}

// CompareRuns judges every figure of CompareFigures present on both
// sides across runs: each run contributes one value per figure (its
// statistic over its own raw samples), and the two sides' values are
// compared with the Mann-Whitney U test (two-sided, exact for small
// samples; golang.org/x/perf/benchmath, the test benchstat uses). A
// change is flagged when P <= Alpha and the change of the medians is
// larger than the tolerance; with fewer runs than the test needs to ever
// reach Alpha the verdict is "too few runs". base and cur are single runs
// (SplitRuns); figures are matched by name, mode, kernel, position and
// size. A figure on one side only gets the verdict NotInBoth (after the
// others, in its side's order), with that side's runs and NaN for the
// other's median.
func CompareRuns(base, cur []*Result, opt CompareOptions) []Change {
	opt = opt.withDefaults()
	collect := func(runs []*Result) ([]string, map[string][]Figure) {
		var order []string
		vals := map[string][]Figure{}
		for _, r := range runs {
			keys, figs := runFigures(r, opt.AnySize)
			for _, k := range keys {
				if _, seen := vals[k]; !seen {
					order = append(order, k)
				}
				vals[k] = append(vals[k], figs[k])
			}
		}
		return order, vals
	}
	border, bv := collect(base)
	order, nv := collect(cur)
	need := NeedRuns(opt.Alpha)
	var out, oneSide []Change
	change := func(f Figure, bf, nf []Figure) Change {
		c := Change{Figure: f.Name, Mode: f.Mode, Kernel: f.Kernel, Services: f.Services, Position: f.Position, MinSyncPeriod: f.MinSyncPeriod, Unit: f.Unit,
			Alpha: opt.Alpha, NeedRuns: need, Basis: Basis(f.Name)}
		for _, x := range bf {
			c.BaseRuns = append(c.BaseRuns, x.Value)
		}
		for _, x := range nf {
			c.NewRuns = append(c.NewRuns, x.Value)
		}
		c.Gated = len(opt.Gate) == 0 || slices.Contains(opt.Gate, c.Figure)
		return c
	}
	notInBoth := func(c Change) Change {
		c.Verdict, c.Base, c.New, c.Ratio, c.P, c.Floor = NotInBoth, median(c.BaseRuns), median(c.NewRuns), math.NaN(), math.NaN(), math.NaN()
		return c
	}
	for _, k := range order {
		nf := nv[k]
		bf, ok := bv[k]
		if !ok {
			oneSide = append(oneSide, notInBoth(change(nf[0], nil, nf)))
			continue
		}
		c := change(nf[0], bf, nf)
		if bf[0].Services != c.Services {
			c.BaseServices = bf[0].Services
		}
		judge(&c, opt)
		out = append(out, c)
	}
	for _, k := range border {
		if _, ok := nv[k]; !ok {
			oneSide = append(oneSide, notInBoth(change(bv[k][0], bv[k], nil)))
		}
	}
	return append(out, oneSide...)
}

// Judged reports whether both sides had the figure (Verdict is not
// NotInBoth).
func (c Change) Judged() bool { return c.Verdict != NotInBoth }

// judge fills Base, New, Ratio, P, Floor, Significant and Verdict of c
// from its runs.
func judge(c *Change, opt CompareOptions) {
	c.Base, c.New = median(c.BaseRuns), median(c.NewRuns)
	c.Ratio = c.New / c.Base
	if c.Base == 0 {
		c.Ratio = math.NaN()
	}
	c.P = uTest(c.BaseRuns, c.NewRuns, opt.Alpha)
	if minP(len(c.BaseRuns), len(c.NewRuns)) > opt.Alpha {
		c.Verdict = "too few runs"
		c.Floor, c.FloorDown = math.Inf(1), math.Inf(1)
		return
	}
	c.Floor = NoiseFloor(c.BaseRuns, opt.Alpha)
	c.FloorDown = NoiseFloorDown(c.BaseRuns, opt.Alpha)
	c.Significant = c.P <= opt.Alpha
	switch {
	case c.Significant && c.Ratio > 1+opt.Tolerance:
		c.Verdict = "regression"
	case c.Significant && c.Ratio < 1-opt.Tolerance:
		c.Verdict = "improvement"
	}
}

// median is the sample median (benchmath's AssumeNothing summary).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := benchmath.NewSample(slices.Clone(xs), &benchmath.Thresholds{CompareAlpha: 0.05})
	return benchmath.AssumeNothing.Summary(s, 0.95).Center
}

// uTest is the two-sided Mann-Whitney U p-value of a against b (1 when
// the test cannot be computed, e.g. every value equal).
func uTest(a, b []float64, alpha float64) float64 {
	t := &benchmath.Thresholds{CompareAlpha: alpha}
	return benchmath.AssumeNothing.Compare(benchmath.NewSample(slices.Clone(a), t), benchmath.NewSample(slices.Clone(b), t)).P
}

var minPCache sync.Map

// minP is the smallest p-value the U test can give for samples of n1
// and n2 values (two fully separated samples).
func minP(n1, n2 int) float64 {
	if n1 == 0 || n2 == 0 {
		return 1
	}
	key := [2]int{n1, n2}
	if p, ok := minPCache.Load(key); ok {
		return p.(float64)
	}
	a, b := make([]float64, n1), make([]float64, n2)
	for i := range a {
		a[i] = float64(i)
	}
	for i := range b {
		b[i] = float64(n1 + i)
	}
	p := uTest(a, b, 0.05)
	minPCache.Store(key, p)
	return p
}

// NeedRuns is the fewest runs per side with which the U test can reach
// alpha at all: 4 at 0.05 (two fully separated sets of 4 give p = 0.029),
// 5 at 0.01. It is 50 when even that is not enough.
func NeedRuns(alpha float64) int {
	for n := 2; n <= 50; n++ {
		if minP(n, n) <= alpha {
			return n
		}
	}
	return 50
}

// NoiseFloor is the smallest relative change δ (0.05 = 5%) such that the
// runs xs against the same runs scaled by 1+δ would be judged significant
// at alpha by the U test: the change this spread between runs can
// resolve with this many runs. It is +Inf when no change can be (too few
// runs) and 0 when the runs are all equal.
func NoiseFloor(xs []float64, alpha float64) float64 {
	return noiseFloor(xs, alpha, false)
}

// NoiseFloorDown is NoiseFloor for a decrease: the smallest relative
// decrease d (0.4 = 40% below base, always < 1) such that the runs xs
// against the same runs scaled by 1-d would be judged significant at
// alpha by the U test. The test ranks values, so d = δ/(1+δ) for
// NoiseFloor's δ (scaling down by 1/(1+δ)); it is computed by running the
// test on the runs scaled down, not from that identity. +Inf with too
// few runs, 0 when the runs are all equal.
func NoiseFloorDown(xs []float64, alpha float64) float64 {
	return noiseFloor(xs, alpha, true)
}

func noiseFloor(xs []float64, alpha float64, down bool) float64 {
	n := len(xs)
	if n == 0 || minP(n, n) > alpha {
		return math.Inf(1)
	}
	// The test's outcome changes only where a scaled run crosses an
	// unscaled one: at the ratios between runs. Try them in order.
	cands := []float64{0}
	for _, a := range xs {
		for _, b := range xs {
			if a > 0 && b > a {
				cands = append(cands, b/a-1)
			}
		}
	}
	slices.Sort(cands)
	cands = slices.Compact(cands)
	scaled := make([]float64, n)
	for _, d := range cands {
		step := d*(1+1e-9) + 1e-12
		for i, x := range xs {
			if down {
				scaled[i] = x / (1 + step)
			} else {
				scaled[i] = x * (1 + step)
			}
		}
		if uTest(xs, scaled, alpha) <= alpha {
			if down {
				return d / (1 + d)
			}
			return d
		}
	}
	return math.Inf(1)
}

// WriteComparison prints a table of changes and a verdict line.
func WriteComparison(w io.Writer, cs []Change, opt CompareOptions) error {
	opt = opt.withDefaults()
	// One mode (two rows, two kernels of one mode): named once above the
	// table instead of on every line.
	common := ""
	for i, c := range cs {
		m := c.Mode
		if c.Kernel != "" {
			m += "@" + c.Kernel
		}
		if i == 0 {
			common = m
		} else if m != common {
			common = ""
			break
		}
	}
	if strings.Contains(common, " → ") {
		a, b, _ := strings.Cut(common, " → ")
		if _, err := fmt.Fprintf(w, "base: row %s\nnew:  row %s\n\n", a, b); err != nil {
			return err
		}
	} else if common != "" {
		if _, err := fmt.Fprintf(w, "mode: %s\n\n", common); err != nil {
			return err
		}
	}
	modeCol := func(s string) string {
		if common != "" {
			return ""
		}
		return s + "\t"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "figure\t%sservices\tposition\tbase\tnew\tchange\tfloor\tp\truns\tverdict\n", modeCol("mode"))
	regs, imps, few, ungated, absent := 0, 0, 0, 0, 0
	nb, nn := 0, 0
	var bases []string
	for _, c := range cs {
		if !slices.Contains(bases, c.Basis) && c.Basis != "" && c.Judged() {
			bases = append(bases, c.Basis)
		}
		pos := c.Position
		if c.MinSyncPeriod != "" {
			pos = "minSyncPeriod " + c.MinSyncPeriod // a churn phase's
		}
		if pos == "" {
			pos = "-"
		}
		size := fmt.Sprint(c.Services)
		if c.BaseServices != 0 {
			size = fmt.Sprintf("%d→%d", c.BaseServices, c.Services)
		}
		v := c.VerdictText()
		switch c.Verdict {
		case "regression":
			if c.Gated {
				regs++
				v = "REGRESSION"
			} else {
				ungated++
			}
		case "improvement":
			imps++
		case "too few runs":
			few++
		case NotInBoth:
			absent++
		}
		if c.Verdict == "" {
			v = "~ " + v
		}
		if !c.Gated && c.Judged() {
			v += " (not gated)"
		}
		mode := c.Mode
		if c.Kernel != "" {
			mode += "@" + c.Kernel
		}
		nb, nn = max(nb, len(c.BaseRuns)), max(nn, len(c.NewRuns))
		p := fmt.Sprintf("%.3f", c.P)
		if !c.Judged() {
			p = "-"
		}
		fmt.Fprintf(tw, "%s\t%s%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d+%d\t%s\n", c.Figure, modeCol(mode), size, pos,
			valueText(c.Figure, c.Base), valueText(c.Figure, c.New), pct(c.Ratio), floorText(c), p, len(c.BaseRuns), len(c.NewRuns), v)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	gate := "every figure gated"
	if len(opt.Gate) > 0 {
		gate = fmt.Sprintf("gated: %s; %d regressions of figures not gated", strings.Join(opt.Gate, ", "), ungated)
	}
	judged := len(cs) - absent
	if _, err := fmt.Fprintf(w, "\n%d figures compared across %d+%d runs: %d regressions, %d improvements, %d with too few runs (%s)", judged, nb, nn, regs, imps, few, gate); err != nil {
		return err
	}
	if absent > 0 {
		if _, err := fmt.Fprintf(w, "; %d not in both sides, not judged", absent); err != nil {
			return err
		}
	}
	if slices.Contains(bases, Basis("kubeproxy.sync.partial")) || slices.Contains(bases, Basis("kubeproxy.cpu")) {
		fmt.Fprintf(w, "\neach run's value: ")
		for _, name := range []string{"sync.incremental", "kubeproxy.sync.partial", "kubeproxy.cpu"} {
			if b := Basis(name); slices.Contains(bases, b) {
				fmt.Fprintf(w, "%s: %s; ", basisFigures(name), b)
			}
		}
		fmt.Fprintf(w, "others: %s", Basis(""))
	}
	_, err := fmt.Fprintf(w, "\n(two-sided Mann-Whitney U test of the per-run figures, α = %g, need ≥ %d runs per side; flagged when p ≤ α and |change| > %.0f%%; floor: the smallest change in the direction observed that the spread between the base runs lets the test resolve for certain; a smaller one is flagged only when the runs separate anyway)\n",
		opt.Alpha, NeedRuns(opt.Alpha), opt.Tolerance*100)
	return err
}

// basisFigures names the figures sharing figure's Basis.
func basisFigures(figure string) string {
	switch figure {
	case "kubeproxy.sync.partial":
		return "kubeproxy.sync.full, .sync.partial, .programming"
	case "kubeproxy.cpu":
		return "kubeproxy.cpu, .programs.cpu, .rss"
	}
	return "sync.full, sync.incremental"
}

// valueText is FormatValue, "-" for a side without the figure (NaN).
func valueText(figure string, v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return FormatValue(figure, v)
}

// pct writes a ratio as a signed percentage change: 1.3 -> "+30.0%".
func pct(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", (r-1)*100)
}
