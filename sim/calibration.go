package sim

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"sort"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/reports"
)

// CalibrationVersion is the version of Calibration's JSON layout.
const CalibrationVersion = 1

// Calibration turns the counts the sim engine derives from rendered
// rulesets (rules walked, objects programmed) into time. It is measured on
// a real kernel by `proxybench calibrate` (Fit over real results) and
// written as JSON; the binary embeds a default measured on the machine the
// release was built on.
type Calibration struct {
	Version int `json:"version"`
	// Source names where the calibration came from: a file path, or
	// "default (embedded)" for the shipped one.
	Source string `json:"source"`
	// Default is true for the shipped calibration; every sim result that
	// uses it says so (ModeResult.Info["calibration.default"]).
	Default bool `json:"default"`
	// Measured is when the real runs behind it finished.
	Measured time.Time `json:"measured"`
	// Machine and Kernel identify where it was measured (hostname, CPU
	// model and count; uname -r and host or uml); IPTablesBackend is the
	// iptables back end (legacy or nft) of the iptables runs.
	Machine         string `json:"machine"`
	Kernel          string `json:"kernel"`
	KernelWhere     string `json:"kernelWhere"`
	IPTablesBackend string `json:"iptablesBackend"`
	// Sizes are the service counts of the real runs.
	Sizes []int `json:"sizes"`
	// BaseQuantilesNs is the quantile function of mode none's TCP connect
	// time (direct to the pod), in ns, at the probabilities of
	// QuantileProbs: the noise model every mode's lookup latency is drawn
	// from (inverse transform sampling with linear interpolation).
	BaseQuantilesNs []float64 `json:"baseQuantilesNs"`
	// ConnCycleNs is how long a driver connection occupies its slot
	// beyond its connect time (echo read, close, scheduling), in ns: the
	// closed loop's concurrency / throughput.cps minus the mean connect
	// time, for mode none.
	ConnCycleNs float64 `json:"connCycleNs"`
	// Modes holds the per-mode costs, by mode name: builtin's (and mode
	// none's).
	Modes map[string]*ModeCost `json:"modes"`
	// Implementations holds the costs of rows another implementation
	// programs, by implementation (scenarios.ImplKubeProxy: the real
	// kube-proxy's, FitKubeProxy); absent in calibrations written before
	// them or by calibrate without --implementation.
	Implementations map[string]*ImplementationCost `json:"implementations,omitempty"`
}

// ModeCost is one mode's cost model.
type ModeCost struct {
	// Measured is false for a mode whose costs are estimates (for example
	// ipvs when the calibration ran on a host kernel without IP_VS); Note
	// says how they were obtained.
	Measured bool   `json:"measured"`
	Note     string `json:"note,omitempty"`
	// LookupOverheadNs is the connect time this mode adds to mode none's,
	// in ns, apart from rule walking (conntrack, NAT, a map or hash
	// lookup, the userspace proxy's accept and dial).
	LookupOverheadNs float64 `json:"lookupOverheadNs"`
	// PerRuleNs is the cost of one rule walked in KUBE-SERVICES (iptables:
	// the slope of connect latency from the first to the last service),
	// in ns; PerServiceNs the cost per service present that does not
	// depend on position (nftables map lookups, IPVS hash chains: ~0).
	PerRuleNs    float64 `json:"perRuleNs"`
	PerServiceNs float64 `json:"perServiceNs"`
	// KernelPerRuleNs is the kernel's own cost of one rule walked, from
	// lookup.kernel (the SYN's time in the node's PREROUTING, measured by
	// BPF, over mode none's at the same size and position: the slope
	// against the rules walked), in ns; KernelOverheadNs the intercept
	// (conntrack and the NAT setup). 0 when the results hold no
	// lookup.kernel. PerRuleNs minus it is what a rule costs a connect
	// beyond the walk (the SYNs queued behind other SYNs' walks, caches).
	KernelPerRuleNs  float64 `json:"kernelPerRuleNs,omitempty"`
	KernelOverheadNs float64 `json:"kernelOverheadNs,omitempty"`
	// Full is sync.full wall time against the objects a full sync
	// programs (rules, nft objects, netlink objects); Incremental is
	// sync.incremental wall time against the objects of the whole
	// ruleset (iptables-legacy restore and nft transactions scale with
	// the table), plus PerChangedObjectNs per object the sync changes.
	Full               Fit     `json:"full"`
	Incremental        Fit     `json:"incremental"`
	PerChangedObjectNs float64 `json:"perChangedObjectNs"`
	// PerByteNs is the full sync's marginal cost per byte of restore or
	// netlink input (a second fit of the same samples, for reference).
	PerByteNs float64 `json:"perByteNs"`
	// ObjectsPerChange is how many objects a sync sends per endpoint
	// change (measured by the real sync.incremental, which moves one
	// endpoint).
	ObjectsPerChange float64 `json:"objectsPerChange"`
	// CPUPerWall is sync CPU time (user+sys, children included) over wall
	// time.
	CPUPerWall float64 `json:"cpuPerWall"`
	// SyncCV is the coefficient of variation of repeated syncs (noise).
	SyncCV float64 `json:"syncCV"`
	// Against is what Full and Incremental are curves of: "" the objects
	// the mode's render programs, AgainstServices the service count (an
	// implementation whose rules proxybench does not render: kube-proxy).
	Against string `json:"against,omitempty"`
	// FullContention and PartialContention are how much a sync stretches
	// per other node syncing at once on the same machine, per CPU
	// (SharedStretch: 1 + (nodes-1)·contention/cores), for full and
	// partial syncs; measured from a run on several nodes (FitKubeProxy),
	// 0 when not measured (then CPUPerWall stands for both).
	FullContention    float64 `json:"fullContention,omitempty"`
	PartialContention float64 `json:"partialContention,omitempty"`
}

// Fit is a fitted cost curve y(x) in ns. Form "linear" is y = A + B·x
// (stat.LinearRegression of y on x); form "quadratic" is y = x·(A + B·x)
// (stat.LinearRegression of y/x on x: a cost per object that grows with
// the table, as nft transactions do). RMSRel is the root mean square of
// the relative residuals at the calibration points.
//
// Points, when it holds two or more sizes, are the median y per
// calibration x, and At interpolates between them on log-log axes (a
// power law per segment, the end segments extended): full sync costs
// grow superlinearly and unevenly (nft transactions), which neither
// regression form follows across 1k..10k services. A, B and RMSRel then
// still describe the best regression, for reading.
type Fit struct {
	Form   string       `json:"form"`
	A      float64      `json:"a"`
	B      float64      `json:"b"`
	RMSRel float64      `json:"rmsRel"`
	Points [][2]float64 `json:"points,omitempty"`
}

// At evaluates the fit at x (never below 0).
func (f Fit) At(x float64) float64 {
	if p := f.Points; len(p) >= 2 && x > 0 {
		i := sort.Search(len(p), func(i int) bool { return p[i][0] >= x })
		i = min(max(i, 1), len(p)-1)
		x0, y0, x1, y1 := p[i-1][0], p[i-1][1], p[i][0], p[i][1]
		if x0 > 0 && y0 > 0 && y1 > 0 {
			k := math.Log(y1/y0) / math.Log(x1/x0)
			return y0 * math.Exp(k*math.Log(x/x0))
		}
	}
	var y float64
	if f.Form == "quadratic" {
		y = x * (f.A + f.B*x)
	} else {
		y = f.A + f.B*x
	}
	return math.Max(y, 0)
}

// FitCurve fits ys against xs in both forms and keeps the one with the
// smaller relative residuals. With one point it is a constant per x
// (quadratic form, B = 0); with none, the zero Fit.
func FitCurve(xs, ys []float64) Fit {
	switch len(xs) {
	case 0:
		return Fit{Form: "linear"}
	case 1:
		if xs[0] == 0 {
			return Fit{Form: "linear", A: ys[0]}
		}
		return Fit{Form: "quadratic", A: ys[0] / xs[0]}
	}
	distinct := false
	for _, x := range xs {
		distinct = distinct || x != xs[0]
	}
	if !distinct {
		return Fit{Form: "linear", A: stat.Mean(ys, nil)}
	}
	a, b := stat.LinearRegression(xs, ys, nil, false)
	lin := Fit{Form: "linear", A: a, B: b}
	lin.RMSRel = rmsRel(lin, xs, ys)
	per := make([]float64, len(xs))
	ok := true
	for i := range xs {
		if xs[i] <= 0 {
			ok = false
			break
		}
		per[i] = ys[i] / xs[i]
	}
	if !ok {
		return lin
	}
	qa, qb := stat.LinearRegression(xs, per, nil, false)
	quad := Fit{Form: "quadratic", A: qa, B: qb}
	quad.RMSRel = rmsRel(quad, xs, ys)
	best := lin
	if quad.RMSRel < lin.RMSRel {
		best = quad
	}
	best.Points = medians(xs, ys)
	return best
}

// medians returns (x, median y) per distinct x, ascending.
func medians(xs, ys []float64) [][2]float64 {
	by := map[float64][]float64{}
	for i, x := range xs {
		by[x] = append(by[x], ys[i])
	}
	var out [][2]float64
	for x, v := range by {
		sort.Float64s(v)
		out = append(out, [2]float64{x, stat.Quantile(0.5, stat.LinInterp, v, nil)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

func rmsRel(f Fit, xs, ys []float64) float64 {
	s := 0.0
	for i := range xs {
		if ys[i] == 0 {
			continue
		}
		r := (f.At(xs[i]) - ys[i]) / ys[i]
		s += r * r
	}
	return math.Sqrt(s / float64(len(xs)))
}

// QuantileProbs are the probabilities at which BaseQuantilesNs is stored:
// 0, 0.01, …, 0.98, then a finer tail up to 0.9999 and 1.
var QuantileProbs = func() []float64 {
	var p []float64
	for i := 0; i <= 98; i++ {
		p = append(p, float64(i)/100)
	}
	return append(p, 0.985, 0.99, 0.9925, 0.995, 0.9975, 0.999, 0.9995, 0.9999, 1)
}()

// Quantiles returns the empirical quantiles of samples at QuantileProbs
// (gonum stat.Quantile, empirical CDF).
func Quantiles(samples []int64) []float64 {
	if len(samples) == 0 {
		return nil
	}
	xs := make([]float64, len(samples))
	for i, v := range samples {
		xs[i] = float64(v)
	}
	sort.Float64s(xs)
	out := make([]float64, len(QuantileProbs))
	for i, p := range QuantileProbs {
		if p == 0 {
			out[i] = xs[0]
			continue
		}
		out[i] = stat.Quantile(p, stat.Empirical, xs, nil)
	}
	return out
}

// baseAt is the inverse CDF of the base latency at u in [0, 1], linear
// between stored quantiles.
func (c *Calibration) baseAt(u float64) float64 {
	q := c.BaseQuantilesNs
	p := QuantileProbs
	if len(q) != len(p) {
		return 20000
	}
	i := sort.SearchFloat64s(p, u)
	switch {
	case i <= 0:
		return q[0]
	case i >= len(p):
		return q[len(q)-1]
	}
	f := (u - p[i-1]) / (p[i] - p[i-1])
	return q[i-1] + f*(q[i]-q[i-1])
}

//go:embed default_calibration.json
var defaultCalibration []byte

// DefaultCalibration returns the calibration shipped in the binary, with
// Default set and Source "default (embedded)".
func DefaultCalibration() (*Calibration, error) {
	c, err := parseCalibration(defaultCalibration, "default (embedded)")
	if err != nil {
		return nil, err
	}
	c.Default = true
	return c, nil
}

// LoadCalibration reads a calibration file written by Write; an empty
// path returns DefaultCalibration. Errors name the file.
func LoadCalibration(path string) (*Calibration, error) {
	if path == "" {
		return DefaultCalibration()
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("calibration %q: %w", path, err)
	}
	c, err := parseCalibration(b, path)
	if err != nil {
		return nil, err
	}
	c.Default = false
	return c, nil
}

func parseCalibration(b []byte, source string) (*Calibration, error) {
	var c Calibration
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("calibration %q: not a proxybench calibration: %w", source, err)
	}
	if c.Version < 1 || c.Version > CalibrationVersion {
		return nil, fmt.Errorf("calibration %q: version %d; this proxybench reads 1..%d", source, c.Version, CalibrationVersion)
	}
	if len(c.BaseQuantilesNs) != len(QuantileProbs) {
		return nil, fmt.Errorf("calibration %q: baseQuantilesNs has %d values, want %d", source, len(c.BaseQuantilesNs), len(QuantileProbs))
	}
	c.Source = source
	return &c, nil
}

// Write stores c as indented JSON at path.
func (c *Calibration) Write(path string) error {
	b, err := json.MarshalIndent(c, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Mode returns the cost model of mode, or an error naming the modes the
// calibration has.
func (c *Calibration) Mode(mode string) (*ModeCost, error) {
	if m, ok := c.Modes[mode]; ok {
		return m, nil
	}
	names := make([]string, 0, len(c.Modes))
	for n := range c.Modes {
		names = append(names, n)
	}
	slices.Sort(names)
	return nil, fmt.Errorf("calibration %q has no costs for mode %q (has: %v); fix: run proxybench calibrate with that mode", c.Source, mode, names)
}

// FitCalibration builds a Calibration from real results (one per service count, as
// `proxybench calibrate` runs them; a sweep result works too). Per mode
// and size it takes: lookup p50 minus mode none's p50 at the same size
// and position, against the rules walked for a mode whose lookup walks
// a list (Sim.Lookup LookupLinear: iptables' KUBE-SERVICES, userspace's
// portals; the render position + 1) or the service count (others),
// fitted with stat.LinearRegression (intercept = LookupOverheadNs);
// sync.full wall against the objects programmed (FitCurve);
// sync.incremental wall against the full sync's objects. Mode none's
// (the direct mode's, Sim.Lookup LookupDirect) raw samples at every size
// give BaseQuantilesNs, its throughput ConnCycleNs. It fails without
// mode none.
//
// known are the build's modes (modes.All): a row is modelled after the
// mode of its name; a row of another implementation (a kube-proxy row,
// whose services sit in no fixed order in its rules) or of a mode known
// does not have is fitted as a mode of its own against the service
// count.
func FitCalibration(results []*reports.Result, known []proxymodes.Mode) (*Calibration, error) {
	modeOf := func(name string) proxymodes.Mode {
		for _, md := range known {
			if md.Name == name {
				return md
			}
		}
		return proxymodes.Mode{}
	}
	direct := func(name string) bool { return modeOf(name).Sim.Lookup == proxymodes.LookupDirect }
	c := &Calibration{Version: CalibrationVersion, Modes: map[string]*ModeCost{}}
	type pt struct{ x, y float64 }
	look := map[string][]pt{}
	klook := map[string][]pt{} // lookup.kernel p50 over none's against rules walked
	full := map[string][]pt{}
	bytesPts := map[string][]pt{}
	inc := map[string][]pt{}
	cpu := map[string][2]float64{}
	cv := map[string][]float64{}
	opc := map[string][]float64{}
	var base []int64 // mode none's samples at every size: the noise model
	var cycles []float64
	for _, r := range results {
		if r == nil {
			continue
		}
		if r.Finished.After(c.Measured) {
			c.Measured = r.Finished
		}
		c.Machine = fmt.Sprintf("%s (%s, %d CPUs)", r.Machine.Hostname, r.Machine.CPUModel, r.Machine.CPUs)
		c.Kernel, c.KernelWhere = r.Machine.Kernel, r.Machine.KernelWhere
		if r.Scenario != nil {
			c.IPTablesBackend = r.Scenario.IPTables.Backend
		}
		none := map[string]int64{}  // size/position -> p50
		noneK := map[string]int64{} // size/position -> lookup.kernel p50
		for _, m := range r.Modes {
			size := m.Services
			if size == 0 && r.Scenario != nil {
				size = r.Scenario.Services.Count
			}
			if !slices.Contains(c.Sizes, size) {
				c.Sizes = append(c.Sizes, size)
			}
			if direct(m.Mode) {
				for _, p := range m.Lookup {
					sum := reports.Summarize(p.SamplesNs)
					none[fmt.Sprint(size, p.Position)] = sum.P50
					if len(p.KernelSamplesNs) > 0 {
						noneK[fmt.Sprint(size, p.Position)] = reports.Summarize(p.KernelSamplesNs).P50
					}
					base = append(base, p.SamplesNs...)
					if p.CPS > 0 && r.Scenario != nil {
						cycles = append(cycles, float64(r.Scenario.Traffic.Concurrency)/p.CPS*1e9-sum.Mean)
					}
				}
			}
		}
		for _, m := range r.Modes {
			if direct(m.Mode) {
				continue
			}
			size := m.Services
			if size == 0 && r.Scenario != nil {
				size = r.Scenario.Services.Count
			}
			for _, p := range m.Lookup {
				b, ok := none[fmt.Sprint(size, p.Position)]
				if !ok || len(p.SamplesNs) == 0 || p.Position == "random" {
					continue
				}
				y := float64(reports.Summarize(p.SamplesNs).P50 - b)
				x := float64(size)
				if modeOf(m.Mode).Sim.Lookup == proxymodes.LookupLinear {
					x = float64(p.Index + 1) // rules walked (KUBE-SERVICES, KUBE-PORTALS-CONTAINER)
				}
				look[m.Mode] = append(look[m.Mode], pt{x, y})
				if kb, ok := noneK[fmt.Sprint(size, p.Position)]; ok && len(p.KernelSamplesNs) > 0 {
					klook[m.Mode] = append(klook[m.Mode], pt{x, float64(reports.Summarize(p.KernelSamplesNs).P50 - kb)})
				}
			}
			var walls []float64
			for _, s := range m.SyncFull {
				full[m.Mode] = append(full[m.Mode], pt{float64(s.Objects), float64(s.Wall)})
				bytesPts[m.Mode] = append(bytesPts[m.Mode], pt{float64(s.Bytes), float64(s.Wall)})
				cc := cpu[m.Mode]
				cc[0] += float64(s.CPU)
				cc[1] += float64(s.Wall)
				cpu[m.Mode] = cc
				walls = append(walls, float64(s.Wall))
			}
			if len(walls) > 1 {
				mean, sd := stat.MeanStdDev(walls, nil)
				cv[m.Mode] = append(cv[m.Mode], sd/mean)
			}
			if len(m.SyncFull) > 0 {
				objs := float64(m.SyncFull[0].Objects)
				for _, s := range m.SyncIncremental {
					inc[m.Mode] = append(inc[m.Mode], pt{objs, float64(s.Wall)})
					o := float64(s.Objects)
					if modeOf(m.Mode).Sim.PartialRewritesWalk {
						// A partial sync rewrites KUBE-SERVICES whole (size + 1
						// rules) besides the changed service's chains.
						o = math.Max(o-float64(size+1), 1)
					}
					opc[m.Mode] = append(opc[m.Mode], o)
				}
			}
		}
	}
	if len(base) == 0 {
		return nil, fmt.Errorf("calibrate: the results hold no mode none lookup samples (the baseline every lookup is measured against)")
	}
	slices.Sort(c.Sizes)
	c.BaseQuantilesNs = Quantiles(base)
	if len(cycles) > 0 {
		c.ConnCycleNs = math.Max(stat.Mean(cycles, nil), 0)
	}
	split := func(ps []pt) ([]float64, []float64) {
		xs, ys := make([]float64, len(ps)), make([]float64, len(ps))
		for i, p := range ps {
			xs[i], ys[i] = p.x, p.y
		}
		return xs, ys
	}
	modes := map[string]bool{}
	for m := range full {
		modes[m] = true
	}
	for m := range look {
		modes[m] = true
	}
	for mode := range modes {
		mc := &ModeCost{Measured: true, Note: "measured on " + c.Kernel + " (" + c.KernelWhere + ")"}
		if xs, ys := split(look[mode]); len(xs) > 0 {
			a, b := stat.Mean(ys, nil), 0.0
			if len(xs) > 1 && !allSame(xs) {
				a, b = stat.LinearRegression(xs, ys, nil, false)
			}
			mc.LookupOverheadNs = math.Max(a, 0)
			if modeOf(mode).Sim.Lookup == proxymodes.LookupLinear {
				mc.PerRuleNs = math.Max(b, 0)
			} else {
				mc.PerServiceNs = math.Max(b, 0)
			}
		}
		if xs, ys := split(klook[mode]); len(xs) > 0 {
			a, b := stat.Mean(ys, nil), 0.0
			if len(xs) > 1 && !allSame(xs) {
				a, b = stat.LinearRegression(xs, ys, nil, false)
			}
			mc.KernelOverheadNs = math.Max(a, 0)
			if modeOf(mode).Sim.Lookup == proxymodes.LookupLinear {
				mc.KernelPerRuleNs = math.Max(b, 0)
			}
		}
		mc.Full = FitCurve(split(full[mode]))
		if xs, ys := split(bytesPts[mode]); len(xs) > 1 && !allSame(xs) {
			_, mc.PerByteNs = stat.LinearRegression(xs, ys, nil, false)
		}
		mc.Incremental = FitCurve(split(inc[mode]))
		if len(opc[mode]) > 0 {
			mc.ObjectsPerChange = stat.Mean(opc[mode], nil)
		}
		if cc := cpu[mode]; cc[1] > 0 {
			mc.CPUPerWall = cc[0] / cc[1]
		}
		if len(cv[mode]) > 0 {
			mc.SyncCV = stat.Mean(cv[mode], nil)
		}
		// The marginal cost of one changed object: the full sync's
		// per-object cost at the smallest size.
		if len(c.Sizes) > 0 && len(full[mode]) > 0 {
			x := full[mode][0].x
			if x > 0 {
				mc.PerChangedObjectNs = mc.Full.At(x) / x
			}
		}
		c.Modes[mode] = mc
	}
	for _, md := range known {
		if md.Sim.Lookup == proxymodes.LookupDirect {
			c.Modes[md.Name] = &ModeCost{Measured: true, Note: "the baseline: no rules", Full: Fit{Form: "linear"}, Incremental: Fit{Form: "linear"}}
		}
	}
	return c, nil
}

func allSame(xs []float64) bool {
	for _, x := range xs {
		if x != xs[0] {
			return false
		}
	}
	return true
}

// EstimateMissing adds estimated costs (Measured false, with a Note) for
// the modes of known that c lacks and that have an estimate
// (proxymodes.SimModel.Estimate), so the sim engine can still run them:
// ipvs on a host kernel without IP_VS takes the lookup overhead of the
// other hash-lookup mode c has (nftables: both do one hash lookup plus
// conntrack and NAT) and a full sync of 8 µs per netlink object
// (proxymodes/ipvs: a 10k-service full sync, ~60k objects, took 0.5 s
// with batched netlink in UML), an incremental sync of 5 ms plus the
// same per object; userspace, when missing, takes 40 µs of accept, dial
// and copy over mode none.
func EstimateMissing(c *Calibration, known []proxymodes.Mode) {
	have := maps.Clone(c.Modes) // what the estimates may borrow from
	for _, md := range known {
		e := md.Sim.Estimate
		if e == nil {
			continue
		}
		if _, ok := c.Modes[md.Name]; ok {
			continue
		}
		over := e.LookupOverheadNs
		if e.LookupAsSameModel {
			for _, o := range known {
				if oc := have[o.Name]; oc != nil && o.Name != md.Name && o.Sim.Lookup == md.Sim.Lookup {
					over = oc.LookupOverheadNs
					break
				}
			}
		}
		c.Modes[md.Name] = &ModeCost{Measured: false, Note: e.Note, LookupOverheadNs: over,
			Full: Fit{Form: "linear", A: e.FullNs, B: e.FullPerObjectNs}, Incremental: Fit{Form: "linear", A: e.IncrementalNs},
			PerChangedObjectNs: e.PerChangedObjectNs, ObjectsPerChange: e.ObjectsPerChange, CPUPerWall: e.CPUPerWall, SyncCV: e.SyncCV}
	}
}
