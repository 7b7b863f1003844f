package monitoring

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/proxybench/proxybench/reports"
)

// LiveJob is the scrape job of proxybench's own live metrics in a
// row's Prometheus (the row's kube-proxy is job "kube-proxy").
const LiveJob = "proxybench"

// LivePort is the port of proxybench's own metrics endpoint, on
// 127.0.0.1 of the namespace the row's Prometheus runs in (Port + 1).
const LivePort = 9091

// RowLabels are the constant labels of one row's live series.
type RowLabels struct {
	// Mode is the proxy mode (iptables, ipvs, nftables, userspace, none;
	// a kube-proxy row's base mode), Implementation "builtin" or
	// "kube-proxy", Kernel where the row runs ("host" or "uml"), Row the
	// row's label in the report ("iptables (kube-proxy)", a variant's
	// "iptables [minSyncPeriod=1s]").
	Mode, Implementation, Kernel, Row string
}

// Live is proxybench's own live metrics during a run, served by
// Handler: one registry per row (BeginRow), so a row's Prometheus
// scrapes the series of its own row only, plus the process's Go runtime
// and process collectors (go_*, process_*: proxybench's CPU and memory).
// The row's figures are updated as they are measured, not at its end.
// Safe for concurrent use.
type Live struct {
	base *prometheus.Registry
	mu   sync.Mutex
	cur  *RowMetrics
}

// NewLive returns a Live with no row begun (Handler then serves go_* and
// process_* only).
func NewLive() *Live {
	base := prometheus.NewRegistry()
	base.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Live{base: base}
}

// Handler serves the current row's registry and the process collectors
// in the Prometheus text (or OpenMetrics, as negotiated) exposition
// format (promhttp).
func (l *Live) Handler() http.Handler {
	g := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		gs := prometheus.Gatherers{l.base}
		if r := l.Current(); r != nil {
			gs = append(gs, r.reg)
		}
		return gs.Gather()
	})
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, EnableOpenMetrics: true})
}

// BeginRow makes a fresh registry for the row labelled lb the one
// Handler serves and returns its metrics. Nil-safe: a nil Live (a run
// without monitoring) returns a nil *RowMetrics, whose methods do
// nothing.
func (l *Live) BeginRow(lb RowLabels) *RowMetrics {
	if l == nil {
		return nil
	}
	r := newRowMetrics(lb)
	l.mu.Lock()
	l.cur = r
	l.mu.Unlock()
	return r
}

// EndRow stops serving r's series (when r is still the current row).
func (l *Live) EndRow(r *RowMetrics) {
	if l == nil {
		return
	}
	l.mu.Lock()
	if l.cur == r {
		l.cur = nil
	}
	l.mu.Unlock()
}

// Current is the row Handler serves (nil between rows).
func (l *Live) Current() *RowMetrics {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}

// The live families (docs/kube-proxy.md, "proxybench's own live
// metrics"). Every one carries the row's labels mode, implementation,
// kernel and row.
const (
	MetricLookupConnections = "proxybench_lookup_connections_total"
	MetricLookupConnect     = "proxybench_lookup_connect_duration_seconds"
	MetricChurnApplied      = "proxybench_churn_changes_applied_total"
	MetricChurnObserved     = "proxybench_churn_changes_observed_total"
	MetricProgramming       = "proxybench_churn_programming_duration_seconds"
	MetricSyncDuration      = "proxybench_sync_proxy_rules_duration_seconds"
	MetricSyncFailures      = "proxybench_sync_proxy_rules_failures_total"
	MetricSyncLastTimestamp = "proxybench_sync_proxy_rules_last_timestamp_seconds"
	MetricSyncObjects       = "proxybench_sync_proxy_rules_objects"
	MetricPhaseActive       = "proxybench_phase_active"
)

// Lookup outcomes besides the error kinds (traffic.ErrorKind): answered
// by an endpoint of the service, answered by another address.
const (
	OutcomeOK   = "ok"
	OutcomeMiss = "miss"
)

// LiveMetrics are the families of proxybench's live registry (without
// the process's go_* and process_*), by base name.
var LiveMetrics = []string{
	MetricLookupConnections, MetricLookupConnect, MetricChurnApplied, MetricChurnObserved, MetricProgramming,
	MetricSyncDuration, MetricSyncFailures, MetricSyncLastTimestamp, MetricSyncObjects, MetricPhaseActive,
}

// RowMetrics are one row's live series. Every method is safe on a nil
// receiver (does nothing) and for concurrent use.
type RowMetrics struct {
	Labels RowLabels
	reg    *prometheus.Registry

	lookupConns   *prometheus.CounterVec
	connect       *prometheus.HistogramVec
	churnApplied  *prometheus.CounterVec
	churnObserved *prometheus.CounterVec
	programming   *prometheus.HistogramVec
	syncDur       *prometheus.HistogramVec
	syncFailures  *prometheus.CounterVec
	syncLast      prometheus.Gauge
	objects       prometheus.Gauge
	phase         *prometheus.GaugeVec
}

func newRowMetrics(lb RowLabels) *RowMetrics {
	cl := prometheus.Labels{"mode": lb.Mode, "implementation": lb.Implementation, "kernel": lb.Kernel, "row": lb.Row}
	r := &RowMetrics{Labels: lb, reg: prometheus.NewRegistry()}
	r.lookupConns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricLookupConnections, ConstLabels: cl,
		Help: "Recorded lookup connections (traffic phase) through the ClusterIP, by service position and outcome: ok (answered by an endpoint of the service), miss (answered by another address), or the error (refused, timeout, reset, unreachable, other)."},
		[]string{"position", "outcome"})
	r.connect = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricLookupConnect, ConstLabels: cl, Buckets: reports.LookupBucketBounds(),
		Help: "TCP connect time through the ClusterIP of the traffic phase's answered connections, in seconds (2.5 us doubling to 0.33 s), by service position."},
		[]string{"position"})
	r.churnApplied = prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricChurnApplied, ConstLabels: cl,
		Help: "Churn phases: changes applied to the cluster state (the sync loop programs them), by change kind."}, []string{"kind"})
	r.churnObserved = prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricChurnObserved, ConstLabels: cl,
		Help: "Churn phases: changes the data-plane probes saw take effect, by change kind."}, []string{"kind"})
	r.programming = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricProgramming, ConstLabels: cl, Buckets: reports.ProgrammingBuckets(),
		Help: "Churn phases: time from a change to the data-plane probes seeing it take effect, in seconds, in kube-proxy's network_programming_duration_seconds buckets, by change kind."},
		[]string{"kind"})
	r.syncDur = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricSyncDuration, ConstLabels: cl, Buckets: reports.SyncBucketBounds(),
		Help: "Wall time of each rule sync proxybench made (sync.full, sync.incremental with its syncs back, the churn loop's syncs; kube-proxy rows: from the data plane), in seconds, in kube-proxy's sync buckets (1 ms doubling to 16.384 s), by kind full or incremental."},
		[]string{"kind"})
	r.syncFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricSyncFailures, ConstLabels: cl,
		Help: "Rule syncs that failed, by kind full or incremental."}, []string{"kind"})
	r.syncLast = prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricSyncLastTimestamp, ConstLabels: cl,
		Help: "Unix time, in seconds, when the last successful rule sync ended."})
	r.objects = prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricSyncObjects, ConstLabels: cl,
		Help: "Kernel objects (iptables rules, nft elements, IPVS servers) the last successful full sync programmed: the ruleset's size, as the mode counts it (measure.SyncStats.Objects)."})
	r.phase = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricPhaseActive, ConstLabels: cl,
		Help: "1 while the row's phase runs, 0 once it is over (sync.full, traffic, churn, ...)."}, []string{"phase"})
	r.reg.MustRegister(r.lookupConns, r.connect, r.churnApplied, r.churnObserved, r.programming, r.syncDur, r.syncFailures, r.syncLast, r.objects, r.phase)
	for _, k := range []string{"full", "incremental"} {
		r.syncDur.WithLabelValues(k)
		r.syncFailures.WithLabelValues(k)
	}
	return r
}

// Gatherer is the row's registry (tests read it).
func (r *RowMetrics) Gatherer() prometheus.Gatherer { return r.reg }

// Lookup adds one driver call at position: the answered connections'
// connect times (latenciesNs, ns), and the other outcomes' counts (miss
// and each error kind; a kind given with 0 is created at 0, so a rate
// over it starts from the row's first call). Outcome ok counts
// latenciesNs.
func (r *RowMetrics) Lookup(position string, latenciesNs []int64, outcomes map[string]int) {
	if r == nil {
		return
	}
	r.lookupConns.WithLabelValues(position, OutcomeOK).Add(float64(len(latenciesNs)))
	for k, n := range outcomes {
		r.lookupConns.WithLabelValues(position, k).Add(float64(n))
	}
	h := r.connect.WithLabelValues(position)
	for _, ns := range latenciesNs {
		h.Observe(float64(ns) / 1e9)
	}
}

// Sync observes one rule sync of kind ("full" or "incremental"; other
// kinds count as incremental) that took wall and programmed objects
// kernel objects (measure.SyncStats.Objects: a full sync's is the whole
// ruleset, an incremental one's what it wrote); a failed one counts in
// the failures and the histogram (kube-proxy observes every sync's
// duration), not in the objects and last timestamp.
func (r *RowMetrics) Sync(kind string, wall time.Duration, objects int, failed bool) {
	if r == nil {
		return
	}
	if kind != "full" {
		kind = "incremental"
	}
	if wall > 0 {
		r.syncDur.WithLabelValues(kind).Observe(wall.Seconds())
	}
	if failed {
		r.syncFailures.WithLabelValues(kind).Inc()
		return
	}
	r.syncLast.Set(float64(time.Now().UnixNano()) / 1e9)
	if kind == "full" && objects > 0 {
		r.objects.Set(float64(objects))
	}
}

// ChurnApplied counts one churn change of kind applied to the cluster.
func (r *RowMetrics) ChurnApplied(kind string) {
	if r == nil {
		return
	}
	r.churnApplied.WithLabelValues(kind).Inc()
	r.churnObserved.WithLabelValues(kind)
	r.programming.WithLabelValues(kind)
}

// ChurnObserved counts one churn change of kind the probes saw take
// effect latency after it was made.
func (r *RowMetrics) ChurnObserved(kind string, latency time.Duration) {
	if r == nil {
		return
	}
	r.churnObserved.WithLabelValues(kind).Inc()
	r.programming.WithLabelValues(kind).Observe(latency.Seconds())
}

// Phase sets phase's proxybench_phase_active to 1 (running) or 0.
func (r *RowMetrics) Phase(phase string, running bool) {
	if r == nil {
		return
	}
	v := 0.0
	if running {
		v = 1
	}
	r.phase.WithLabelValues(phase).Set(v)
}
