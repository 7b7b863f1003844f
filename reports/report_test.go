package reports

import (
	"bytes"
	"encoding/xml"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/scenarios"
)

// TestGoldenFormats renders the fixture in every format.
func TestGoldenFormats(t *testing.T) {
	r := loadFixture(t)
	for _, f := range Formats {
		t.Run(f, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteFormat(&b, r, f, ReportOptions{}); err != nil {
				t.Fatal(err)
			}
			golden(t, "fixture."+f, b.Bytes())
		})
	}
}

// TestFixtureDeterministic: the generator gives the stored fixture, so
// -update never changes it by accident.
func TestFixtureDeterministic(t *testing.T) {
	a, b := newFixture(), newFixture()
	var x, y bytes.Buffer
	_ = WriteCSV(&x, a)
	_ = WriteCSV(&y, b)
	if x.String() != y.String() {
		t.Fatal("newFixture is not deterministic")
	}
}

func TestJUnitIsXML(t *testing.T) {
	r := loadFixture(t)
	gates := EvaluateGates(r, []scenarios.Gate{gate(t, "lookup.latency.p50", "iptables", "last", "<", "1ns")})
	var b bytes.Buffer
	if err := WriteJUnitGates(&b, r, gates); err != nil {
		t.Fatal(err)
	}
	var v junitSuites
	if err := xml.Unmarshal(b.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if s := v.Suites[0]; s.Tests != 4 || s.Failures != 4 {
		t.Errorf("tests %d failures %d, want 4 and 4 (one per size)", s.Tests, s.Failures)
	}
}

func gate(t *testing.T, figure, mode, pos, op, value string) scenarios.Gate {
	t.Helper()
	v, err := scenarios.ParseGateValue(value)
	if err != nil {
		t.Fatal(err)
	}
	return scenarios.Gate{Figure: figure, Mode: mode, Position: pos, Op: op, Value: v}
}

func TestEvaluateGates(t *testing.T) {
	r := loadFixture(t)
	cases := []struct {
		g      scenarios.Gate
		pass   bool
		checks int
	}{
		// iptables at the last of 10000 services: p99 about 32 µs * e^(2.33*0.25).
		{gate(t, "lookup.latency.p99", "iptables", "last", "<", "2ms"), true, 4},
		{gate(t, "lookup.latency.p50", "iptables", "last", "<", "25us"), false, 4}, // fails at 5000 and 10000
		{gate(t, "sync.full", "", "", "<", "5s"), true, 8},
		{gate(t, "sync.full", "iptables", "", "<", "100ms"), false, 4}, // 0.505 s at 10000
		{gate(t, "fairness.jain", "", "", ">", "0.95"), true, 8},
		{gate(t, "lookup.vsnone.p50", "iptables", "first", "<", "1.5"), true, 4},
		{gate(t, "throughput.cps", "none", "random", ">=", "1e9"), false, 4},
		{scenarios.Gate{Figure: "sync.full", Mode: "ipvs", Op: "<", Value: scenarios.GateValue{V: 1, IsDuration: true, Text: "1ns"}}, false, 0},
	}
	for _, c := range cases {
		g := EvaluateGates(r, []scenarios.Gate{c.g})[0]
		if g.Pass != c.pass || len(g.Checks) != c.checks {
			t.Errorf("%s: pass %v with %d checks, want %v with %d", c.g, g.Pass, len(g.Checks), c.pass, c.checks)
		}
	}
	var b bytes.Buffer
	_ = WriteGates(&b, EvaluateGates(r, []scenarios.Gate{cases[3].g}))
	if !strings.Contains(b.String(), "FAIL sync.full{mode=iptables,services=10000} = 473.96 ms < 100ms") {
		t.Errorf("gate output lacks the measured value:\n%s", b.String())
	}
}

func TestSameMachine(t *testing.T) {
	a, b := newFixture(), newFixture()
	if err := SameMachine(a, b); err != nil {
		t.Fatal(err)
	}
	b.Machine.Kernel = "6.12.0"
	b.Machine.KernelWhere = "uml"
	err := SameMachine(a, b)
	if err == nil || !strings.Contains(err.Error(), `kernel "6.1.0-test" vs "6.12.0"`) || !strings.Contains(err.Error(), "kernelWhere") {
		t.Errorf("err = %v", err)
	}
}

// TestFitChoosesModel: linear data picks linear, flat data constant
// (seeded noise), and the limit of a linear fit is where it crosses the
// budget, marked extrapolated beyond the measured sizes.
func TestFitChoosesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var xs, lin, flat []float64
	for _, n := range []float64{1000, 2000, 5000, 10000} {
		for range 2 {
			xs = append(xs, n)
			lin = append(lin, 5e6+50e3*n*(1+0.02*rng.NormFloat64()))
			flat = append(flat, 30e3*(1+0.05*rng.NormFloat64()))
		}
	}
	fl := FitCapacity(xs, lin)
	if fl.Model != "linear" || fl.B < 45e3 || fl.B > 55e3 || fl.R2 < 0.99 {
		t.Errorf("linear data: %+v", fl)
	}
	l := fl.LimitUnder(float64(5 * time.Second))
	if l.Services < 95000 || l.Services > 105000 || !l.Extrapolated || l.Conservative >= l.Services {
		t.Errorf("limit under 5s: %+v, want about 99,900, extrapolated, conservative below", l)
	}
	fc := FitCapacity(xs, flat)
	if fc.Model != "constant" || fc.B != 0 {
		t.Errorf("flat data: %+v", fc)
	}
	if l := fc.LimitUnder(2e6); !l.Unbounded {
		t.Errorf("flat data under a large budget: %+v, want unbounded", l)
	}
	if l := fc.LimitUnder(1e3); l.Services != 0 {
		t.Errorf("flat data over budget: %+v, want 0", l)
	}
}

func TestCapacityPlanFixture(t *testing.T) {
	plan := CapacityPlan(loadFixture(t), Budgets{P99: 2 * time.Millisecond, Sync: 5 * time.Second})
	if len(plan) != 2 {
		t.Fatalf("plan for %d modes, want 2", len(plan))
	}
	for _, mc := range plan {
		switch mc.Mode {
		case "none":
			if !mc.Unbounded {
				t.Errorf("none: %+v", mc)
			}
		case "iptables":
			// sync = 5 ms + 50 µs·n stays under 5 s up to about 99,900 services.
			if mc.LimitedBy != "sync.full" || mc.MaxServices < 90000 || mc.MaxServices > 110000 || !mc.Extrapolated {
				t.Errorf("iptables: %+v", mc)
			}
			for _, cf := range mc.Figures {
				if cf.Figure == "sync.full" && cf.Fit.Model != "linear" {
					t.Errorf("iptables sync fit %s, want linear", cf.Fit.Model)
				}
			}
		}
	}
}

// TestFaultsShown: a mode's faults appear as warnings in the markdown and
// HTML reports, and a result without faults has none.
func TestFaultsShown(t *testing.T) {
	r := loadFixture(t)
	const fault = "conntrack flush of node0 before the last full sync failed"
	for _, f := range []string{"md", "html"} {
		var b bytes.Buffer
		if err := WriteFormat(&b, r, f, ReportOptions{}); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(b.String(), fault) {
			t.Fatalf("%s: fault text in a report of a run without faults", f)
		}
	}
	r.Modes[1].Faults = []string{fault}
	for _, f := range []string{"md", "html"} {
		var b bytes.Buffer
		if err := WriteFormat(&b, r, f, ReportOptions{}); err != nil {
			t.Fatal(err)
		}
		if want := r.label(r.Modes[1]) + ": " + fault; !strings.Contains(b.String(), want) {
			t.Errorf("%s report does not show the fault %q", f, want)
		}
	}
}

// TestPartialMarkedInCIFormats: a partial result is a failing "run
// complete" testcase in JUnit (figures and gates) and a configuration line
// in the Go benchmark text, so CI cannot read it as a complete run.
func TestPartialMarkedInCIFormats(t *testing.T) {
	r := loadFixture(t)
	r.Partial = "interrupted (SIGINT)"
	for name, write := range map[string]func(*bytes.Buffer) error{
		"figures": func(b *bytes.Buffer) error { return WriteJUnitFigures(b, r) },
		"gates":   func(b *bytes.Buffer) error { return WriteJUnitGates(b, r, nil) },
	} {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			t.Fatal(err)
		}
		var v junitSuites
		if err := xml.Unmarshal(b.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		s := v.Suites[0]
		if s.Failures < 1 || s.Cases[0].Failure == nil || !strings.Contains(s.Cases[0].Failure.Message, "PARTIAL") {
			t.Errorf("junit %s: failures %d, first case %+v; want a failing partial case", name, s.Failures, s.Cases[0])
		}
	}
	var b bytes.Buffer
	if err := WriteGoBench(&b, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "partial: interrupted (SIGINT)\n") {
		t.Errorf("gobench lacks the partial line:\n%.300s", b.String())
	}
}
