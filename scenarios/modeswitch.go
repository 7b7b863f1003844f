package scenarios

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// ModeSwitchSpec configures the modeSwitch phase: on one node, with
// probes running, the proxy switches from one mode to another as a
// DaemonSet rollout does (the seeds' "switching modes": edit the
// kube-proxy ConfigMap, `kubectl rollout restart daemonset kube-proxy`):
// the old proxier stops without removing its rules, a new one starts in
// the other mode (cleaning up at start what kube-proxy v1.37 cleans up),
// and then `kube-proxy --cleanup` runs as the seeds' recovery step. The
// phase spans two rows (the from and the to mode) and runs once per run.
type ModeSwitchSpec struct {
	// Pairs are the switches, in order: from one of iptables, ipvs,
	// nftables (and userspace, builtin only) to another. A pair runs when
	// both its modes are in modes, on the kernel that runs them.
	Pairs []ModeSwitchPair `yaml:"pairs" json:"pairs"`
	// Services is how many services the probes cycle over, spread over
	// the service list, first and last included (default 8).
	Services int `yaml:"services" json:"services"`
	// Interval is each probe worker's pause between two connections
	// (default 10ms); Timeout bounds one connection (default 1s).
	Interval Duration `yaml:"interval" json:"interval"`
	Timeout  Duration `yaml:"timeout" json:"timeout"`
	// Slow is the connect time above which a connection counts as slow
	// (default 100ms).
	Slow Duration `yaml:"slow" json:"slow"`
	// Settle is how long the probes go on after the new mode's first
	// sync, until every probed service has answered (default 10s).
	Settle Duration `yaml:"settle" json:"settle"`
	// Established is how many TCP connections are opened through the old
	// mode's rules before the switch and checked after it (default 8, 0:
	// none).
	Established int `yaml:"established" json:"established"`
}

// ModeSwitchPair is one switch of modeSwitch.pairs.
type ModeSwitchPair struct {
	From string `yaml:"from" json:"from"`
	To   string `yaml:"to" json:"to"`
}

// String is "iptables → nftables".
func (p ModeSwitchPair) String() string { return p.From + " → " + p.To }

// ModeSwitchModes are the modes modeSwitch.pairs may name: kube-proxy's
// modes, and userspace (builtin only: kube-proxy removed it in v1.26).
var ModeSwitchModes = append(slices.Clone(KubeProxyModes), "userspace")

// setModeSwitchDefaults fills modeSwitch's unset fields (SetDefaults).
func (s *Scenario) setModeSwitchDefaults() {
	ms := s.ModeSwitch
	if ms == nil {
		return
	}
	if ms.Services == 0 && !s.has("modeSwitch.services") {
		ms.Services = 8
	}
	if ms.Established == 0 && !s.has("modeSwitch.established") {
		ms.Established = 8
	}
	for _, d := range []struct {
		path string
		p    *Duration
		v    time.Duration
	}{{"modeSwitch.interval", &ms.Interval, 10 * time.Millisecond}, {"modeSwitch.timeout", &ms.Timeout, time.Second},
		{"modeSwitch.slow", &ms.Slow, 100 * time.Millisecond}, {"modeSwitch.settle", &ms.Settle, 10 * time.Second}} {
		if d.p.Duration == 0 && !s.has(d.path) {
			d.p.Duration = d.v
		}
	}
	// A default slow threshold stays below a short timeout given.
	if !s.has("modeSwitch.slow") && ms.Timeout.Duration > 0 && ms.Slow.Duration >= ms.Timeout.Duration {
		ms.Slow.Duration = ms.Timeout.Duration / 2
	}
}

// ModeSwitchProblems checks the modeSwitch block (Validate): each pair names two different modes of
// ModeSwitchModes, no pair twice, and at least one pair has both its
// modes in modes (a pair with a mode left out, e.g. by run --modes, is
// skipped and says so; one with userspace runs builtin only, as its row
// does); services, established
// and the durations in range; one node (the switch is on one node).
func ModeSwitchProblems(s *Scenario) []*FieldError {
	ms := s.ModeSwitch
	if ms == nil {
		return nil
	}
	var out []*FieldError
	add := func(field, msg, fix string) { out = append(out, &FieldError{Field: field, Msg: msg, Fix: fix}) }
	if len(ms.Pairs) == 0 {
		add("modeSwitch.pairs", "is empty", "list at least one switch, e.g. pairs: [{from: iptables, to: nftables}]")
	}
	badMode := false // a pair names no mode or an unknown one (reported once, per side)
	for i, p := range ms.Pairs {
		f := fmt.Sprintf("modeSwitch.pairs[%d]", i)
		for _, side := range []struct{ name, mode string }{{"from", p.From}, {"to", p.To}} {
			field := f + "." + side.name
			switch {
			case side.mode == "":
				badMode = true
				add(field, "is missing", "name the mode the node switches "+side.name+": one of "+strings.Join(ModeSwitchModes, ", "))
			case !slices.Contains(ModeSwitchModes, side.mode):
				badMode = true
				fix := "use one of " + strings.Join(ModeSwitchModes, ", ")
				if n := closest(side.mode, ModeSwitchModes); n != "" {
					fix = fmt.Sprintf("did you mean %q?", n)
				}
				add(field, fmt.Sprintf("%q is not a mode a node switches between", side.mode), fix)
			}
		}
		if p.From == p.To && p.From != "" {
			add(f, fmt.Sprintf("switches from %s to itself", p.From), "name two different modes")
		}
		if j := slices.Index(ms.Pairs, p); j < i {
			add(f, fmt.Sprintf("%s is listed twice (also modeSwitch.pairs[%d])", p, j), "remove the duplicate")
		}
	}
	if len(ms.Pairs) > 0 && !badMode && !slices.ContainsFunc(ms.Pairs, func(p ModeSwitchPair) bool { return slices.Contains(s.Modes, p.From) && slices.Contains(s.Modes, p.To) }) {
		add("modeSwitch.pairs", fmt.Sprintf("no pair has both its modes in modes (%s): none would run", strings.Join(s.Modes, ", ")), "add the pairs' modes to modes (a pair runs where both its modes run; one with a mode left out is skipped)")
	}
	if ms.Services < 1 || ms.Services > 1000 {
		add("modeSwitch.services", fmt.Sprintf("%d is out of range", ms.Services), "use 1..1000")
	}
	if n := s.Services.Count; s.has("modeSwitch.services") && ms.Services > n && n > 0 && ms.Services <= 1000 {
		add("modeSwitch.services", fmt.Sprintf("%d probed services, but services.count is %d", ms.Services, n), fmt.Sprintf("use at most %d (or leave it out: 8, or every service when fewer)", n))
	}
	if s.has("modeSwitch.slow") && ms.Slow.Duration > 0 && ms.Timeout.Duration > 0 && ms.Slow.Duration >= ms.Timeout.Duration {
		add("modeSwitch.slow", fmt.Sprintf("%s is not below modeSwitch.timeout %s: no connection could count as slow", ms.Slow.Duration, ms.Timeout.Duration),
			"use a slow threshold below the timeout, such as "+(ms.Timeout.Duration/4).String())
	}
	if ms.Established < 0 || ms.Established > 1000 {
		add("modeSwitch.established", fmt.Sprintf("%d is out of range", ms.Established), "use 0..1000")
	}
	for _, d := range []struct {
		field    string
		v        time.Duration
		positive bool
		example  string
	}{{"modeSwitch.interval", ms.Interval.Duration, false, "10ms"}, {"modeSwitch.timeout", ms.Timeout.Duration, true, "1s"},
		{"modeSwitch.slow", ms.Slow.Duration, true, "100ms"}, {"modeSwitch.settle", ms.Settle.Duration, false, "10s"}} {
		switch {
		case d.v < 0:
			add(d.field, fmt.Sprintf("%s is negative", d.v), fmt.Sprintf("use a duration such as %q", d.example))
		case d.positive && d.v == 0:
			add(d.field, "0s is not positive", fmt.Sprintf("use a duration such as %q", d.example))
		}
	}
	if n := s.Topology.NodeCount(); n > 1 {
		add("modeSwitch", fmt.Sprintf("the switch runs on one node, and topology has %d", n), "use topology.nodes: 1 for the mode-switch scenario")
	}
	return out
}

// modeSwitch checks the modeSwitch block (ModeSwitchProblems).
func (c *checker) modeSwitch() {
	for _, e := range ModeSwitchProblems(c.s) {
		c.add(e.Field, e.Msg, e.Fix)
	}
}
