package monitoring

import (
	"math"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"

	"github.com/proxybench/proxybench/reports"
)

// scrape reads l's endpoint as Prometheus would (text format).
func scrape(t *testing.T, l *Live) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	l.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("scrape: status %d: %s", rec.Code, rec.Body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatalf("scrape does not parse: %v\n%s", err, rec.Body)
	}
	return fams
}

// series finds the metric of family name with labels kv (name, value, ...).
func series(t *testing.T, fams map[string]*dto.MetricFamily, name string, kv ...string) *dto.Metric {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no family %s", name)
	}
	for _, m := range f.Metric {
		ok := true
		for i := 0; i+1 < len(kv); i += 2 {
			if label(m, kv[i]) != kv[i+1] {
				ok = false
			}
		}
		if ok {
			return m
		}
	}
	t.Fatalf("%s has no series with %v", name, kv)
	return nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// bucket is the cumulative count of h's bucket with upper bound le.
func bucket(t *testing.T, h *dto.Histogram, le float64) uint64 {
	t.Helper()
	for _, b := range h.Bucket {
		if math.Abs(b.GetUpperBound()-le) < 1e-12 {
			return b.GetCumulativeCount()
		}
	}
	t.Fatalf("no bucket le=%g", le)
	return 0
}

// TestLiveRowSeries: a row's fake observations show in the endpoint's
// scrape with the row's labels, counted and bucketed as observed; the
// next row's registry starts empty and the ended row's series leave the
// endpoint.
func TestLiveRowSeries(t *testing.T) {
	l := NewLive()
	lb := RowLabels{Mode: "iptables", Implementation: "builtin", Kernel: "host", Row: "iptables"}
	r := l.BeginRow(lb)
	r.Phase("traffic", true)
	// 10 µs and 20 µs answered, a miss, two refused, no timeout.
	r.Lookup("first", []int64{10_000, 20_000}, map[string]int{OutcomeMiss: 1, "refused": 2, "timeout": 0})
	r.Lookup("first", []int64{30_000}, map[string]int{OutcomeMiss: 0})
	r.Lookup("last", nil, map[string]int{"reset": 4})
	r.Sync("full", 1500*time.Millisecond, 30001, false)
	r.Sync("incremental", 3*time.Millisecond, 30004, false)
	r.Sync("", 0, 0, true) // a failed sync without stats counts as incremental
	r.ChurnApplied("endpoint-add")
	r.ChurnApplied("endpoint-add")
	r.ChurnObserved("endpoint-add", 750*time.Millisecond)
	fams := scrape(t, l)

	want := map[string]float64{"ok": 3, "miss": 1, "refused": 2, "timeout": 0}
	for outcome, n := range want {
		m := series(t, fams, MetricLookupConnections, "position", "first", "outcome", outcome)
		if got := m.GetCounter().GetValue(); got != n {
			t.Errorf("connections first/%s = %v, want %v", outcome, got, n)
		}
	}
	if got := series(t, fams, MetricLookupConnections, "position", "last", "outcome", "reset").GetCounter().GetValue(); got != 4 {
		t.Errorf("connections last/reset = %v, want 4", got)
	}
	h := series(t, fams, MetricLookupConnect, "position", "first").GetHistogram()
	if h.GetSampleCount() != 3 || math.Abs(h.GetSampleSum()-60e-6) > 1e-12 {
		t.Errorf("connect histogram count %d sum %g, want 3 and 60e-6", h.GetSampleCount(), h.GetSampleSum())
	}
	// Bounds 2.5 µs doubling: 10 µs, 20 µs, 40 µs.
	if b10, b20, b40 := bucket(t, h, 10e-6), bucket(t, h, 20e-6), bucket(t, h, 40e-6); b10 != 1 || b20 != 2 || b40 != 3 {
		t.Errorf("connect buckets le 10/20/40 µs = %d/%d/%d, want 1/2/3", b10, b20, b40)
	}
	full := series(t, fams, MetricSyncDuration, "kind", "full").GetHistogram()
	if full.GetSampleCount() != 1 || bucket(t, full, 1.024) != 0 || bucket(t, full, 2.048) != 1 {
		t.Errorf("full sync histogram %v: want one sync between 1.024 s and 2.048 s", full)
	}
	if n := series(t, fams, MetricSyncDuration, "kind", "incremental").GetHistogram().GetSampleCount(); n != 1 {
		t.Errorf("incremental syncs observed %d, want 1 (the failed one had no wall time)", n)
	}
	if f := series(t, fams, MetricSyncFailures, "kind", "incremental").GetCounter().GetValue(); f != 1 {
		t.Errorf("incremental failures %v, want 1", f)
	}
	if f := series(t, fams, MetricSyncFailures, "kind", "full").GetCounter().GetValue(); f != 0 {
		t.Errorf("full failures %v, want 0 (present from the start)", f)
	}
	if o := series(t, fams, MetricSyncObjects).GetGauge().GetValue(); o != 30001 {
		t.Errorf("objects %v, want the last successful full sync's 30001", o)
	}
	if ts := series(t, fams, MetricSyncLastTimestamp).GetGauge().GetValue(); math.Abs(ts-float64(time.Now().Unix())) > 60 {
		t.Errorf("last sync timestamp %v, want about now", ts)
	}
	if a := series(t, fams, MetricChurnApplied, "kind", "endpoint-add").GetCounter().GetValue(); a != 2 {
		t.Errorf("applied %v, want 2", a)
	}
	if o := series(t, fams, MetricChurnObserved, "kind", "endpoint-add").GetCounter().GetValue(); o != 1 {
		t.Errorf("observed %v, want 1", o)
	}
	prog := series(t, fams, MetricProgramming, "kind", "endpoint-add").GetHistogram()
	if prog.GetSampleCount() != 1 || bucket(t, prog, 0.5) != 0 || bucket(t, prog, 1) != 1 || len(prog.Bucket) != len(reports.ProgrammingBuckets())+1 {
		t.Errorf("programming histogram: %d observations, %d buckets; want 0.75 s in kube-proxy's %d buckets and +Inf", prog.GetSampleCount(), len(prog.Bucket), len(reports.ProgrammingBuckets()))
	}
	if v := series(t, fams, MetricPhaseActive, "phase", "traffic").GetGauge().GetValue(); v != 1 {
		t.Errorf("phase traffic active %v, want 1", v)
	}
	for name, f := range fams {
		if !LiveExports(name) {
			t.Errorf("the endpoint serves %s, which LiveExports does not know", name)
		}
		if !strings.HasPrefix(name, "proxybench_") {
			continue
		}
		for _, m := range f.Metric {
			for k, v := range map[string]string{"mode": "iptables", "implementation": "builtin", "kernel": "host", "row": "iptables"} {
				if label(m, k) != v {
					t.Errorf("%s %v: %s=%q, want %q", name, m.Label, k, label(m, k), v)
				}
			}
		}
	}
	for _, n := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if fams[n] == nil {
			t.Errorf("no %s: the process collectors are served", n)
		}
	}

	// The next row starts from zero; the ended one is no longer served.
	r2 := l.BeginRow(RowLabels{Mode: "nftables", Implementation: "kube-proxy", Kernel: "host", Row: "nftables (kube-proxy)"})
	fams = scrape(t, l)
	if fams[MetricLookupConnections] != nil {
		t.Errorf("a new row's scrape has %s of the previous row", MetricLookupConnections)
	}
	if m := series(t, fams, MetricSyncDuration, "kind", "full"); label(m, "implementation") != "kube-proxy" || m.GetHistogram().GetSampleCount() != 0 {
		t.Errorf("new row's full syncs %v, want 0 with its own labels", m)
	}
	l.EndRow(r) // not current: no effect
	if l.Current() != r2 {
		t.Error("EndRow of a finished row ended the current one")
	}
	l.EndRow(r2)
	fams = scrape(t, l)
	for name := range fams {
		if strings.HasPrefix(name, "proxybench_") {
			t.Errorf("between rows the endpoint serves %s", name)
		}
	}
}

// TestLiveNil: a run without monitoring has a nil Live and nil rows;
// every method is a no-op.
func TestLiveNil(t *testing.T) {
	var l *Live
	r := l.BeginRow(RowLabels{Mode: "none"})
	if r != nil || l.Current() != nil {
		t.Fatal("a nil Live returned a row")
	}
	r.Lookup("first", []int64{1}, map[string]int{"miss": 1})
	r.Sync("full", time.Second, 1, false)
	r.ChurnApplied("x")
	r.ChurnObserved("x", time.Second)
	r.Phase("traffic", true)
	l.EndRow(r)
}

// TestLiveExports: proxybench's live families (with a histogram's
// series) are known, so the warning about names no row exports stays
// silent for them; kube-proxy's stay known; an unknown name is not.
func TestLiveExports(t *testing.T) {
	for _, n := range []string{MetricLookupConnections, MetricLookupConnect + "_bucket", MetricProgramming + "_count", MetricSyncDuration + "_sum",
		MetricSyncObjects, "process_cpu_seconds_total"} {
		if !LiveExports(n) || !RowExports(n) {
			t.Errorf("%s: LiveExports %v RowExports %v, want both", n, LiveExports(n), RowExports(n))
		}
	}
	if LiveExports("kubeproxy_sync_proxy_rules_duration_seconds_bucket") || !RowExports("kubeproxy_sync_proxy_rules_duration_seconds_bucket") {
		t.Error("kube-proxy's histogram: want RowExports only")
	}
	for _, n := range []string{"proxybench_lookup_latency_p99_seconds", "kube_endpoint_address_available", "proxybench_nothing_total"} {
		if RowExports(n) {
			t.Errorf("RowExports(%s) = true: no row exports it live", n)
		}
	}
}

// TestConfigLiveJob: with Live the configuration scrapes proxybench's
// endpoint as its own job at the scenario's interval beside kube-proxy's
// job; without targets (a builtin row) it is the only job; promtool
// accepts both.
func TestConfigLiveJob(t *testing.T) {
	h := NewLive().Handler()
	for _, c := range []struct {
		name string
		spec ServerSpec
		jobs []string
	}{
		{"kube-proxy row", ServerSpec{Interval: 2 * time.Second, Job: "kube-proxy", Targets: []Target{{Addr: "169.254.0.2:10249", Labels: map[string]string{"node": "n0"}}}, Live: h},
			[]string{"kube-proxy", LiveJob}},
		{"builtin row", ServerSpec{Interval: 7 * time.Second, Live: h}, []string{LiveJob}},
		{"no live", ServerSpec{Interval: 5 * time.Second, Job: "kube-proxy", Targets: []Target{{Addr: "169.254.0.2:10249"}}}, []string{"kube-proxy"}},
	} {
		b, err := Config(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			Global struct {
				ScrapeInterval string `json:"scrape_interval"`
			} `json:"global"`
			ScrapeConfigs []struct {
				JobName       string `json:"job_name"`
				StaticConfigs []struct {
					Targets []string `json:"targets"`
				} `json:"static_configs"`
			} `json:"scrape_configs"`
		}
		if err := yaml.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
		var jobs []string
		for _, sc := range cfg.ScrapeConfigs {
			jobs = append(jobs, sc.JobName)
			if sc.JobName == LiveJob && (len(sc.StaticConfigs) != 1 || !slices.Equal(sc.StaticConfigs[0].Targets, []string{"127.0.0.1:9091"})) {
				t.Errorf("%s: job %s targets %+v, want 127.0.0.1:9091", c.name, LiveJob, sc.StaticConfigs)
			}
		}
		if !slices.Equal(jobs, c.jobs) || cfg.Global.ScrapeInterval != FormatDuration(c.spec.Interval) {
			t.Errorf("%s: jobs %v every %s, want %v every %s\n%s", c.name, jobs, cfg.Global.ScrapeInterval, c.jobs, FormatDuration(c.spec.Interval), b)
		}
		if _, err := exec.LookPath(Promtool); err != nil {
			t.Logf("%s: promtool not on PATH: configuration not checked by it", c.name)
			continue
		}
		p := filepath.Join(t.TempDir(), "prometheus.yml")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(Promtool, "check", "config", p).CombinedOutput(); err != nil {
			t.Errorf("%s: promtool check config: %v\n%s\n%s", c.name, err, out, b)
		}
	}
}
