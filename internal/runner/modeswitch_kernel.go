//go:build linux

package runner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/proxybench/proxybench/internal/uml"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
)

// planModeSwitch is auto's plan for a scenario with modeSwitch pairs the
// host cannot run (a mode it lacks, ipvs here): the pairs whose two modes
// the host runs stay on the host, with every mode the host runs; the
// others run in the first usable guest kernel of guests that runs all of
// their modes, with those modes only. Each target's scenario lists its
// own pairs (Target.ModeSwitch), so no pair runs twice. ok is false when
// every pair runs on the host (auto's usual choice then applies to the
// modes) or no guest kernel runs the others.
func planModeSwitch(sc *scenarios.Scenario, st []ModeStatus, guests []*uml.Kernel) (Plan, bool) {
	host := map[string]bool{}
	var hostModes []string
	for _, s := range st {
		if s.Available {
			host[s.Mode] = true
			hostModes = append(hostModes, s.Mode)
		}
	}
	var onHost, inGuest []scenarios.ModeSwitchPair
	for _, p := range sc.ModeSwitch.Pairs {
		if !slices.Contains(sc.Modes, p.From) || !slices.Contains(sc.Modes, p.To) {
			continue // skipped by the phase, on every kernel
		}
		if host[p.From] && host[p.To] {
			onHost = append(onHost, p)
		} else {
			inGuest = append(inGuest, p)
		}
	}
	if len(inGuest) == 0 {
		return Plan{}, false
	}
	var guestModes []string
	for _, m := range sc.Modes {
		if slices.ContainsFunc(inGuest, func(p scenarios.ModeSwitchPair) bool { return p.From == m || p.To == m }) {
			guestModes = append(guestModes, m)
		}
	}
	for _, k := range guests {
		if uml.Usable(k) != nil || slices.ContainsFunc(guestModes, func(m string) bool { return GuestUnsupported(sc, k, m) != "" }) {
			continue
		}
		narrow := func(pairs []scenarios.ModeSwitchPair) *scenarios.ModeSwitchSpec {
			ms := *sc.ModeSwitch
			ms.Pairs = pairs
			return &ms
		}
		var targets []Target
		if len(onHost) > 0 {
			targets = append(targets, Target{Name: "host", Modes: hostModes, ModeSwitch: narrow(onHost)})
		}
		targets = append(targets, Target{Name: k.Name, UML: k, Modes: guestModes, ModeSwitch: narrow(inGuest)})
		names := func(ps []scenarios.ModeSwitchPair) string {
			var out []string
			for _, p := range ps {
				out = append(out, p.String())
			}
			return strings.Join(out, ", ")
		}
		why := fmt.Sprintf("auto (modeSwitch): the host runs %s, so the switches %s run in %s (%s) with %s", strings.Join(hostModes, ", "), names(inGuest), k.Name, k.Release, strings.Join(guestModes, ", "))
		if len(onHost) > 0 {
			why = fmt.Sprintf("auto (modeSwitch): the switches %s run on the host; %s need a mode the host lacks, so they run in %s (%s) with %s; compare switches within one kernel only", names(onHost), names(inGuest), k.Name, k.Release, strings.Join(guestModes, ", "))
		}
		return Plan{Targets: targets, Why: why}, true
	}
	return Plan{}, false
}

// mergeModeSwitch adds r's switches to res (a later kernel's run), each
// marked with its kernel, and rebuilds res's mode-switch sections from
// every switch, so that one table holds every kernel's switches.
func mergeModeSwitch(res, r *reports.Result, kernel string) {
	for i := range r.ModeSwitch {
		r.ModeSwitch[i].Kernel = kernel
	}
	if res != r {
		res.ModeSwitch = append(res.ModeSwitch, r.ModeSwitch...)
	}
	if len(res.ModeSwitch) == 0 {
		return
	}
	res.Sections = slices.DeleteFunc(res.Sections, func(s reports.Section) bool { return s.Phase == modeSwitchPhase.Name })
	for _, s := range reports.ModeSwitchSections(res.ModeSwitch) {
		res.MergeSection(s)
	}
}
