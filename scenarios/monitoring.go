package scenarios

import (
	"embed"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// MonitoringSpec puts Prometheus in the loop of every row: in a
// kube-proxy row Debian's prometheus server runs inside the row's
// control-plane namespace (nothing listens in the root namespace),
// scrapes the row's kube-proxy over its node's link and proxybench's own
// live metrics at Interval, evaluates the scenario's Alerts, and keeps
// its TSDB in the row's folder beside the result; in a builtin row it
// runs in a namespace of its own and scrapes proxybench's live metrics
// alone (no rules: they read kube-proxy's series).
type MonitoringSpec struct {
	// Prometheus turns it on (alerts: does too).
	Prometheus bool `yaml:"prometheus,omitempty" json:"prometheus,omitempty"`
	// Interval is the scrape and rule evaluation interval (default 5s;
	// 1s to 5m).
	Interval Duration `yaml:"interval,omitempty" json:"interval,omitempty"`
	// TimeScale multiplies every alert's for: and every range window of
	// the rules' expressions (rate(x[5m]) with 0.1 is rate(x[30s]), at
	// least 4 intervals), for rows shorter than the rules' minutes
	// (default 1: the rules as written, and a row shorter than an alert's
	// for: can only show it pending). 0.01 to 10.
	TimeScale float64 `yaml:"timeScale,omitempty" json:"timeScale,omitempty"`
	// Hold keeps each monitored kube-proxy row running this long after
	// its last phase, before Prometheus is read back (default 0; at most
	// 1h): kube-proxy goes on with its periodic syncs (syncPeriod) and
	// Prometheus on scraping and evaluating, so an alert's for: can pass
	// in a row shorter than it (a 10k kube-proxy row lives under a
	// minute after kube-proxy's start).
	Hold Duration `yaml:"hold,omitempty" json:"hold,omitempty"`
}

// Monitored reports whether rows run Prometheus (monitoring.prometheus,
// or alerts).
func (s *Scenario) Monitored() bool { return s.Monitoring.Prometheus || s.Alerts != "" }

// SetMonitoringDefaults fills monitoring's defaults when it is on (after
// a command-line override turned it on: run --alerts).
func (s *Scenario) SetMonitoringDefaults() { s.monitoringDefaults() }

// monitoringDefaults fills monitoring's defaults when it is on.
func (s *Scenario) monitoringDefaults() {
	if !s.Monitored() {
		return
	}
	if s.Monitoring.Interval.Duration == 0 && !s.has("monitoring.interval") {
		s.Monitoring.Interval.Duration = 5 * time.Second
	}
	if s.Monitoring.TimeScale == 0 && !s.has("monitoring.timeScale") {
		s.Monitoring.TimeScale = 1
	}
}

// CheckMonitoring returns monitoring's and alerts' problems with s (the
// alerts phase's rule Check): the interval and time scale in range, and,
// with alerts, a kube-proxy row whose series the rules read
// (monitoring.prometheus alone also watches builtin rows: proxybench's
// own live metrics). The rule file itself is checked by
// Prometheus's promtool before a run (runner.Preflight).
func CheckMonitoring(s *Scenario) []*FieldError {
	if !s.Monitored() {
		return nil
	}
	var out []*FieldError
	if d := s.Monitoring.Interval.Duration; d < time.Second || d > 5*time.Minute {
		out = append(out, &FieldError{Field: "monitoring.interval", Msg: fmt.Sprintf("%v: want 1s to 5m", d), Fix: "write interval: 5s"})
	}
	if d := s.Monitoring.Hold.Duration; d < 0 || d > time.Hour {
		out = append(out, &FieldError{Field: "monitoring.hold", Msg: fmt.Sprintf("%v: want 0 to 1h", d), Fix: "write hold: 2m (or leave it out: no hold)"})
	}
	if f := s.Monitoring.TimeScale; f < 0.01 || f > 10 {
		out = append(out, &FieldError{Field: "monitoring.timeScale", Msg: fmt.Sprintf("%v: want 0.01 to 10", f), Fix: "write timeScale: 0.1 (for: 5m becomes 30s) or leave it out (1: the rules as written)"})
	}
	if s.Alerts != "" && !s.UsesKubeProxy() {
		out = append(out, &FieldError{Field: "alerts", Msg: "the rules are evaluated over kube-proxy's metrics, and no row runs kube-proxy (builtin rows' Prometheus scrapes proxybench's own live metrics, without rules)",
			Fix: "add implementation: [builtin, kube-proxy] (or run --implementation builtin,kube-proxy) with a mode kube-proxy has (iptables, ipvs, nftables)"})
	}
	return out
}

// monitoring adds CheckMonitoring's problems.
func (c *checker) monitoring() {
	for _, e := range CheckMonitoring(c.s) {
		c.add(e.Field, e.Msg, e.Fix)
	}
}

//go:embed alerts/*.yaml
var embeddedAlerts embed.FS

// EmbeddedAlerts returns a rule file shipped under scenarios/alerts/
// (embedded in the binary) named by name: "seeds", "seeds.yaml",
// "alerts/seeds.yaml" or "scenarios/alerts/seeds.yaml"; ok false when
// there is none of that name.
func EmbeddedAlerts(name string) (data []byte, file string, ok bool) {
	dir := filepath.Dir(name)
	if dir != "." && dir != "alerts" && dir != filepath.Join("scenarios", "alerts") {
		return nil, "", false
	}
	base := strings.TrimSuffix(filepath.Base(name), ".yaml") + ".yaml"
	b, err := embeddedAlerts.ReadFile("alerts/" + base)
	if err != nil {
		return nil, "", false
	}
	return b, "scenarios/alerts/" + base, true
}

// Source is the file the scenario came from ("" for one built in Go).
func (s *Scenario) Source() string { return s.source }
