package monitoring

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/proxybench/proxybench/reports"
)

// Window is the time range a row's Prometheus ran over and its
// evaluation interval (the range queries' step).
type Window struct {
	Start, End time.Time
	Step       time.Duration
}

// WaitScraped waits until Prometheus has scraped every target once
// (each has an up sample), or ctx ends: Prometheus applies a new target
// up to 5 s after its configuration is reloaded (its discovery manager's
// update period), so a row shorter than that may have no scrape yet.
func WaitScraped(ctx context.Context, c *Client, targets int, since time.Time, step time.Duration) {
	for ctx.Err() == nil {
		up, err := c.QueryRange(ctx, "up", since, time.Now(), step)
		if err == nil && len(up) >= targets {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Evaluate reads back from Prometheus (c) what the rules of rs (as the
// server ran them) did over w: every alert's pending and firing times
// (ALERTS, ALERTS_FOR_STATE) and its expression's value when it fired,
// every recording rule's series, the targets' scrapes (up), the rules
// Prometheus reports unhealthy, and the metric names rules read that the
// TSDB has no series of. It fills m (Alerts, Records, Targets, Unhealthy,
// Missing, Prometheus); each query that fails is named in the returned
// error and the rest is still filled.
func Evaluate(ctx context.Context, c *Client, rs *RuleSet, w Window, m *reports.Monitoring) error {
	var errs []error
	if m.Started.IsZero() {
		m.Started = w.Start
	}
	if m.Ended.IsZero() {
		m.Ended = w.End
	}
	if v, err := c.Version(ctx); err == nil {
		m.Prometheus = v
	} else {
		errs = append(errs, err)
	}
	if up, err := c.QueryRange(ctx, "up", w.Start, w.End, w.Step); err == nil {
		m.Targets = targets(up)
	} else {
		errs = append(errs, err)
	}
	alerts, err := c.QueryRange(ctx, "ALERTS", w.Start, w.End, w.Step)
	if err != nil {
		errs = append(errs, err)
	}
	forState, err := c.QueryRange(ctx, "ALERTS_FOR_STATE", w.Start, w.End, w.Step)
	if err != nil {
		errs = append(errs, err)
	}
	for _, r := range rs.Alerts() {
		var exprSeries []Series
		if hasAlert(alerts, r.Alert) {
			if exprSeries, err = c.QueryRange(ctx, r.Expr, w.Start, w.End, w.Step); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", r.Alert, err))
			}
		}
		m.Alerts = append(m.Alerts, alertOutcomes(r, alerts, forState, exprSeries, w)...)
	}
	for _, name := range recordNames(rs) {
		series, err := c.QueryRange(ctx, fmt.Sprintf("{__name__=%q}", name), w.Start, w.End, w.Step)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		m.Records = append(m.Records, recordOutcomes(rs, name, series)...)
	}
	if st, err := c.Rules(ctx); err == nil {
		for _, r := range st {
			if r.Health != "" && r.Health != "ok" && r.Health != "unknown" {
				m.Unhealthy = append(m.Unhealthy, fmt.Sprintf("%s (%s): %s", r.Name, r.Health, r.LastError))
			}
		}
	} else {
		errs = append(errs, err)
	}
	if names, err := c.LabelValues(ctx, "__name__"); err == nil {
		for _, u := range rs.Unexported(func(n string) bool { return slices.Contains(names, n) }) {
			m.Missing = append(m.Missing, fmt.Sprintf("%s (line %d): %s", u.Rule, u.Line, u.Metric))
		}
	} else {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func hasAlert(alerts []Series, name string) bool {
	return slices.ContainsFunc(alerts, func(s Series) bool { return s.Labels["alertname"] == name })
}

// targets summarises up per target: scrapes and successful ones.
func targets(up []Series) []reports.MonitoredTarget {
	var out []reports.MonitoredTarget
	for _, s := range up {
		t := reports.MonitoredTarget{Job: s.Labels["job"], Instance: s.Labels["instance"], Node: s.Labels["node"], Scrapes: len(s.Samples)}
		for _, x := range s.Samples {
			if x.V == 1 {
				t.Up++
			}
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Instance < out[j].Instance })
	return out
}

// alertKey is an alert's labels without alertname and alertstate, as
// text: the identity of one alert of a rule.
func alertKey(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		if k != "alertname" && k != "alertstate" && k != "__name__" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q,", k, l[k])
	}
	return b.String()
}

func without(l map[string]string, drop ...string) map[string]string {
	out := map[string]string{}
	for k, v := range l {
		if !slices.Contains(drop, k) {
			out[k] = v
		}
	}
	return out
}

// alertOutcomes turns rule r's ALERTS and ALERTS_FOR_STATE series (every
// rule's, as queried) and its expression's series into one outcome per
// alert (label set), or one "inactive" outcome when it was never active.
func alertOutcomes(r Rule, alerts, forState, expr []Series, w Window) []reports.AlertOutcome {
	type acc struct {
		labels          map[string]string
		pending, firing []time.Time
		activeAt        *time.Time
	}
	byKey := map[string]*acc{}
	var order []string
	get := func(l map[string]string) *acc {
		k := alertKey(l)
		a, ok := byKey[k]
		if !ok {
			a = &acc{labels: without(l, "alertname", "alertstate", "__name__")}
			byKey[k] = a
			order = append(order, k)
		}
		return a
	}
	for _, s := range alerts {
		if s.Labels["alertname"] != r.Alert {
			continue
		}
		a := get(s.Labels)
		for _, x := range s.Samples {
			if s.Labels["alertstate"] == "firing" {
				a.firing = append(a.firing, x.T)
			} else {
				a.pending = append(a.pending, x.T)
			}
		}
	}
	for _, s := range forState {
		if s.Labels["alertname"] != r.Alert {
			continue
		}
		k := alertKey(s.Labels)
		a, ok := byKey[k]
		if !ok {
			continue
		}
		for _, x := range s.Samples {
			if x.V > 0 && !math.IsNaN(x.V) {
				t := time.Unix(0, int64(x.V*1e9)).UTC()
				if a.activeAt == nil || t.Before(*a.activeAt) {
					a.activeAt = &t
				}
			}
		}
	}
	if len(order) == 0 {
		return []reports.AlertOutcome{{Alert: r.Alert, Labels: r.Labels, Line: r.Line, For: r.For, Expr: r.Expr, State: "inactive"}}
	}
	var out []reports.AlertOutcome
	for _, k := range order {
		a := byKey[k]
		o := reports.AlertOutcome{Alert: r.Alert, Labels: a.labels, Line: r.Line, For: r.For, Expr: r.Expr, State: "pending"}
		first := func(ts []time.Time) *time.Time {
			if len(ts) == 0 {
				return nil
			}
			t := slices.MinFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
			return &t
		}
		o.PendingAt = a.activeAt
		if o.PendingAt == nil {
			o.PendingAt = first(append(slices.Clone(a.pending), a.firing...))
		}
		if fired := first(a.firing); fired != nil {
			o.State, o.FiredAt = "firing", fired
			o.FiringSeconds = float64(len(a.firing)) * w.Step.Seconds()
		}
		// Inactive again before the row ended (firing or only pending).
		if all := append(slices.Clone(a.pending), a.firing...); len(all) > 0 {
			last := slices.MaxFunc(all, func(a, b time.Time) int { return a.Compare(b) })
			if last.Before(w.End.Add(-2 * w.Step)) {
				t := last.Add(w.Step)
				o.ResolvedAt = &t
			}
		}
		// The expression's value: its series whose labels are the
		// alert's without the rule's own labels.
		want := alertKey(without(a.labels, keysOf(r.Labels)...))
		at := o.FiredAt
		if at == nil {
			at = o.PendingAt
		}
		// The value is the sample nearest to when it fired (became
		// active): the range query's grid is the rules' interval, not
		// their evaluation instants, so the sample at that instant may be
		// just past the expression's end.
		var nearest time.Duration = -1
		for _, s := range expr {
			if alertKey(without(s.Labels, keysOf(r.Labels)...)) != want {
				continue
			}
			for _, x := range s.Samples {
				if math.IsNaN(x.V) || (o.PendingAt != nil && x.T.Before(o.PendingAt.Add(-w.Step))) {
					continue
				}
				if o.Peak == nil || x.V > *o.Peak {
					v := x.V
					o.Peak = &v
				}
				if at == nil {
					continue
				}
				d := x.T.Sub(*at)
				if d < 0 {
					d = -d
				}
				if nearest < 0 || d < nearest {
					v := x.V
					o.Value, nearest = &v, d
				}
			}
		}
		out = append(out, o)
	}
	return out
}

func keysOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// recordNames are the record names of rs, once each, in file order.
func recordNames(rs *RuleSet) []string {
	var out []string
	for _, r := range rs.Records() {
		if !slices.Contains(out, r.Record) {
			out = append(out, r.Record)
		}
	}
	return out
}

// recordOutcomes gives one outcome per recording rule of name (by its
// static labels) and series; a rule with no series gives one with no
// samples.
func recordOutcomes(rs *RuleSet, name string, series []Series) []reports.RecordOutcome {
	var out []reports.RecordOutcome
	for _, r := range rs.Records() {
		if r.Record != name {
			continue
		}
		found := false
		for _, s := range series {
			if !subset(r.Labels, s.Labels) || !mostSpecific(rs, name, r, s.Labels) {
				continue
			}
			found = true
			o := reports.RecordOutcome{Record: name, Labels: without(s.Labels, "__name__"), Line: r.Line, Expr: r.Expr, Samples: len(s.Samples)}
			for _, x := range s.Samples {
				if math.IsNaN(x.V) || math.IsInf(x.V, 0) {
					continue
				}
				o.Values++
				v, t := x.V, x.T
				o.Last, o.LastAt = &v, &t
				if o.Min == nil || v < *o.Min {
					o.Min = &v
				}
				if o.Max == nil || v > *o.Max {
					mx := v
					o.Max = &mx
				}
			}
			out = append(out, o)
		}
		if !found {
			out = append(out, reports.RecordOutcome{Record: name, Labels: r.Labels, Line: r.Line, Expr: r.Expr})
		}
	}
	return out
}

// subset says whether every label of want is in have with that value.
func subset(want, have map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// mostSpecific says whether r is, of the recording rules of name whose
// labels match l, the one with the most labels (so a series is given to
// one rule only).
func mostSpecific(rs *RuleSet, name string, r Rule, l map[string]string) bool {
	for _, o := range rs.Records() {
		if o.Record == name && subset(o.Labels, l) && len(o.Labels) > len(r.Labels) {
			return false
		}
	}
	return true
}
