package reports

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/proxybench/proxybench/measure"
)

// Fairness-phase defaults: the significance level of every verdict, the
// power and the effect size of the sample-size (power) analysis.
const (
	// FairnessAlpha is the level at which a chi-square test rejects "the
	// hits follow the expected shares".
	FairnessAlpha = 0.001
	// FairnessPower is the probability of detecting a deviation of
	// FairnessEffect that the needed sample size guarantees.
	FairnessPower = 0.8
	// FairnessEffect is the deviation to detect, as Cohen's effect size
	// w = sqrt(Σ (p1−p0)²/p0): every endpoint's share 5% (relative) off its
	// expected share, alternately up and down, gives exactly w = 0.05.
	FairnessEffect = 0.05
)

// Units a scheduler balances (see measure).
const (
	UnitConnection  = measure.UnitConnection
	UnitSource      = measure.UnitSource
	UnitDestination = measure.UnitDestination
	UnitActive      = measure.UnitActive
)

// Expectation is what a scheduler's kernel definition promises; each
// mode's proxymodes.Mode.Fairness gives it (see measure).
type Expectation = measure.Expectation

// ServiceObs is the raw observation of one service (one ServicePort) on
// one node: Counts[s][k] connections from the run's source address
// Sources[s] landed on endpoint Endpoints[k].
type ServiceObs struct {
	Node      int       `json:"node"`
	Service   string    `json:"service"` // "ns/name:port"
	Endpoints []string  `json:"endpoints"`
	Weights   []float64 `json:"weights"`
	// Sources[s] indexes FairnessRun.Sources: the source address of row s.
	Sources []int   `json:"sources"`
	Counts  [][]int `json:"counts"`
	// Active[k] counts connections held open on endpoint k at the end of
	// the long-lived phase (nil without one).
	Active []int `json:"active,omitempty"`
	// FirstPick is the endpoint index the node's very first connection to
	// the service reached after a fresh sync (-1: none).
	FirstPick int `json:"firstPick"`
}

// ServiceFairness is the figures of one service, cluster-wide.
type ServiceFairness struct {
	Service string `json:"service"`
	// Hits per endpoint IP, in the unit of the expectation.
	Hits map[string]int `json:"hits"`
	Fairness
	// Stickiness is the share of a source address's connections that
	// reached its most-used endpoint, over all its sources (1: sticky).
	Stickiness float64 `json:"stickiness"`
	// Needed is the sample size (in the unit) that detects a FairnessEffect
	// deviation at FairnessAlpha with FairnessPower.
	Needed int `json:"needed"`
}

// FairnessAggregate pools per-service figures.
type FairnessAggregate struct {
	Services int     `json:"services"`
	Samples  int     `json:"samples"`
	MeanJain float64 `json:"meanJain"`
	MinJain  float64 `json:"minJain"`
	// MaxMaxMin is the worst max/min ratio over services where no endpoint
	// starved (see Starved).
	MaxMaxMin float64 `json:"maxMaxMin"`
	MeanCV    float64 `json:"meanCV"`
	Starved   int     `json:"starved"`
	// ChiSquare and DoF are the sums over services (independent tests),
	// PValue the pooled test's upper tail.
	ChiSquare float64 `json:"chiSquare"`
	DoF       int     `json:"dof"`
	PValue    float64 `json:"pValue"`
	// Rejected counts services whose own test rejects at FairnessAlpha
	// (about Services×FairnessAlpha are expected by chance).
	Rejected int `json:"rejected"`
	// Needed is the total sample size the pooled test needs to detect a
	// FairnessEffect deviation; Underpowered is Samples < Needed.
	Needed       int  `json:"needed"`
	Underpowered bool `json:"underpowered"`
	// Stickiness is Σ(connections on each source's top endpoint) / Σ
	// connections, over every service and source.
	Stickiness float64 `json:"stickiness"`
}

// FairnessRun is the fairness phase of one mode (and IPVS scheduler): raw
// observations and every figure computed from them.
type FairnessRun struct {
	Mode      string      `json:"mode"`
	Scheduler string      `json:"scheduler,omitempty"`
	Affinity  bool        `json:"affinity,omitempty"`
	Expect    Expectation `json:"expectation"`
	Nodes     int         `json:"nodes"`
	Order     string      `json:"endpointOrder"`
	Pods      string      `json:"pods"`
	// PodCount isolated pods were built in PodBuild (ns), lowering
	// MemAvailable by PodMemBytes (0 with the shared backend host).
	PodCount    int           `json:"podCount,omitempty"`
	PodBuild    time.Duration `json:"podBuildNs,omitempty"`
	PodMemBytes int64         `json:"podMemBytes,omitempty"`
	// Errors and Misses count failed connections and answers from a
	// non-endpoint, over every fairness connection.
	Errors    int      `json:"errors"`
	Misses    int      `json:"misses"`
	ErrorText []string `json:"errorSamples,omitempty"`
	// Sources are the client source addresses, indexing ServiceObs.Counts.
	Sources []string     `json:"sources"`
	Obs     []ServiceObs `json:"obs"`

	// PerService is cluster-wide, one row per service.
	PerService []ServiceFairness `json:"perService"`
	// PerNode pools each node's services (index = node).
	PerNode []FairnessAggregate `json:"perNode"`
	// Cluster pools PerService.
	Cluster FairnessAggregate `json:"cluster"`
	// LongLived pools active connections per endpoint (when measured).
	LongLived *FairnessAggregate `json:"longLived,omitempty"`
	// FirstPickMaxShare is, averaged over services, the largest share of
	// nodes whose first connection reached the same endpoint (1: every
	// node picked the same one, the rollout hot spot).
	FirstPickMaxShare float64 `json:"firstPickMaxShare"`
	// Verdict is "fair", "UNFAIR", "fair?" (not rejected, but fewer
	// samples than Needed) or "untestable" (too few samples in the unit for
	// the test, for example one client address under sh; Why then reports
	// the concentration seen); for destination units "sticky" or "NOT
	// STICKY".
	Verdict string `json:"verdict"`
	Why     string `json:"why"`
}

// Analyze computes every figure of r from r.Obs (so a saved result can be
// recomputed): per-service and per-node figures in r.Expect's unit, the
// long-lived figures from Active, the first-pick spread, and the verdict.
func (r *FairnessRun) Analyze() {
	r.PerService, r.PerNode, r.LongLived = nil, nil, nil
	type acc struct {
		counts [][]int
		w      []float64
		eps    []string
		active []int
	}
	bySvc := map[string]*acc{}
	var order []string
	byNode := map[int][]ServiceFairness{}
	firstPicks := map[string][]int{}
	for _, o := range r.Obs {
		a := bySvc[o.Service]
		if a == nil {
			a = &acc{eps: o.Endpoints, w: o.Weights}
			bySvc[o.Service] = a
			order = append(order, o.Service)
		}
		a.counts = append(a.counts, o.Counts...)
		if o.Active != nil {
			if a.active == nil {
				a.active = make([]int, len(o.Active))
			}
			for k, v := range o.Active {
				a.active[k] += v
			}
		}
		if o.FirstPick >= 0 {
			firstPicks[o.Service] = append(firstPicks[o.Service], o.FirstPick)
		}
		byNode[o.Node] = append(byNode[o.Node], r.serviceFigures(o.Service, o.Endpoints, o.Weights, o.Counts))
	}
	var longs []ServiceFairness
	for _, name := range order {
		a := bySvc[name]
		r.PerService = append(r.PerService, r.serviceFigures(name, a.eps, a.w, a.counts))
		if a.active != nil {
			longs = append(longs, figures(name, a.eps, a.w, toFloat(a.active), r.Expect.Weighted))
		}
	}
	for n := 0; n < r.Nodes; n++ {
		r.PerNode = append(r.PerNode, Aggregate(byNode[n]))
	}
	r.Cluster = Aggregate(r.PerService)
	if len(longs) > 0 {
		l := Aggregate(longs)
		r.LongLived = &l
	}
	var fp float64
	for _, picks := range firstPicks {
		c := map[int]int{}
		top := 0
		for _, p := range picks {
			c[p]++
			top = max(top, c[p])
		}
		fp += float64(top) / float64(len(picks))
	}
	if len(firstPicks) > 0 {
		r.FirstPickMaxShare = fp / float64(len(firstPicks))
	}
	r.Verdict, r.Why = r.verdict()
}

func (r *FairnessRun) verdict() (string, string) {
	if r.Expect.Unit == UnitDestination {
		if r.Cluster.Stickiness >= 0.99 {
			return "sticky", fmt.Sprintf("%.1f%% of each ClusterIP's connections reached one endpoint (%s)", 100*r.Cluster.Stickiness, r.Expect.Source)
		}
		return "NOT STICKY", fmt.Sprintf("only %.1f%% of each ClusterIP's connections reached one endpoint; %s promises one", 100*r.Cluster.Stickiness, r.Expect.Source)
	}
	a := r.Cluster
	if r.Expect.Unit == UnitActive && r.LongLived != nil {
		a = *r.LongLived
	}
	v, why := Verdict(a, r.Expect)
	if v == VerdictUntestable && r.Expect.Unit == UnitSource {
		why += "; " + r.concentration()
	}
	return v, why
}

// concentration describes where the connections of each source went, for
// a verdict that cannot test the source unit: the share of a source's
// connections on its top endpoint, and the spread over connections
// (Jain, starved endpoints) that this concentration produces.
func (r *FairnessRun) concentration() string {
	c := *r
	c.Expect.Unit = UnitConnection
	var fs []ServiceFairness
	for _, o := range r.Obs {
		fs = append(fs, c.serviceFigures(o.Service, o.Endpoints, o.Weights, o.Counts))
	}
	conn := Aggregate(fs)
	head := fmt.Sprintf("%.1f%% of each client's connections on one endpoint", 100*r.Cluster.Stickiness)
	if r.Cluster.Stickiness >= 0.999 {
		head = "all connections of a client on one endpoint"
	}
	return fmt.Sprintf("concentration seen: %s (over %d connections: mean Jain %.2f, %d endpoints starved)", head, conn.Samples, conn.MeanJain, conn.Starved)
}

// VerdictUntestable is the verdict when the unit of randomness has too few
// samples for the chi-square test to mean anything (fewer than
// MinExpectedPerEndpoint expected per endpoint), for example one source
// address under a source hash.
const VerdictUntestable = "untestable"

// MinExpectedPerEndpoint is the smallest mean expected count per endpoint
// at which the chi-square approximation is trusted (Cochran's rule of 5).
const MinExpectedPerEndpoint = 5

// Verdict judges a pooled test: "untestable" when the samples are fewer
// than MinExpectedPerEndpoint per endpoint, "UNFAIR" when the pooled
// chi-square rejects at FairnessAlpha, else "fair" with enough samples
// (Needed) or "fair?" without.
func Verdict(a FairnessAggregate, e Expectation) (string, string) {
	shares := "equal shares"
	if e.Weighted {
		shares = "weight-proportional shares"
	}
	endpoints := a.DoF + a.Services // each service tests its endpoints - 1 dof
	switch {
	case a.Samples == 0:
		return "n/a", "no samples"
	case a.Samples < MinExpectedPerEndpoint*endpoints:
		return VerdictUntestable, fmt.Sprintf("%d %s over %d endpoints are too few to test %s (χ² needs >= %d per endpoint: %d)", a.Samples, unitPlural(e.Unit), endpoints, shares, MinExpectedPerEndpoint, MinExpectedPerEndpoint*endpoints)
	case a.PValue < FairnessAlpha:
		return "UNFAIR", fmt.Sprintf("pooled χ²=%.1f on %d dof rejects %s (p=%.3g < %g); %d of %d services reject alone", a.ChiSquare, a.DoF, shares, a.PValue, FairnessAlpha, a.Rejected, a.Services)
	case a.Underpowered:
		return "fair?", fmt.Sprintf("%s not rejected (p=%.3g), but %d %ss are fewer than the %d needed to detect a %.0f%% deviation", shares, a.PValue, a.Samples, e.Unit, a.Needed, 100*FairnessEffect)
	}
	return "fair", fmt.Sprintf("%s not rejected (p=%.3g) with %d %ss (>= %d needed to detect a %.0f%% deviation)", shares, a.PValue, a.Samples, e.Unit, a.Needed, 100*FairnessEffect)
}

// unitPlural names a unit's samples for a sentence ("source addresses").
func unitPlural(u string) string {
	if u == UnitSource {
		return "source addresses"
	}
	return u + "s"
}

// serviceFigures reduces a service's source × endpoint counts to the
// expectation's unit and computes its figures.
func (r *FairnessRun) serviceFigures(name string, eps []string, w []float64, counts [][]int) ServiceFairness {
	hits := make([]float64, len(eps))
	var top, all int
	for _, row := range counts {
		best, sum := 0, 0
		for k, v := range row {
			sum += v
			if v > row[best] {
				best = k
			}
		}
		if sum == 0 {
			continue
		}
		top += row[best]
		all += sum
		if r.Expect.Unit == UnitSource {
			hits[best]++
			continue
		}
		for k, v := range row {
			hits[k] += float64(v)
		}
	}
	if r.Expect.Unit == UnitDestination {
		// Stickiness per ClusterIP: the top endpoint over all sources.
		top = 0
		for _, h := range hits {
			top = max(top, int(h))
		}
	}
	sf := figures(name, eps, w, hits, r.Expect.Weighted)
	if all > 0 {
		sf.Stickiness = float64(top) / float64(all)
	}
	return sf
}

func figures(name string, eps []string, w, hits []float64, weighted bool) ServiceFairness {
	ew := make([]float64, len(eps))
	for k := range ew {
		ew[k] = 1
		if weighted && k < len(w) {
			ew[k] = w[k]
		}
	}
	// Endpoints of weight 0 take nothing by definition; leave them out.
	var h, ww []float64
	hm := map[string]int{}
	for k, e := range eps {
		hm[e] = int(hits[k])
		if k < len(w) && w[k] <= 0 {
			continue
		}
		h, ww = append(h, hits[k]), append(ww, ew[k])
	}
	f := ComputeFairness(h, ww)
	return ServiceFairness{Service: name, Hits: hm, Fairness: f, Needed: SamplesToDetect(f.DoF, FairnessEffect, FairnessAlpha, FairnessPower)}
}

// Aggregate pools per-service figures: sums of chi-square statistics and
// degrees of freedom (independent services), mean and minimum Jain, worst
// max/min, mean CV, services rejected alone, and the pooled test's
// needed sample size.
func Aggregate(fs []ServiceFairness) FairnessAggregate {
	a := FairnessAggregate{MinJain: 1, PValue: 1}
	var top, all float64
	for _, f := range fs {
		if f.Samples == 0 {
			continue
		}
		a.Services++
		a.Samples += f.Samples
		a.MeanJain += f.Jain
		a.MinJain = min(a.MinJain, f.Jain)
		a.MeanCV += f.CV
		a.Starved += f.Starved
		a.ChiSquare += f.ChiSquare
		a.DoF += f.DoF
		a.MaxMaxMin = max(a.MaxMaxMin, f.MaxMin) // starved services (MaxMin 0) count in Starved
		if f.DoF > 0 && f.PValue < FairnessAlpha {
			a.Rejected++
		}
		top += f.Stickiness * float64(f.Samples)
		all += float64(f.Samples)
	}
	if a.Services == 0 {
		a.MinJain = 0
		return a
	}
	a.MeanJain /= float64(a.Services)
	a.MeanCV /= float64(a.Services)
	if a.DoF > 0 {
		a.PValue = distuv.ChiSquared{K: float64(a.DoF)}.Survival(a.ChiSquare)
	}
	a.Needed = SamplesToDetect(a.DoF, FairnessEffect, FairnessAlpha, FairnessPower)
	a.Underpowered = a.DoF > 0 && a.Samples < a.Needed
	if all > 0 {
		a.Stickiness = top / all
	}
	return a
}

func toFloat(xs []int) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}

// NoncentralChiSquaredSurvival is P(X > x) for X noncentral chi-squared
// with k degrees of freedom and noncentrality lambda, as the Poisson
// mixture Σ_j Pois(j; λ/2)·Q_{k+2j}(x) (Johnson, Kotz & Balakrishnan,
// Continuous Univariate Distributions vol. 2, eq. 29.2), with gonum's
// Poisson and central chi-squared distributions; the sum runs to
// λ/2 + 12√(λ/2) + 30 terms, past which the Poisson weights are negligible.
func NoncentralChiSquaredSurvival(x, k, lambda float64) float64 {
	if lambda <= 0 {
		return distuv.ChiSquared{K: k}.Survival(x)
	}
	m := lambda / 2
	pois := distuv.Poisson{Lambda: m}
	var s float64
	for j := 0; j <= int(m+12*math.Sqrt(m)+30); j++ {
		s += pois.Prob(float64(j)) * distuv.ChiSquared{K: k + 2*float64(j)}.Survival(x)
	}
	return min(s, 1)
}

// SamplesToDetect returns the smallest total sample size N at which
// Pearson's chi-square goodness-of-fit test with dof degrees of freedom,
// at level alpha, rejects with probability >= power when the true shares
// deviate from the expected ones by Cohen's effect size w. Method (Cohen
// 1988, ch. 7): under the alternative the statistic is noncentral
// chi-squared with noncentrality λ = N·w²; λ is found by bisection so that
// NoncentralChiSquaredSurvival(crit, dof, λ) = power, where crit is the
// central chi-squared quantile 1−alpha (gonum), and N = ⌈λ/w²⌉. It returns
// 0 for dof < 1.
func SamplesToDetect(dof int, w, alpha, power float64) int {
	if dof < 1 || w <= 0 {
		return 0
	}
	key := [4]float64{float64(dof), w, alpha, power}
	neededMu.Lock()
	defer neededMu.Unlock()
	if n, ok := neededMemo[key]; ok {
		return n
	}
	n := samplesToDetect(dof, w, alpha, power)
	neededMemo[key] = n
	return n
}

var (
	neededMu   sync.Mutex
	neededMemo = map[[4]float64]int{}
)

func samplesToDetect(dof int, w, alpha, power float64) int {
	k := float64(dof)
	crit := distuv.ChiSquared{K: k}.Quantile(1 - alpha)
	lo, hi := 0.0, 1.0
	for NoncentralChiSquaredSurvival(crit, k, hi) < power {
		hi *= 2
	}
	for i := 0; i < 60 && hi-lo > 1e-6*hi; i++ {
		mid := (lo + hi) / 2
		if NoncentralChiSquaredSurvival(crit, k, mid) < power {
			lo = mid
		} else {
			hi = mid
		}
	}
	return int(math.Ceil(hi / (w * w)))
}

// SortedServices returns the PerService rows with the lowest p-values first.
func (r *FairnessRun) SortedServices() []ServiceFairness {
	out := append([]ServiceFairness(nil), r.PerService...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].PValue < out[j].PValue })
	return out
}

// writeFairnessMarkdown writes the fairness phase: one row per mode and
// scheduler with its verdict and sample size, per-node rows when there is
// more than one node, the isolated pods' cost, and a warning line for
// every underpowered run.
func writeFairnessMarkdown(b *strings.Builder, r *Result) {
	var runs []*FairnessRun
	mode := map[*FairnessRun]string{} // the mode, with its kernel when the run used several
	for i := range r.Modes {
		if f := r.Modes[i].FairnessRun; f != nil {
			runs = append(runs, f)
			mode[f] = f.Mode
			if r.MultiKernel() {
				mode[f] += " (" + kernelOf(r.Modes[i]) + ")"
			}
		}
	}
	if len(runs) == 0 {
		return
	}
	fmt.Fprintf(b, "\n### fairness per mode and scheduler (every service, every client pod and source address)\n\n")
	fmt.Fprintf(b, "Verdicts: pooled Pearson χ² over services against the expected shares at α = %g, each row on its own; `p (Holm)` is that p-value after Holm's step-down correction over the table's tested rows (Holm 1979), the one to read when many rows are tested; `needed` is the sample size (in the unit) at which that test detects a %.0f%% deviation (Cohen's w = %.2f) with power %.0f%% (noncentral χ², gonum); `fair?` means not rejected but fewer samples than needed; `untestable` means fewer than %d samples per endpoint in the unit (one client address under a source hash is one sample), and the why names the concentration seen instead. Jain is on weight-normalised shares. `1st-pick` is the mean largest share of nodes whose first connection after a sync reached the same endpoint (1 = all nodes pick the same).\n\n",
		FairnessAlpha, 100*FairnessEffect, FairnessEffect, 100*FairnessPower, MinExpectedPerEndpoint)
	adj := phaseHolm(runs)
	b.WriteString("| mode | scheduler | unit | shares | nodes | order | pods | services | samples | needed | mean Jain | min Jain | max max/min | mean CV | χ² | dof | p-value | p (Holm) | svc rejected | stickiness | 1st-pick | long-lived active (p) | errors | verdict |\n")
	b.WriteString("|---|---|---|---|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|---|\n")
	for i, f := range runs {
		a := f.Cluster
		shares := "equal"
		if f.Expect.Weighted {
			shares = "weighted"
		}
		sched := f.Scheduler
		if sched == "" {
			sched = "-"
		}
		if f.Affinity {
			sched += " +ClientIP"
		}
		ll := "-"
		if f.LongLived != nil {
			ll = fmt.Sprintf("Jain %.3f, max/min %s (p=%.3g, n=%d)", f.LongLived.MeanJain, ratio(*f.LongLived), f.LongLived.PValue, f.LongLived.Samples)
		}
		verdict := "**" + f.Verdict + "**"
		if f.Verdict == VerdictUntestable && f.Expect.Unit == UnitSource {
			verdict += fmt.Sprintf(" (%.0f%% of each client's connections on one endpoint)", 100*a.Stickiness)
		}
		holm := "-"
		if !math.IsNaN(adj[i]) {
			holm = fmt.Sprintf("%.3g", adj[i])
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %d | %s | %s | %d | %d | %d | %.4f | %.4f | %s | %.4f | %.1f | %d | %.3g | %s | %d | %.3f | %.2f | %s | %d | %s |\n",
			mode[f], sched, f.Expect.Unit, shares, f.Nodes, f.Order, f.Pods, a.Services, a.Samples, a.Needed, a.MeanJain, a.MinJain,
			ratio(a), a.MeanCV, a.ChiSquare, a.DoF, a.PValue, holm, a.Rejected, a.Stickiness, f.FirstPickMaxShare, ll, f.Errors+f.Misses, verdict)
	}
	b.WriteString("\n")
	tested := 0
	for _, p := range adj {
		if !math.IsNaN(p) {
			tested++
		}
	}
	for i, f := range runs {
		fmt.Fprintf(b, "- %s%s: %s. %s", mode[f], schedName(f), f.Verdict, f.Why)
		if f.Verdict == "UNFAIR" && tested > 1 && adj[i] >= FairnessAlpha {
			fmt.Fprintf(b, "; but not after Holm's correction (Holm 1979) over the %d tested rows of this table (p %.3g ≥ %g): a chance result until a repeated run shows it again", tested, adj[i], FairnessAlpha)
		}
		b.WriteString("\n")
	}
	for _, f := range runs {
		if f.Nodes < 2 {
			continue
		}
		fmt.Fprintf(b, "\n%s%s per node: ", mode[f], schedName(f))
		var parts []string
		for n, a := range f.PerNode {
			parts = append(parts, fmt.Sprintf("node%d n=%d Jain %.3f p=%.3g", n, a.Samples, a.MeanJain, a.PValue))
		}
		b.WriteString(strings.Join(parts, "; ") + "\n")
	}
	for _, f := range runs {
		if f.PodCount > 0 {
			fmt.Fprintf(b, "\n- isolated pods: %d pod namespaces + veths built in %.2f s (%.2f ms and %.0f KiB of MemAvailable per pod)\n",
				f.PodCount, f.PodBuild.Seconds(), f.PodBuild.Seconds()*1e3/float64(f.PodCount), float64(f.PodMemBytes)/1024/float64(f.PodCount))
			break
		}
	}
}

// phaseHolm Holm-adjusts the fairness phase's verdict p-values over its
// rows (one per mode and scheduler), in runs' order: the pooled test each
// verdict rests on (the long-lived one for the active unit); NaN for a
// row without a test (stickiness, too few samples).
func phaseHolm(runs []*FairnessRun) []float64 {
	ps := make([]float64, len(runs))
	for i, f := range runs {
		a := f.Cluster
		if f.Expect.Unit == UnitActive && f.LongLived != nil {
			a = *f.LongLived
		}
		ps[i] = a.PValue
		if f.Expect.Unit == UnitDestination || a.DoF < 1 || f.Verdict == VerdictUntestable || f.Verdict == "n/a" {
			ps[i] = math.NaN()
		}
	}
	return Holm(ps)
}

func schedName(f *FairnessRun) string {
	if f.Scheduler == "" {
		return ""
	}
	return "/" + f.Scheduler
}

func ratio(a FairnessAggregate) string {
	if a.Starved > 0 {
		return fmt.Sprintf("%.3f (%d starved)", a.MaxMaxMin, a.Starved)
	}
	return fmt.Sprintf("%.3f", a.MaxMaxMin)
}

// SpreadAlpha is the family-wise level of the endpoint-spread verdicts of
// the findings and the fixed-position fairness table: with Holm's
// correction over every row and position of a run, the chance that any of
// them calls an even spread uneven is at most SpreadAlpha.
const SpreadAlpha = 0.01

// Holm returns Holm's step-down adjusted p-values, in p's order (Holm, S.
// 1979, "A simple sequentially rejective multiple test procedure",
// Scandinavian Journal of Statistics 6(2):65-70). With the m p-values
// sorted, p(1) ≤ ... ≤ p(m), the i-th is adjusted to
// max over j ≤ i of min(1, (m−j+1)·p(j)); rejecting every hypothesis
// whose adjusted p is below α keeps the family-wise error rate at α
// whatever the dependence between the tests. A NaN stays NaN and does not
// count in m.
func Holm(p []float64) []float64 {
	out := make([]float64, len(p))
	var idx []int
	for i, v := range p {
		out[i] = math.NaN()
		if !math.IsNaN(v) {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool { return p[idx[a]] < p[idx[b]] })
	m, run := len(idx), 0.0
	for j, i := range idx {
		run = max(run, min(1, float64(m-j)*p[i]))
		out[i] = run
	}
	return out
}

// SpreadCell is one endpoint-spread test of a run: a row's fixed
// position (its one service's connections per endpoint against even
// shares), pooled over the run's repetitions of the whole measurement
// (Result.MoreRuns): runs are independent, so the sum of their χ²
// statistics is χ² on the sum of their degrees of freedom (the pooling
// Aggregate does over services).
type SpreadCell struct {
	// Label is the row's label in the run's tables (Result.label: mode,
	// scheduler, kernel, size); Position the fixed position ("first").
	Label, Position string
	// Runs is how many runs were pooled.
	Runs      int
	ChiSquare float64
	DoF       int
	// P is the pooled test's p-value, Adjusted Holm's over the family
	// (every cell of the run, SpreadFamily).
	P, Adjusted float64
}

// SpreadFamily returns every endpoint-spread test of r, pooled over r's
// runs (Result.Runs) and Holm-adjusted over the whole family: each row's
// fixed positions with a per-position test (PositionResult.Fairness), or
// for a row without them its pooled FairnessSummary as one cell (position
// ""), in r's row order.
func SpreadFamily(r *Result) []SpreadCell {
	type key struct{ label, pos string }
	var order []key
	cells := map[key]*SpreadCell{}
	add := func(k key, chi float64, dof int) {
		if dof < 1 {
			return
		}
		c := cells[k]
		if c == nil {
			c = &SpreadCell{Label: k.label, Position: k.pos}
			cells[k] = c
			order = append(order, k)
		}
		c.Runs++
		c.ChiSquare += chi
		c.DoF += dof
	}
	for _, run := range r.Runs() {
		for _, m := range run.Modes {
			l, any := run.label(m), false
			for _, p := range m.Lookup {
				if f := p.Fairness; f != nil && f.Samples > 0 && f.DoF > 0 {
					add(key{l, p.Position}, f.ChiSquare, f.DoF)
					any = true
				}
			}
			if f := m.Fairness; !any && f.Services > 0 {
				add(key{l, ""}, f.ChiSquare, f.DoF)
			}
		}
	}
	out := make([]SpreadCell, 0, len(order))
	ps := make([]float64, 0, len(order))
	for _, k := range order {
		c := *cells[k]
		c.P = distuv.ChiSquared{K: float64(c.DoF)}.Survival(c.ChiSquare)
		out = append(out, c)
		ps = append(ps, c.P)
	}
	for i, a := range Holm(ps) {
		out[i].Adjusted = a
	}
	return out
}

// spreadOf returns the cells of the row labelled label.
func spreadOf(fam []SpreadCell, label string) []SpreadCell {
	var out []SpreadCell
	for _, c := range fam {
		if c.Label == label {
			out = append(out, c)
		}
	}
	return out
}

// spreadFamilyText describes the family for a sentence: "15 tests (rows ×
// fixed positions), pooled over 3 runs".
func spreadFamilyText(fam []SpreadCell) string {
	s := fmt.Sprintf("%d tests (rows × fixed positions", len(fam))
	runs := 0
	for _, c := range fam {
		runs = max(runs, c.Runs)
	}
	if runs > 1 {
		s += fmt.Sprintf(", each pooled over %d runs", runs)
	}
	return s + ")"
}

func cellName(c SpreadCell) string {
	if c.Position == "" {
		return "the pooled positions"
	}
	return c.Position
}

// SpreadVerdict words a row's endpoint spread, judged over the run's
// family fam (SpreadFamily) with Holm's correction at SpreadAlpha:
// "consistent with even shares" (saying so when a cell is significant
// alone but not after the correction), "uneven at one position only" for
// a lone significant cell among the row's several, with what it is and
// what to do, else "uneven at" the positions. starved endpoints make a
// row uneven whatever the test: no chance leaves an endpoint without a
// connection of thousands. f is the row's pooled summary (min Jain).
func SpreadVerdict(fam []SpreadCell, label string, f FairnessSummary) string {
	cs := spreadOf(fam, label)
	jain := fmt.Sprintf("min Jain %.4f", f.MinJain)
	if len(cs) == 0 {
		return fmt.Sprintf("endpoint spread not tested (%s)", jain)
	}
	var sig []SpreadCell
	low := cs[0]
	for _, c := range cs {
		if c.Adjusted < SpreadAlpha {
			sig = append(sig, c)
		}
		if c.P < low.P {
			low = c
		}
	}
	pooledOf := func(c SpreadCell) string {
		if c.Runs > 1 {
			return fmt.Sprintf(", pooled over %d runs", c.Runs)
		}
		return ""
	}
	pooled := pooledOf(low)
	holm := "Holm's correction over " + spreadFamilyText(fam)
	switch {
	case f.Starved > 0:
		return fmt.Sprintf("endpoint spread uneven, %d endpoints starved (%s; smallest χ² p = %.2g at %s%s)", f.Starved, jain, low.P, cellName(low), pooled)
	case len(sig) == 0 && low.P < SpreadAlpha:
		return fmt.Sprintf("endpoint spread consistent with even shares (%s; χ² p = %.2g at %s%s is significant alone, but %.2g after %s)", jain, low.P, cellName(low), pooled, low.Adjusted, holm)
	case len(sig) == 0:
		return fmt.Sprintf("endpoint spread consistent with even shares (%s; smallest χ² p = %.2g at %s%s, %.2g after %s)", jain, low.P, cellName(low), pooled, low.Adjusted, holm)
	case len(sig) == 1 && len(cs) > 1:
		s := sig[0]
		again := "rerun (run --count 3) before reading it as a bias of the mode"
		if s.Runs > 1 {
			again = "the row's other positions are consistent with even shares"
		}
		return fmt.Sprintf("endpoint spread uneven at one position only (%s: χ² p = %.2g%s, %.2g after %s; %s): one significant service of %d tested in this row, not a pattern; %s",
			cellName(s), s.P, pooledOf(s), s.Adjusted, holm, jain, len(cs), again)
	}
	var at []string
	for _, c := range sig {
		at = append(at, fmt.Sprintf("%s (p = %.2g, %.2g after correction)", cellName(c), c.P, c.Adjusted))
	}
	return fmt.Sprintf("endpoint spread uneven at %s, significant after %s (%s%s)", strings.Join(at, ", "), holm, jain, pooledOf(sig[0]))
}
