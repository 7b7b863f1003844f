package reports

import (
	"fmt"
	"math"
	"slices"
	"time"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/proxybench/proxybench/scenarios"
)

// Fit is a least-squares fit of y against the service count x, with the
// model chosen between constant (y = A) and linear (y = A + B·x) by the
// corrected Akaike information criterion AICc = n·ln(RSS/n) + 2k +
// 2k(k+1)/(n−k−1), k counting the coefficients and the noise variance
// (2 for constant, 3 for linear); the lower AICc wins, ties go to constant.
// Coefficients come from gonum's stat.LinearRegression (linear) and
// stat.Mean (constant); Student's t from gonum's distuv.StudentsT.
type Fit struct {
	// Model is "linear" or "constant".
	Model string `json:"model"`
	// A and B are the coefficients of y = A + B·x (B = 0 for constant), in
	// y's unit (ns for time figures) and y's unit per service.
	A float64 `json:"a"`
	B float64 `json:"b"`
	// AICcLinear and AICcConstant are the criterion of each model.
	AICcLinear   float64 `json:"aiccLinear"`
	AICcConstant float64 `json:"aiccConstant"`
	// R2 is the chosen model's coefficient of determination (0 for constant).
	R2 float64 `json:"r2"`
	// N is the number of points; XMin and XMax the measured range.
	N    int     `json:"n"`
	XMin float64 `json:"xMin"`
	XMax float64 `json:"xMax"`

	s, xbar, sxx, t float64 // residual sd, mean x, Σ(x−x̄)², t quantile
	dof             int
}

// FitCapacity fits ys against xs (at least 2 points, not all x equal for
// the linear model) and chooses the model by AICc. With fewer than 5
// points AICc is undefined for the linear model and plain AIC is used.
func FitCapacity(xs, ys []float64) Fit {
	n := len(xs)
	f := Fit{N: n}
	if n == 0 {
		return Fit{Model: "constant"}
	}
	f.XMin, f.XMax = slices.Min(xs), slices.Max(xs)
	mean := stat.Mean(ys, nil)
	var rssC, tss float64
	for _, y := range ys {
		rssC += (y - mean) * (y - mean)
	}
	tss = rssC
	f.AICcConstant = aicc(n, rssC, 2, tss)
	f.AICcLinear = math.Inf(1)
	var a, b, rssL float64
	if n >= 3 && f.XMax > f.XMin {
		a, b = stat.LinearRegression(xs, ys, nil, false)
		for i := range xs {
			r := ys[i] - (a + b*xs[i])
			rssL += r * r
		}
		f.AICcLinear = aicc(n, rssL, 3, tss)
	}
	f.xbar = stat.Mean(xs, nil)
	for _, x := range xs {
		f.sxx += (x - f.xbar) * (x - f.xbar)
	}
	if f.AICcLinear < f.AICcConstant {
		f.Model, f.A, f.B, f.dof = "linear", a, b, n-2
		f.s = math.Sqrt(rssL / float64(max(n-2, 1)))
		if tss > 0 {
			f.R2 = 1 - rssL/tss
		}
	} else {
		f.Model, f.A, f.dof = "constant", mean, n-1
		f.s = math.Sqrt(rssC / float64(max(n-1, 1)))
	}
	if f.dof > 0 {
		f.t = distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(f.dof)}.Quantile(0.975)
	}
	return f
}

// aicc is the corrected AIC of a Gaussian least-squares fit with k
// parameters; RSS is floored at a tiny fraction of the total sum of
// squares so that an exact fit does not give −∞.
func aicc(n int, rss float64, k int, tss float64) float64 {
	rss = math.Max(rss, 1e-12*tss+1e-300)
	v := float64(n)*math.Log(rss/float64(n)) + 2*float64(k)
	if n-k-1 > 0 {
		v += 2 * float64(k*(k+1)) / float64(n-k-1)
	}
	return v
}

// At returns the fitted mean at x and the 95% prediction band around it
// (where one new measurement at x falls): mean ± t·s·√(1 + 1/n + h(x)),
// h = (x−x̄)²/Σ(x−x̄)² for the linear model and 0 for the constant one.
func (f Fit) At(x float64) (mean, lo, hi float64) {
	mean = f.A + f.B*x
	if f.N == 0 || f.dof <= 0 {
		return mean, mean, mean
	}
	h := 0.0
	if f.Model == "linear" && f.sxx > 0 {
		h = (x - f.xbar) * (x - f.xbar) / f.sxx
	}
	w := f.t * f.s * math.Sqrt(1+1/float64(f.N)+h)
	return mean, mean - w, mean + w
}

// Equation writes the model, such as "y = 12.3 µs + 1.05 ns/service · n".
func (f Fit) Equation(duration bool) string {
	v := func(x float64) string {
		if duration {
			return FormatNs(x)
		}
		return fmt.Sprintf("%.4g", x)
	}
	if f.Model == "constant" {
		return "constant " + v(f.A)
	}
	return fmt.Sprintf("%s + %s per 1000 services", v(f.A), v(f.B*1000))
}

// Limit is the largest service count that keeps a fitted figure under a
// budget.
type Limit struct {
	// Services is the largest count whose fitted mean stays within the
	// budget; Unbounded when every count up to scenarios.MaxServices does,
	// 0 when none does.
	Services  int  `json:"services"`
	Unbounded bool `json:"unbounded"`
	// Conservative is the same against the upper 95% prediction bound.
	Conservative          int  `json:"conservative"`
	ConservativeUnbounded bool `json:"conservativeUnbounded"`
	// Extrapolated is true when Services lies outside the measured sizes.
	Extrapolated bool `json:"extrapolated"`
}

// LimitUnder solves the fit for the largest x in [1, scenarios.MaxServices]
// whose mean (and, for Conservative, upper prediction bound) is ≤ budget.
func (f Fit) LimitUnder(budget float64) Limit {
	var l Limit
	l.Services, l.Unbounded = largestUnder(func(x float64) float64 { m, _, _ := f.At(x); return m }, budget)
	l.Conservative, l.ConservativeUnbounded = largestUnder(func(x float64) float64 { _, _, h := f.At(x); return h }, budget)
	l.Extrapolated = !l.Unbounded && l.Services > 0 && (float64(l.Services) > f.XMax || float64(l.Services) < f.XMin) ||
		l.Unbounded && f.XMax < scenarios.MaxServices
	return l
}

// largestUnder finds the largest integer x in [1, MaxServices] with
// g(x) ≤ budget, for g convex in x (a line, or a line plus a hyperbola's
// upper branch): a geometric scan then bisection.
func largestUnder(g func(float64) float64, budget float64) (int, bool) {
	const hi = float64(scenarios.MaxServices)
	if g(hi) <= budget {
		return scenarios.MaxServices, true
	}
	best := 0.0
	for x := 1.0; x <= hi; x *= 1.01 {
		if g(x) <= budget {
			best = x
		}
	}
	if best == 0 {
		return 0, false
	}
	lo, up := best, math.Min(best*1.01, hi)
	for up-lo > 0.5 {
		mid := (lo + up) / 2
		if g(mid) <= budget {
			lo = mid
		} else {
			up = mid
		}
	}
	return int(math.Floor(lo)), false
}

// Budgets are the capacity question's limits.
type Budgets struct {
	// P99 bounds lookup.latency.p99 at position last.
	P99 time.Duration
	// Sync bounds sync.full (wall).
	Sync time.Duration
}

// CapacityFigure is one figure's fit for one mode.
type CapacityFigure struct {
	// Figure is "lookup.latency.p99" (position last) or "sync.full".
	Figure string `json:"figure"`
	// X (services) and Y (ns) are the points: one per repetition and size.
	X   []float64 `json:"x"`
	Y   []float64 `json:"y"`
	Fit Fit       `json:"fit"`
	// Budget is the limit in ns; Limit the answer against it.
	Budget float64 `json:"budgetNs"`
	Limit  Limit   `json:"limit"`
}

// ModeCapacity answers the capacity question for one mode: the largest
// service count that keeps both figures under their budgets.
type ModeCapacity struct {
	Mode    string           `json:"mode"`
	Figures []CapacityFigure `json:"figures"`
	// MaxServices is the smaller of the figures' limits (fitted mean);
	// Unbounded when neither figure limits it up to scenarios.MaxServices.
	MaxServices  int  `json:"maxServices"`
	Unbounded    bool `json:"unbounded"`
	Conservative int  `json:"conservative"`
	// Extrapolated is true when MaxServices lies beyond the measured sizes.
	Extrapolated bool `json:"extrapolated"`
	// LimitedBy names the figure that sets MaxServices.
	LimitedBy string `json:"limitedBy,omitempty"`
}

// Sizes returns the distinct service counts of r, ascending.
func Sizes(r *Result) []int {
	var out []int
	for _, m := range r.Modes {
		if s := modeSize(r, m); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// repetitionChunks splits a position's samples into the scenario's
// repetitions (the runner appends them in order, equal counts); when they
// do not divide evenly, the whole is one chunk.
func repetitionChunks(r *Result, samples []int64) [][]int64 {
	reps := 1
	if r.Scenario != nil && r.Scenario.Repetitions > 1 {
		reps = r.Scenario.Repetitions
	}
	if reps <= 1 || len(samples) < reps || len(samples)%reps != 0 {
		return [][]int64{samples}
	}
	k := len(samples) / reps
	out := make([][]int64, reps)
	for i := range out {
		out[i] = samples[i*k : (i+1)*k]
	}
	return out
}

// CapacityPlan fits lookup.latency.p99 at position last (one point per
// repetition: the p99 of its samples) and sync.full wall (one point per
// repetition) against service count for each mode, and answers the
// largest count under the budgets. It needs at least two sizes; with one
// it returns nil.
func CapacityPlan(r *Result, b Budgets) []ModeCapacity {
	if len(Sizes(r)) < 2 {
		return nil
	}
	var modes []string
	for _, m := range r.Modes {
		if !slices.Contains(modes, m.Mode) {
			modes = append(modes, m.Mode)
		}
	}
	var out []ModeCapacity
	for _, mode := range modes {
		p99 := CapacityFigure{Figure: "lookup.latency.p99", Budget: float64(b.P99)}
		syn := CapacityFigure{Figure: "sync.full", Budget: float64(b.Sync)}
		for _, m := range r.Modes {
			if m.Mode != mode {
				continue
			}
			x := float64(modeSize(r, m))
			for _, p := range m.Lookup {
				if p.Position != "last" {
					continue
				}
				for _, c := range repetitionChunks(r, p.SamplesNs) {
					if len(c) > 0 {
						p99.X, p99.Y = append(p99.X, x), append(p99.Y, float64(Summarize(c).P99))
					}
				}
			}
			for _, w := range syncWalls(m) {
				syn.X, syn.Y = append(syn.X, x), append(syn.Y, float64(w))
			}
		}
		mc := ModeCapacity{Mode: mode, Unbounded: true, MaxServices: scenarios.MaxServices, Conservative: scenarios.MaxServices}
		for _, cf := range []*CapacityFigure{&p99, &syn} {
			if len(cf.X) == 0 {
				continue
			}
			cf.Fit = FitCapacity(cf.X, cf.Y)
			if cf.Budget > 0 {
				cf.Limit = cf.Fit.LimitUnder(cf.Budget)
				if cf.Limit.Services < mc.MaxServices || (!cf.Limit.Unbounded && mc.Unbounded) {
					mc.MaxServices, mc.Unbounded, mc.Extrapolated, mc.LimitedBy = cf.Limit.Services, cf.Limit.Unbounded, cf.Limit.Extrapolated, cf.Figure
				}
				mc.Conservative = min(mc.Conservative, cf.Limit.Conservative)
			}
			mc.Figures = append(mc.Figures, *cf)
		}
		if mc.Unbounded {
			mc.Extrapolated = true
		}
		out = append(out, mc)
	}
	return out
}

// Answer is one sentence: "iptables: up to 41,200 services (extrapolated;
// 35,900 at the upper 95% bound), limited by lookup.latency.p99".
func (mc ModeCapacity) Answer(b Budgets) string {
	budgets := fmt.Sprintf("p99 lookup ≤ %s and full sync ≤ %s", b.P99, b.Sync)
	if mc.Unbounded {
		return fmt.Sprintf("%s: no limit up to %s services within %s (extrapolated: neither fit reaches its budget)", mc.Mode, thousands(scenarios.MaxServices), budgets)
	}
	if mc.MaxServices == 0 {
		return fmt.Sprintf("%s: no service count keeps %s (%s exceeds its budget at every size)", mc.Mode, budgets, mc.LimitedBy)
	}
	ex := "within the measured sizes"
	if mc.Extrapolated {
		ex = "extrapolated beyond the measured sizes"
	}
	return fmt.Sprintf("%s: up to %s services keep %s (%s; %s at the upper 95%% prediction bound), limited by %s",
		mc.Mode, thousands(mc.MaxServices), budgets, ex, thousands(mc.Conservative), mc.LimitedBy)
}

// thousands writes n with comma separators: 110009 -> "110,009".
func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
