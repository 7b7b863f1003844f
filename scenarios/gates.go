package scenarios

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Gate is one pass/fail check on a measured figure, evaluated by `run`
// after the measurement (exit 1 when one fails). In YAML:
//
//	gates:
//	  - {figure: lookup.latency.p99, mode: iptables, position: last, op: "<", value: 2ms}
//	  - {figure: sync.full, op: "<", value: 5s}
//	  - {figure: fairness.jain, op: ">", value: 0.95}
//
// Mode, Position and Services narrow which measurements the gate checks;
// left empty, the gate checks every mode, every measured position (lookup
// and throughput figures) and every size of a sweep, and passes only when
// all of them pass.
type Gate struct {
	// Figure names the figure, one of GateFigures' keys.
	Figure string `yaml:"figure" json:"figure"`
	// Mode restricts the gate to one mode of the scenario.
	Mode string `yaml:"mode,omitempty" json:"mode,omitempty"`
	// Position restricts a lookup.* or throughput.cps gate to one of
	// traffic.positions; other figures have no position.
	Position string `yaml:"position,omitempty" json:"position,omitempty"`
	// Services restricts the gate to one size (services.count or a
	// sweep.services entry).
	Services int `yaml:"services,omitempty" json:"services,omitempty"`
	// Op compares the measured value to Value: <, <=, > or >=.
	Op string `yaml:"op" json:"op"`
	// Value is the threshold: a duration ("2ms") for time figures, a
	// number for the others.
	Value GateValue `yaml:"value" json:"value"`
}

// GateValue is a gate threshold written either as a Go duration ("2ms",
// "5s"; stored in nanoseconds) or as a plain number ("0.95").
type GateValue struct {
	// V is the threshold in the figure's unit (ns for durations).
	V float64
	// IsDuration is true when it was written with a time unit.
	IsDuration bool
	// Text is the value as written.
	Text string
}

// ParseGateValue reads "2ms", "5s" (durations) or "0.95", "1e3" (numbers).
func ParseGateValue(s string) (GateValue, error) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsInf(f, 0) {
			return GateValue{}, fmt.Errorf("%q is not a finite number", s)
		}
		return GateValue{V: f, Text: s}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return GateValue{V: float64(d), IsDuration: true, Text: s}, nil
	}
	return GateValue{}, fmt.Errorf("%q is neither a duration nor a number", s)
}

// String is the value as written.
func (v GateValue) String() string { return v.Text }

// UnmarshalYAML reads a scalar duration or number.
func (v *GateValue) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a duration such as \"2ms\" or a number such as 0.95", n.Line)
	}
	g, err := ParseGateValue(n.Value)
	if err != nil {
		// Validate reports it, with the gate's figure in the fix.
		g = GateValue{V: math.NaN(), Text: n.Value}
	}
	*v = g
	return nil
}

// MarshalYAML writes the value as written.
func (v GateValue) MarshalYAML() (any, error) { return v.Text, nil }

// MarshalJSON writes the value as written, as a JSON string.
func (v GateValue) MarshalJSON() ([]byte, error) { return json.Marshal(v.Text) }

// UnmarshalJSON reads a JSON string or number.
func (v *GateValue) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		s = string(b)
	}
	g, err := ParseGateValue(s)
	if err != nil {
		return err
	}
	*v = g
	return nil
}

// FigureKind says how a gate figure is measured and written.
type FigureKind struct {
	// Duration figures are in ns and gate values need a time unit.
	Duration bool
	// Positional figures exist per service position.
	Positional bool
	// Doc says what the figure is.
	Doc string
}

// GateFigures lists the figures a gate may name (docs/scenario.md,
// "Gates"). Every one is computed by reports.Figures from a saved result.
var GateFigures = map[string]FigureKind{
	"lookup.latency.p50":      {true, true, "median TCP connect time through the ClusterIP"},
	"lookup.latency.p90":      {true, true, "90th percentile connect time"},
	"lookup.latency.p99":      {true, true, "99th percentile connect time"},
	"lookup.latency.p999":     {true, true, "99.9th percentile connect time"},
	"lookup.latency.max":      {true, true, "slowest connect"},
	"lookup.vsnone.p50":       {false, true, "p50 connect time over mode none's p50 at the same position and size (1 = no overhead)"},
	"lookup.vsnone.p99":       {false, true, "p99 connect time over mode none's p99 at the same position and size"},
	"lookup.kernel.p50":       {true, true, "median node-kernel time of a new connection's SYN from netif_receive_skb to its input route lookup (ip_rcv, conntrack, the nat rule walk), measured by BPF"},
	"lookup.kernel.p90":       {true, true, "90th percentile of lookup.kernel"},
	"lookup.kernel.p99":       {true, true, "99th percentile of lookup.kernel"},
	"lookup.kernel.other.p50": {true, true, "median node-kernel time of the same connections' other packets (ACK, data, FIN, RST: conntrack hits), same bracket as lookup.kernel"},
	"lookup.kernel.other.p99": {true, true, "99th percentile of lookup.kernel.other"},
	"lookup.errors":           {false, true, "failed or misrouted connections"},
	"throughput.cps":          {false, true, "connections per second (closed loop, the scenario's concurrency)"},
	"sync.full":               {true, false, "median wall time of a full sync"},
	"sync.full.max":           {true, false, "slowest full sync"},
	"sync.full.cpu":           {true, false, "median CPU time of a full sync (the proxy's thread and rule programs, user+sys)"},
	"sync.full.vsraw":         {false, false, "median over repetitions of a full sync's wall time over the time its raw tool took on the same bytes (iptables-restore; nft for nftables): 1 = no overhead beyond the tool"},
	"cpu.perconn":             {true, false, "CPU time (user+sys, driver, echo server and proxy) per connection of the traffic phase"},
	"cpu.vsnone":              {false, false, "cpu.perconn over mode none's in the same run, size and kernel (1 = no proxy cost)"},
	"sync.incremental":        {true, false, "median wall time of an incremental sync (one endpoint moved; kube-proxy rows: the EndpointSlice written through the API until kube-proxy finished the sync that programmed it)"},
	"fairness.jain":           {false, false, "lowest Jain's index over the fixed-position services (1 = even)"},
	"fairness.maxmin":         {false, false, "largest max/min endpoint share (0 when an endpoint starved)"},
	"fairness.pvalue":         {false, false, "chi-square p-value of the pooled hits against the expected shares"},
}

// KubeProxyFigures are the figures of a kube-proxy row only (the real
// kube-proxy, docs/kube-proxy.md), from its own metrics endpoint
// (pkg/proxy/metrics in k8s.io/kubernetes, IPv4 series) and from
// /proc of its process and the rule programs it ran. The metric figures
// are each row's mean of kube-proxy's histogram (its sum over its count):
// a result holds kube-proxy's scrapes, not each sync's duration.
var KubeProxyFigures = map[string]FigureKind{
	"kubeproxy.sync.full":    {true, false, "kube-proxy's own full-sync duration (kubeproxy_sync_full_proxy_rules_duration_seconds, mean over the row's syncs until sync.full answered)"},
	"kubeproxy.sync.partial": {true, false, "kube-proxy's own partial-sync duration (kubeproxy_sync_partial_proxy_rules_duration_seconds, mean over the row's syncs after sync.full)"},
	"kubeproxy.programming":  {true, false, "kube-proxy's network programming latency (kubeproxy_network_programming_duration_seconds: the EndpointSlice's last-change-trigger-time to its rules written, mean over the row)"},
	"kubeproxy.cpu":          {true, false, "kube-proxy's own CPU time (user+sys) over the row"},
	"kubeproxy.programs.cpu": {true, false, "CPU time (user+sys) of the rule programs kube-proxy ran and waited for (nft, iptables-restore, ipset, ...) over the row"},
	"kubeproxy.rss":          {false, false, "kube-proxy's peak resident set (VmHWM), bytes"},
}

// ChurnFigures are the figures of a churn phase, one value per phase (a
// row runs one per sweep.minSyncPeriod value; the figure's key names
// it), from the data plane's observation of every row's changes, and
// for a kube-proxy row from kube-proxy's own metrics over the phase
// (kubeproxy.churn.*; docs/kube-proxy.md, "Churn through the API").
var ChurnFigures = map[string]FigureKind{
	"churn.programming.p50":            {true, false, "median programming latency under churn, seen from the data plane: from the change to the first probe connection through the ClusterIP that shows it"},
	"churn.programming.p99":            {true, false, "99th percentile programming latency under churn, seen from the data plane"},
	"churn.unobserved.count":           {false, false, "churn changes the probes never saw in the data plane within churn.grace"},
	"kubeproxy.churn.programming.p50":  {true, false, "kube-proxy rows: kube-proxy's network programming latency under churn (kubeproxy_network_programming_duration_seconds over the churn phase: trigger time to the rules written), median interpolated in its buckets as histogram_quantile does"},
	"kubeproxy.churn.programming.p99":  {true, false, "kube-proxy rows: 99th percentile of kube-proxy's network programming latency over the churn phase, interpolated in its buckets"},
	"kubeproxy.churn.programming.mean": {true, false, "kube-proxy rows: mean of kube-proxy's network programming latency over the churn phase (its histogram's sum over its count)"},
	"kubeproxy.churn.syncs.count":      {false, false, "kube-proxy rows: kube-proxy's syncs during the churn phase (kubeproxy_sync_proxy_rules_duration_seconds' count)"},
	"kubeproxy.churn.cpu":              {true, false, "kube-proxy rows: CPU time (user+sys) of kube-proxy and the rule programs it ran over the churn phase"},
	"kubeproxy.churn.rss":              {false, false, "kube-proxy rows: kube-proxy's largest resident set (VmRSS, sampled every 20 ms) over the churn phase, bytes"},
}

// ErrorCauses are the causes a failed connection is counted under
// (traffic.ErrorKind): refused (ICMP port unreachable or RST to the SYN,
// e.g. a REJECT for a service without endpoints), timeout, reset,
// unreachable (ICMP host/net unreachable), other.
var ErrorCauses = []string{"refused", "timeout", "reset", "unreachable", "other"}

func init() {
	for k, v := range KubeProxyFigures {
		GateFigures[k] = v
	}
	for k, v := range ChurnFigures {
		GateFigures[k] = v
	}
	// Per cause: lookup.<cause>.count, and its time from connect to
	// error lookup.<cause>.timetoerror.{p50,p90,p99,max}.
	for _, c := range ErrorCauses {
		GateFigures["lookup."+c+".count"] = FigureKind{false, true, "failed connections with cause " + c}
		for _, q := range []string{"p50", "p90", "p99", "max"} {
			GateFigures["lookup."+c+".timetoerror."+q] = FigureKind{true, true, q + " time from the connect to a " + c + " error"}
		}
	}
}

// GateOps are the comparison operators a gate may use.
var GateOps = []string{"<", "<=", ">", ">="}

// GateFigureNames returns GateFigures' keys, sorted.
func GateFigureNames() []string {
	var names []string
	for k := range GateFigures {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// Holds reports whether measured op threshold is true.
func (g Gate) Holds(measured float64) bool {
	switch g.Op {
	case "<":
		return measured < g.Value.V
	case "<=":
		return measured <= g.Value.V
	case ">":
		return measured > g.Value.V
	case ">=":
		return measured >= g.Value.V
	}
	return false
}

// String writes the gate as one line: "lookup.latency.p99{mode=iptables,position=last} < 2ms".
func (g Gate) String() string {
	var sel []string
	if g.Mode != "" {
		sel = append(sel, "mode="+g.Mode)
	}
	if g.Position != "" {
		sel = append(sel, "position="+g.Position)
	}
	if g.Services != 0 {
		sel = append(sel, fmt.Sprintf("services=%d", g.Services))
	}
	s := g.Figure
	if len(sel) > 0 {
		s += "{" + strings.Join(sel, ",") + "}"
	}
	return s + " " + g.Op + " " + g.Value.Text
}

// validateGates checks gates[i]: a known figure, op and value kind, and a
// mode, position and size the scenario measures.
func (s *Scenario) validateGates(add func(field, msg, fix string)) {
	names := GateFigureNames()
	for i, g := range s.Gates {
		f := fmt.Sprintf("gates[%d].", i)
		kind, known := GateFigures[g.Figure]
		switch {
		case g.Figure == "":
			add(f+"figure", "is missing", "name a figure such as lookup.latency.p99 (known: "+strings.Join(names, ", ")+")")
		case !known:
			fix := "use one of " + strings.Join(names, ", ")
			if c := closest(g.Figure, names); c != "" {
				fix = fmt.Sprintf("did you mean %q?", c)
			}
			add(f+"figure", fmt.Sprintf("unknown figure %q", g.Figure), fix)
		case strings.HasPrefix(g.Figure, "lookup.kernel.") && !s.Traffic.KernelTimeOn():
			add(f+"figure", g.Figure+" is not measured: traffic.kernelTime is false", "remove the gate, or set traffic.kernelTime: true")
		}
		if g.Op == "" {
			add(f+"op", "is missing", `write op: "<" (or "<=", ">", ">=")`)
		} else if !slices.Contains(GateOps, g.Op) {
			add(f+"op", fmt.Sprintf("unknown operator %q", g.Op), `use one of <, <=, >, >= (quoted: op: "<")`)
		}
		switch {
		case g.Value.Text == "":
			add(f+"value", "is missing", "write the threshold, such as value: 2ms or value: 0.95")
		case math.IsNaN(g.Value.V):
			add(f+"value", fmt.Sprintf("%q is neither a duration nor a number", g.Value.Text), "write a duration such as 2ms or a number such as 0.95")
		case known && kind.Duration && !g.Value.IsDuration:
			add(f+"value", fmt.Sprintf("%s is a time figure but %q has no unit", g.Figure, g.Value.Text), fmt.Sprintf("write a duration such as %sms", g.Value.Text))
		case known && !kind.Duration && g.Value.IsDuration:
			add(f+"value", fmt.Sprintf("%s is not a time figure but %q is a duration", g.Figure, g.Value.Text), "write a plain number such as 0.95")
		case g.Value.IsDuration && g.Value.V <= 0:
			add(f+"value", fmt.Sprintf("%s is not positive", g.Value.Text), "use a positive duration such as 2ms")
		}
		if g.Mode != "" && !slices.Contains(s.Modes, g.Mode) {
			fix := "use one of the scenario's modes: " + strings.Join(s.Modes, ", ")
			if c := closest(g.Mode, s.Modes); c != "" {
				fix = fmt.Sprintf("did you mean %q?", c)
			}
			add(f+"mode", fmt.Sprintf("mode %q is not measured by this scenario", g.Mode), fix)
		}
		if g.Position != "" {
			switch {
			case known && !kind.Positional:
				add(f+"position", fmt.Sprintf("%s has no service position", g.Figure), "remove it")
			case !slices.Contains(s.Traffic.Positions, g.Position):
				fix := "use one of traffic.positions: " + strings.Join(s.Traffic.Positions, ", ")
				if c := closest(g.Position, s.Traffic.Positions); c != "" {
					fix = fmt.Sprintf("did you mean %q?", c)
				}
				add(f+"position", fmt.Sprintf("position %q is not measured (traffic.positions)", g.Position), fix)
			}
		}
		if (g.Services != 0 || s.has(f+"services")) && !slices.Contains(s.Sizes(), g.Services) {
			add(f+"services", fmt.Sprintf("%d is not a measured size", g.Services),
				"use one of "+strings.Trim(strings.Join(strings.Fields(fmt.Sprint(s.Sizes())), ", "), "[]")+", or remove it to check every size")
		}
		if (strings.HasPrefix(g.Figure, "churn.") || strings.HasPrefix(g.Figure, "kubeproxy.churn.")) && s.Churn.Rate <= 0 {
			add(f+"figure", g.Figure+" is a churn figure, and this scenario has no churn phase", "set churn.rate, or gate on another figure")
		}
		if strings.HasPrefix(g.Figure, "lookup.vsnone.") && !slices.Contains(s.Modes, BaselineMode) {
			add(f+"figure", g.Figure+" needs mode none as the baseline", "add none to modes")
		}
	}
}
