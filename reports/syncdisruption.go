package reports

import (
	"fmt"
	"strings"
	"time"
)

// SyncWindow is what probes connecting to a fixed set of services saw
// while one sync ran (kubernetes PR#139546: ClusterIP traffic stalls during
// a cold nftables full sync). A connection counts in the window when it
// started between the sync's start and end.
type SyncWindow struct {
	// Kind is "full (cold start)": a new proxier's first sync on a node
	// without rules, as on a node that joins while the services exist;
	// "full (restart)": a new proxier's first sync over the rules of the
	// previous one, as kube-proxy after a restart; or "incremental": one
	// endpoint moved.
	Kind string `json:"kind"`
	// SyncNs is the sync's wall time; Objects what it programmed.
	SyncNs  int64 `json:"syncNs"`
	Objects int   `json:"objects"`
	// Attempts, Failed (error or timeout) and Slow (connect time above
	// SlowAbove) count the connections started in the window; MaxNs is the
	// longest connect time of those that succeeded, FailedSamples up to 3
	// errors.
	Attempts      int           `json:"attempts"`
	Failed        int           `json:"failed"`
	Slow          int           `json:"slow"`
	SlowAbove     time.Duration `json:"slowAboveNs"`
	MaxNs         int64         `json:"maxNs"`
	FailedSamples []string      `json:"failedSamples,omitempty"`
	// BeforeAttempts and BeforeFailed count the connections of the second
	// before the sync (the baseline).
	BeforeAttempts int `json:"beforeAttempts"`
	BeforeFailed   int `json:"beforeFailed"`
	// P50Ns and P99Ns are the median and 99th percentile connect times of
	// the connections started in the window that succeeded (0: none).
	P50Ns int64 `json:"p50Ns,omitempty"`
	P99Ns int64 `json:"p99Ns,omitempty"`
	// For a full sync (cold start or restart): StartNs is when the new
	// proxier started, from the window's start (a restart's window begins
	// with the old one being stopped; for kube-proxy the new process's
	// fork, after its --version check, with the control plane and every
	// API object already there). Probed is the number of services probed
	// (spread over the list, the first and the last included), Answered
	// how many answered from the new proxier's start until
	// syncDisruption.settle after the sync, and FirstAnswerNs /
	// LastAnswerNs when the first and the last of them first answered
	// from the new proxier's start (-1: none / not every one). After a
	// restart the old rules answer from the start: then these say only
	// that traffic kept flowing.
	StartNs       int64 `json:"startNs,omitempty"`
	Probed        int   `json:"probed,omitempty"`
	Answered      int   `json:"answered,omitempty"`
	FirstAnswerNs int64 `json:"firstAnswerNs,omitempty"`
	LastAnswerNs  int64 `json:"lastAnswerNs,omitempty"`
	// ProxyMetricNs is the proxy's own account of the sync (kube-proxy
	// rows: its first sync's kubeproxy_sync_proxy_rules_duration_seconds),
	// ProxySyncEndNs when that sync ended by its own clock
	// (kubeproxy_sync_proxy_rules_last_timestamp_seconds), from the new
	// process's start; 0 for builtin rows.
	ProxyMetricNs  int64 `json:"proxyMetricNs,omitempty"`
	ProxySyncEndNs int64 `json:"proxySyncEndNs,omitempty"`
}

func writeSyncDisruptionMarkdown(b *strings.Builder, r *Result) {
	have := false
	for _, m := range r.Modes {
		have = have || len(m.SyncDisruption) > 0
	}
	if !have {
		return
	}
	b.WriteString("\n### traffic during syncs (probes to a fixed set of services)\n\n")
	b.WriteString("Connections started while the sync ran: attempts, failed (error or timeout), slow (connect above the threshold), median / 99th percentile / longest successful connect; the second before the sync as baseline. For a full sync (cold start, restart): when the first and the last probed service first answered, from the new proxier's start (kube-proxy: its process start, control plane and API objects already there; \"start\" is that moment from the window's start, which for a restart includes stopping the old one); the sync wall is from that start too. kube-proxy's own account: its first sync's duration by its metric / when it ended by its own timestamp, from its start.\n\n")
	b.WriteString("| mode | services | sync | start | sync wall | kube-proxy's own: sync / end | objects | first / last answer (answered) | attempts | failed | slow | p50 / p99 / max connect | before: attempts / failed | errors seen |\n")
	b.WriteString("|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, m := range r.Modes {
		name := m.Mode
		if m.Kernel == "uml" {
			name += " (uml)"
		}
		for _, w := range m.SyncDisruption {
			errs := strings.Join(w.FailedSamples, "; ")
			if errs == "" {
				errs = "-"
			}
			start, own := "-", "-"
			if w.Probed > 0 {
				start = fmt.Sprintf("%.3f s", float64(w.StartNs)/1e9)
			}
			if w.ProxyMetricNs > 0 {
				own = fmt.Sprintf("%.3f s / %.3f s", float64(w.ProxyMetricNs)/1e9, float64(w.ProxySyncEndNs)/1e9)
			}
			objs := "-" // not measured (0)
			if w.Objects > 0 {
				objs = fmt.Sprint(w.Objects)
			}
			fmt.Fprintf(b, "| %s | %d | %s | %s | %.3f s | %s | %s | %s | %d | %d | %d (> %s) | %s | %d / %d | %s |\n",
				name, m.Services, w.Kind, start, float64(w.SyncNs)/1e9, own, objs, answerCell(w), w.Attempts, w.Failed, w.Slow, w.SlowAbove,
				connectCell(w), w.BeforeAttempts, w.BeforeFailed, errs)
		}
	}
}

// connectCell is "p50 / p99 / max ms" of the window's successful
// connects, "(none succeeded)" when none did (its percentiles are not
// measured, not 0).
func connectCell(w SyncWindow) string {
	if w.Attempts == 0 {
		return "-"
	}
	if w.Attempts-w.Failed <= 0 {
		return "(none succeeded)"
	}
	return fmt.Sprintf("%.1f / %.1f / %.1f ms", float64(w.P50Ns)/1e6, float64(w.P99Ns)/1e6, float64(w.MaxNs)/1e6)
}

// answerCell is "first / last (answered/probed)" of a full sync's window,
// "-" for an incremental one.
func answerCell(w SyncWindow) string {
	if w.Probed == 0 {
		return "-"
	}
	sec := func(ns int64) string {
		if ns < 0 {
			return "never"
		}
		return fmt.Sprintf("%.3f s", float64(ns)/1e9)
	}
	return fmt.Sprintf("%s / %s (%d/%d)", sec(w.FirstAnswerNs), sec(w.LastAnswerNs), w.Answered, w.Probed)
}

// PhaseSyncDisruption is the sync-disruption phase's name (scenario block
// syncDisruption) in Section.Phase.
const PhaseSyncDisruption = "syncDisruption"

// SyncDisruptionSection is the sync-disruption phase's section for one
// result row (label: the ModeResult's row label, e.g. "nftables
// (kube-proxy)"): one row per window of ws, keyed by the sync's kind,
// with writeSyncDisruptionMarkdown's figures: the new proxier's start,
// the sync's wall time and kube-proxy's own account of it (s), the
// objects programmed, the first and last probed service's first answer
// (s; "never" has no value) with answered/probed, the window's attempts,
// failed and slow connections, the slow threshold and the successful
// connects' p50/p99/max (ms; "none succeeded" has no value), the second
// before as baseline and the errors seen. A figure the window did not
// measure (an incremental sync's answers, a builtin row's kube-proxy
// account, objects 0) is Missing, never 0.
func SyncDisruptionSection(label string, ws []SyncWindow) Section {
	s := Section{Phase: PhaseSyncDisruption, Title: "traffic during syncs (probes to a fixed set of services)", Scope: "row",
		Intro: "Connections started while the sync ran: attempts, failed (error or timeout), slow (connect above the threshold), " +
			"median / 99th percentile / longest successful connect; the second before the sync as baseline. For a full sync " +
			"(cold start, restart): when the first and the last probed service first answered, from the new proxier's start " +
			"(start: that moment from the window's start); the sync wall is from that start too. kube-proxy's own account: its " +
			"first sync's duration by its metric and when it ended by its own timestamp, from its start.",
		Columns: []Column{
			{Name: "sync", Key: true},
			{Name: "start", Unit: "s", Figure: "start"},
			{Name: "sync wall", Unit: "s", Figure: "sync.wall"},
			{Name: "kube-proxy's own sync", Unit: "s", Figure: "kubeproxy.sync"},
			{Name: "kube-proxy's own sync end", Unit: "s", Figure: "kubeproxy.sync.end"},
			{Name: "objects", Unit: "count", Figure: "objects"},
			{Name: "first answer", Unit: "s", Figure: "answer.first"},
			{Name: "last answer", Unit: "s", Figure: "answer.last"},
			{Name: "answered", Unit: "count", Figure: "answered"},
			{Name: "probed", Unit: "count", Figure: "probed"},
			{Name: "attempts", Unit: "count", Figure: "attempts"},
			{Name: "failed", Unit: "count", Figure: "failed"},
			{Name: "slow", Unit: "count", Figure: "slow"},
			{Name: "slow above", Unit: "ms", Figure: "slow.above"},
			{Name: "connect p50", Unit: "ms", Figure: "connect.p50"},
			{Name: "connect p99", Unit: "ms", Figure: "connect.p99"},
			{Name: "connect max", Unit: "ms", Figure: "connect.max"},
			{Name: "before: attempts", Unit: "count", Figure: "before.attempts"},
			{Name: "before: failed", Unit: "count", Figure: "before.failed"},
			{Name: "errors seen"},
		}}
	sec := func(ns int64) Cell { return Num(float64(ns)/1e9, "%.3f") }
	for _, w := range ws {
		start, answered, probed := Missing(), Missing(), Missing()
		first, last := Missing(), Missing()
		if w.Probed > 0 {
			start, answered, probed = sec(w.StartNs), Int(w.Answered), Int(w.Probed)
			answer := func(ns int64) Cell {
				if ns < 0 {
					return Text("never")
				}
				return sec(ns)
			}
			first, last = answer(w.FirstAnswerNs), answer(w.LastAnswerNs)
		}
		own, ownEnd := Missing(), Missing()
		if w.ProxyMetricNs > 0 {
			own, ownEnd = sec(w.ProxyMetricNs), sec(w.ProxySyncEndNs)
		}
		objs := Missing()
		if w.Objects > 0 {
			objs = Int(w.Objects)
		}
		p50, p99, maxc := Missing(), Missing(), Missing()
		switch {
		case w.Attempts == 0:
		case w.Attempts-w.Failed <= 0:
			p50, p99, maxc = Text("none succeeded"), Text("none succeeded"), Text("none succeeded")
		default:
			msc := func(ns int64) Cell { return Num(float64(ns)/1e6, "%.1f") }
			p50, p99, maxc = msc(w.P50Ns), msc(w.P99Ns), msc(w.MaxNs)
		}
		errs := Missing()
		if len(w.FailedSamples) > 0 {
			errs = Text(strings.Join(w.FailedSamples, "; "))
		}
		s.Rows = append(s.Rows, SectionRow{Row: label, Cells: []Cell{Text(w.Kind), start, sec(w.SyncNs), own, ownEnd, objs, first, last,
			answered, probed, Int(w.Attempts), Int(w.Failed), Int(w.Slow), Num(float64(w.SlowAbove)/1e6, "%g"), p50, p99, maxc,
			Int(w.BeforeAttempts), Int(w.BeforeFailed), errs}})
	}
	return s
}
