package reports

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/proxybench/proxybench/measure"
)

// ChurnResult is one churn phase of a mode: the changes made, the
// programming latency observed from the data plane for each, and every
// sync the mode's sync loop ran meanwhile.
type ChurnResult struct {
	MinSyncPeriodNs int64   `json:"minSyncPeriodNs"`
	SyncPeriodNs    int64   `json:"syncPeriodNs"`
	Rate            float64 `json:"rate"`
	// ProbeNodes, when the phase's probes dial from client pods on several
	// nodes (topology.nodes > 1), are those nodes: each change is
	// followed on every one of them (observe.Spread) and seen when all
	// show it (its latency the slowest node's); NodeLatency is each
	// node's own programming latency over the changes it showed, in the
	// order of ProbeNodes.
	ProbeNodes  []int     `json:"probeNodes,omitempty"`
	NodeLatency []Summary `json:"nodeLatency,omitempty"`
	DurationNs  int64     `json:"durationNs"`
	Arrival     string    `json:"arrival"`
	// Changes made, by kind; Skipped arrivals found no service to change.
	Changes int            `json:"changes"`
	ByKind  map[string]int `json:"byKind"`
	Skipped int            `json:"skipped"`
	// Observed changes have a programming latency; Unobserved were not
	// seen in the data plane within the grace period.
	Observed   int `json:"observed"`
	Unobserved int `json:"unobserved"`
	// Latency summarises programming.latency (ns) over observed changes.
	Latency Summary `json:"latency"`
	// LatencyBuckets counts it in kube-proxy's
	// network_programming_duration_seconds buckets (cumulative, as
	// Prometheus).
	LatencyBuckets []Bucket      `json:"latencyBuckets"`
	Samples        []ChurnSample `json:"samples"`
	Syncs          []SyncRecord  `json:"syncs"`
	// SyncSummary and SyncBuckets are per sync kind ("full",
	// "incremental"): wall time percentiles and counts in kube-proxy's
	// sync_proxy_rules_duration_seconds buckets.
	SyncSummary map[string]Summary  `json:"syncSummary"`
	SyncBuckets map[string][]Bucket `json:"syncBuckets"`
	// CPUNs is the CPU time (user+sys, self+children) of the whole phase:
	// syncs, probes and the echo server.
	CPUNs int64 `json:"cpuNs"`
	// SyncCPUNs is the CPU time of the syncs alone.
	SyncCPUNs int64 `json:"syncCpuNs"`
	// FailedSyncs counts the syncs that failed (Syncs[i].Err set); the run
	// went on, each next sync full as in kube-proxy. Failures describes
	// each with its recovery.
	FailedSyncs int           `json:"failedSyncs,omitempty"`
	Failures    []SyncFailure `json:"failures,omitempty"`
	// Injected is failure.syncErrors' own account of the phase (nil
	// without it): the rule-program calls its wrappers counted and those
	// they failed. A builtin row's wrappers were first on proxybench's
	// PATH, a kube-proxy row's on kube-proxy's (its IPv4 calls only).
	Injected *InjectedErrors `json:"injected,omitempty"`
	// KubeProxy is a kube-proxy row's own account of the phase (nil for
	// builtin rows): the changes went through the API and kube-proxy ran
	// its own sync loop, so Syncs are the syncs its log shows and CPUNs
	// is proxybench's side (the writes, probes and echo server).
	KubeProxy *ChurnKubeProxy `json:"kubeProxy,omitempty"`
}

// ChurnKubeProxy is what a kube-proxy row's churn phase measured of
// kube-proxy itself, beside the data plane's observation of the same
// changes (ChurnResult.Latency). Every change was written through the
// API (its EndpointSlice, or its Service and slice) with
// endpoints.kubernetes.io/last-change-trigger-time set to the time of
// the change, the instant the data plane's clock starts too.
type ChurnKubeProxy struct {
	// Version is kube-proxy's version.
	Version string `json:"version"`
	// Programming is kubeproxy_network_programming_duration_seconds
	// (IPv4) over the phase: the growth of kube-proxy's histogram between
	// scrapes at the phase's start and end. One observation per trigger
	// time a sync programmed (a deletion has none), from the trigger time
	// to the end of that sync's rule write.
	Programming KubeProxyHistogram `json:"programming"`
	// Syncs is kubeproxy_sync_proxy_rules_duration_seconds over the
	// phase; FullSyncs and PartialSyncs its full and partial variants
	// (nil for a mode without them: IPVS).
	Syncs        KubeProxyHistogram  `json:"syncs"`
	FullSyncs    *KubeProxyHistogram `json:"fullSyncs,omitempty"`
	PartialSyncs *KubeProxyHistogram `json:"partialSyncs,omitempty"`
	// Logged counts the "Network programming" lines of kube-proxy's log
	// over the phase (one per programmed trigger time, at -v 4); Matched
	// those matched to one of the phase's changes (by service and trigger
	// time: ChurnSample.KubeProxyNs). PerChange says how the log came to
	// have them, or why it has none.
	Logged    int    `json:"logged"`
	Matched   int    `json:"matched"`
	PerChange string `json:"perChange,omitempty"`
	// SeenBeforeSync counts the matched changes the data plane reported
	// seen before kube-proxy's sync that programmed them began (by its
	// log): disappearances the probes confirmed by chance
	// (observe.ConfirmMisses connections in a row that avoided the
	// endpoint while it was still in the rules), whose data-plane
	// latency is too short.
	SeenBeforeSync int `json:"seenBeforeSync"`
	// CPUNs and ChildCPUNs are kube-proxy's CPU time and that of the rule
	// programs it ran over the phase (user+sys); PeakRSSBytes its largest
	// resident set (VmRSS sampled every 20 ms) over the phase.
	CPUNs        int64 `json:"cpuNs"`
	ChildCPUNs   int64 `json:"childCpuNs"`
	PeakRSSBytes int64 `json:"peakRssBytes"`
	// MinSyncPeriodNs and SyncPeriodNs are kube-proxy's own, as its log
	// gave them for the phase (a swept 0 is 1 ns for iptables and
	// nftables: kube-proxy reads 0 as 1 s there).
	MinSyncPeriodNs int64 `json:"minSyncPeriodNs"`
	SyncPeriodNs    int64 `json:"syncPeriodNs"`
	// RestartNs, when > 0, is the restart before the phase that gave
	// kube-proxy this minSyncPeriod (sweep.minSyncPeriod): from the new
	// process's start to its first sync seen done.
	RestartNs int64 `json:"restartNs,omitempty"`
	// SettleNs is how long the phase waited after its probes were done
	// for kube-proxy to end the syncs of its last writes (the data plane
	// shows a change when the rules are committed, before kube-proxy's
	// rule program returns); Unsettled, when set, says it stopped waiting
	// first (a minute) and how far kube-proxy had got.
	SettleNs  int64  `json:"settleNs,omitempty"`
	Unsettled string `json:"unsettled,omitempty"`
	// Writes counts the API writes (one per change), WriteErrors those
	// that failed (WriteError the first one's error: its change was never
	// written, so it stays unobserved); WriteLatency is from each change
	// to its write's return.
	Writes       int     `json:"writes"`
	WriteErrors  int     `json:"writeErrors,omitempty"`
	WriteError   string  `json:"writeError,omitempty"`
	WriteLatency Summary `json:"writeLatency"`
	// FailureCounters is the growth over the phase of kube-proxy's
	// failure counters (IPv4) that its metrics endpoint serves, by
	// name (KubeProxyFailureCounters; a counter the mode does not serve
	// is absent; names: measure.KubeProxyFailureCounters).
	FailureCounters map[string]float64 `json:"failureCounters,omitempty"`
	// Events are the Service and EndpointSlice watch events kube-proxy
	// received over the phase (its
	// kubeproxy_sync_proxy_rules_{service,endpoint}_changes_total growth).
	Events float64 `json:"events,omitempty"`
	// Nodes are the other nodes' kube-proxies over the phase when the
	// row runs kube-proxy on several nodes (node-1 first; node-0 is the
	// fields above); APIServerCPUNs and EtcdCPUNs the control plane's CPU
	// over the phase (/proc/<pid>/stat).
	Nodes          []ChurnKubeProxyNode `json:"nodes,omitempty"`
	APIServerCPUNs int64                `json:"apiserverCpuNs,omitempty"`
	EtcdCPUNs      int64                `json:"etcdCpuNs,omitempty"`
}

// ChurnKubeProxyNode is one other node's kube-proxy over a churn phase:
// its network_programming_duration_seconds growth, CPU (own, rule
// programs), largest resident set, and the watch events it received
// (as ChurnKubeProxy's); Unsettled or Err say what is missing.
type ChurnKubeProxyNode struct {
	Node         string             `json:"node"`
	Programming  KubeProxyHistogram `json:"programming"`
	CPUNs        int64              `json:"cpuNs"`
	ChildCPUNs   int64              `json:"childCpuNs"`
	PeakRSSBytes int64              `json:"peakRssBytes"`
	Events       float64            `json:"events"`
	Unsettled    string             `json:"unsettled,omitempty"`
	Err          string             `json:"err,omitempty"`
}

// InjectedErrors is failure.syncErrors' account of one churn phase:
// Calls the rule-program calls its wrappers counted (Programs: the
// programs wrapped), Failed those it failed on purpose.
type InjectedErrors struct {
	Calls    int      `json:"calls"`
	Failed   int      `json:"failed"`
	Programs []string `json:"programs,omitempty"`
}

// KubeProxyHistogram is the growth of one of kube-proxy's histograms over
// a phase: Count observations summing to SumSeconds, and Buckets
// cumulative with kube-proxy's bounds (LE in seconds, "+Inf" last).
type KubeProxyHistogram struct {
	Count      uint64   `json:"count"`
	SumSeconds float64  `json:"sumSeconds"`
	Buckets    []Bucket `json:"buckets,omitempty"`
}

// Mean is SumSeconds/Count (NaN without observations).
func (h KubeProxyHistogram) Mean() float64 {
	if h.Count == 0 {
		return math.NaN()
	}
	return h.SumSeconds / float64(h.Count)
}

// Quantile is the q-quantile (0..1) of h in seconds as Prometheus's
// histogram_quantile computes it from cumulative buckets: the bucket
// holding rank q×count, linearly interpolated between its lower bound
// (0 for the first) and its upper bound; in the +Inf bucket, the last
// finite bound. NaN without observations. It is an estimate within a
// bucket's width (kube-proxy's programming buckets are 0.25 s, 0.5 s,
// then 1 s apart).
func (h KubeProxyHistogram) Quantile(q float64) float64 {
	if h.Count == 0 || len(h.Buckets) == 0 {
		return math.NaN()
	}
	total := float64(h.Buckets[len(h.Buckets)-1].Count)
	if total == 0 {
		return math.NaN()
	}
	rank := q * total
	lower, prev := 0.0, 0.0
	for _, b := range h.Buckets {
		c := float64(b.Count)
		if b.LE == "+Inf" {
			return lower // the last finite bound
		}
		upper, err := strconv.ParseFloat(b.LE, 64)
		if err != nil {
			return math.NaN()
		}
		if c >= rank && c > prev {
			return lower + (upper-lower)*(rank-prev)/(c-prev)
		}
		lower, prev = upper, c
	}
	return lower
}

// kubeProxyGap is kube-proxy's own latency over every change of c matched
// to its log (ChurnSample.KubeProxyNs, observed by the data plane or
// not), and the data plane's minus kube-proxy's over those the data plane
// observed too (ns, may be negative), each as sorted samples. A change
// the data plane missed within the grace still has kube-proxy's figure:
// leaving it out would keep only the changes programmed first (in a
// user-mode-linux guest, where an IPVS sync takes tens of seconds, 41 of
// 512 matched changes were observed and their kube-proxy p50 was half of
// all 512's).
func kubeProxyGap(c ChurnResult) (own, gap []float64) {
	for _, s := range c.Samples {
		if s.KubeProxyNs <= 0 {
			continue
		}
		own = append(own, float64(s.KubeProxyNs))
		if s.LatencyNs >= 0 {
			gap = append(gap, float64(s.LatencyNs-s.KubeProxyNs))
		}
	}
	slices.Sort(own)
	slices.Sort(gap)
	return own, gap
}

// quantileOf is the q-quantile of sorted xs (gonum's empirical
// quantile), NaN when empty.
func quantileOf(q float64, xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return stat.Quantile(q, stat.Empirical, xs, nil)
}

// PhaseChurn is the churn phase's name in Section.Phase.
const PhaseChurn = "churn"

// ChurnKubeProxyReport is the churn phase's sections of one row (as
// SyncDisruptionReport): for a kube-proxy row, ChurnKubeProxySections of
// its churn phases; none for a builtin row (its churn figures are the
// core table's).
func ChurnKubeProxyReport(label string, mr *ModeResult) []Section {
	has := false
	for _, c := range mr.Churn {
		has = has || c.KubeProxy != nil
	}
	if !has {
		return nil
	}
	return ChurnKubeProxySections(label, mr.Churn)
}

// churnSectionTitles are the titles of ChurnKubeProxySections.
const (
	churnLatencyTitle = "programming latency under churn: kube-proxy's own metric beside the data plane"
	churnCostTitle    = "kube-proxy under churn: syncs, CPU, memory and API writes"
)

// ChurnKubeProxySections are two sections of one kube-proxy row's churn
// phases (one row per phase, keyed by minSyncPeriod): programming
// latency by the data plane (every change: p50, p99 of the observed,
// how many were never seen), by kube-proxy's
// network_programming_duration_seconds over the phase (observations,
// p50 and p99 interpolated in its buckets, the exact mean), and per
// change where its log's line matched the change (kube-proxy's own p50
// and p99, and the data plane's minus kube-proxy's); then kube-proxy's
// syncs (its sync histograms' counts and mean), CPU, peak RSS and the
// API writes' latency. Durations in ms, CPU in s.
func ChurnKubeProxySections(label string, cs []ChurnResult) []Section {
	lat := Section{Phase: PhaseChurn, Title: churnLatencyTitle, Scope: "row",
		Intro: "Both clocks start at the change (the trigger time written on the EndpointSlice). kube-proxy's stops when the sync that programmed the change has written its rules (its histogram, p50/p99 interpolated in its buckets as histogram_quantile does; per change from its log's \"Network programming\" line); the data plane's at the first probe connection through the ClusterIP that shows the change (a removal: the first of the connections that no longer reach the endpoint).",
		Columns: []Column{{Name: "minSyncPeriod", Key: true},
			{Name: "changes", Unit: "count"}, {Name: "data plane p50", Unit: "ms", Figure: "dataplane.p50"}, {Name: "data plane p99", Unit: "ms", Figure: "dataplane.p99"},
			{Name: "unobserved", Unit: "count"},
			{Name: "kube-proxy metric n", Unit: "count", Figure: "kubeproxy.n"}, {Name: "kube-proxy metric p50", Unit: "ms", Figure: "kubeproxy.p50"},
			{Name: "kube-proxy metric p99", Unit: "ms", Figure: "kubeproxy.p99"}, {Name: "kube-proxy metric mean", Unit: "ms", Figure: "kubeproxy.mean"},
			{Name: "matched per change", Unit: "count", Figure: "matched"}, {Name: "kube-proxy per change p50", Unit: "ms", Figure: "perchange.kubeproxy.p50"},
			{Name: "kube-proxy per change p99", Unit: "ms", Figure: "perchange.kubeproxy.p99"},
			{Name: "data plane − kube-proxy p50", Unit: "ms", Figure: "perchange.gap.p50"}, {Name: "data plane − kube-proxy p99", Unit: "ms", Figure: "perchange.gap.p99"},
			{Name: "seen before its sync", Unit: "count", Figure: "perchange.early"}}}
	cost := Section{Phase: PhaseChurn, Title: churnCostTitle, Scope: "row",
		Intro: "kube-proxy's own sync loop (its minSyncPeriod) over the churn phase: its sync histograms' growth, its CPU (own and its rule programs') and its largest resident set over the phase, and the API writes that carried the changes (from the change to the write's return).",
		Columns: []Column{{Name: "minSyncPeriod", Key: true},
			{Name: "syncs", Unit: "count"}, {Name: "full", Unit: "count"}, {Name: "partial", Unit: "count"},
			{Name: "sync mean", Unit: "ms", Figure: "sync.mean"}, {Name: "sync p99", Unit: "ms", Figure: "sync.p99"},
			{Name: "kube-proxy CPU", Unit: "s", Figure: "cpu"}, {Name: "rule programs CPU", Unit: "s", Figure: "programs.cpu"},
			{Name: "peak RSS", Unit: "MiB", Figure: "rss"},
			{Name: "API write p50", Unit: "ms", Figure: "write.p50"}, {Name: "API write p99", Unit: "ms", Figure: "write.p99"},
			{Name: "write errors", Unit: "count", Figure: "write.errors"}}}
	msOf := func(ns float64) Cell {
		if math.IsNaN(ns) {
			return Missing()
		}
		return Num(ns/1e6, "%.1f")
	}
	secMs := func(s float64) Cell { return msOf(s * 1e9) }
	for _, c := range cs {
		kp := c.KubeProxy
		if kp == nil {
			continue
		}
		key := Text(time.Duration(c.MinSyncPeriodNs).String())
		dp50, dp99 := math.NaN(), math.NaN()
		if c.Latency.Count > 0 {
			dp50, dp99 = float64(c.Latency.P50), float64(c.Latency.P99)
		}
		own, gap := kubeProxyGap(c)
		_ = lat.AddRow(label, key, Int(c.Changes), msOf(dp50), msOf(dp99), Int(c.Unobserved),
			Int(int(kp.Programming.Count)), secMs(kp.Programming.Quantile(0.5)), secMs(kp.Programming.Quantile(0.99)), secMs(kp.Programming.Mean()),
			Int(kp.Matched), msOf(quantileOf(0.5, own)), msOf(quantileOf(0.99, own)), msOf(quantileOf(0.5, gap)), msOf(quantileOf(0.99, gap)),
			Int(kp.SeenBeforeSync))
		full, partial := Missing(), Missing()
		if kp.FullSyncs != nil {
			full = Int(int(kp.FullSyncs.Count))
		}
		if kp.PartialSyncs != nil {
			partial = Int(int(kp.PartialSyncs.Count))
		}
		w50, w99 := math.NaN(), math.NaN()
		if kp.WriteLatency.Count > 0 {
			w50, w99 = float64(kp.WriteLatency.P50), float64(kp.WriteLatency.P99)
		}
		_ = cost.AddRow(label, key, Int(int(kp.Syncs.Count)), full, partial, secMs(kp.Syncs.Mean()), secMs(kp.Syncs.Quantile(0.99)),
			Num(float64(kp.CPUNs)/1e9, "%.2f"), Num(float64(kp.ChildCPUNs)/1e9, "%.2f"), Num(float64(kp.PeakRSSBytes)/(1<<20), "%.1f"),
			msOf(w50), msOf(w99), Int(kp.WriteErrors))
		for _, n := range []string{kp.PerChange, kp.WriteError, kp.Unsettled} {
			if n != "" {
				lat.Notes = appendNote(lat.Notes, label+": "+n)
			}
		}
	}
	return []Section{lat, cost}
}

// appendNote appends n to notes unless it is there.
func appendNote(notes []string, n string) []string {
	if containsString(notes, n) {
		return notes
	}
	return append(notes, n)
}

// SyncFailure is one failed sync of a churn phase and its recovery.
type SyncFailure struct {
	Index int    `json:"index"` // in ChurnResult.Syncs
	AtNs  int64  `json:"atNs"`  // when it started, from the phase start
	Kind  string `json:"kind"`  // full or incremental
	Err   string `json:"error"`
	// RecoveredNs is from the failed sync's start to the end of the next
	// successful sync (-1: none succeeded before the phase ended): how
	// long the data plane served the rules of the last good sync, stale
	// for every change made meanwhile. RecoveryKind is that sync's kind
	// (full, as kube-proxy forces after a failure).
	RecoveredNs  int64  `json:"recoveredNs"`
	RecoveryKind string `json:"recoveryKind,omitempty"`
	// Changes made in that window; ProbeConns and ProbeErrors are the
	// probe connections made in it and how many of them failed.
	Changes     int `json:"changes"`
	ProbeConns  int `json:"probeConns"`
	ProbeErrors int `json:"probeErrors"`
}

// ChurnSample is one change and its programming latency (-1 when
// unobserved). KubeProxyNs, for a kube-proxy row, is kube-proxy's own
// programming latency of the change: its log's "Network programming"
// line for the change's service whose trigger time is the change's (0:
// none matched, e.g. a service deletion, which kube-proxy does not time).
type ChurnSample struct {
	Kind        string `json:"kind"`
	AtNs        int64  `json:"atNs"` // offset from the phase start
	LatencyNs   int64  `json:"latencyNs"`
	KubeProxyNs int64  `json:"kubeProxyNs,omitempty"`
	// NodeLatencyNs, when the probes followed the change on several
	// nodes (ChurnResult.ProbeNodes), is its latency on each of them (-1:
	// not shown there); LatencyNs is then the slowest node's.
	NodeLatencyNs []int64 `json:"nodeLatencyNs,omitempty"`
	// Probes, of an unobserved change (LatencyNs -1) only, counts the
	// probes made after it by outcome: what the data plane showed instead.
	Probes *ProbeCounts `json:"probes,omitempty"`
}

// ProbeCounts counts probe connections of one change by outcome
// (observe.Observation): Hits landed on the change's endpoint (for a
// service create or delete: reached any), Elsewhere on another endpoint,
// Failed on none.
type ProbeCounts struct {
	Hits      int `json:"hits"`
	Elsewhere int `json:"elsewhere"`
	Failed    int `json:"failed"`
}

// SyncRecord is one sync of the loop, at an offset from the phase start.
type SyncRecord struct {
	AtNs int64 `json:"atNs"`
	measure.SyncStats
	Err string `json:"error,omitempty"`
}

// Bucket is a cumulative histogram bucket: Count observations <= LE
// seconds ("+Inf" for all).
type Bucket struct {
	LE    string `json:"le"`
	Count int    `json:"count"`
}

// ProgrammingBuckets are kube-proxy's network_programming_duration_seconds
// bucket bounds (pkg/proxy/metrics): 0.25 s, 0.5 s, 1..59 s by 1 s,
// 60..115 s by 5 s, 120..300 s by 30 s.
func ProgrammingBuckets() []float64 {
	b := []float64{0.25, 0.5}
	for s := 1; s <= 59; s++ {
		b = append(b, float64(s))
	}
	for s := 60; s <= 115; s += 5 {
		b = append(b, float64(s))
	}
	for s := 120; s <= 300; s += 30 {
		b = append(b, float64(s))
	}
	return b
}

// SyncBucketBounds are kube-proxy's sync_proxy_rules_duration_seconds
// bounds: 1 ms doubling 15 times, to 16.384 s.
func SyncBucketBounds() []float64 {
	b := make([]float64, 15)
	v := 0.001
	for i := range b {
		b[i] = v
		v *= 2
	}
	return b
}

// BucketCounts counts samples (ns) into cumulative buckets with the given
// upper bounds (seconds), plus "+Inf".
func BucketCounts(samplesNs []int64, bounds []float64) []Bucket {
	out := make([]Bucket, len(bounds)+1)
	for i, b := range bounds {
		out[i].LE = strconv.FormatFloat(b, 'f', -1, 64)
		for _, s := range samplesNs {
			if float64(s)/1e9 <= b {
				out[i].Count++
			}
		}
	}
	out[len(bounds)] = Bucket{LE: "+Inf", Count: len(samplesNs)}
	return out
}

// writeChurnMarkdown appends the sync.incremental table and, for runs with
// churn, programming latency and the syncs of the loop per mode and
// minSyncPeriod.
func writeChurnMarkdown(b *strings.Builder, r *Result) {
	any := false
	for _, m := range r.Modes {
		any = any || len(m.SyncIncremental) > 0
	}
	if any {
		b.WriteString("\n### sync.incremental: one endpoint changed, at N services\n\n")
		b.WriteString("Builtin rows: the Sync call to its rules in the kernel. kube-proxy rows: from the EndpointSlice update request sent (its API round trip included) until kube-proxy finished the sync that programmed it.\n\n")
		b.WriteString("| mode | n | wall p50 | wall max | vs sync.full p50 | objects | bytes |\n|---|--:|--:|--:|--:|--:|--:|\n")
		for _, m := range r.Modes {
			s := m.SyncIncrementalSummary
			if s.Count == 0 {
				continue
			}
			ratio := "-"
			if f := m.SyncFullSummary.P50; f > 0 {
				ratio = fmt.Sprintf("%.3f×", float64(s.P50)/float64(f))
			}
			// Objects and bytes as the sync.full table shows them: "-"
			// where not measured (kube-proxy rows' incremental syncs).
			objs, bytes, _ := syncObjects(m, m.SyncIncremental[len(m.SyncIncremental)-1])
			fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s | %s |\n", r.label(m), s.Count, dur(time.Duration(s.P50)), dur(time.Duration(s.Max)), ratio, objs, bytes)
		}
	}
	any = false
	for _, m := range r.Modes {
		any = any || len(m.Churn) > 0
	}
	if !any {
		return
	}
	b.WriteString("\n### programming.latency under churn: change → first connection through the VIP that shows it\n\n")
	b.WriteString("| mode | minSyncPeriod | changes | observed | p50 | p90 | p99 | max | ≤1 s (observations) | syncs (full/incr.) | incr. sync p50 | sync CPU | phase CPU |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, m := range r.Modes {
		for _, c := range m.Churn {
			l := c.Latency
			le1 := 0
			for _, bk := range c.LatencyBuckets {
				if bk.LE == "1" {
					le1 = bk.Count
				}
			}
			full, inc := 0, 0
			for _, s := range c.Syncs {
				if s.Kind == "full" {
					full++
				} else {
					inc++
				}
			}
			fmt.Fprintf(b, "| %s | %s | %d | %d | %s | %s | %s | %s | %d | %d/%d | %s | %s | %s |\n", r.label(m),
				time.Duration(c.MinSyncPeriodNs), c.Changes, c.Observed, ms(l.P50), ms(l.P90), ms(l.P99), ms(l.Max), le1,
				full, inc, dur(time.Duration(c.SyncSummary["incremental"].P50)), dur(time.Duration(c.SyncCPUNs)), dur(time.Duration(c.CPUNs)))
		}
	}
	writeSyncFailures(b, r)
	writeUnobserved(b, r)
	b.WriteString("\nLatencies in ms; `≤1 s` counts observations in kube-proxy's network_programming_duration_seconds bucket le=\"1\" (one per change, or per change and node in the sim). A removal is observed at the first connection after the last one that still lands on the removed endpoint.\n")
}

func ms(ns int64) string { return fmt.Sprintf("%.1f", float64(ns)/1e6) }

// writeSyncFailures lists the failed syncs of every churn phase with
// their recovery: how long the data plane served stale rules, the changes
// made meanwhile and what the probes saw.
func writeSyncFailures(b *strings.Builder, r *Result) {
	any := false
	for _, m := range r.Modes {
		for _, c := range m.Churn {
			any = any || c.FailedSyncs > 0
		}
	}
	if !any {
		return
	}
	b.WriteString("\n#### failed syncs and recovery\n\n")
	b.WriteString("The run went on after each failed sync; the next sync was full, as in kube-proxy. `stale` is from the failed sync's start to the end of the next successful one: the data plane kept the last good sync's rules, stale for every change made meanwhile.\n\n")
	b.WriteString("| mode | minSyncPeriod | sync # | at | kind | stale (s) | recovered by | changes meanwhile | probe conns | probe errors | error |\n")
	b.WriteString("|---|--:|--:|--:|---|--:|---|--:|--:|--:|---|\n")
	for _, m := range r.Modes {
		for _, c := range m.Churn {
			var stale []int64
			for _, f := range c.Failures {
				rec := "not recovered"
				st := "-"
				if f.RecoveredNs >= 0 {
					rec = f.RecoveryKind + " sync"
					st = fmt.Sprintf("%.3f", float64(f.RecoveredNs)/1e9)
					stale = append(stale, f.RecoveredNs)
				}
				e := f.Err
				if len(e) > 120 {
					e = e[:120] + "…"
				}
				fmt.Fprintf(b, "| %s | %s | %d | %.3f s | %s | %s | %s | %d | %d | %d | %s |\n", r.label(m), time.Duration(c.MinSyncPeriodNs),
					f.Index+1, float64(f.AtNs)/1e9, f.Kind, st, rec, f.Changes, f.ProbeConns, f.ProbeErrors, strings.Join(strings.Fields(strings.ReplaceAll(e, "|", "/")), " "))
			}
			if len(stale) > 0 {
				s := Summarize(stale)
				fmt.Fprintf(b, "\n%s: %d of %d syncs failed; stale rules served for %s s in total, p50 %.3f s, max %.3f s per failure.\n\n",
					r.label(m), c.FailedSyncs, len(c.Syncs), fmt.Sprintf("%.3f", float64(sum(stale))/1e9), float64(s.P50)/1e9, float64(s.Max)/1e9)
			}
		}
	}
}

func sum(xs []int64) (t int64) {
	for _, x := range xs {
		t += x
	}
	return t
}

// writeUnobserved lists the changes of every churn phase that the probes
// never saw in the data plane within the phase and its grace, with what
// the probes after each saw instead: a removed endpoint that still
// answered (hits), or probes that failed.
func writeUnobserved(b *strings.Builder, r *Result) {
	head := false
	for _, m := range r.Modes {
		for _, c := range m.Churn {
			for _, s := range c.Samples {
				if s.LatencyNs >= 0 {
					continue
				}
				if !head {
					b.WriteString("\n#### changes not observed within the phase and its grace\n\n")
					b.WriteString("| mode | minSyncPeriod | change | at (s) | probes on its endpoint | elsewhere | failed |\n|---|--:|---|--:|--:|--:|--:|\n")
					head = true
				}
				p := ProbeCounts{}
				if s.Probes != nil {
					p = *s.Probes
				}
				fmt.Fprintf(b, "| %s | %s | %s | %.3f | %d | %d | %d |\n", r.label(m), time.Duration(c.MinSyncPeriodNs), s.Kind,
					float64(s.AtNs)/1e9, p.Hits, p.Elsewhere, p.Failed)
			}
		}
	}
}
