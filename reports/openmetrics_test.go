package reports

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestOpenMetricsParses: the exposition of the fixture parses with
// Prometheus' own text parser; kube-proxy's sync histogram has its 15
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
	full := fams["kubeproxy_sync_full_proxy_rules_duration_seconds"]
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
