package reports

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// soakCurve is one line of a soak plot per row: its name and the value
// of a sample (false: the sample has none).
type soakCurve struct {
	name string
	get  func(SoakSample) (float64, bool)
}

// soakPlots are the soak's series, one plot each, x the time since the
// soak's start (minutes): every figure of a sample.
var soakPlots = []struct {
	title, y string
	lines    []soakCurve
}{
	{"proxy CPU", "cores (CPU s per s)", []soakCurve{{"", func(s SoakSample) (float64, bool) {
		return float64(s.ProxyCPUNs) / float64(s.SpanNs), s.SpanNs > 0
	}}}},
	{"memory", "MiB", []soakCurve{
		{"proxybench RSS", func(s SoakSample) (float64, bool) { return mibOf(s.SelfRSSBytes), s.SelfRSSBytes > 0 }},
		{"proxybench heap", func(s SoakSample) (float64, bool) { return mibOf(s.SelfHeapBytes), s.SelfHeapBytes > 0 }},
		{"proxy RSS", func(s SoakSample) (float64, bool) { return mibOf(s.ProxyRSSBytes), s.ProxyRSSBytes > 0 }},
	}},
	{"conntrack entries of the node", "entries", []soakCurve{{"", func(s SoakSample) (float64, bool) { return float64(s.Conntrack), s.Conntrack >= 0 }}}},
	{"proxy objects in the node's kernel (read back)", "objects", []soakCurve{{"", func(s SoakSample) (float64, bool) { return float64(s.Objects), s.Objects >= 0 }}}},
	{"programming latency of the changes seen", "ms", []soakCurve{
		{"p50", func(s SoakSample) (float64, bool) { return float64(s.ProgP50Ns) / 1e6, s.Observed > 0 }},
		{"p99", func(s SoakSample) (float64, bool) { return float64(s.ProgP99Ns) / 1e6, s.Observed > 0 }},
	}},
	{"lookup: connect time", "ms", []soakCurve{
		{"p50", func(s SoakSample) (float64, bool) { return float64(s.LookupP50Ns) / 1e6, s.OK > 0 }},
		{"p99", func(s SoakSample) (float64, bool) { return float64(s.LookupP99Ns) / 1e6, s.OK > 0 }},
	}},
	{"failed connections", "per interval", []soakCurve{{"", func(s SoakSample) (float64, bool) { return float64(s.ErrorCount()), true }}}},
	{"proxybench goroutines", "goroutines", []soakCurve{{"", func(s SoakSample) (float64, bool) { return float64(s.SelfGoroutines), s.SelfGoroutines > 0 }}}},
}

// soakPlot draws plot i of soakPlots for rows: one line per row and
// line kind, the row's colour, dashes per kind.
func soakPlot(r *Result, rows []ModeResult, i int, pal map[string]color.Color) (*plot.Plot, error) {
	sp := soakPlots[i]
	p := newPlot("soak: "+sp.title, "minutes since the soak's start", sp.y)
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	p.Legend.Left = true
	drawn := false
	for _, m := range rows {
		label := r.modeLabel(m)
		for k, ln := range sp.lines {
			var pts plotter.XYs
			for _, s := range m.Soak.Samples {
				if v, ok := ln.get(s); ok {
					pts = append(pts, plotter.XY{X: float64(s.AtNs) / 6e10, Y: v})
				}
			}
			if len(pts) == 0 {
				continue
			}
			l, sc, err := plotter.NewLinePoints(pts)
			if err != nil {
				return nil, err
			}
			l.Color, sc.Color = pal[label], pal[label]
			l.Width = vg.Points(1.2)
			sc.Radius = vg.Points(1.5)
			sc.Shape = draw.CircleGlyph{}
			if k > 0 {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(2 * float64(k))}
			}
			p.Add(l, sc)
			name := label
			if ln.name != "" {
				name += " " + ln.name
			}
			p.Legend.Add(name, l)
			drawn = true
		}
	}
	if !drawn {
		return nil, fmt.Errorf("no sample has %s", sp.title)
	}
	return p, nil
}
