package reports

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestOpenMetricsParses: the exposition of the fixture parses with
// Prometheus' own text parser; the full-sync histogram has kube-proxy's 15
// buckets plus +Inf (1 ms to 16.384 s) and one observation per full sync; every
// figure is a gauge with the figure's value.
func TestOpenMetricsParses(t *testing.T) {
	r := loadFixture(t)
	var b bytes.Buffer
	if err := WriteOpenMetrics(&b, r); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(b.String(), "# EOF\n") {
		t.Error("no # EOF terminator")
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	full := fams["proxybench_sync_full_duration_seconds"]
	if full == nil || len(full.Metric) != 4 { // iptables at 4 sizes; none programs nothing
		t.Fatalf("full-sync histogram: %v", full)
	}
	for _, m := range full.Metric {
		h := m.GetHistogram()
		// The parser lists +Inf as a 16th bucket.
		if len(h.Bucket) != 16 || h.Bucket[0].GetUpperBound() != 0.001 || h.Bucket[14].GetUpperBound() != 16.384 || h.GetSampleCount() != uint64(r.Scenario.Repetitions) {
			t.Errorf("buckets %d (%g..), count %d", len(h.Bucket), h.Bucket[0].GetUpperBound(), h.GetSampleCount())
		}
	}
	g := fams["proxybench_lookup_latency_p99_seconds"]
	if g == nil || len(g.Metric) != 2*4*4 {
		t.Fatalf("p99 gauges: %v", g)
	}
	want := map[string]float64{}
	for _, f := range Figures(r) {
		if f.Name == "lookup.latency.p99" {
			want[f.Mode+f.Position+itoa(f.Services)] = f.Value / 1e9
		}
	}
	for _, m := range g.Metric {
		l := map[string]string{}
		for _, p := range m.Label {
			l[p.GetName()] = p.GetValue()
		}
		if w := want[l["mode"]+l["position"]+l["services"]]; m.GetGauge().GetValue() != w || w == 0 {
			t.Errorf("%v = %g, want %g", l, m.GetGauge().GetValue(), w)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestOpenMetricsKubeProxyRows: nothing is exported under kube-proxy's own
// metric names; a kube-proxy row's data-plane syncs are in proxybench_*
// histograms, and kube-proxy's scraped histograms are in
// proxybench_kubeproxy_scraped_* summaries holding exactly the scraped
// count and sum; the exposition parses back with expfmt.
func TestOpenMetricsKubeProxyRows(t *testing.T) {
	r := kpVersionsRuns(4, 1)[0]
	var b bytes.Buffer
	if err := WriteOpenMetrics(&b, r); err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	for name := range fams {
		if strings.HasPrefix(name, "kubeproxy_") {
			t.Errorf("family %s uses kube-proxy's own name", name)
		}
	}
	labels := func(m interface {
		GetLabel() []*dto.LabelPair
	}) map[string]string {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		return l
	}
	kpRow := r.Modes[1]
	full := fams["proxybench_sync_full_duration_seconds"]
	found := false
	for _, m := range full.GetMetric() {
		if labels(m)["mode"] == kpRow.Mode {
			found = true
			if got, want := m.GetHistogram().GetSampleSum(), kpRow.SyncFull[0].Wall.Seconds(); math.Abs(got-want) > 1e-9 {
				t.Errorf("data-plane full sync of %s: sum %g, want %g", kpRow.Mode, got, want)
			}
		}
	}
	if !found {
		t.Errorf("no proxybench_sync_full_duration_seconds for %s", kpRow.Mode)
	}
	partial := fams[ScrapedMetricName(kpSyncPartial)]
	if partial == nil || partial.GetType() != dto.MetricType_SUMMARY {
		t.Fatalf("scraped partial syncs: %v", partial)
	}
	want := kpRow.KubeProxy.AtEnd[2]
	found = false
	for _, m := range partial.GetMetric() {
		l := labels(m)
		if l["mode"] == kpRow.Mode && l["ip_family"] == "IPv4" && l["scrape"] == "at_end" {
			found = true
			if m.GetSummary().GetSampleCount() != want.Count || m.GetSummary().GetSampleSum() != want.Sum {
				t.Errorf("scraped partial syncs %v, want count %d sum %g", m.GetSummary(), want.Count, want.Sum)
			}
		}
		if l["mode"] == "nftables" {
			t.Error("builtin row has scraped kube-proxy metrics")
		}
	}
	if !found {
		t.Errorf("no at_end IPv4 series of %s in %s", kpRow.Mode, ScrapedMetricName(kpSyncPartial))
	}
	if g := fams["proxybench_kubeproxy_sync_partial_seconds"]; g == nil || len(g.GetMetric()) != 2 {
		t.Errorf("kubeproxy.sync.partial gauges: %v", g)
	}
}
