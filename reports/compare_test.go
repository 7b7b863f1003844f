package reports

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/scenarios"
)

// synth describes the synthetic runs of the A/A tests: what varies
// between runs on a shared machine and what a change does.
type synth struct {
	// drift is the σ of a whole run's log speed (every duration of a run
	// is scaled by exp(drift·z)): the machine changed between runs.
	drift float64
	// modeDrift is the σ of each mode's own log offset within a run.
	modeDrift float64
	// shift scales iptables' durations (1 = no change); the raw tool's
	// time is not scaled, so sync.full.vsraw moves too.
	shift float64
	// samples is the connections per position.
	samples int
}

// run draws one synthetic run of modes none and iptables at 1000
// services: lookup samples log-normal (σ 0.3) around a median growing
// with the position for iptables, three full syncs, traffic CPU.
func (s synth) run(rng *rand.Rand) *Result {
	sc := &scenarios.Scenario{Name: "synthetic", Seed: 1, Repetitions: 1, Modes: []string{"none", "iptables"}, Services: scenarios.ServicesSpec{Count: 1000}}
	r := &Result{SchemaVersion: SchemaVersion, Machine: Machine{Hostname: "synthetic", Kernel: "test", KernelWhere: "host"}, Scenario: sc}
	run := math.Exp(s.drift * rng.NormFloat64())
	for _, mode := range sc.Modes {
		off := run * math.Exp(s.modeDrift*rng.NormFloat64())
		k := 1.0
		if mode == "iptables" {
			k = s.shift
		}
		m := ModeResult{Mode: mode, Services: 1000}
		for range 3 {
			tool := 40e6 * off * math.Exp(0.05*rng.NormFloat64())
			wall := 1.3 * tool * k * math.Exp(0.03*rng.NormFloat64())
			st := measure.SyncStats{Kind: "full", Wall: time.Duration(wall), CPU: time.Duration(wall * 0.7)}
			if mode == "iptables" {
				st.Phases = map[string]time.Duration{"restore": time.Duration(tool)}
			} else {
				st.Wall = time.Duration(200 + rng.IntN(100))
			}
			m.SyncFull = append(m.SyncFull, st)
		}
		for _, pos := range []struct {
			name string
			idx  int
		}{{"first", 0}, {"middle", 500}, {"last", 999}, {"random", 500}} {
			med := 18000 * off
			if mode == "iptables" {
				med = (22000 + 8*float64(pos.idx)) * off * k
			}
			m.Lookup = append(m.Lookup, PositionResult{Position: pos.name, Index: pos.idx, SamplesNs: logNormal(rng, s.samples, med, 0.3)})
		}
		m.TrafficConns = 4 * s.samples
		cpu := 40000 * off
		if mode == "iptables" {
			cpu = 46000 * off * k
		}
		m.TrafficCPUNs = int64(cpu * float64(m.TrafficConns) * math.Exp(0.02*rng.NormFloat64()))
		r.Modes = append(r.Modes, m)
	}
	return r
}

func (s synth) runs(rng *rand.Rand, n int) []*Result {
	out := make([]*Result, n)
	for i := range out {
		out[i] = s.run(rng)
	}
	return out
}

// realistic is the run-to-run drift of a shared machine: whole runs 5%
// faster or slower (σ), each mode 2% on its own.
var realistic = synth{drift: 0.05, modeDrift: 0.02, shift: 1, samples: 250}

// TestCompareAAFalseAlarms: pairs of 5+5 runs drawn from one
// distribution, with per-run drift, are judged significant at most α of
// the time (tolerance 0, so only the test decides), and at the default
// 10% tolerance almost never flagged.
func TestCompareAAFalseAlarms(t *testing.T) {
	draws := 200
	if testing.Short() {
		draws = 60
	}
	rng := rand.New(rand.NewPCG(17, 17))
	const alpha = 0.05
	judged, sig, flagged := 0, 0, 0
	for range draws {
		a, b := realistic.runs(rng, 5), realistic.runs(rng, 5)
		for _, c := range CompareRuns(a, b, CompareOptions{Alpha: alpha}) {
			if c.Verdict == "too few runs" {
				t.Fatalf("5+5 runs judged too few: %v", c)
			}
			judged++
			if c.Significant {
				sig++
			}
			if c.Significant && math.Abs(c.Ratio-1) > 0.10 { // the verdict at a 10% tolerance
				flagged++
			}
		}
	}
	rate := float64(sig) / float64(judged)
	t.Logf("A/A: %d draws, %d figures judged, %d significant (%.2f%%), %d flagged beyond 10%%", draws, judged, sig, rate*100, flagged)
	if judged != draws*29 {
		t.Errorf("%d figures judged, want %d (29 per comparison)", judged, draws*29)
	}
	if rate > alpha {
		t.Errorf("false-alarm rate %.3f > α = %g", rate, alpha)
	}
	if float64(flagged)/float64(judged) > alpha {
		t.Errorf("%d of %d figures flagged beyond a 10%% tolerance with no change: more than α", flagged, judged)
	}
}

// TestCompareDetectsShift: a 10% slowdown of iptables fails the gate (a
// regression of some iptables figure at a 5% tolerance) in nearly every
// draw, and the ratio figures docs/gates.md recommends each find it in
// most draws, while the raw latencies, under the same 5% run drift,
// often cannot; mode none, unchanged, is flagged at most α of the time.
func TestCompareDetectsShift(t *testing.T) {
	draws := 100
	if testing.Short() {
		draws = 30
	}
	rng := rand.New(rand.NewPCG(23, 23))
	slow := realistic
	slow.shift = 1.10
	found := map[string]int{}
	gateFailed, noneJudged, noneFlagged := 0, 0, 0
	for range draws {
		a, b := realistic.runs(rng, 5), slow.runs(rng, 5)
		failed := false
		for _, c := range CompareRuns(a, b, CompareOptions{Tolerance: 0.05}) {
			if c.Mode == "none" {
				noneJudged++
				if c.Flagged() {
					noneFlagged++
				}
			}
			if c.Mode == "iptables" && c.Regression() {
				found[c.Figure]++
				failed = true
			}
		}
		if failed {
			gateFailed++
		}
	}
	t.Logf("10%% shift: gate failed in %d of %d draws; regressions per figure: %v; mode none flagged %d of %d", gateFailed, draws, found, noneFlagged, noneJudged)
	if float64(gateFailed) < 0.95*float64(draws) {
		t.Errorf("a 10%% shift failed the gate in %d of %d draws, want ≥ 95%%", gateFailed, draws)
	}
	for f, want := range map[string]float64{"lookup.vsnone.p50": 0.6, "sync.full.vsraw": 0.9} {
		per := 1
		if strings.HasPrefix(f, "lookup.") {
			per = 4 // positions
		}
		if rate := float64(found[f]) / float64(draws*per); rate < want {
			t.Errorf("%s: a 10%% shift flagged in %.0f%% of draws, want ≥ %.0f%%", f, rate*100, want*100)
		}
	}
	if float64(noneFlagged) > 0.05*float64(noneJudged) {
		t.Errorf("unchanged mode none flagged in %d of %d figures, more than α", noneFlagged, noneJudged)
	}
}

// TestCompareTooFewRuns: one run against one run gets no verdict,
// however large the change, and says how many runs it needs.
func TestCompareTooFewRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	slow := realistic
	slow.shift = 3
	cs := CompareRuns(realistic.runs(rng, 1), slow.runs(rng, 3), CompareOptions{Tolerance: 0.1})
	if len(cs) == 0 {
		t.Fatal("nothing compared")
	}
	for _, c := range cs {
		if c.Verdict != "too few runs" || c.Significant || c.NeedRuns != 4 {
			t.Errorf("1+3 runs judged: %v", c)
		}
		if !strings.Contains(c.String(), "too few runs: need ≥ 4 per side") {
			t.Errorf("verdict text %q lacks the runs needed", c.String())
		}
	}
	if n := NeedRuns(0.01); n != 5 {
		t.Errorf("NeedRuns(0.01) = %d, want 5 (separated 4+4 give p = 0.029)", n)
	}
}

// TestNoiseFloor: the floor grows with the spread between runs, is 0
// for identical runs, and is never crossed by an unflagged change.
func TestNoiseFloor(t *testing.T) {
	tight := []float64{100, 101, 99, 100.5, 99.5}
	wide := []float64{100, 110, 90, 105, 95}
	ft, fw := NoiseFloor(tight, 0.05), NoiseFloor(wide, 0.05)
	if !(ft > 0 && ft < fw) {
		t.Errorf("floors tight %.4f wide %.4f, want 0 < tight < wide", ft, fw)
	}
	if f := NoiseFloor([]float64{7, 7, 7, 7, 7}, 0.05); f != 0 {
		t.Errorf("floor of identical runs = %g, want 0", f)
	}
	if f := NoiseFloor([]float64{1, 2, 3}, 0.05); !math.IsInf(f, 1) {
		t.Errorf("floor of 3 runs = %g, want +Inf (the test cannot reach 0.05)", f)
	}
	// Shifting the wide runs by just over the floor is significant, by
	// just under it is not.
	scale := func(xs []float64, k float64) []float64 {
		out := make([]float64, len(xs))
		for i, x := range xs {
			out[i] = x * k
		}
		return out
	}
	if p := uTest(wide, scale(wide, 1+fw*1.001), 0.05); p > 0.05 {
		t.Errorf("shift just over the floor: p = %.3f", p)
	}
	if p := uTest(wide, scale(wide, 1+fw*0.999), 0.05); p <= 0.05 {
		t.Errorf("shift just under the floor: p = %.3f", p)
	}
}

// TestCompareFormats: benchstat's table shape, JUnit with one testcase
// per judged figure (a regression fails), JSON that decodes.
func TestCompareFormats(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	slow := realistic
	slow.shift = 2
	cs := CompareRuns(realistic.runs(rng, 5), slow.runs(rng, 5), CompareOptions{Tolerance: 0.1})
	var b bytes.Buffer
	if err := WriteBenchstat(&b, cs, []string{"base.json"}, []string{"new.json"}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"base.json", "│", "vs base", "~ (p=", "(p=0.008 n=5)", "sec/op", "mode=iptables/pos=last/services=1000"} {
		if !strings.Contains(out, want) {
			t.Errorf("benchstat output lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	if err := WriteComparisonJUnit(&b, cs, CompareOptions{Tolerance: 0.1}); err != nil {
		t.Fatal(err)
	}
	var v junitSuites
	if err := xml.Unmarshal(b.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	regs := 0
	for _, c := range cs {
		if c.Regression() {
			regs++
		}
	}
	if s := v.Suites[0]; s.Tests != len(cs) || s.Failures != regs || regs == 0 {
		t.Errorf("junit: %d tests, %d failures; want %d and %d (> 0)", s.Tests, s.Failures, len(cs), regs)
	}
	b.Reset()
	one := CompareRuns(realistic.runs(rng, 1), realistic.runs(rng, 1), CompareOptions{})
	if err := WriteComparisonJSON(&b, append(cs, one...)); err != nil {
		t.Fatal(err)
	}
	var j struct{ Changes []map[string]any }
	if err := json.Unmarshal(b.Bytes(), &j); err != nil || len(j.Changes) != len(cs)+len(one) {
		t.Fatalf("json: %v, %d changes", err, len(j.Changes))
	}
}

// TestRunsSplit: a result holding 3 runs splits into 3, sharing the
// machine, and a comparison pools runs of several files.
func TestRunsSplit(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	rs := realistic.runs(rng, 6)
	a, b := rs[0], rs[3]
	a.MoreRuns = []Run{{Modes: rs[1].Modes}, {Modes: rs[2].Modes}}
	b.MoreRuns = []Run{{Modes: rs[4].Modes}, {Modes: rs[5].Modes}}
	runs := SplitRuns([]*Result{a})
	if len(runs) != 3 || runs[1].Machine != a.Machine || len(runs[2].MoreRuns) != 0 || &runs[2].Modes[0] != &rs[2].Modes[0] {
		t.Fatalf("split into %d runs", len(runs))
	}
	cs := CompareRuns(SplitRuns([]*Result{a, b}), SplitRuns([]*Result{b, a}), CompareOptions{})
	for _, c := range cs {
		if len(c.BaseRuns) != 6 || len(c.NewRuns) != 6 || c.P != 1 {
			t.Errorf("pooled comparison of the same six runs: %v", c)
		}
	}
}

// TestCompareGate: with the ratio gate, a run-wide slowdown (every mode
// 30% slower, as a noisy neighbour does) flags raw figures but fails
// nothing, while a slowdown of iptables alone fails the gate through its
// ratios; ParseGate refuses unknown names.
func TestCompareGate(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	quiet := synth{drift: 0.01, modeDrift: 0.005, shift: 1, samples: 250}
	base := quiet.runs(rng, 5)
	noisy := make([]*Result, 5)
	for i := range noisy {
		r := quiet.run(rng)
		for j := range r.Modes {
			m := &r.Modes[j]
			for k := range m.Lookup {
				for s := range m.Lookup[k].SamplesNs {
					m.Lookup[k].SamplesNs[s] = m.Lookup[k].SamplesNs[s] * 13 / 10
				}
			}
		}
		noisy[i] = r
	}
	gate, err := ParseGate("ratios")
	if err != nil {
		t.Fatal(err)
	}
	rawFlagged := 0
	for _, c := range CompareRuns(base, noisy, CompareOptions{Tolerance: 0.1, Gate: gate}) {
		if c.Fails() {
			t.Errorf("run-wide slowdown failed the ratio gate: %v", c)
		}
		if c.Regression() && !c.Gated {
			rawFlagged++
		}
	}
	if rawFlagged == 0 {
		t.Error("a 30% run-wide slowdown flagged no raw figure")
	}
	slow := quiet
	slow.shift = 1.3
	fails := 0
	for _, c := range CompareRuns(base, slow.runs(rng, 5), CompareOptions{Tolerance: 0.1, Gate: gate}) {
		if c.Fails() {
			fails++
		}
	}
	if fails == 0 {
		t.Error("a 30% slowdown of iptables alone did not fail the ratio gate")
	}
	if _, err := ParseGate("lookup.latency.p50,sync.bogus"); err == nil || !strings.Contains(err.Error(), "sync.bogus") {
		t.Errorf("unknown gate figure: %v", err)
	}
}
