package reports

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Monitoring is what a kube-proxy row's Prometheus saw (scenario block
// monitoring, alerts:): the server that scraped the row's kube-proxy, and
// what its own rule evaluation gave, read back from its HTTP API after the
// row. Prometheus evaluated every rule; nothing here re-computes PromQL.
type Monitoring struct {
	// Prometheus is the server's version (its build info).
	Prometheus string `json:"prometheus,omitempty"`
	// TSDB is the server's data folder, kept beside the result (a
	// `prometheus --storage.tsdb.path` opens it again).
	TSDB string `json:"tsdb,omitempty"`
	// RuleFile is the rule file (alerts:), as named; RulesLoaded the
	// rules Prometheus ran (for: and windows scaled by TimeScale).
	RuleFile    string `json:"ruleFile,omitempty"`
	RulesLoaded string `json:"rulesLoaded,omitempty"`
	// IntervalSeconds is the scrape and evaluation interval; TimeScale
	// the factor applied to every for: and range window (1: as written).
	IntervalSeconds float64 `json:"intervalSeconds"`
	TimeScale       float64 `json:"timeScale"`
	// Started and Ended bound the server's life in the row (the queries'
	// range); Restarts counts the servers after the first (each control
	// plane of the row has its own, on the same TSDB).
	Started  time.Time `json:"started"`
	Ended    time.Time `json:"ended"`
	Restarts int       `json:"restarts,omitempty"`
	// CPUSeconds is the CPU time of the row's Prometheus servers (user +
	// system), beside kube-proxy's own in the row's record.
	CPUSeconds float64 `json:"cpuSeconds,omitempty"`
	// HoldSeconds is monitoring.hold: how long the row stayed up after
	// its last phase before the read-back.
	HoldSeconds float64 `json:"holdSeconds,omitempty"`
	// LiveOnly: a builtin row's server, which scraped proxybench's own
	// live metrics alone and ran no rules (the rule file reads
	// kube-proxy's series, which a builtin row has not).
	LiveOnly bool `json:"liveOnly,omitempty"`
	// Targets are the scraped targets: the row's kube-proxy (job
	// kube-proxy) and proxybench's own metrics (job proxybench).
	Targets []MonitoredTarget `json:"targets,omitempty"`
	// Alerts has one entry per alerting rule and label set it was active
	// with, and one (State "inactive") per alerting rule never active.
	Alerts []AlertOutcome `json:"alerts,omitempty"`
	// Records has one entry per recording rule series.
	Records []RecordOutcome `json:"records,omitempty"`
	// Unhealthy are rules Prometheus reported with an evaluation error
	// ("KubeProxyDown: <lastError>").
	Unhealthy []string `json:"unhealthy,omitempty"`
	// Missing are the metric names a rule reads that the TSDB held no
	// series of after the row ("ServiceEndpointsDown (line 31):
	// kube_endpoint_address_available").
	Missing []string `json:"missing,omitempty"`
	// Error, when set, says why the evaluation is incomplete.
	Error string `json:"error,omitempty"`
}

// MonitoredTarget is one scrape target: Instance (address), its labels
// job and node, how many scrapes Prometheus recorded (samples of up) and
// how many of them succeeded (up == 1).
type MonitoredTarget struct {
	Job      string `json:"job"`
	Instance string `json:"instance"`
	Node     string `json:"node,omitempty"`
	Scrapes  int    `json:"scrapes"`
	Up       int    `json:"up"`
}

// AlertOutcome is one alert (an alerting rule with one label set) over
// the row.
type AlertOutcome struct {
	Alert string `json:"alert"`
	// Labels are the alert's labels but alertname and alertstate.
	Labels map[string]string `json:"labels,omitempty"`
	Line   int               `json:"line,omitempty"`
	// For and Expr are as Prometheus ran them (scaled).
	For  string `json:"for,omitempty"`
	Expr string `json:"expr"`
	// State is "firing" (it fired at least once), "pending" (active, its
	// for: never passed) or "inactive" (never active).
	State string `json:"state"`
	// PendingAt is when it became active (ALERTS_FOR_STATE), FiredAt its
	// first firing evaluation, ResolvedAt when it was inactive again
	// before the row ended (after firing, or pending only; nil: active at
	// the end, or never active).
	PendingAt  *time.Time `json:"pendingAt,omitempty"`
	FiredAt    *time.Time `json:"firedAt,omitempty"`
	ResolvedAt *time.Time `json:"resolvedAt,omitempty"`
	// FiringSeconds is the time it was firing (samples × interval).
	FiringSeconds float64 `json:"firingSeconds,omitempty"`
	// Value is the expression's value when it fired (when it became
	// active, for a pending one), Peak its largest while active; both by
	// a range query of the expression at the evaluation interval.
	Value *float64 `json:"value,omitempty"`
	Peak  *float64 `json:"peak,omitempty"`
}

// RecordOutcome is one series of a recording rule over the row.
type RecordOutcome struct {
	Record string            `json:"record"`
	Labels map[string]string `json:"labels,omitempty"`
	Line   int               `json:"line,omitempty"`
	Expr   string            `json:"expr"`
	// Samples counts the series' samples (NaN ones included: a quantile
	// of a histogram with no observations in the window); Values the
	// numeric ones, summarised by Last (at LastAt), Min and Max.
	Samples int        `json:"samples"`
	Values  int        `json:"values"`
	Last    *float64   `json:"last,omitempty"`
	LastAt  *time.Time `json:"lastAt,omitempty"`
	Min     *float64   `json:"min,omitempty"`
	Max     *float64   `json:"max,omitempty"`
}

// MonitoringPhase names the section of the alerts phase.
const MonitoringPhase = "alerts"

// MonitoringSection is the report section of one row's Monitoring: one
// table row per alert and per recording rule series, times in seconds
// from the row's Prometheus start. Nil when m is nil.
func MonitoringSection(label string, m *Monitoring) []Section {
	if m == nil {
		return nil
	}
	s := Section{Phase: MonitoringPhase, Title: "alerts and recording rules (Prometheus)", Scope: "row",
		Intro: "Prometheus scraped each kube-proxy row's kube-proxy and proxybench's own live metrics and evaluated the rule file itself; " +
			"per row, which alerts fired, when (seconds from the row's Prometheus start) and at what value, and what the recording rules gave. " +
			"A builtin row's Prometheus scraped proxybench's live metrics alone, without the rules.",
		Columns: []Column{{Name: "rule"}, {Name: "kind"}, {Name: "labels"}, {Name: "state"},
			{Name: "active at", Unit: "s", Figure: "alert.active_at"}, {Name: "fired at", Unit: "s", Figure: "alert.fired_at"},
			{Name: "value", Figure: "rule.value"}, {Name: "peak / max", Figure: "rule.max"}, {Name: "detail"}}}
	rel := func(t *time.Time) Cell {
		if t == nil {
			return Missing()
		}
		return Num(t.Sub(m.Started).Seconds(), "%.0f")
	}
	num := func(v *float64) Cell {
		if v == nil {
			return Missing()
		}
		return Num(*v, "%.4g")
	}
	for _, a := range m.Alerts {
		detail := "for " + orDash(a.For)
		switch {
		case a.State == "firing" && a.ResolvedAt != nil:
			detail += fmt.Sprintf("; fired %.0f s, resolved at %.0f s", a.FiringSeconds, a.ResolvedAt.Sub(m.Started).Seconds())
		case a.State == "firing":
			detail += fmt.Sprintf("; firing at the end (%.0f s)", a.FiringSeconds)
		case a.State == "pending" && a.ResolvedAt != nil && a.PendingAt != nil:
			detail += fmt.Sprintf("; pending %.0f s, inactive again from %.0f s: its for: did not pass", a.ResolvedAt.Sub(*a.PendingAt).Seconds(), a.ResolvedAt.Sub(m.Started).Seconds())
		case a.State == "pending":
			detail += "; pending at the end: its for: did not pass while the row ran"
		default:
			detail += "; never active"
		}
		_ = s.AddRow(label, Text(a.Alert), Text("alert"), Text(labelText(a.Labels)), Text(a.State), rel(a.PendingAt), rel(a.FiredAt), num(a.Value), num(a.Peak), Text(detail))
	}
	for _, r := range m.Records {
		state := "no samples"
		if r.Values > 0 {
			state = "recorded"
		} else if r.Samples > 0 {
			state = "NaN only"
		}
		detail := fmt.Sprintf("%d samples, %d numeric; min %s", r.Samples, r.Values, num(r.Min).Text)
		_ = s.AddRow(label, Text(r.Record), Text("record"), Text(labelText(r.Labels)), Text(state), Missing(), Missing(), num(r.Last), num(r.Max), Text(detail))
	}
	rules := orDash(m.RuleFile)
	if m.LiveOnly {
		rules = "none (a builtin row: proxybench's own live metrics only)"
	}
	run := fmt.Sprintf("%s: Prometheus %s, every %gs, rules %s", label, orDash(m.Prometheus), m.IntervalSeconds, rules)
	if m.TimeScale != 1 && m.TimeScale != 0 {
		run += fmt.Sprintf(" with for: and range windows ×%g", m.TimeScale)
	}
	run += fmt.Sprintf(", ran %.0f s (%.1f s CPU)", m.Ended.Sub(m.Started).Seconds(), m.CPUSeconds)
	if m.HoldSeconds > 0 {
		run += fmt.Sprintf(", of which %.0f s held after the row's last phase (monitoring.hold)", m.HoldSeconds)
	}
	for _, t := range m.Targets {
		run += fmt.Sprintf("; %s %s: %d of %d scrapes up", t.Job, t.Instance, t.Up, t.Scrapes)
	}
	if m.TSDB != "" {
		run += "; TSDB " + m.TSDB
	}
	s.Notes = append(s.Notes, run)
	if len(m.Missing) > 0 {
		s.Notes = append(s.Notes, label+": no series of "+strings.Join(m.Missing, ", ")+" in the TSDB: those rules could not see them")
	}
	for _, u := range m.Unhealthy {
		s.Notes = append(s.Notes, label+": rule not healthy: "+u)
	}
	if m.Error != "" {
		s.Notes = append(s.Notes, label+": evaluation incomplete: "+m.Error)
	}
	return []Section{s}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// labelText writes labels as {a="x", b="y"}, sorted; "" for none.
func labelText(l map[string]string) string {
	if len(l) == 0 {
		return ""
	}
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, l[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
