package reports

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/scenarios"
)

// kpRow is a synthetic kube-proxy row: one full sync (the data plane's
// sync.full), incSyncs incremental syncs of about inc each, and
// kube-proxy's scrapes with a full sync of kpFull s and partial syncs of
// kpPartial s each (as proxymodes/kubeproxy records them).
func kpRow(rng *rand.Rand, name, version string, inc time.Duration, kpFull, kpPartial float64, cpu, child, rss int64) ModeResult {
	j := func() float64 { return math.Exp(0.1 * rng.NormFloat64()) }
	m := ModeResult{Mode: name, BaseMode: "nftables", Implementation: "kube-proxy", Services: 1000}
	m.SyncFull = []measure.SyncStats{{Kind: "full", Wall: time.Duration(1.2e9 * j())}}
	for range 3 {
		m.SyncIncremental = append(m.SyncIncremental, measure.SyncStats{Kind: "incremental", Wall: time.Duration(float64(inc) * j())})
	}
	full := kpFull * j()
	part := 3 * kpPartial * j()
	m.KubeProxy = &measure.KubeProxy{
		Version: version,
		AfterFullSync: []measure.Metric{
			{Name: kpSyncFull, Family: "IPv4", Count: 1, Sum: full},
			{Name: kpSyncFull, Family: "IPv6", Count: 1, Sum: 0.05},
		},
		AtEnd: []measure.Metric{
			{Name: kpSyncFull, Family: "IPv4", Count: 1, Sum: full},
			{Name: kpSyncFull, Family: "IPv6", Count: 1, Sum: 0.05},
			{Name: kpSyncPartial, Family: "IPv4", Count: 3, Sum: part},
			{Name: kpProgramming, Family: "IPv4", Count: 4, Sum: 4 * (full + part/3) * j()},
		},
		CPUNs: int64(float64(cpu) * j()), ChildCPUNs: int64(float64(child) * j()), PeakRSSBytes: int64(float64(rss) * j()),
	}
	return m
}

// kpVersionsRuns draws n runs of one result holding rows of two
// kube-proxy versions and a builtin nftables row: v1.36.3's partial syncs
// take 250 ms (it lists its table, kubernetes#136786), v1.37.2's 50 ms;
// everything else the same.
func kpVersionsRuns(seed uint64, n int) []*Result {
	rng := rand.New(rand.NewPCG(seed, seed))
	var out []*Result
	for range n {
		r := &Result{SchemaVersion: SchemaVersion, Machine: Machine{Hostname: "synthetic", Kernel: "test", KernelWhere: "host"},
			Scenario: &scenarios.Scenario{Name: "kp", Repetitions: 1, Services: scenarios.ServicesSpec{Count: 1000}}}
		builtin := ModeResult{Mode: "nftables", Services: 1000,
			SyncFull:        []measure.SyncStats{{Kind: "full", Wall: 900 * time.Millisecond}},
			SyncIncremental: []measure.SyncStats{{Kind: "incremental", Wall: time.Duration(60e6 * math.Exp(0.1*rng.NormFloat64()))}}}
		r.Modes = []ModeResult{builtin,
			kpRow(rng, "nftables (kube-proxy v1.36.3)", "v1.36.3", 310*time.Millisecond, 0.27, 0.25, 500e6, 500e6, 90<<20),
			kpRow(rng, "nftables (kube-proxy v1.37.2)", "v1.37.2", 140*time.Millisecond, 0.27, 0.05, 500e6, 280e6, 90<<20),
		}
		out = append(out, r)
	}
	return out
}

func rowSides(t *testing.T, runs []*Result, a, b string) (base, cur []*Result) {
	t.Helper()
	for _, r := range runs {
		x, err := RowSide(r, a, a+" → "+b)
		if err != nil {
			t.Fatal(err)
		}
		y, err := RowSide(r, b, a+" → "+b)
		if err != nil {
			t.Fatal(err)
		}
		base, cur = append(base, x), append(cur, y)
	}
	return base, cur
}

// TestFiguresKubeProxy: a kube-proxy row has sync.incremental and
// kube-proxy's own figures, computed from its scrapes (full: up to
// sync.full; partial: after it; IPv4 only); a builtin row has
// sync.incremental and none of kube-proxy's.
func TestFiguresKubeProxy(t *testing.T) {
	r := kpVersionsRuns(1, 1)[0]
	got := map[string]Figure{}
	for _, f := range Figures(r) {
		got[f.Mode+"|"+f.Name] = f
	}
	kp := r.Modes[1].KubeProxy
	row := "nftables (kube-proxy v1.36.3)|"
	if f := got[row+"kubeproxy.sync.full"]; f.Value != kp.AfterFullSync[0].Sum*1e9 || f.N != 1 || f.Unit != "ns" {
		t.Errorf("kubeproxy.sync.full = %+v, want the IPv4 full sync %g s", f, kp.AfterFullSync[0].Sum)
	}
	if f, want := got[row+"kubeproxy.sync.partial"], kp.AtEnd[2].Sum/3*1e9; math.Abs(f.Value-want) > 1 || f.N != 3 {
		t.Errorf("kubeproxy.sync.partial = %+v, want the mean %g ns of 3", f, want)
	}
	if f, want := got[row+"kubeproxy.programming"], kp.AtEnd[3].Sum/4*1e9; math.Abs(f.Value-want) > 1 || f.N != 4 {
		t.Errorf("kubeproxy.programming = %+v, want %g ns", f, want)
	}
	if f := got[row+"kubeproxy.cpu"]; f.Value != float64(kp.CPUNs) {
		t.Errorf("kubeproxy.cpu = %+v, want %d", f, kp.CPUNs)
	}
	if f := got[row+"kubeproxy.programs.cpu"]; f.Value != float64(kp.ChildCPUNs) {
		t.Errorf("kubeproxy.programs.cpu = %+v, want %d", f, kp.ChildCPUNs)
	}
	if f := got[row+"kubeproxy.rss"]; f.Value != float64(kp.PeakRSSBytes) || f.Unit != "bytes" || !strings.HasSuffix(f.Text(), "MiB") {
		t.Errorf("kubeproxy.rss = %+v (%s)", f, f.Text())
	}
	if f := got[row+"sync.incremental"]; f.N != 3 || f.Value <= 0 {
		t.Errorf("sync.incremental = %+v, want the p50 of 3", f)
	}
	if _, ok := got["nftables|sync.incremental"]; !ok {
		t.Error("builtin row has no sync.incremental")
	}
	for k := range got {
		if strings.HasPrefix(k, "nftables|kubeproxy.") {
			t.Errorf("builtin row has %s", k)
		}
	}
	for name := range scenarios.KubeProxyFigures {
		if _, ok := got[row+name]; !ok {
			t.Errorf("kube-proxy row lacks %s", name)
		}
		if _, ok := scenarios.GateFigures[name]; !ok {
			t.Errorf("gates cannot name %s", name)
		}
	}
}

// TestCompareKubeProxyVersions: two kube-proxy rows of 4 runs, differing
// only in their partial syncs, the incremental sync and the rule
// programs' CPU: compare --rows flags exactly those as improvements and
// says that kube-proxy's figures are per-run means; a figure missing on
// one side (builtin against kube-proxy) is "not in both", never judged.
func TestCompareKubeProxyVersions(t *testing.T) {
	runs := kpVersionsRuns(2, 4)
	base, cur := rowSides(t, runs, "nftables (kube-proxy v1.36.3)", "nftables (kube-proxy v1.37.2)")
	opt := CompareOptions{Tolerance: 0.1}
	cs := CompareRuns(base, cur, opt)
	verdict := map[string]string{}
	for _, c := range cs {
		verdict[c.Figure] = c.Verdict
		if c.Figure == "kubeproxy.sync.partial" && !strings.Contains(c.Basis, "per-run mean") {
			t.Errorf("kubeproxy.sync.partial basis %q", c.Basis)
		}
	}
	for _, f := range []string{"kubeproxy.sync.partial", "sync.incremental", "kubeproxy.programs.cpu"} {
		if verdict[f] != "improvement" {
			t.Errorf("%s: verdict %q, want improvement", f, verdict[f])
		}
	}
	for _, f := range []string{"kubeproxy.sync.full", "sync.full", "kubeproxy.rss"} {
		if v, ok := verdict[f]; !ok || v == "regression" || v == "improvement" || v == NotInBoth {
			t.Errorf("%s: verdict %q (present %v), want a judged figure without a flag", f, v, ok)
		}
	}
	var b bytes.Buffer
	if err := WriteComparison(&b, cs, opt); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "per-run mean of kube-proxy's histogram") {
		t.Errorf("output does not say kube-proxy's figures are per-run means:\n%s", b.String())
	}

	// builtin against kube-proxy: kube-proxy's figures are on one side.
	base, cur = rowSides(t, runs, "nftables", "nftables (kube-proxy v1.37.2)")
	cs = CompareRuns(base, cur, opt)
	absent := 0
	for _, c := range cs {
		if strings.HasPrefix(c.Figure, "kubeproxy.") {
			absent++
			if c.Verdict != NotInBoth || c.Fails() || c.Flagged() || len(c.BaseRuns) != 0 || len(c.NewRuns) != 4 {
				t.Errorf("%s: %+v, want not in both with the new side's 4 runs", c.Figure, c)
			}
			if !strings.Contains(c.VerdictText(), "only new") {
				t.Errorf("%s: verdict text %q", c.Figure, c.VerdictText())
			}
		}
		if c.Figure == "sync.incremental" && c.Verdict == NotInBoth {
			t.Error("sync.incremental is in both rows")
		}
	}
	if absent != len(scenarios.KubeProxyFigures) {
		t.Errorf("%d kube-proxy figures shown, want %d", absent, len(scenarios.KubeProxyFigures))
	}
	b.Reset()
	if err := WriteComparison(&b, cs, opt); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "not in both (only new has it)") || !strings.Contains(b.String(), "6 not in both sides, not judged") {
		t.Errorf("text output:\n%s", b.String())
	}
	// Every format copes with a side without the figure.
	b.Reset()
	if err := WriteComparisonJSON(&b, cs); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Changes []struct {
			Figure  string   `json:"figure"`
			Verdict string   `json:"verdict"`
			Base    *float64 `json:"base"`
		} `json:"changes"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, c := range doc.Changes {
		if c.Verdict == NotInBoth && c.Base != nil {
			t.Errorf("%s: base %v in JSON, want null", c.Figure, *c.Base)
		}
	}
	b.Reset()
	if err := WriteBenchstat(&b, cs, []string{"a.json"}, []string{"a.json"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "kubeproxy.rss{") || !strings.Contains(b.String(), NotInBoth) {
		t.Errorf("benchstat output does not list the figures not in both:\n%s", b.String())
	}
	b.Reset()
	if err := WriteComparisonJUnit(&b, cs, opt); err != nil {
		t.Fatal(err)
	}
	if strings.Count(b.String(), "<skipped") < len(scenarios.KubeProxyFigures) {
		t.Errorf("JUnit: figures not in both are not skipped:\n%s", b.String())
	}
}

// TestGateKubeProxyFigure: a scenario gate may name kube-proxy's partial
// sync, and EvaluateGates checks it on the kube-proxy rows.
func TestGateKubeProxyFigure(t *testing.T) {
	r := kpVersionsRuns(3, 1)[0]
	g := scenarios.Gate{Figure: "kubeproxy.sync.partial", Op: "<", Value: scenarios.GateValue{V: 100e6, IsDuration: true, Text: "100ms"}}
	res := EvaluateGates(r, []scenarios.Gate{g})
	if len(res) != 1 || len(res[0].Checks) != 2 {
		t.Fatalf("gate checks %+v, want the two kube-proxy rows", res)
	}
	pass := map[string]bool{}
	for _, c := range res[0].Checks {
		pass[c.Figure.Mode] = c.Pass
	}
	if pass["nftables (kube-proxy v1.36.3)"] || !pass["nftables (kube-proxy v1.37.2)"] {
		t.Errorf("gate verdicts %v: want v1.36.3 (250 ms) failing and v1.37.2 (50 ms) passing", pass)
	}
}

// TestCompareRowsDecreaseFloor: a decrease shows the floor of a
// decrease (below 100%, signed like the change), the two rows are named
// once above the table instead of on every line, and JSON spells out a
// figure without a verdict.
func TestCompareRowsDecreaseFloor(t *testing.T) {
	runs := kpVersionsRuns(2, 4)
	a, b := "nftables (kube-proxy v1.36.3)", "nftables (kube-proxy v1.37.2)"
	base, cur := rowSides(t, runs, a, b)
	opt := CompareOptions{Tolerance: 0.1}
	cs := CompareRuns(base, cur, opt)
	decreases := 0
	for _, c := range cs {
		if !c.Judged() || c.Verdict == "too few runs" || !(c.Ratio < 1) {
			continue
		}
		decreases++
		f := c.DirFloor()
		if !(f <= 0 && f > -1) {
			t.Errorf("%s: change %s, floor %v; want a decrease's floor in (-100%%, 0]", c.Figure, pct(c.Ratio), f)
		}
		// The floor of a decrease is the smallest decrease the test
		// flags for certain: the base runs scaled down by it separate.
		if c.FloorDown > 0 {
			scaled := make([]float64, len(c.BaseRuns))
			for i, x := range c.BaseRuns {
				scaled[i] = x * (1 - c.FloorDown*1.001)
			}
			if p := uTest(c.BaseRuns, scaled, 0.05); p > 0.05 {
				t.Errorf("%s: base runs lowered by the floor %.3f: p = %.3f", c.Figure, c.FloorDown, p)
			}
		}
	}
	if decreases == 0 {
		t.Fatal("no decrease to check")
	}
	var out bytes.Buffer
	if err := WriteComparison(&out, cs, opt); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if n := strings.Count(text, a); n != 1 {
		t.Errorf("row %q named %d times, want once in the header:\n%s", a, n, text)
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "sync.incremental") {
			// change and floor, both negative, side by side.
			if strings.Contains(line, "improvement") && !regexp.MustCompile(`-\d+\.\d%\s+-\d+\.\d%`).MatchString(line) {
				t.Errorf("decrease line without a negative floor beside it: %q", line)
			}
		}
	}
	out.Reset()
	if err := WriteComparisonJSON(&out, cs); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Changes []struct {
			Figure    string   `json:"figure"`
			Verdict   string   `json:"verdict"`
			FloorDown *float64 `json:"floorDown"`
		} `json:"changes"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	noVerdict := 0
	for _, c := range doc.Changes {
		if c.Verdict == "" {
			t.Errorf("%s: empty verdict in JSON", c.Figure)
		}
		if c.Verdict == "no verdict" || c.Verdict == "within tolerance" {
			noVerdict++
		}
	}
	if noVerdict == 0 {
		t.Error("no figure without a verdict to check")
	}
}
