package reports

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/scenarios"
)

// TimeToErrorBounds are the bucket bounds (seconds) of time-to-error
// histograms: an immediate refusal (sub-ms), then around the SYN
// retransmissions (1 s, 3 s, 7 s after the connect) and the timeouts.
func TimeToErrorBounds() []float64 {
	return []float64{0.0001, 0.001, 0.01, 0.1, 0.5, 0.9, 1.1, 2, 2.9, 3.1, 5, 7.5, 10, 30}
}

// LookupBucketBounds are the bounds (seconds) of
// proxybench_lookup_connect_duration_seconds: 2.5 µs doubling 18 times,
// to 0.33 s (kube-proxy has no connect-time histogram).
func LookupBucketBounds() []float64 {
	b := make([]float64, 18)
	v := 2.5e-6
	for i := range b {
		b[i] = v
		v *= 2
	}
	return b
}

// WriteOpenMetrics writes r in the OpenMetrics text exposition format
// (github.com/prometheus/common/expfmt), so a result can be pushed to the
// Prometheus that already charts a cluster's kube-proxy. proxybench's own
// figures never use kube-proxy's metric names (a kube-proxy row's
// data-plane sync is not kube-proxy's own account of it):
//
//   - proxybench_sync_full_duration_seconds and
//     proxybench_sync_incremental_duration_seconds (histograms of the
//     full and incremental syncs proxybench measured, every mode but
//     none; for a kube-proxy row from the data plane), and
//     proxybench_sync_duration_seconds (both, plus the churn phases'
//     syncs), in kube-proxy's buckets (1 ms doubling to 16.384 s,
//     pkg/proxy/metrics) so they chart beside kube-proxy's;
//   - proxybench_churn_programming_duration_seconds, the churn phases'
//     programming latency from the data plane, in kube-proxy's
//     network-programming buckets;
//   - for a kube-proxy row, kube-proxy's own histograms as scraped from
//     its metrics endpoint (count and sum; measure.KubeProxy):
//     proxybench_kubeproxy_scraped_<kube-proxy's name without its
//     kubeproxy_ prefix>, e.g.
//     proxybench_kubeproxy_scraped_sync_full_proxy_rules_duration_seconds,
//     a summary without quantiles, with labels ip_family and scrape
//     ("after_full_sync" or "at_end");
//   - proxybench_lookup_connect_duration_seconds, a histogram of the raw
//     connect times per mode and position (LookupBucketBounds);
//   - one gauge per figure (Figures): proxybench_<figure> with dots as
//     underscores, _seconds for durations (in seconds) and _bytes for
//     sizes, e.g.
//     proxybench_lookup_latency_p99_seconds, proxybench_lookup_vsnone_p50,
//     proxybench_kubeproxy_sync_partial_seconds;
//   - one gauge per phase and figure of r.AllSections
//     (openMetricsSectionFamilies): proxybench_section_<phase>_<figure>
//     in snake case, _seconds for durations, with labels scenario,
//     run_id, phase, row and column instead of the mode labels.
//
// Every series carries the labels scenario, run_id, mode, kernel
// ("host" or "uml") and services; lookup series also position. Durations
// are in seconds, as Prometheus names them.
func WriteOpenMetrics(w io.Writer, r *Result) error {
	scen := ""
	if r.Scenario != nil {
		scen = r.Scenario.Name
	}
	labels := func(m ModeResult, extra ...string) []*dto.LabelPair {
		kernel := m.Kernel
		if kernel == "" {
			kernel = "host"
		}
		mode := r.modeLabel(m)
		mode = strings.TrimSuffix(mode, " (uml)")
		kv := append([]string{"scenario", scen, "run_id", r.RunID, "mode", mode, "kernel", kernel, "services", strconv.Itoa(modeSize(r, m))}, extra...)
		var out []*dto.LabelPair
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, &dto.LabelPair{Name: proto.String(kv[i]), Value: proto.String(kv[i+1])})
		}
		return out
	}
	hist := func(name, help string) *dto.MetricFamily {
		return &dto.MetricFamily{Name: proto.String(name), Help: proto.String(help), Type: dto.MetricType_HISTOGRAM.Enum()}
	}
	full := hist("proxybench_sync_full_duration_seconds", "Full sync wall time in seconds as proxybench measured it (kube-proxy rows: API objects created to every probed service answering), in kube-proxy's sync buckets")
	partial := hist("proxybench_sync_incremental_duration_seconds", "Incremental sync wall time in seconds as proxybench measured it (kube-proxy rows: EndpointSlice written to kube-proxy's sync done), in kube-proxy's sync buckets")
	all := hist("proxybench_sync_duration_seconds", "Sync wall time in seconds, every sync proxybench measured (full, incremental, churn)")
	prog := hist("proxybench_churn_programming_duration_seconds", "Churn phases: time from a change to its first observation in the data plane, in seconds")
	scraped := map[string]*dto.MetricFamily{}
	var scrapedOrder []string
	lookup := hist("proxybench_lookup_connect_duration_seconds", "TCP connect time through the ClusterIP, in seconds")
	tte := hist("proxybench_lookup_time_to_error_seconds", "Failed connections: time from the connect to the error, in seconds, per cause (refused, timeout, reset, unreachable, other)")
	for _, m := range r.Modes {
		var fullNs, partNs, allNs, progNs []int64
		for _, s := range m.SyncFull {
			fullNs = append(fullNs, int64(s.Wall))
		}
		for _, s := range m.SyncIncremental {
			partNs = append(partNs, int64(s.Wall))
		}
		allNs = append(append(allNs, fullNs...), partNs...)
		for _, c := range m.Churn {
			for _, s := range c.Syncs {
				if s.Err == "" {
					allNs = append(allNs, int64(s.Wall))
				}
			}
			for _, s := range c.Samples {
				progNs = append(progNs, s.LatencyNs)
			}
		}
		if !m.isBaseline() {
			addHistogram(full, labels(m), fullNs, SyncBucketBounds())
			addHistogram(partial, labels(m), partNs, SyncBucketBounds())
			addHistogram(all, labels(m), allNs, SyncBucketBounds())
		}
		addHistogram(prog, labels(m), progNs, ProgrammingBuckets())
		if kp := m.KubeProxy; kp != nil {
			for _, sc := range []struct {
				name string
				ms   []measure.Metric
			}{{"after_full_sync", kp.AfterFullSync}, {"at_end", kp.AtEnd}} {
				for _, km := range sc.ms {
					name := ScrapedMetricName(km.Name)
					f, ok := scraped[name]
					if !ok {
						f = &dto.MetricFamily{Name: proto.String(name), Type: dto.MetricType_SUMMARY.Enum(),
							Help: proto.String("kube-proxy's own " + km.Name + " scraped from its metrics endpoint in the node's namespace: observations and their sum in seconds (scrape: after_full_sync or at_end of the row)")}
						scraped[name] = f
						scrapedOrder = append(scrapedOrder, name)
					}
					f.Metric = append(f.Metric, &dto.Metric{Label: labels(m, "ip_family", km.Family, "scrape", sc.name),
						Summary: &dto.Summary{SampleCount: proto.Uint64(km.Count), SampleSum: proto.Float64(km.Sum)}})
				}
			}
		}
		for _, p := range m.Lookup {
			addHistogram(lookup, labels(m, "position", p.Position), p.SamplesNs, LookupBucketBounds())
			for _, k := range sortedKeys(p.ErrorKinds) {
				addHistogram(tte, labels(m, "position", p.Position, "cause", k), p.ErrorKinds[k].SamplesNs, TimeToErrorBounds())
			}
		}
	}
	fams := []*dto.MetricFamily{full, partial, all, prog}
	for _, n := range scrapedOrder {
		fams = append(fams, scraped[n])
	}
	fams = append(fams, lookup, tte)
	gauges := map[string]*dto.MetricFamily{}
	var order []string
	byMode := map[string]ModeResult{}
	for _, m := range r.Modes {
		byMode[fmt.Sprint(m.Mode, "|", m.Kernel, "|", modeSize(r, m), "|", m.Info["scheduler"])] = m
	}
	for _, f := range Figures(r) {
		name := "proxybench_" + strings.ReplaceAll(f.Name, ".", "_")
		v := f.Value
		switch f.Unit {
		case "ns":
			name += "_seconds"
			v /= 1e9
		case "bytes":
			name += "_bytes"
		}
		g, ok := gauges[name]
		if !ok {
			g = &dto.MetricFamily{Name: proto.String(name), Type: dto.MetricType_GAUGE.Enum(), Help: proto.String(figureHelp(f.Name))}
			gauges[name] = g
			order = append(order, name)
		}
		kernel := ""
		if f.Kernel == "uml" {
			kernel = "uml"
		}
		m := byMode[fmt.Sprint(f.Mode, "|", kernel, "|", f.Services, "|", f.variant)]
		if m.Mode == "" {
			m = ModeResult{Mode: f.Mode, Kernel: kernel, Services: f.Services}
		}
		var extra []string
		if f.Position != "" {
			extra = []string{"position", f.Position}
		}
		if f.MinSyncPeriod != "" {
			extra = append(extra, "min_sync_period", f.MinSyncPeriod)
		}
		g.Metric = append(g.Metric, &dto.Metric{Label: labels(m, extra...), Gauge: &dto.Gauge{Value: proto.Float64(v)}})
	}
	for _, n := range order {
		fams = append(fams, gauges[n])
	}
	fams = append(fams, openMetricsSectionFamilies(r)...)
	for _, f := range fams {
		if len(f.Metric) == 0 {
			continue
		}
		if _, err := expfmt.MetricFamilyToOpenMetrics(w, f); err != nil {
			return err
		}
	}
	_, err := expfmt.FinalizeOpenMetrics(w)
	return err
}

// ScrapedMetricName is the OpenMetrics name under which WriteOpenMetrics
// exports kube-proxy's scraped metric name:
// "kubeproxy_sync_full_proxy_rules_duration_seconds" ->
// "proxybench_kubeproxy_scraped_sync_full_proxy_rules_duration_seconds".
func ScrapedMetricName(name string) string {
	return "proxybench_kubeproxy_scraped_" + strings.TrimPrefix(name, "kubeproxy_")
}

func figureHelp(name string) string {
	if k, ok := scenarios.GateFigures[name]; ok {
		return name + ": " + k.Doc
	}
	return name
}

// addHistogram appends one histogram of samplesNs (cumulative counts in
// bounds, seconds) to f; nothing when there are no samples.
func addHistogram(f *dto.MetricFamily, labels []*dto.LabelPair, samplesNs []int64, bounds []float64) {
	if len(samplesNs) == 0 {
		return
	}
	s := slices.Clone(samplesNs)
	slices.Sort(s)
	h := &dto.Histogram{SampleCount: proto.Uint64(uint64(len(s)))}
	var sum float64
	for _, x := range s {
		sum += float64(x) / 1e9
	}
	h.SampleSum = proto.Float64(sum)
	i := 0
	for _, b := range bounds {
		for i < len(s) && float64(s[i])/1e9 <= b {
			i++
		}
		h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: proto.Float64(b), CumulativeCount: proto.Uint64(uint64(i))})
	}
	f.Metric = append(f.Metric, &dto.Metric{Label: labels, Histogram: h})
}
