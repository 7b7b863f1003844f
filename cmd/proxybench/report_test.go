//go:build linux

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
)

const fixture = "../../reports/testdata/fixture.json"

// TestReportFormats renders the stored fixture through the binary.
func TestReportFormats(t *testing.T) {
	for _, c := range []struct{ format, want string }{
		{"md", "### capacity"}, {"csv", "mode,services,position,figure,value,unit,n"},
		{"junit", "<testsuites>"}, {"gobench", "BenchmarkLookup/mode=iptables/pos=last/services=10000"}, {"html", "<svg class=\"plot\""},
	} {
		out := filepath.Join(t.TempDir(), "r."+c.format)
		_, stderr, code := run(t, nil, "report", fixture, "--format", c.format, "--output", out, "--budget-p99", "1ms")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.format, code, stderr)
		}
		b, _ := os.ReadFile(out)
		if !strings.Contains(string(b), c.want) {
			t.Errorf("%s output lacks %q", c.format, c.want)
		}
	}
	if _, stderr, code := run(t, nil, "report", fixture, "--format", "pdf"); code != 2 || !strings.Contains(stderr, "md, html") {
		t.Errorf("unknown format: exit %d, %s", code, stderr)
	}
}

// TestCompareRefusesOtherMachine: a different kernel is refused (exit 2,
// naming the difference) unless --force; the same file compares clean.
func TestCompareRefusesOtherMachine(t *testing.T) {
	stdout, stderr, code := run(t, nil, "compare", fixture, fixture, "--fail-on-regression")
	if code != 0 || !strings.Contains(stdout, "0 regressions") {
		t.Fatalf("self-compare: exit %d\n%s%s", code, stdout, stderr)
	}
	b, _ := os.ReadFile(fixture)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["machine"].(map[string]any)["kernel"] = "6.12.0-other"
	other := filepath.Join(t.TempDir(), "other.json")
	b, _ = json.Marshal(m)
	_ = os.WriteFile(other, b, 0o644)
	_, stderr, code = run(t, nil, "compare", fixture, other)
	if code != 2 || !strings.Contains(stderr, `kernel "6.1.0-test" vs "6.12.0-other"`) || !strings.Contains(stderr, "--force") {
		t.Errorf("other kernel: exit %d: %s", code, stderr)
	}
	if _, stderr, code = run(t, nil, "compare", fixture, other, "--force"); code != 0 {
		t.Errorf("--force: exit %d: %s", code, stderr)
	}
}

// TestCompareAcrossRuns: one run against one run gets "too few runs"
// (exit 0 even with --fail-on-regression); four runs per side, one side
// a file holding four runs (moreRuns) and the other four files after
// "--", judge a 2x slowdown of iptables a regression (exit 1) and leave
// mode none alone; benchstat and junit formats render it.
func TestCompareAcrossRuns(t *testing.T) {
	stdout, stderr, code := run(t, nil, "compare", fixture, fixture, "--fail-on-regression")
	if code != 0 || !strings.Contains(stdout, "too few runs: need ≥ 4 per side") {
		t.Fatalf("1+1 runs: exit %d\n%s%s", code, stdout, stderr)
	}
	b, _ := os.ReadFile(fixture)
	var base map[string]any
	if err := json.Unmarshal(b, &base); err != nil {
		t.Fatal(err)
	}
	modes := base["modes"].([]any)
	base["moreRuns"] = []any{map[string]any{"modes": modes}, map[string]any{"modes": modes}, map[string]any{"modes": modes}}
	dir := t.TempDir()
	basePath := filepath.Join(dir, "base.json")
	b, _ = json.Marshal(base)
	_ = os.WriteFile(basePath, b, 0o644)
	var slow map[string]any
	_ = json.Unmarshal(b, &slow)
	delete(slow, "moreRuns")
	for _, m := range slow["modes"].([]any) {
		mm := m.(map[string]any)
		if mm["mode"] != "iptables" {
			continue
		}
		for _, p := range mm["lookup"].([]any) {
			ss := p.(map[string]any)["samplesNs"].([]any)
			for i := range ss {
				ss[i] = ss[i].(float64) * 2
			}
		}
	}
	var news []string
	for i := range 4 {
		p := filepath.Join(dir, "new"+string(rune('a'+i))+".json")
		b, _ = json.Marshal(slow)
		_ = os.WriteFile(p, b, 0o644)
		news = append(news, p)
	}
	// Flags go before "--": everything after it is a NEW result.
	args := func(flags ...string) []string {
		return append(append(append([]string{"compare"}, flags...), basePath, "--"), news...)
	}
	stdout, stderr, code = run(t, nil, args("--fail-on-regression")...)
	if code != 1 || !strings.Contains(stderr, "regression: lookup.latency.p50{mode=iptables") || !strings.Contains(stdout, "across 4+4 runs") {
		t.Fatalf("2x slowdown: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, line := range strings.Split(stdout, "\n") {
		if strings.Contains(line, " none ") && strings.Contains(line, "lookup.latency") && !strings.Contains(line, "~ no verdict") {
			t.Errorf("unchanged mode none judged: %s", line)
		}
	}
	if stdout, stderr, code = run(t, nil, args("--format", "benchstat")...); code != 0 || !strings.Contains(stdout, "+100.") || !strings.Contains(stdout, "(p=0.029 n=4)") {
		t.Errorf("benchstat: exit %d\n%s%s", code, stdout, stderr)
	}
	if stdout, _, code = run(t, nil, args("--format", "junit")...); code != 0 || !strings.Contains(stdout, `type="regression"`) {
		t.Errorf("junit: exit %d\n%s", code, stdout)
	}
}

// TestGateFails runs a tiny scenario whose gate cannot pass: exit 1, the
// failing check printed with its measured value, and a JUnit failure.
func TestGateFails(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore")
	sc := writeFile(t, `services:
  count: 50
repetitions: 1
modes: [none, iptables]
traffic:
  connections: 100
  positions: [first, last]
gates:
  - {figure: lookup.latency.p50, mode: iptables, position: last, op: "<", value: 1ns}
  - {figure: sync.full, op: "<", value: 1m}
`)
	dir := t.TempDir()
	junit := filepath.Join(dir, "gates.xml")
	stdout, stderr, code := run(t, nil, "run", sc, "--quiet", "--kernel", "host", "--output", filepath.Join(dir, "r.json"), "--junit", junit)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "FAIL lookup.latency.p50{mode=iptables,position=last,services=50} = ") ||
		!strings.Contains(stdout, "PASS sync.full{mode=iptables,services=50}") || !strings.Contains(stderr, "1 of 2 gates failed") {
		t.Errorf("gate output:\n%s\nstderr: %s", stdout, stderr)
	}
	x, err := os.ReadFile(junit)
	if err != nil || !strings.Contains(string(x), `failures="1"`) || !strings.Contains(string(x), "<failure message=\"measured ") {
		t.Errorf("junit (%v):\n%s", err, x)
	}
}

// TestRunCount: --count 2 repeats the whole run on fresh testbeds (two
// run IDs), stores both runs in one result, leaves no namespace of
// either, and compare reads the result as two runs.
func TestRunCount(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore")
	sc := writeFile(t, `services:
  count: 20
repetitions: 1
modes: [none, iptables]
traffic:
  connections: 50
  positions: [last]
`)
	out := filepath.Join(t.TempDir(), "r.json")
	_, stderr, code := run(t, nil, "run", sc, "--quiet", "--kernel", "host", "--count", "2", "--output", out)
	if code != 0 {
		t.Fatalf("run --count 2: exit %d: %s", code, stderr)
	}
	b, _ := os.ReadFile(out)
	var r struct {
		RunID    string
		Modes    []struct{ Mode string }
		MoreRuns []struct {
			RunID string
			Modes []struct{ Mode string }
		}
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Modes) != 2 || len(r.MoreRuns) != 1 || len(r.MoreRuns[0].Modes) != 2 || r.MoreRuns[0].RunID == "" || r.MoreRuns[0].RunID == r.RunID {
		t.Fatalf("result: run %s with %d modes, more runs %+v", r.RunID, len(r.Modes), r.MoreRuns)
	}
	left, _ := topology.Leftovers()
	for _, id := range []string{r.RunID, r.MoreRuns[0].RunID} {
		if n := countRun(left, id); n != 0 {
			t.Errorf("run %s left %d namespaces", id, n)
		}
	}
	stdout, stderr, code := run(t, nil, "compare", out, out)
	if code != 0 || !strings.Contains(stdout, "across 2+2 runs") || !strings.Contains(stdout, "too few runs: need ≥ 4 per side") {
		t.Errorf("compare of a 2-run result: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestReportOldResult: a result written before rows recorded their mode's
// traits (ModeResult.Traits) reports as one that has them: report fills
// them from the build's modes (runner.FillTraits).
func TestReportOldResult(t *testing.T) {
	b, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	stripped := 0
	for _, m := range r["modes"].([]any) {
		if _, ok := m.(map[string]any)["traits"]; ok {
			delete(m.(map[string]any), "traits")
			stripped++
		}
	}
	if stripped == 0 {
		t.Fatal("the fixture has no traits to strip")
	}
	old := filepath.Join(t.TempDir(), "old.json")
	if b, err = json.Marshal(r); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, b, 0o644); err != nil {
		t.Fatal(err)
	}
	render := func(path string) string {
		out := filepath.Join(t.TempDir(), "r.md")
		if _, stderr, code := run(t, nil, "report", path, "--output", out); code != 0 {
			t.Fatalf("report %s: exit %d: %s", path, code, stderr)
		}
		b, _ := os.ReadFile(out)
		return string(b)
	}
	want, got := render(fixture), render(old)
	if got != want {
		t.Errorf("the result without traits reports differently (%d vs %d bytes)", len(got), len(want))
	}
	if !strings.Contains(got, "linear KUBE-SERVICES walk") || !strings.Contains(got, "rules") {
		t.Errorf("the report lacks the iptables traits' words:\n%s", got)
	}
}

// TestReportKilledSliceChurn: the result path of a run killed in the
// middle of faults.sliceChurn (no result written, its artifact folder
// holding slicechurn/<row>.jsonl without an end line) renders that
// stream as a slice churn, marked cut, with what it measured.
func TestReportKilledSliceChurn(t *testing.T) {
	dir := t.TempDir()
	result := filepath.Join(dir, "slice-churn-20261202T080000Z.json")
	spec := scenarios.SoakSpec{Duration: scenarios.Duration{Duration: time.Minute}, Interval: scenarios.Duration{Duration: 10 * time.Second},
		Rate: 5, Churn: 10, Idle: 1, Quiet: 1, Probes: 2, FlatBound: 5}
	h := reports.SoakHeader{Tool: "proxybench test", RunID: "c0ffee", Row: "nftables (kube-proxy)", Mode: "nftables", Implementation: "kube-proxy",
		Phase: reports.PhaseSliceChurn, Services: 100, Started: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC), Spec: spec,
		ProxyCPU: "kube-proxy's CPU", ProxyRSS: "kube-proxy's RSS"}
	w, err := reports.CreateSoakStream(filepath.Join(strings.TrimSuffix(result, ".json"), "slicechurn", "nftables-kube-proxy.jsonl"), h)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		stage := reports.SoakChurn
		if i == 1 {
			stage = reports.SoakIdle
		}
		if err := w.Sample(reports.SoakSample{Index: i, AtNs: int64(i) * int64(10*time.Second), SpanNs: int64(10 * time.Second), Stage: stage,
			ProxyRSSBytes: uint64(40+i) << 20, SelfRSSBytes: 90 << 20, Conntrack: 10, Objects: 321, Changes: 100, Observed: 100,
			Attempts: 50, OK: 49, Errors: map[string]int{"timeout": 1}}); err != nil {
			t.Fatal(err)
		}
	}
	_ = w.Close() // killed: no end line
	stdout, stderr, code := run(t, nil, "report", result)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"slice churn: memory slope", "stream ends at 00:00:30 of 1m20s: the run was killed or crashed", "nftables (kube-proxy)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "### soak:") || !strings.Contains(stderr, "slicechurn/nftables-kube-proxy.jsonl") {
		t.Errorf("rendered as a soak, or the note does not name the stream: %s", stderr)
	}
}
