package scenarios

import (
	"fmt"
	"slices"
)

// Scope is what one run of a phase covers.
type Scope string

const (
	// ScopeRow: the phase runs once per row (mode × implementation ×
	// variant × size) over that row's proxier.
	ScopeRow Scope = "row"
	// ScopeRun: the phase runs once per run and spans rows (a mode
	// switch goes from one row's mode to another's).
	ScopeRun Scope = "run"
)

// PhaseRule is what the scenario layer knows of one phase: when a
// scenario wants it and what it needs, so validate (Catalog.Phases) and
// the sim (sim.Options.Phases) ask the phase list as they ask the mode
// list. internal/runner.Phases is the list; each entry embeds its rule.
type PhaseRule struct {
	// Name is the phase's name in results and reports ("syncDisruption").
	Name string
	// Field is the scenario field that asks for it ("syncDisruption",
	// "churn", "traffic.perService"); errors about the phase name it.
	Field string
	Scope Scope
	// Wants says whether scenario s asks for the phase (nil: always).
	Wants func(s *Scenario) bool
	// TCP: the phase's probes connect over TCP to each service's first
	// ServicePort, so that port must be TCP.
	TCP bool
	// Rules: the phase needs proxy rules (it is skipped for a direct
	// mode, the baseline none).
	Rules bool
	// NotWithKubeProxy, when set, says why the phase does not run with
	// implementation kube-proxy yet (validate refuses the combination,
	// naming Field); "" : kube-proxy rows run it too.
	NotWithKubeProxy string
	// NotWithKubeProxyNodes, when set, says why the phase does not run
	// with implementation kube-proxy on several nodes (topology.nodes >
	// 1) yet; validate refuses the combination, naming Field.
	NotWithKubeProxyNodes string
	// Check returns the phase's own problems with s (nil: none).
	Check func(s *Scenario) []*FieldError
}

// Wanted reports whether s asks for the phase.
func (p PhaseRule) Wanted(s *Scenario) bool { return p.Wants == nil || p.Wants(s) }

// phaseChecks adds the problems of every phase rule s wants: a TCP phase
// over a non-TCP first port, a phase kube-proxy rows do not run yet, and
// each phase's own Check.
func (c *checker) phaseChecks() {
	if c.cat == nil {
		return
	}
	s := c.s
	for _, ph := range c.cat.Phases {
		if !ph.Wanted(s) {
			continue
		}
		if ph.TCP {
			ports := s.Services.PortList()
			if len(ports) > 0 && ports[0].Protocol != "TCP" {
				field := "services.protocol"
				if len(s.Services.Ports) > 0 {
					field = "services.ports[0].protocol"
				}
				c.add(field, fmt.Sprintf("%s probes connect over TCP to each service's first port, which is %s", ph.Field, ports[0].Protocol),
					"list a TCP port first in services.ports, or remove "+ph.Field)
			}
		}
		if ph.NotWithKubeProxy != "" && s.UsesKubeProxy() {
			c.add(ph.Field, "not yet with implementation kube-proxy: "+ph.NotWithKubeProxy, "run it with implementation: [builtin] in a scenario of its own, or drop it here")
		}
		if ph.NotWithKubeProxyNodes != "" && s.UsesKubeProxy() && s.Topology.NodeCount() > 1 {
			c.add(ph.Field, "not yet with implementation kube-proxy on several nodes (topology.nodes > 1): "+ph.NotWithKubeProxyNodes, "run it on one node (topology.nodes: 1), or drop it here")
		}
		if ph.Check != nil {
			for _, e := range ph.Check(s) {
				c.add(e.Field, e.Msg, e.Fix)
			}
		}
	}
}

// PhaseNames lists the rules' names.
func PhaseNames(rules []PhaseRule) []string {
	out := make([]string, 0, len(rules))
	for _, r := range rules {
		out = append(out, r.Name)
	}
	return out
}

// RefuseUnmodelled returns a *FieldError for the first phase of rules
// that s wants and that modelled does not list (the sim engine's models):
// an engine refuses a phase block it would otherwise silently ignore.
func RefuseUnmodelled(s *Scenario, rules []PhaseRule, modelled []string, engine string) error {
	for _, ph := range rules {
		if ph.Wanted(s) && !slices.Contains(modelled, ph.Name) {
			e := &FieldError{Field: ph.Field, Msg: fmt.Sprintf("the %s engine does not model the %s phase", engine, ph.Name),
				Fix: "run it with engine: real, or remove " + ph.Field}
			e.Source, e.Line = s.source, s.line(ph.Field)
			if e.Source == "" {
				e.Source = "scenario"
			}
			return e
		}
	}
	return nil
}
