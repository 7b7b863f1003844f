package reports

import (
	"fmt"
	"io"

	"github.com/proxybench/proxybench/scenarios"
)

// GateCheck is one measurement a gate looked at.
type GateCheck struct {
	Figure Figure `json:"figure"`
	Pass   bool   `json:"pass"`
}

// GateResult is one gate's verdict: it passes when it found at least one
// matching measurement and every one of them passes.
type GateResult struct {
	Gate   scenarios.Gate `json:"gate"`
	Checks []GateCheck    `json:"checks"`
	Pass   bool           `json:"pass"`
	// Reason explains a failure without measurement ("no measurement of …").
	Reason string `json:"reason,omitempty"`
}

// EvaluateGates checks each gate against r's figures (Figures). A gate
// without matching figures fails, since a gate that checks nothing
// protects nothing.
func EvaluateGates(r *Result, gates []scenarios.Gate) []GateResult {
	figs := Figures(r)
	var out []GateResult
	for _, g := range gates {
		gr := GateResult{Gate: g, Pass: true}
		for _, f := range figs {
			if f.Name != g.Figure || (g.Mode != "" && f.Mode != g.Mode) || (g.Position != "" && f.Position != g.Position) ||
				(g.Services != 0 && f.Services != g.Services) {
				continue
			}
			c := GateCheck{Figure: f, Pass: g.Holds(f.Value)}
			gr.Pass = gr.Pass && c.Pass
			gr.Checks = append(gr.Checks, c)
		}
		if len(gr.Checks) == 0 {
			gr.Pass = false
			gr.Reason = "no measurement matches this gate (did the mode or position run?)"
		}
		out = append(out, gr)
	}
	return out
}

// GatesPassed reports whether every gate passed.
func GatesPassed(rs []GateResult) bool {
	for _, g := range rs {
		if !g.Pass {
			return false
		}
	}
	return true
}

// WriteGates prints one line per check: "PASS lookup.latency.p99{mode=iptables,position=last,services=1000} = 334.8 µs < 2ms",
// and a final count.
func WriteGates(w io.Writer, rs []GateResult) error {
	failed := 0
	for _, g := range rs {
		if !g.Pass {
			failed++
		}
		if len(g.Checks) == 0 {
			if _, err := fmt.Fprintf(w, "FAIL %s: %s\n", g.Gate, g.Reason); err != nil {
				return err
			}
		}
		for _, c := range g.Checks {
			verdict := "PASS"
			if !c.Pass {
				verdict = "FAIL"
			}
			if _, err := fmt.Fprintf(w, "%s %s = %s %s %s\n", verdict, c.Figure.Key(), c.Figure.Text(), g.Gate.Op, g.Gate.Value); err != nil {
				return err
			}
		}
	}
	_, err := fmt.Fprintf(w, "gates: %d passed, %d failed\n", len(rs)-failed, failed)
	return err
}
