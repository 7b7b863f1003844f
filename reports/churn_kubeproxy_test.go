package reports

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/scenarios"
)

// TestKubeProxyHistogramQuantile: histogram_quantile's interpolation
// within the bucket holding the rank, from 0 below the first bound; the
// last finite bound in +Inf; NaN without observations.
func TestKubeProxyHistogramQuantile(t *testing.T) {
	h := KubeProxyHistogram{Count: 10, SumSeconds: 6.5, Buckets: []Bucket{{"0.25", 2}, {"0.5", 4}, {"1", 10}, {"+Inf", 10}}}
	for _, tc := range []struct{ q, want float64 }{
		{0.5, 0.5 + 0.5*1/6},    // rank 5 in (0.5, 1]: 1 of its 6
		{0.99, 0.5 + 0.5*5.9/6}, // rank 9.9
		{0.1, 0.125},            // rank 1 in (0, 0.25]: half of its 2
	} {
		if got := h.Quantile(tc.q); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("q %g: %g, want %g", tc.q, got, tc.want)
		}
	}
	if m := h.Mean(); m != 0.65 {
		t.Errorf("mean %g", m)
	}
	inf := KubeProxyHistogram{Count: 3, Buckets: []Bucket{{"0.25", 1}, {"0.5", 1}, {"+Inf", 3}}}
	if got := inf.Quantile(0.99); got != 0.5 {
		t.Errorf("quantile in +Inf: %g, want the last finite bound 0.5", got)
	}
	if got := (KubeProxyHistogram{}).Quantile(0.5); !math.IsNaN(got) || !math.IsNaN((KubeProxyHistogram{}).Mean()) {
		t.Errorf("empty histogram: %g", got)
	}
}

// churnKPResult is a result with a builtin and a kube-proxy row, each
// with a churn sweep of two minSyncPeriod values; the kube-proxy row's
// phases carry kube-proxy's account and per-change latencies.
func churnKPResult() *Result {
	r := &Result{SchemaVersion: SchemaVersion, Machine: Machine{Hostname: "synthetic", Kernel: "test", KernelWhere: "host"},
		Scenario: &scenarios.Scenario{Name: "churn-kp", Repetitions: 1, Services: scenarios.ServicesSpec{Count: 100}}}
	phase := func(minSync time.Duration, kp bool) ChurnResult {
		c := ChurnResult{MinSyncPeriodNs: int64(minSync), Rate: 10, DurationNs: int64(2 * time.Second), Arrival: "poisson"}
		var lat []int64
		for i := range 10 {
			s := ChurnSample{Kind: "endpoint-add", AtNs: int64(i) * 1e8, LatencyNs: int64(100+10*i) * 1e6}
			if kp {
				s.KubeProxyNs = s.LatencyNs - 5e6 // the data plane 5 ms after kube-proxy's clock
			}
			lat = append(lat, s.LatencyNs)
			c.Samples = append(c.Samples, s)
		}
		c.Samples = append(c.Samples, ChurnSample{Kind: "service-delete", AtNs: 11e8, LatencyNs: -1})
		c.Changes, c.Observed, c.Unobserved = 11, 10, 1
		c.Latency = Summarize(lat)
		if kp {
			c.KubeProxy = &ChurnKubeProxy{Version: "v1.37.2", Logged: 10, Matched: 10, PerChange: "kube-proxy's -v raised from 2 to 4",
				Programming: KubeProxyHistogram{Count: 10, SumSeconds: 1.4, Buckets: []Bucket{{"0.25", 10}, {"0.5", 10}, {"+Inf", 10}}},
				Syncs:       KubeProxyHistogram{Count: 4, SumSeconds: 0.2, Buckets: []Bucket{{"0.064", 4}, {"+Inf", 4}}},
				FullSyncs:   &KubeProxyHistogram{Count: 1}, PartialSyncs: &KubeProxyHistogram{Count: 3},
				CPUNs: 4e8, ChildCPUNs: 1e8, PeakRSSBytes: 70 << 20, Writes: 11, WriteLatency: Summarize([]int64{8e6, 9e6, 30e6})}
		}
		return c
	}
	r.Modes = []ModeResult{
		{Mode: "iptables", Services: 100, Churn: []ChurnResult{phase(0, false), phase(time.Second, false)}},
		{Mode: "iptables (kube-proxy)", BaseMode: "iptables", Implementation: "kube-proxy", Services: 100, Churn: []ChurnResult{phase(0, true), phase(time.Second, true)}},
	}
	return r
}

// TestChurnKubeProxySections: a kube-proxy row's churn phases give the
// latency table (data plane, kube-proxy's metric, per change) and the
// cost table, one row per minSyncPeriod; a saved result without
// sections gets them from the typed fields, and every format shows
// them; a builtin row has none.
func TestChurnKubeProxySections(t *testing.T) {
	r := churnKPResult()
	if s := ChurnKubeProxyReport("iptables", &r.Modes[0]); s != nil {
		t.Errorf("builtin row: %d sections", len(s))
	}
	secs := r.AllSections()
	if len(secs) != 2 || secs[0].Title != churnLatencyTitle || secs[1].Title != churnCostTitle || len(secs[0].Rows) != 2 {
		t.Fatalf("sections %+v", secs)
	}
	row := secs[0].Rows[0]
	cell := func(name string) Cell {
		for i, c := range secs[0].Columns {
			if c.Name == name {
				return row.Cells[i]
			}
		}
		t.Fatalf("no column %q", name)
		return Cell{}
	}
	// The metric's p50: rank 5 of 10, all in (0, 0.25]: 0.125 s.
	for name, want := range map[string]float64{"kube-proxy metric p50": 125, "kube-proxy metric mean": 140, "data plane − kube-proxy p50": 5,
		"matched per change": 10, "unobserved": 1, "data plane p50": float64(r.Modes[1].Churn[0].Latency.P50) / 1e6} {
		if c := cell(name); c.Value == nil || math.Abs(*c.Value-want) > 1e-6 {
			t.Errorf("%s = %+v, want %g", name, c, want)
		}
	}
	if got := secs[0].RowNames(); got[0] != "iptables (kube-proxy), 0s" || got[1] != "iptables (kube-proxy), 1s" {
		t.Errorf("row names %q", got)
	}
	if len(secs[0].Notes) != 1 || !strings.Contains(secs[0].Notes[0], "raised") {
		t.Errorf("notes %q", secs[0].Notes)
	}
	for format, want := range map[string]string{
		"md":          "kube-proxy's own metric beside the data plane",
		"html":        "kube-proxy under churn: syncs, CPU, memory and API writes",
		"csv":         "churn.perchange.gap.p50",
		"junit":       "churn/iptables (kube-proxy), 1s",
		"gobench":     "phase=churn/row=iptables_(kube-proxy),_0s/figure=kubeproxy.p50",
		"openmetrics": "proxybench_section_churn_kubeproxy_p50_seconds",
	} {
		var b bytes.Buffer
		if err := WriteFormat(&b, r, format, ReportOptions{}); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if !strings.Contains(b.String(), want) {
			t.Errorf("%s output lacks %q", format, want)
		}
	}
}

// TestKubeProxyPerChangeUnobserved: kube-proxy's per-change p50 and p99
// are over every matched change, also those the data plane did not
// observe within the grace (a guest's slow IPVS syncs); the data plane −
// kube-proxy gap only over changes both clocks timed.
func TestKubeProxyPerChangeUnobserved(t *testing.T) {
	r := churnKPResult()
	c := &r.Modes[1].Churn[0]
	// Four slow changes kube-proxy programmed (10 s, its log matched
	// them) after the grace: the data plane never saw them.
	for i := range 4 {
		c.Samples = append(c.Samples, ChurnSample{Kind: "endpoint-remove", AtNs: int64(12+i) * 1e8, LatencyNs: -1, KubeProxyNs: 10e9})
	}
	c.Changes, c.Unobserved = 15, 5
	c.KubeProxy.Matched = 14
	own, gap := kubeProxyGap(*c)
	if len(own) != 14 || len(gap) != 10 {
		t.Fatalf("own %d, gap %d samples; want 14 matched, 10 observed by both", len(own), len(gap))
	}
	secs := ChurnKubeProxySections("iptables (kube-proxy)", r.Modes[1].Churn)
	cell := func(name string) float64 {
		for i, col := range secs[0].Columns {
			if col.Name == name && secs[0].Rows[0].Cells[i].Value != nil {
				return *secs[0].Rows[0].Cells[i].Value
			}
		}
		t.Fatalf("no value in column %q", name)
		return 0
	}
	// Sorted own: 95..185 ms (10), then 4 × 10 s; the empirical p99 is
	// the last, 10 s, and p50 the 7th (155 ms); the gap stays 5 ms.
	for name, want := range map[string]float64{"kube-proxy per change p50": 155, "kube-proxy per change p99": 10000, "data plane − kube-proxy p50": 5, "data plane − kube-proxy p99": 5} {
		if got := cell(name); math.Abs(got-want) > 1e-6 {
			t.Errorf("%s = %g, want %g", name, got, want)
		}
	}
}

// TestChurnFigures: every row's churn phases give churn.programming.* per
// minSyncPeriod (kept apart in the key), a kube-proxy row also
// kube-proxy's own figures; compare matches them per minSyncPeriod;
// gates on them need a churn phase.
func TestChurnFigures(t *testing.T) {
	r := churnKPResult()
	got := map[string]Figure{}
	for _, f := range Figures(r) {
		if _, dup := got[f.Key()]; dup {
			t.Errorf("two figures keyed %s", f.Key())
		}
		got[f.Key()] = f
	}
	key := func(name, mode, ms string) string {
		return Figure{Name: name, Mode: mode, MinSyncPeriod: ms, Services: 100}.Key()
	}
	for _, ms := range []string{"0s", "1s"} {
		if f, ok := got[key("churn.programming.p50", "iptables", ms)]; !ok || f.N != 10 || f.Value != float64(r.Modes[0].Churn[0].Latency.P50) {
			t.Errorf("builtin churn.programming.p50 at %s: %+v", ms, f)
		}
		if _, ok := got[key("kubeproxy.churn.programming.p50", "iptables", ms)]; ok {
			t.Error("builtin row has kube-proxy's churn figures")
		}
		kp := "iptables (kube-proxy)"
		if f := got[key("kubeproxy.churn.programming.p50", kp, ms)]; math.Abs(f.Value-125e6) > 1 || f.N != 10 || f.Unit != "ns" {
			t.Errorf("kubeproxy.churn.programming.p50 at %s: %+v", ms, f)
		}
		if f := got[key("kubeproxy.churn.rss", kp, ms)]; f.Value != 70<<20 || f.Unit != "bytes" {
			t.Errorf("kubeproxy.churn.rss: %+v", f)
		}
		if f := got[key("kubeproxy.churn.syncs.count", kp, ms)]; f.Value != 4 || f.Unit != "count" {
			t.Errorf("kubeproxy.churn.syncs.count: %+v", f)
		}
		if f := got[key("churn.unobserved.count", kp, ms)]; f.Value != 1 {
			t.Errorf("churn.unobserved.count: %+v", f)
		}
	}
	if !strings.Contains(key("churn.programming.p50", "iptables", "1s"), "minSyncPeriod=1s") {
		t.Error("the key does not name the phase's minSyncPeriod")
	}
	// compare: one change per figure and minSyncPeriod.
	cs := CompareRuns([]*Result{churnKPResult()}, []*Result{churnKPResult()}, CompareOptions{Tolerance: 0.1})
	n := 0
	for _, c := range cs {
		if c.Figure == "kubeproxy.churn.programming.p99" {
			n++
			if c.Verdict == NotInBoth || c.MinSyncPeriod == "" {
				t.Errorf("%s: %+v", c.Key(), c)
			}
		}
	}
	if n != 2 {
		t.Errorf("%d kubeproxy.churn.programming.p99 changes, want one per minSyncPeriod", n)
	}
	// A gate on a churn figure.
	g := scenarios.Gate{Figure: "kubeproxy.churn.programming.p99", Op: "<", Value: scenarios.GateValue{V: 1e9, IsDuration: true, Text: "1s"}}
	res := EvaluateGates(r, []scenarios.Gate{g})
	if len(res) != 1 || !res[0].Pass || len(res[0].Checks) != 2 {
		t.Errorf("gate: %+v", res)
	}
	sc, err := scenarios.Parse([]byte("services: {count: 3}\ngates: [{figure: churn.programming.p99, op: \"<\", value: 1s}]\n"), "g.yaml")
	if err == nil || !strings.Contains(err.Error(), "no churn phase") {
		t.Errorf("a churn gate without churn: %v %v", sc, err)
	}
}
