package fidelity

import (
	"fmt"
	"sort"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
)

// Difference is one normalised line that only one implementation's
// reading has (a line in a different place counts on both sides).
type Difference struct {
	// Tool is the section ("iptables-legacy-save", "nft list table ip
	// kube-proxy", ...).
	Tool string
	// Side is Builtin or KubeProxy: the reading that has Line.
	Side string
	Line string
	// Known is the documented difference Line is (Explain), nil when it
	// is none.
	Known *Known `json:",omitempty"`
}

func (d Difference) String() string {
	sign := "-"
	if d.Side == KubeProxy {
		sign = "+"
	}
	return fmt.Sprintf("%s %s%s", d.Tool, sign, d.Line)
}

// sectionLines returns the normalised lines of each section of r by tool.
func sectionLines(r Reading) map[string][]string {
	out := map[string][]string{}
	for _, s := range Normalise(r).Sections {
		if s.Text == "" {
			out[s.Tool] = nil
			continue
		}
		out[s.Tool] = strings.Split(strings.TrimSuffix(s.Text, "\n"), "\n")
	}
	return out
}

func tools(a, b map[string][]string) []string {
	seen := map[string]bool{}
	for t := range a {
		seen[t] = true
	}
	for t := range b {
		seen[t] = true
	}
	return sortedKeys(seen)
}

// Diff normalises both readings and returns every line only one of them
// has, section by section (a section only one side has counts whole), in
// section order, then builtin's lines before kube-proxy's within each
// change. The comparison is a longest-common-subsequence match
// (difflib.SequenceMatcher, no junk heuristic), so a line that moved is
// a difference on both sides.
func Diff(builtin, kubeProxy Reading) []Difference {
	a, b := sectionLines(builtin), sectionLines(kubeProxy)
	var out []Difference
	for _, t := range tools(a, b) {
		m := difflib.NewMatcherWithJunk(a[t], b[t], false, nil)
		for _, op := range m.GetOpCodes() {
			if op.Tag == 'e' {
				continue
			}
			for _, l := range a[t][op.I1:op.I2] {
				out = append(out, Difference{Tool: t, Side: Builtin, Line: l})
			}
			for _, l := range b[t][op.J1:op.J2] {
				out = append(out, Difference{Tool: t, Side: KubeProxy, Line: l})
			}
		}
	}
	return out
}

// Unified is the normalised comparison as a unified diff per section
// ("--- builtin <tool>", "+++ kube-proxy <tool>", 3 lines of context),
// each changed line followed by the documented difference it is
// ("    ^ known: <id>") or "    ^ NOT DOCUMENTED". Empty when the
// readings are equal after normalisation.
func Unified(builtin, kubeProxy Reading, known []Known) string {
	a, b := sectionLines(builtin), sectionLines(kubeProxy)
	var w strings.Builder
	note := func(tool, side, line string) {
		if k := Match(known, builtin.Mode, Difference{Tool: tool, Side: side, Line: line}); k != nil {
			fmt.Fprintf(&w, "    ^ known: %s\n", k.ID)
		} else {
			fmt.Fprintf(&w, "    ^ NOT DOCUMENTED\n")
		}
	}
	for _, t := range tools(a, b) {
		m := difflib.NewMatcherWithJunk(a[t], b[t], false, nil)
		groups := m.GetGroupedOpCodes(3)
		if len(groups) == 0 || (len(groups) == 1 && len(groups[0]) == 1 && groups[0][0].Tag == 'e') {
			continue
		}
		fmt.Fprintf(&w, "--- %s %s\n+++ %s %s\n", Builtin, t, KubeProxy, t)
		for _, g := range groups {
			first, last := g[0], g[len(g)-1]
			fmt.Fprintf(&w, "@@ -%d,%d +%d,%d @@\n", first.I1+1, last.I2-first.I1, first.J1+1, last.J2-first.J1)
			for _, op := range g {
				if op.Tag == 'e' {
					for _, l := range a[t][op.I1:op.I2] {
						fmt.Fprintf(&w, " %s\n", l)
					}
					continue
				}
				for _, l := range a[t][op.I1:op.I2] {
					fmt.Fprintf(&w, "-%s\n", l)
					note(t, Builtin, l)
				}
				for _, l := range b[t][op.J1:op.J2] {
					fmt.Fprintf(&w, "+%s\n", l)
					note(t, KubeProxy, l)
				}
			}
		}
	}
	return w.String()
}

// Summary counts diffs by known difference ID ("" for undocumented ones),
// sorted by ID.
func Summary(diffs []Difference) []string {
	n := map[string]int{}
	for _, d := range diffs {
		id := "NOT DOCUMENTED"
		if d.Known != nil {
			id = d.Known.ID
		}
		n[id]++
	}
	var out []string
	for _, id := range sortedKeys(n) {
		out = append(out, fmt.Sprintf("%s: %d lines", id, n[id]))
	}
	sort.Strings(out)
	return out
}
