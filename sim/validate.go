package sim

import (
	"fmt"
	"io"
	"math"
	"sort"
	"text/tabwriter"

	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
)

// ValidationRow is one figure of a real and a simulated result side by
// side: Error is (sim - real) / real.
type ValidationRow struct {
	Services int
	// Nodes is the real run's topology.nodes for a kube-proxy row (0:
	// builtin rows, one node).
	Nodes    int
	Mode     string
	Figure   string // sync.full, lookup.p50, lookup.p99, fairness.jain; kube-proxy rows: sync.full, programming.p50, programming.p99
	Position string
	Real     float64
	Sim      float64
	Error    float64
}

// CompareResults pairs the figures sim validate checks, per mode and
// size present in both results: sync.full (p50 wall), lookup.p50 and
// lookup.p99 per position, and fairness.jain (the pooled minimum Jain
// index of the fixed positions).
func CompareResults(real, sim *reports.Result) []ValidationRow {
	type key struct {
		n    int
		mode string
	}
	simModes := map[key]reports.ModeResult{}
	for _, m := range sim.Modes {
		simModes[key{m.Services, m.Mode}] = m
	}
	var out []ValidationRow
	add := func(n int, mode, fig, pos string, r, s float64) {
		e := math.NaN()
		if r != 0 {
			e = (s - r) / r
		}
		out = append(out, ValidationRow{n, 0, mode, fig, pos, r, s, e})
	}
	for _, rm := range real.Modes {
		sm, ok := simModes[key{rm.Services, rm.Mode}]
		if !ok || rm.Implementation != "" {
			continue
		}
		if rm.Mode != scenarios.BaselineMode {
			add(rm.Services, rm.Mode, "sync.full", "", float64(rm.SyncFullSummary.P50), float64(sm.SyncFullSummary.P50))
		}
		sp := map[string]reports.PositionResult{}
		for _, p := range sm.Lookup {
			sp[p.Position] = p
		}
		for _, p := range rm.Lookup {
			s, ok := sp[p.Position]
			if !ok {
				continue
			}
			rl, sl := reports.Summarize(p.SamplesNs), reports.Summarize(s.SamplesNs)
			add(rm.Services, rm.Mode, "lookup.p50", p.Position, float64(rl.P50), float64(sl.P50))
			add(rm.Services, rm.Mode, "lookup.p99", p.Position, float64(rl.P99), float64(sl.P99))
		}
		if rm.Fairness.Services > 0 && sm.Fairness.Services > 0 {
			add(rm.Services, rm.Mode, "fairness.jain", "", rm.Fairness.MinJain, sm.Fairness.MinJain)
		}
	}
	out = append(out, compareKubeProxy(real, sim)...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Mode != out[j].Mode {
			return out[i].Mode < out[j].Mode
		}
		return out[i].Services < out[j].Services
	})
	return out
}

// WriteValidation prints rows as an aligned table: size, mode, figure,
// position, real, sim, error in percent.
func WriteValidation(w io.Writer, rows []ValidationRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "services\tnodes\tmode\tfigure\tposition\treal\tsim\terror\t")
	for _, r := range rows {
		pos := r.Position
		if pos == "" {
			pos = "-"
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%+.1f%%\t\n", r.Services, max(r.Nodes, 1), r.Mode, r.Figure, pos, fmtFig(r.Figure, r.Real), fmtFig(r.Figure, r.Sim), 100*r.Error)
	}
	return tw.Flush()
}

func fmtFig(fig string, v float64) string {
	if fig == "fairness.jain" {
		return fmt.Sprintf("%.4f", v)
	}
	return reports.FormatNs(v)
}
