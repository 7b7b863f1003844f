package reports

import (
	"fmt"
	"sort"
	"strings"
)

// LifecycleChange is what clients of a TCP service saw across one endpoint
// lifecycle change (kubernetes#57841, #81775, #126378): connections held
// open across it, and new connections made after it.
type LifecycleChange struct {
	// Name is "removal" (endpoint A removed), "terminating" (A marked
	// terminating: not ready, still serving), "drain-refill" (every
	// endpoint removed, then one new endpoint), "restart" (A replaced by
	// a new address while clients hold connections),
	// "all-serving-terminating" (every endpoint terminating and still
	// serving: kube-proxy falls back to them, KEP-1669, so new
	// connections reach them) or "all-terminating" (every endpoint
	// terminating and no longer serving: new connections fail).
	Name string `json:"name"`
	// Held connections open before the change, HeldOnChanged those on the
	// endpoint(s) the change took away, Broken those no longer open
	// (reset or closed) after the observation.
	Held          int `json:"held"`
	HeldOnChanged int `json:"heldOnChanged"`
	Broken        int `json:"broken"`
	// New connections made one at a time during the observation after the
	// sync that made the change: how many, how many failed, how many still
	// reached a removed or terminating endpoint, and when the last of
	// those started (ns after the sync's end; -1: none).
	New            int   `json:"new"`
	NewFailed      int   `json:"newFailed"`
	NewToOld       int   `json:"newToOld"`
	LastToOldNs    int64 `json:"lastToOldNs"`
	FirstSuccessNs int64 `json:"firstSuccessNs"`
	// ActiveAfter is, for restart, the open connections per endpoint after
	// each batch of held new connections (index = batch).
	ActiveAfter []map[string]int `json:"activeAfter,omitempty"`
	// RealServers, on an IPVS row, are the web service's IPVS real
	// servers right after the change's sync, "address weight active
	// inactive" each (ipvsadm -Ln): graceful termination shows as a
	// removed endpoint kept at weight 0 while it has connections
	// (kube-proxy's pkg/proxy/ipvs/graceful_termination.go).
	RealServers []string `json:"realServers,omitempty"`
}

// realServerNotes are the notes of cs's IPVS real servers after each
// change, labelled with label.
func realServerNotes(label string, cs []LifecycleChange) []string {
	var out []string
	for _, c := range cs {
		if len(c.RealServers) > 0 {
			out = append(out, fmt.Sprintf("%s %s: IPVS real servers after the sync (address weight active inactive): %s", label, c.Name, strings.Join(c.RealServers, "; ")))
		}
	}
	return out
}

func writeLifecycleMarkdown(b *strings.Builder, r *Result) {
	have := false
	for _, m := range r.Modes {
		have = have || len(m.Lifecycle) > 0
	}
	if !have {
		return
	}
	b.WriteString("\n### endpoint lifecycle with held connections (TCP)\n\n")
	b.WriteString("Held: connections open before the change (on the changed endpoint), broken after it; new: connections made one at a time after the sync, failed, and still reaching the removed or terminating endpoint (last one after the sync); first success after the sync.\n\n")
	b.WriteString("| mode | change | held (on changed) | broken | new | failed | to old endpoint | last to old | first success |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|\n")
	ms := func(ns int64) string {
		if ns < 0 {
			return "-"
		}
		return fmt.Sprintf("%.3f s", float64(ns)/1e9)
	}
	var restarts []string
	for _, m := range r.Modes {
		name := m.Mode
		if m.Kernel == "uml" {
			name += " (uml)"
		}
		for _, c := range m.Lifecycle {
			fmt.Fprintf(b, "| %s | %s | %d (%d) | %d | %d | %d | %d | %s | %s |\n",
				name, c.Name, c.Held, c.HeldOnChanged, c.Broken, c.New, c.NewFailed, c.NewToOld, ms(c.LastToOldNs), ms(c.FirstSuccessNs))
			for i, a := range c.ActiveAfter {
				keys := make([]string, 0, len(a))
				for k := range a {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				var parts []string
				for _, k := range keys {
					parts = append(parts, fmt.Sprintf("%s %d", k, a[k]))
				}
				restarts = append(restarts, fmt.Sprintf("- %s restart, after batch %d: %s", name, i+1, strings.Join(parts, ", ")))
			}
		}
	}
	if len(restarts) > 0 {
		b.WriteString("\nActive connections per endpoint after a restart (the restarted endpoint has a new address; each batch opens and holds more connections):\n\n")
		b.WriteString(strings.Join(restarts, "\n") + "\n")
	}
	var rs []string
	for _, m := range r.Modes {
		name := m.Mode
		if m.Kernel == "uml" {
			name += " (uml)"
		}
		for _, n := range realServerNotes(name, m.Lifecycle) {
			rs = append(rs, "- "+n)
		}
	}
	if len(rs) > 0 {
		b.WriteString("\n" + strings.Join(rs, "\n") + "\n")
	}
}

// PhaseLifecycle is the lifecycle phase's name (scenario block lifecycle)
// in Section.Phase.
const PhaseLifecycle = "lifecycle"

// LifecycleSection is the lifecycle phase's section for one result row
// (label: the ModeResult's row label): one row per change of cs, keyed
// by its name, with writeLifecycleMarkdown's figures: connections held
// before the change (and on the changed endpoint), broken after it; new
// connections after the sync, failed, still reaching the removed or
// terminating endpoint, when the last of those started and the first
// success (s after the sync's end; none is Missing). A restart's active
// connections per endpoint after each batch are notes, one per batch.
func LifecycleSection(label string, cs []LifecycleChange) Section {
	s := Section{Phase: PhaseLifecycle, Title: "endpoint lifecycle with held connections (TCP)", Scope: "row",
		Intro: "Held: connections open before the change (on the changed endpoint), broken after it; new: connections made one " +
			"at a time after the sync, failed, and still reaching the removed or terminating endpoint (last one after the sync); " +
			"first success after the sync.",
		Columns: []Column{
			{Name: "change", Key: true},
			{Name: "held", Unit: "count", Figure: "held"},
			{Name: "held on changed", Unit: "count", Figure: "held.onchanged"},
			{Name: "broken", Unit: "count", Figure: "broken"},
			{Name: "new", Unit: "count", Figure: "new"},
			{Name: "new failed", Unit: "count", Figure: "new.failed"},
			{Name: "to old endpoint", Unit: "count", Figure: "new.toold"},
			{Name: "last to old", Unit: "s", Figure: "new.lasttoold"},
			{Name: "first success", Unit: "s", Figure: "new.firstsuccess"},
		}}
	after := func(ns int64) Cell {
		if ns < 0 {
			return Missing()
		}
		return Num(float64(ns)/1e9, "%.3f")
	}
	for _, c := range cs {
		s.Rows = append(s.Rows, SectionRow{Row: label, Cells: []Cell{Text(c.Name), Int(c.Held), Int(c.HeldOnChanged), Int(c.Broken),
			Int(c.New), Int(c.NewFailed), Int(c.NewToOld), after(c.LastToOldNs), after(c.FirstSuccessNs)}})
		for i, a := range c.ActiveAfter {
			var parts []string
			for _, k := range sortedKeys(a) {
				parts = append(parts, fmt.Sprintf("%s %d", k, a[k]))
			}
			s.Notes = append(s.Notes, fmt.Sprintf("%s %s, active connections per endpoint after batch %d (the restarted endpoint has a new address): %s",
				label, c.Name, i+1, strings.Join(parts, ", ")))
		}
	}
	s.Notes = append(s.Notes, realServerNotes(label, cs)...)
	return s
}
