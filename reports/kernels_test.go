package reports

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// twoKernels is the fixture run on two kernels: uml:6.1 as generated, and
// uml:6.12 with every connect time (none's too) doubled, so each mode's
// ratio to its own kernel's none is the same on both kernels while the
// absolute figures differ 2x. Only the largest size is kept.
func twoKernels() *Result {
	a, b := newFixture(), newFixture()
	r, modes := a, a.Modes
	r.Scenario.Sweep.Services = nil
	r.Modes = nil
	for _, m := range modes {
		if m.Services == 10000 {
			m.Kernel = "uml:6.1"
			r.Modes = append(r.Modes, m)
		}
	}
	for _, m := range b.Modes {
		if m.Services != 10000 {
			continue
		}
		m.Kernel = "uml:6.12"
		for j := range m.Lookup {
			p := &m.Lookup[j]
			for k := range p.SamplesNs {
				p.SamplesNs[k] *= 2
			}
			p.Latency = Summarize(p.SamplesNs)
		}
		r.Modes = append(r.Modes, m)
	}
	r.Machine.KernelWhere = "uml:6.1+uml:6.12"
	r.Kernels = []KernelRun{{Name: "uml:6.1", Release: "6.1.192", Where: "uml", InitNs: 9e8, BootNs: 1e9, GuestNs: 5e9},
		{Name: "uml:6.12", Release: "6.12.117", Where: "uml", InitNs: 8e8, BootNs: 9e8, GuestNs: 4e9}}
	return r
}

// TestReportGroupedByKernel: a two-kernel result gets a section per kernel,
// each with ratios to its own kernel's none, and an across-kernels table
// where the ratios agree although the absolute figures do not.
func TestReportGroupedByKernel(t *testing.T) {
	r := twoKernels()
	if got := strings.Join(r.KernelNames(), ","); got != "uml:6.1,uml:6.12" || !r.MultiKernel() {
		t.Fatalf("kernels %q", got)
	}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, r); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{"## kernel uml:6.1 (6.1.192)", "## kernel uml:6.12 (6.12.117)", "## across kernels"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	// iptables' lookup p50 at position last: the same ratio on both kernels, absolute 2x.
	row := regexp.MustCompile(`\| iptables \| lookup p50 last \| ([0-9.]+)× \(([0-9.]+) µs\) \| ([0-9.]+)× \(([0-9.]+) µs\) \|`).FindStringSubmatch(md)
	if row == nil {
		t.Fatalf("no across-kernels row for iptables at last:\n%s", md)
	}
	if row[1] != row[3] || row[1] == "1.00" {
		t.Errorf("ratios to each kernel's own none differ or are trivial: %s vs %s", row[1], row[3])
	}
	if row[2] == row[4] {
		t.Errorf("absolute p50 should differ 2x between kernels: %s vs %s", row[2], row[4])
	}
	var h bytes.Buffer
	if err := WriteHTML(&h, r, Budgets{}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{`id="lookup-uml-6-1"`, `id="lookup-uml-6-12"`, `id="sync-uml-6-12"`} {
		if !strings.Contains(h.String(), id) {
			t.Errorf("HTML lacks section %s", id)
		}
	}
}

// TestCompareKernelsOfOneRun: KernelSide splits one run into its kernels
// so Compare matches each mode across them and sees the 2x.
func TestCompareKernelsOfOneRun(t *testing.T) {
	r := twoKernels()
	a, err := KernelSide(r, "uml:6.1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := KernelSide(r, "uml:6.12")
	if err != nil {
		t.Fatal(err)
	}
	if a.Machine.Kernel != "6.1.192" || b.Machine.Kernel != "6.12.117" {
		t.Errorf("sides' releases %q %q", a.Machine.Kernel, b.Machine.Kernel)
	}
	// One run per side: the rank test cannot judge, but every figure of
	// iptables is matched across the kernels, with the 2x as its ratio
	// for the absolute p50 and ~1 for the ratio to each kernel's none.
	n := 0
	for _, c := range CompareRuns([]*Result{a}, []*Result{b}, CompareOptions{Tolerance: 0.10}) {
		if c.Mode != "iptables" {
			continue
		}
		switch c.Figure {
		case "lookup.latency.p50":
			n++
			if c.Ratio < 1.8 || c.Ratio > 2.2 {
				t.Errorf("%s at %s: ratio %.2f, want ~2", c.Figure, c.Position, c.Ratio)
			}
		case "lookup.vsnone.p50":
			if c.Ratio < 0.9 || c.Ratio > 1.1 {
				t.Errorf("%s at %s: ratio %.2f, want ~1 (each kernel against its own none)", c.Figure, c.Position, c.Ratio)
			}
		}
	}
	if n != 4 {
		t.Errorf("%d iptables lookup p50 figures matched across kernels, want 4", n)
	}
	if _, err := KernelSide(r, "host"); err == nil || !strings.Contains(err.Error(), "uml:6.1, uml:6.12") {
		t.Errorf("missing kernel: err %v, want one listing the run's kernels", err)
	}
	if r.Modes[0].Kernel != "uml:6.1" {
		t.Error("KernelSide changed the original result")
	}
}
