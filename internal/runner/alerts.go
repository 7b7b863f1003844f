//go:build linux

package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/proxybench/proxybench/internal/monitoring"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
)

// alertsPhaseV is Prometheus in the loop (scenario block monitoring,
// alerts:) as a Phase: row-scoped and Final, so it runs after the row's
// other phases, also when one of them stopped the row, while the row's
// control plane and its Prometheus still run. It reads back what
// Prometheus's own rule evaluation gave over the row (monitoring.Evaluate)
// into ModeResult.Monitoring. A builtin row's Prometheus (rowPrometheus)
// scraped proxybench's own live metrics alone and ran no rules: its
// record has the targets and the TSDB, no alerts.
var alertsPhaseV = Phase{
	PhaseRule: scenarios.PhaseRule{Name: "alerts", Field: "monitoring", Scope: scenarios.ScopeRow,
		Wants:                 func(s *scenarios.Scenario) bool { return s.Monitored() },
		NotWithKubeProxyNodes: "the row's Prometheus scrapes node-0's kube-proxy only"},
	Run:   alertsPhase,
	Final: true,
	Report: func(label string, mr *reports.ModeResult) []reports.Section {
		return reports.MonitoringSection(label, mr.Monitoring)
	},
}

// prometheusHolder is a proxier that runs a Prometheus beside it
// (kubeproxy.Proxier with a Monitor).
type prometheusHolder interface {
	Prometheus() (srv *monitoring.Server, first time.Time, restarts int)
	PrometheusCPU() time.Duration
}

// rowServer is the row's Prometheus: a kube-proxy row's Proxier's, a
// builtin row's own (Row.prom); nil when the row has none.
func (r *Row) rowServer() prometheusHolder {
	if r.prom != nil {
		return r.prom
	}
	if ph, ok := r.Proxier.(prometheusHolder); ok {
		return ph
	}
	return nil
}

// alertsPhase evaluates node0's Prometheus (the row's; each node's
// kube-proxy has its own control plane and Prometheus, node0's is read;
// a builtin row's scrapes proxybench alone and runs no rules).
func alertsPhase(ctx context.Context, r *Row) error {
	ph := r.rowServer()
	if ph == nil {
		return nil
	}
	srv, first, restarts := ph.Prometheus()
	if srv == nil {
		return nil // not monitored, or its control plane never started
	}
	sc := r.Sc
	m := &reports.Monitoring{TSDB: srv.TSDB(), RuleFile: sc.Alerts, IntervalSeconds: sc.Monitoring.Interval.Seconds(),
		TimeScale: sc.Monitoring.TimeScale, Started: first, Restarts: restarts, LiveOnly: r.prom != nil}
	if m.LiveOnly {
		m.RuleFile, m.TimeScale = "", 1
	}
	r.Result.Monitoring = m
	rules := srv.Spec.Rules
	if rules == nil {
		rules = &monitoring.RuleSet{}
	} else {
		m.RulesLoaded = filepath.Join(srv.Spec.Dir, "rules.yaml")
	}
	// monitoring.hold: the row stays up (kube-proxy syncing every
	// syncPeriod, Prometheus evaluating) so for: can pass.
	// A builtin row's server runs no rules: nothing to hold for.
	if hold := sc.Monitoring.Hold.Duration; hold > 0 && !m.LiveOnly {
		prog := r.Progress()
		prog.Start(fmt.Sprintf("%s: monitoring.hold, kube-proxy and Prometheus running %v", r.Mode.Name, hold), 1)
		select {
		case <-ctx.Done():
		case <-time.After(hold):
		}
		prog.Done()
		if ctx.Err() != nil {
			return nil
		}
	}
	if !m.LiveOnly {
		m.HoldSeconds = sc.Monitoring.Hold.Seconds()
	}
	// A scrape of every target at least (a row shorter than Prometheus's
	// target discovery may have none yet), then one more evaluation after
	// the row's last phase, so its end is in.
	step := sc.Monitoring.Interval.Duration
	wctx, wcancel := context.WithTimeout(ctx, 15*time.Second+2*step)
	monitoring.WaitScraped(wctx, srv.Client, srv.ScrapeTargets(), first, step)
	wcancel()
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(step + step/2):
	}
	m.Ended = time.Now()
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	err := monitoring.Evaluate(qctx, srv.Client, rules, monitoring.Window{Start: first, End: m.Ended, Step: step}, m)
	if err != nil {
		m.Error = err.Error()
		r.Faults.add("alerts: reading Prometheus back: %v", err)
	}
	m.CPUSeconds = ph.PrometheusCPU().Seconds()
	return nil
}

// alertRules is what Preflight found of a scenario's alerts: the rules
// as written (Source) and as every row's Prometheus runs them (Run,
// scaled by monitoring.timeScale), with the warnings about metric names
// no row exports.
type alertRules struct {
	Source, Run *monitoring.RuleSet
	Warnings    []string
}

// loadAlerts checks, before anything is built, what a monitored scenario
// needs: prometheus and promtool on PATH, and its alerts: file, read
// (a rule file or a PrometheusRule) and judged by Prometheus's own
// promtool as written and as scaled. A rule file promtool refuses is an
// *InputError whose message has the file, line and promtool's words. Nil
// rules for a scenario that is not monitored.
func loadAlerts(ctx context.Context, sc *scenarios.Scenario, o Options) (*alertRules, error) {
	if !sc.Monitored() {
		return nil, nil
	}
	promtool, err := o.LookPath(monitoring.Promtool)
	if err != nil {
		return nil, &InputError{Field: "monitoring.prometheus", Msg: "Prometheus in the loop runs Debian's prometheus server and checks rules with its promtool, which are not on PATH",
			Fix: "run make setup (or apt-get install prometheus), or remove monitoring and alerts"}
	}
	if _, err := o.LookPath(monitoring.Binary); err != nil {
		return nil, &InputError{Field: "monitoring.prometheus", Msg: "Prometheus in the loop runs Debian's prometheus server, which is not on PATH",
			Fix: "run make setup (or apt-get install prometheus), or remove monitoring and alerts"}
	}
	out := &alertRules{Run: nil}
	if sc.Alerts == "" {
		return out, nil
	}
	rs, err := readAlerts(sc)
	if err != nil {
		return nil, &InputError{Field: "alerts", Msg: err.Error(), Fix: "give a Prometheus rule file (groups: [{name, rules}]) or a PrometheusRule object (spec.groups)"}
	}
	if err := monitoring.Check(ctx, promtool, rs); err != nil {
		return nil, &InputError{Field: "alerts", Msg: "Prometheus refuses the rules (promtool check rules): " + oneLine(err),
			Fix: "correct the rule at that line (promtool check rules " + rs.Path + " checks it)"}
	}
	out.Source, out.Run = rs, rs
	if f := sc.Monitoring.TimeScale; f != 1 && f != 0 {
		run, err := rs.Scale(f, 4*sc.Monitoring.Interval.Duration)
		if err == nil {
			err = monitoring.Check(ctx, promtool, run)
		}
		if err != nil {
			return nil, &InputError{Field: "monitoring.timeScale", Msg: fmt.Sprintf("the rules of %s scaled by %g: %s", rs.Path, f, oneLine(err)), Fix: "leave timeScale out (the rules as written)"}
		}
		out.Run = run
	}
	for _, u := range rs.Unexported(monitoring.RowExports) {
		out.Warnings = append(out.Warnings, fmt.Sprintf("alerts: %s:%d: %s reads %s, which no row exports (the rows' Prometheus scrapes kube-proxy, kubeproxy_*, go_*, process_*, rest_client_*, and proxybench's own live metrics, proxybench_*): it cannot fire here",
			rs.Path, u.Line, u.Rule, u.Metric))
	}
	return out, nil
}

// readAlerts reads sc's alerts file: a path as given (from the current
// folder), else beside the scenario file, else a rule file shipped in
// the binary (scenarios.EmbeddedAlerts: "seeds", "scenarios/alerts/seeds.yaml").
func readAlerts(sc *scenarios.Scenario) (*monitoring.RuleSet, error) {
	p := sc.Alerts
	if _, err := os.Stat(p); err == nil {
		return monitoring.Read(p)
	}
	if src := sc.Source(); src != "" && !filepath.IsAbs(p) {
		if q := filepath.Join(filepath.Dir(src), p); fileExists(q) {
			return monitoring.Read(q)
		}
	}
	if data, file, ok := scenarios.EmbeddedAlerts(p); ok {
		return monitoring.Parse(file, data)
	}
	return nil, fmt.Errorf("%s: no such file (looked in the current folder and beside the scenario) and no rule file of that name shipped (scenarios/alerts: seeds)", p)
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// oneLine joins a joined error's lines with "; ".
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

// monitor is the kube-proxy rows' Prometheus (nil when sc is not
// monitored), scraping live too (proxybench's own metrics; nil: not).
func monitor(sc *scenarios.Scenario, ar *alertRules, live *monitoring.Live) *kubeproxy.Monitor {
	if !sc.Monitored() || ar == nil {
		return nil
	}
	m := &kubeproxy.Monitor{Interval: sc.Monitoring.Interval.Duration, Rules: ar.Run}
	if live != nil {
		m.Live = live.Handler()
	}
	return m
}
