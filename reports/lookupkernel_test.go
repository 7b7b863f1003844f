package reports

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/scenarios"
)

// kernelResult is a run of iptables with lookup.kernel measured (SYNs at
// first around 3 µs, at last around 100 µs; the connect time 80 µs more
// at last, of which the kernel's walk is 97 µs at the median), nftables
// with it absent for a reason, and none measured flat.
func kernelResult() *Result {
	rng := rand.New(rand.NewPCG(3, 3))
	sc := &scenarios.Scenario{Name: "kernel", Seed: 1, Repetitions: 1, Modes: []string{"none", "iptables", "nftables"}, Services: scenarios.ServicesSpec{Count: 10000}}
	sc.SetDefaults()
	r := &Result{SchemaVersion: SchemaVersion, RunID: "k3rn3l", Engine: "real", Started: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), Scenario: sc,
		Machine: Machine{Kernel: "6.18.0", KernelWhere: "host", CPUs: 2}}
	pos := func(p string, lat, syn, other float64) PositionResult {
		pr := PositionResult{Position: p, Index: 0, SamplesNs: logNormal(rng, 400, lat, 0.2)}
		if syn > 0 {
			pr.KernelSamplesNs, pr.KernelOtherSamplesNs = logNormal(rng, 400, syn, 0.1), logNormal(rng, 1200, other, 0.1)
		}
		pr.Latency, pr.Kernel, pr.KernelOther = Summarize(pr.SamplesNs), Summarize(pr.KernelSamplesNs), Summarize(pr.KernelOtherSamplesNs)
		return pr
	}
	kt := &KernelTime{Bracket: "netif_receive_skb → fib_table_lookup", Unmatched: 12}
	r.Modes = []ModeResult{
		{Mode: "none", Services: 10000, KernelTime: kt, Lookup: []PositionResult{pos("first", 20e3, 500, 360), pos("last", 20e3, 500, 360)}},
		{Mode: "iptables", Services: 10000, KernelTime: kt, Traits: measure.ModeTraits{Walk: "KUBE-SERVICES"}, Lookup: []PositionResult{pos("first", 30e3, 3e3, 900), pos("last", 130e3, 100e3, 950)}},
		{Mode: "nftables", Services: 10000, KernelTime: &KernelTime{Absent: "not root: BPF programs need CAP_BPF and CAP_PERFMON (uid 1000)"},
			Lookup: []PositionResult{pos("first", 31e3, 0, 0), pos("last", 31e3, 0, 0)}},
	}
	return r
}

// TestLookupKernelFigures: lookup.kernel's figures come from the raw
// samples (a stale stored summary is ignored), only where measured.
func TestLookupKernelFigures(t *testing.T) {
	r := kernelResult()
	r.Modes[1].Lookup[1].Kernel.P50 = 1 // stale: the samples win
	got := map[string]Figure{}
	for _, f := range Figures(r) {
		got[f.Key()] = f
	}
	last := got["lookup.kernel.p50{mode=iptables,position=last,services=10000}"]
	if last.N != 400 || last.Value < 90e3 || last.Value > 110e3 || last.Unit != "ns" {
		t.Errorf("iptables last lookup.kernel.p50 = %+v, want ~100 µs over 400 SYNs", last)
	}
	if o := got["lookup.kernel.other.p50{mode=iptables,position=first,services=10000}"]; o.N != 1200 || o.Value < 800 || o.Value > 1000 {
		t.Errorf("iptables first lookup.kernel.other.p50 = %+v", o)
	}
	for k := range got {
		if strings.HasPrefix(k, "lookup.kernel") && strings.Contains(k, "mode=nftables") {
			t.Errorf("absent figure %s present", k)
		}
	}
	for _, n := range []string{"lookup.kernel.p50", "lookup.kernel.p90", "lookup.kernel.p99", "lookup.kernel.other.p50", "lookup.kernel.other.p99"} {
		if k, ok := scenarios.GateFigures[n]; !ok || !k.Duration || !k.Positional {
			t.Errorf("%s is not a positional duration gate figure", n)
		}
	}
}

// TestLookupKernelWalkShare: the walk's share of iptables' last-minus-first
// connect time, and none's flat figure.
func TestLookupKernelWalkShare(t *testing.T) {
	r := kernelResult()
	d, ok := KernelWalkShare(&r.Modes[1])
	if !ok || d.Kernel < 85e3 || d.Kernel > 110e3 || d.Latency < 85e3 || d.Latency > 115e3 {
		t.Fatalf("iptables WalkShare = %+v, %v", d, ok)
	}
	if _, ok := KernelWalkShare(&r.Modes[2]); ok {
		t.Error("nftables without lookup.kernel has a walk share")
	}
	// A lookup of fixed cost, and a walk in no fixed order, have no share.
	if _, ok := KernelWalkShare(&r.Modes[0]); ok {
		t.Error("none (no walk) has a walk share")
	}
	kp := r.Modes[1]
	kp.Traits.Unordered = true
	if _, ok := KernelWalkShare(&kp); ok {
		t.Error("a row whose services sit in no fixed order has a walk share")
	}
}

// TestLookupKernelEveryFormat: every format shows lookup.kernel where
// measured and, for the row without it, the reason in words.
func TestLookupKernelEveryFormat(t *testing.T) {
	r := kernelResult()
	want := map[string][]string{
		"md":          {"### lookup.kernel", "| iptables | last | 400 |", "not measured: not root: BPF programs need CAP_BPF", "% of the delta is the rule walk"},
		"html":        {"lookup.kernel", "not measured: not root: BPF programs need CAP_BPF"},
		"csv":         {"lookup.kernel.p50", "lookup.kernel.kernel.p50"},
		"junit":       {"lookup.kernel.p50", "not measured: not root"},
		"gobench":     {"phase=lookup.kernel", "figure=kernel.p50"},
		"openmetrics": {"proxybench_lookup_kernel_p50_seconds", "proxybench_section_lookup_kernel_kernel_p50"},
	}
	for _, f := range Formats {
		var b bytes.Buffer
		if err := WriteFormat(&b, r, f, ReportOptions{}); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, w := range want[f] {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: no %q", f, w)
			}
		}
	}
	var h bytes.Buffer
	_ = WriteFormat(&h, r, "html", ReportOptions{})
	if i, j := strings.Index(h.String(), "lookup.kernel: the node kernel"), strings.Index(h.String(), "lookup.latency CDFs"); i < 0 || i > j || strings.Count(h.String(), "lookup.kernel: the node kernel") != 1 {
		t.Errorf("html: lookup.kernel's section at %d, the CDFs at %d; want it once, beside lookup.latency", i, j)
	}
	// The md table sits beside lookup.latency's: before fairness.
	var b bytes.Buffer
	_ = WriteFormat(&b, r, "md", ReportOptions{})
	md := b.String()
	if i, j := strings.Index(md, "### lookup.kernel"), strings.Index(md, "### fairness"); i < 0 || j < 0 || i > j || strings.Count(md, "### lookup.kernel") != 1 {
		t.Errorf("lookup.kernel's table at %d, fairness at %d, %d times; want once, before fairness", i, j, strings.Count(md, "### lookup.kernel"))
	}
}
