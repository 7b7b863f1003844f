package kubeproxy

import (
	"bytes"
	"fmt"
	"math"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// kube-proxy's own figures (pkg/proxy/metrics in k8s.io/kubernetes), each a
// histogram in seconds labelled ip_family="IPv4"|"IPv6".
const (
	MetricSync        = "kubeproxy_sync_proxy_rules_duration_seconds"
	MetricSyncFull    = "kubeproxy_sync_full_proxy_rules_duration_seconds"
	MetricSyncPartial = "kubeproxy_sync_partial_proxy_rules_duration_seconds"
	// MetricProgramming is the network programming latency: from the
	// EndpointSlice's endpoints.kubernetes.io/last-change-trigger-time to
	// the end of the sync that programmed it.
	MetricProgramming = "kubeproxy_network_programming_duration_seconds"
)

// Metrics is one scrape of kube-proxy's metrics endpoint, by family name.
type Metrics map[string]*dto.MetricFamily

// ParseMetrics parses the Prometheus text exposition format.
func ParseMetrics(text []byte) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("kube-proxy metrics: %w", err)
	}
	return Metrics(fams), nil
}

// Histogram is one histogram series: Count observations summing to Sum
// seconds; Buckets[i] counts observations <= Bounds[i] (cumulative).
type Histogram struct {
	Count   uint64
	Sum     float64
	Bounds  []float64
	Buckets []uint64
}

// Histogram returns the series of family name with label ip_family=family
// ("IPv4"); a missing family or series is an error wrapping errNoMetric.
func (m Metrics) Histogram(name, family string) (Histogram, error) {
	f, ok := m[name]
	if !ok || f.GetType() != dto.MetricType_HISTOGRAM {
		return Histogram{}, fmt.Errorf("%s: %w", name, errNoMetric)
	}
	for _, s := range f.GetMetric() {
		match := false
		for _, l := range s.GetLabel() {
			if l.GetName() == "ip_family" && l.GetValue() == family {
				match = true
			}
		}
		if !match {
			continue
		}
		h := s.GetHistogram()
		out := Histogram{Count: h.GetSampleCount(), Sum: h.GetSampleSum()}
		for _, b := range h.GetBucket() {
			if math.IsInf(b.GetUpperBound(), 1) {
				continue
			}
			out.Bounds = append(out.Bounds, b.GetUpperBound())
			out.Buckets = append(out.Buckets, b.GetCumulativeCount())
		}
		return out, nil
	}
	return Histogram{}, fmt.Errorf("%s{ip_family=%q}: %w", name, family, errNoMetric)
}

// Sub returns the observations h has and earlier had not (h - earlier),
// e.g. the syncs between two scrapes.
func (h Histogram) Sub(earlier Histogram) Histogram {
	out := Histogram{Count: h.Count - earlier.Count, Sum: h.Sum - earlier.Sum, Bounds: h.Bounds}
	out.Buckets = make([]uint64, len(h.Buckets))
	for i := range h.Buckets {
		out.Buckets[i] = h.Buckets[i]
		if i < len(earlier.Buckets) {
			out.Buckets[i] -= earlier.Buckets[i]
		}
	}
	return out
}

// Mean is Sum/Count in seconds (NaN without observations).
func (h Histogram) Mean() float64 {
	if h.Count == 0 {
		return math.NaN()
	}
	return h.Sum / float64(h.Count)
}

// Counter returns the value of counter family name's series with label
// ip_family=family; false when the family or series is missing.
func (m Metrics) Counter(name, family string) (float64, bool) {
	f, ok := m[name]
	if !ok || f.GetType() != dto.MetricType_COUNTER {
		return 0, false
	}
	for _, s := range f.GetMetric() {
		for _, l := range s.GetLabel() {
			if l.GetName() == "ip_family" && l.GetValue() == family {
				return s.GetCounter().GetValue(), true
			}
		}
	}
	return 0, false
}
