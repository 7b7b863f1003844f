package sim

import (
	"math"
	"testing"
	"time"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/reports"
)

// TestFitCalibrationAsksTheMode: the fit reads each row's mode from the
// mode list (Sim.Lookup, Sim.PartialRewritesWalk), not its name: a
// linear lookup is fitted per rule walked, a hash lookup per service; an
// iptables incremental sync has the size+1 KUBE-SERVICES rules taken off
// its objects; the direct mode is the baseline and gets its empty entry.
func TestFitCalibrationAsksTheMode(t *testing.T) {
	const size = 100
	samples := func(ns int64) []int64 { return []int64{ns, ns, ns} }
	row := func(mode string, first, last int64) reports.ModeResult {
		return reports.ModeResult{Mode: mode, Services: size,
			Lookup: []reports.PositionResult{
				{Position: "first", Index: 0, SamplesNs: samples(first)},
				{Position: "last", Index: size - 1, SamplesNs: samples(last)},
			},
			SyncFull:        []measure.SyncStats{{Kind: "full", Wall: time.Millisecond, Objects: 1000}},
			SyncIncremental: []measure.SyncStats{{Kind: "incremental", Wall: time.Millisecond, Objects: size + 1 + 7}},
		}
	}
	r := &reports.Result{Modes: []reports.ModeResult{
		row("none", 10000, 10000),
		row("iptables", 11000, 11000+99*10), // 10 ns per rule walked
		row("userspace", 50000, 50000+99*20),
		row("nftables", 12000, 12000+99*30),
	}}
	c, err := FitCalibration([]*reports.Result{r}, modes.All)
	if err != nil {
		t.Fatal(err)
	}
	// Per rule walked: the slope over the render positions (connect
	// times are HDR-quantised, so within 2%); per service: one size, so
	// the mean (slope 0).
	for mode, want := range map[string]struct{ perRule, objs float64 }{
		"iptables":  {10, 7},
		"userspace": {20, size + 1 + 7},
		"nftables":  {0, size + 1 + 7},
	} {
		mc := c.Modes[mode]
		if mc == nil {
			t.Fatalf("%s: no costs", mode)
		}
		if math.Abs(mc.PerRuleNs-want.perRule) > 0.02*want.perRule || mc.PerServiceNs != 0 || mc.ObjectsPerChange != want.objs {
			t.Errorf("%s: perRule %g perService %g objects/change %g, want %g 0 %g", mode, mc.PerRuleNs, mc.PerServiceNs, mc.ObjectsPerChange, want.perRule, want.objs)
		}
	}
	if n := c.Modes["none"]; n == nil || n.Note != "the baseline: no rules" {
		t.Errorf("none: %+v, want the baseline's entry", n)
	}
}

// TestEstimateMissing: the modes with an estimate (ipvs, userspace) get
// it when the calibration lacks them; ipvs borrows the lookup overhead of
// the other hash-lookup mode (nftables) when there is one; measured
// modes are kept.
func TestEstimateMissing(t *testing.T) {
	c := &Calibration{Modes: map[string]*ModeCost{"nftables": {Measured: true, LookupOverheadNs: 1234}}}
	EstimateMissing(c, modes.All)
	if v := c.Modes["ipvs"]; v == nil || v.Measured || v.LookupOverheadNs != 1234 || v.Full.B != 8000 || v.Incremental.A != 5e6 {
		t.Errorf("ipvs: %+v, want nftables' overhead and 8 µs per object", v)
	}
	if u := c.Modes["userspace"]; u == nil || u.Measured || u.LookupOverheadNs != 40000 {
		t.Errorf("userspace: %+v, want the 40 µs estimate", u)
	}
	if n := c.Modes["nftables"]; !n.Measured || n.LookupOverheadNs != 1234 {
		t.Errorf("nftables changed: %+v", n)
	}
	if _, ok := c.Modes["iptables"]; ok {
		t.Error("iptables has no estimate, but got one")
	}
	c = &Calibration{Modes: map[string]*ModeCost{"ipvs": {Measured: true, LookupOverheadNs: 1}}}
	EstimateMissing(c, modes.All)
	if v := c.Modes["ipvs"]; !v.Measured || v.LookupOverheadNs != 1 {
		t.Errorf("measured ipvs replaced: %+v", v)
	}
	c = &Calibration{Modes: map[string]*ModeCost{}}
	EstimateMissing(c, modes.All)
	if v := c.Modes["ipvs"]; v.LookupOverheadNs != 6000 {
		t.Errorf("ipvs without nftables: overhead %g, want 6000", v.LookupOverheadNs)
	}
}

// TestFitCalibrationKernelPerRule: with lookup.kernel in the results the
// fit also gives the kernel's own cost per rule walked (lookup.kernel p50
// over none's against the rules walked) and its intercept, apart from
// the connect time's slope; without it both stay 0.
func TestFitCalibrationKernelPerRule(t *testing.T) {
	const size = 1000
	samples := func(ns int64) []int64 { return []int64{ns, ns, ns} }
	row := func(mode string, first, last, kfirst, klast int64) reports.ModeResult {
		return reports.ModeResult{Mode: mode, Services: size, Lookup: []reports.PositionResult{
			{Position: "first", Index: 0, SamplesNs: samples(first), KernelSamplesNs: samples(kfirst)},
			{Position: "last", Index: size - 1, SamplesNs: samples(last), KernelSamplesNs: samples(klast)},
		}}
	}
	r := &reports.Result{Modes: []reports.ModeResult{
		row("none", 20000, 20000, 500, 500),
		row("iptables", 30000, 30000+999*12, 3000, 3000+999*8), // connect 12 ns a rule, the kernel's walk 8
	}}
	c, err := FitCalibration([]*reports.Result{r}, modes.All)
	if err != nil {
		t.Fatal(err)
	}
	ipt := c.Modes["iptables"]
	if math.Abs(ipt.PerRuleNs-12) > 0.3 || math.Abs(ipt.KernelPerRuleNs-8) > 0.2 || math.Abs(ipt.KernelOverheadNs-2500) > 50 {
		t.Errorf("iptables: perRule %g, kernelPerRule %g, kernelOverhead %g; want 12, 8, 2500", ipt.PerRuleNs, ipt.KernelPerRuleNs, ipt.KernelOverheadNs)
	}
	for i := range r.Modes {
		for j := range r.Modes[i].Lookup {
			r.Modes[i].Lookup[j].KernelSamplesNs = nil
		}
	}
	if c, _ = FitCalibration([]*reports.Result{r}, modes.All); c.Modes["iptables"].KernelPerRuleNs != 0 {
		t.Errorf("without lookup.kernel: kernelPerRule %g, want 0", c.Modes["iptables"].KernelPerRuleNs)
	}
}
