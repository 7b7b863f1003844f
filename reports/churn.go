package reports

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/proxybench/proxybench/measure"
)

// ChurnResult is one churn phase of a mode: the changes made, the
// programming latency observed from the data plane for each, and every
// sync the mode's sync loop ran meanwhile.
type ChurnResult struct {
	MinSyncPeriodNs int64   `json:"minSyncPeriodNs"`
	SyncPeriodNs    int64   `json:"syncPeriodNs"`
	Rate            float64 `json:"rate"`
	DurationNs      int64   `json:"durationNs"`
	Arrival         string  `json:"arrival"`
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

// ChurnSample is one change and its programming latency (-1 when unobserved).
type ChurnSample struct {
	Kind      string `json:"kind"`
	AtNs      int64  `json:"atNs"` // offset from the phase start
	LatencyNs int64  `json:"latencyNs"`
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
