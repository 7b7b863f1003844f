package fidelity

import (
	"regexp"
	"slices"
)

// Known is a documented difference between builtin's ruleset and
// kube-proxy's for the same services: a line of the normalised comparison
// that one side has and the other does not, why, and what it changes.
// docs/modes.md ("Fidelity") lists every one under its ID.
type Known struct {
	// ID is the name docs/modes.md lists it under.
	ID string
	// Modes it applies to.
	Modes []string `json:"-"`
	// Side is the implementation whose reading has the line (Builtin,
	// KubeProxy), "" for both.
	Side string `json:"-"`
	// Tool and Line match the section and the normalised line.
	Tool, Line *regexp.Regexp `json:"-"`
	// Why says where the difference comes from and what it changes.
	Why string `json:"-"`
}

// Match returns the first of known that d (of mode) is, or nil.
func Match(known []Known, mode string, d Difference) *Known {
	for i := range known {
		k := &known[i]
		if !slices.Contains(k.Modes, mode) || (k.Side != "" && k.Side != d.Side) {
			continue
		}
		if (k.Tool == nil || k.Tool.MatchString(d.Tool)) && k.Line.MatchString(d.Line) {
			return k
		}
	}
	return nil
}

// Explain sets Known on each of diffs (of mode) from known, and returns the
// differences no entry explains and the entries of mode that explained
// none (a difference that went away: fixed, or the case is not in the
// services compared).
func Explain(known []Known, mode string, diffs []Difference) (unexplained []Difference, unused []Known) {
	used := map[string]bool{}
	for i := range diffs {
		diffs[i].Known = Match(known, mode, diffs[i])
		if diffs[i].Known == nil {
			unexplained = append(unexplained, diffs[i])
		} else {
			used[diffs[i].Known.ID] = true
		}
	}
	for _, k := range known {
		if slices.Contains(k.Modes, mode) && !used[k.ID] {
			unused = append(unused, k)
		}
	}
	return unexplained, unused
}

// KnownDifferences are the documented differences of kube-proxy v1.37
// from builtin (docs/modes.md, "Fidelity").
var KnownDifferences = []Known{}
