package reports

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// WriteHTML writes one self-contained HTML page (no external resources;
// plots drawn by gonum.org/v1/plot as inline SVG): the findings, the
// capacity plan of a sweep (fits with their 95% prediction bands and the
// answer under b), lookup latency per position and mode, latency CDFs
// from the raw samples, full sync time per mode split by phase, endpoint
// shares per mode and scheduler, programming latency histograms when the
// result has them, the kube-proxy tables, one table per section of
// r.AllSections (every phase's, htmlSectionsOf), and the figure tables. Plots show the largest size of
// a sweep. A small inline script counts the drawn plots into
// #plot-check (used by the headless-browser test).
func WriteHTML(w io.Writer, r *Result, b Budgets) error {
	sizes := Sizes(r)
	if len(sizes) == 0 {
		return fmt.Errorf("result has no modes to report")
	}
	top := sizes[len(sizes)-1]
	pal := modeColors(r)
	page := htmlPage{Title: "proxybench", Findings: Findings(r), Budgets: b, Criterion: capacityCriterion}
	for _, w := range FaultWarnings(r) {
		page.Findings = append(page.Findings, "warning: "+w)
	}
	if r.Scenario != nil {
		page.Title += ": " + r.Scenario.Name
		page.Description = r.Scenario.Description
	}
	page.Meta = fmt.Sprintf("run %s · %s · kernel %s (%s) · %s · %d CPUs · %s", r.RunID, r.Engine, r.Machine.Kernel,
		r.Machine.KernelWhere, r.Machine.CPUModel, r.Machine.CPUs, r.Started.UTC().Format(time.RFC3339))
	if len(sizes) > 1 {
		page.Meta += fmt.Sprintf(" · sweep %v services (plots below the capacity section show %s)", sizes, thousands(top))
	} else {
		page.Meta += fmt.Sprintf(" · %s services", thousands(top))
	}
	add := func(sec *htmlSection, p *plot.Plot, wd, ht vg.Length, err error) {
		if err != nil {
			sec.Notes = append(sec.Notes, "plot failed: "+err.Error())
			return
		}
		svg, err := renderSVG(p, wd, ht)
		if err != nil {
			sec.Notes = append(sec.Notes, "plot failed: "+err.Error())
			return
		}
		sec.Plots = append(sec.Plots, svg)
	}

	if plan := CapacityPlan(r, b); plan != nil {
		sec := htmlSection{ID: "capacity", Title: fmt.Sprintf("Capacity: largest service count with p99 lookup ≤ %s (position last) and full sync ≤ %s", b.P99, b.Sync)}
		for _, mc := range plan {
			page.Answers = append(page.Answers, mc.Answer(b))
		}
		for _, fig := range []string{"lookup.latency.p99", "sync.full"} {
			p, err := capacityPlot(plan, fig, pal, b)
			add(&sec, p, 9*vg.Inch, 4.5*vg.Inch, err)
		}
		sec.Table = capacityTable(plan)
		page.Sections = append(page.Sections, sec)
	}

	// One set of plots per kernel when the run used several: each kernel's
	// modes with its own none baseline, never mixed in one plot.
	gfs := GuestFactors(r)
	groups, gnames := []*Result{r}, []string{""}
	if r.MultiKernel() {
		groups, gnames = nil, nil
		for _, k := range r.KernelNames() {
			groups, gnames = append(groups, r.ForKernel(k)), append(gnames, k)
		}
	}
	if r.soakStreamsOnly() {
		groups = nil // rendered from soak streams alone: no core figure
	}
	for gi, g := range groups {
		gid, gtitle := "", ""
		if gnames[gi] != "" {
			gid, gtitle = "-"+htmlID(gnames[gi]), " — kernel "+gnames[gi]+" ("+g.Machine.Kernel+")"
		}
		gpal := modeColors(g)
		var guest []string // beside every figure of a guest kernel
		if gf := guestFactorOf(gfs, gnames[gi]); gf != nil {
			guest = []string{guestNote(gf)}
		}
		lk := htmlSection{ID: "lookup" + gid, Title: "lookup.latency: TCP connect time through the ClusterIP, per service position" + gtitle, Notes: slices.Clone(guest)}
		if w := g.Machine.Warmup; w != nil { // as atop the Markdown kernel section
			lk.Notes = append([]string{WarmupNote(w)}, lk.Notes...)
		}
		for _, pc := range []float64{50, 99} {
			p, err := lookupBars(g, top, pc, gpal)
			add(&lk, p, 9*vg.Inch, 3.5*vg.Inch, err)
		}
		lk.Notes = append(lk.Notes, "Percentiles recomputed from the raw samples: "+Precision+".")
		page.Sections = append(page.Sections, lk)
		for _, s := range lookupKernelSections(g) { // beside lookup.latency
			page.Sections = append(page.Sections, htmlSection{ID: "lookup-kernel" + gid, Title: s.Title + gtitle,
				Notes: append(append(slices.Clone(guest), s.Intro), s.Notes...), Table: tableOf(s)})
		}

		cdf := htmlSection{ID: "cdf" + gid, Title: "lookup.latency CDFs (all repetitions, raw samples)" + gtitle, Notes: slices.Clone(guest)}
		for _, pos := range positions(g) {
			p, err := cdfPlot(g, top, pos, gpal)
			add(&cdf, p, 4.4*vg.Inch, 3.2*vg.Inch, err)
		}
		page.Sections = append(page.Sections, cdf)

		sy := htmlSection{ID: "sync" + gid, Title: "sync.full: program every service from empty (median repetition, by phase)" + gtitle, Notes: slices.Clone(guest)}
		p, err := syncPlot(g, top)
		add(&sy, p, 9*vg.Inch, 3.5*vg.Inch, err)
		page.Sections = append(page.Sections, sy)

		fa := htmlSection{ID: "fairness" + gid, Title: "fairness: connections per endpoint over the expected share, per mode and scheduler" + gtitle}
		for _, m := range g.Modes {
			if modeSize(g, m) != top || m.Fairness.Services == 0 {
				continue
			}
			p, err := fairnessPlot(m, g.modeLabel(m))
			add(&fa, p, 4.4*vg.Inch, 3.2*vg.Inch, err)
		}
		if len(fa.Plots) > 0 {
			page.Sections = append(page.Sections, fa)
		}

		pr := htmlSection{ID: "programming" + gid, Title: "programming.latency: endpoint change to the first connection on the new endpoint" + gtitle}
		for _, m := range g.Modes {
			if modeSize(g, m) != top || len(programmingSamples(m)) == 0 {
				continue
			}
			p, err := programmingPlot(m, g.modeLabel(m), gpal)
			add(&pr, p, 4.4*vg.Inch, 3.2*vg.Inch, err)
		}
		if len(pr.Plots) > 0 || len(pr.Notes) > 0 {
			page.Sections = append(page.Sections, pr)
		}
	}

	if rows := soakRows(r); len(rows) > 0 {
		sec := htmlSection{ID: "soak", Title: "soak: every series over time (one line per row)"}
		for _, m := range rows {
			if note := m.Soak.CutNote(); note != "" {
				sec.Notes = append(sec.Notes, r.modeLabel(m)+": "+note+".")
			}
		}
		for i := range soakPlots {
			p, err := soakPlot(r, rows, i, pal)
			add(&sec, p, 4.4*vg.Inch, 3.2*vg.Inch, err)
		}
		page.Sections = append(page.Sections, sec)
	}

	if r.hasImplementations() {
		// The Markdown report's tables, from the same table data.
		page.Sections = append(page.Sections,
			htmlSection{ID: "implementations", Title: sideBySideTitle(r), Notes: []string{sideBySideIntro}, Table: sideBySideTable(r)},
			htmlSection{ID: "kube-proxy", Title: "kube-proxy rows: setup and where the time went", Notes: kubeProxyExitNotes(r), Table: kubeProxySetupTable(r)})
	}

	// Every phase's section (Result.AllSections), as a table.
	page.Sections = append(page.Sections, htmlSectionsOf(r)...)

	page.Figures = htmlFigures(r)
	var buf bytes.Buffer
	if err := pageTmpl.Execute(&buf, page); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

type htmlPage struct {
	Title, Description, Meta string
	Findings, Answers        []string
	Budgets                  Budgets
	Criterion                string
	Sections                 []htmlSection
	Figures                  [][]string
}

type htmlSection struct {
	ID, Title string
	Plots     []template.HTML
	Notes     []string
	Table     [][]string // first row is the header
}

var svgHeader = regexp.MustCompile(`(?s)^<\?xml[^>]*\?>\s*(<!--.*?-->\s*)?`)

// renderSVG draws p on a wd×ht SVG canvas and returns the <svg> element.
func renderSVG(p *plot.Plot, wd, ht vg.Length) (template.HTML, error) {
	c := vgsvg.New(wd, ht)
	p.Draw(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return "", err
	}
	s := svgHeader.ReplaceAllString(b.String(), "")
	s = strings.Replace(s, "<svg ", `<svg class="plot" `, 1)
	return template.HTML(s), nil // #nosec: gonum's own SVG output
}

// modeColors gives each mode a stable colour (plotutil's palette).
func modeColors(r *Result) map[string]color.Color {
	out := map[string]color.Color{}
	for _, m := range r.Modes {
		if k := r.modeLabel(m); out[k] == nil {
			out[k] = plotutil.Color(len(out))
		}
	}
	return out
}

func modesAt(r *Result, size int) []ModeResult {
	var out []ModeResult
	for _, m := range r.Modes {
		if modeSize(r, m) == size {
			out = append(out, m)
		}
	}
	return out
}

func positions(r *Result) []string {
	var out []string
	for _, m := range r.Modes {
		for _, p := range m.Lookup {
			if !slices.Contains(out, p.Position) {
				out = append(out, p.Position)
			}
		}
	}
	return out
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

// lookupBars is a grouped bar chart of the pc-th percentile (µs) per
// position, one bar per mode.
func lookupBars(r *Result, size int, pc float64, pal map[string]color.Color) (*plot.Plot, error) {
	pos := positions(r)
	p := newPlot(fmt.Sprintf("p%g connect latency by service position (%s services)", pc, thousands(size)), "service position", "µs")
	ms := modesAt(r, size)
	// A 9-inch plot gives each of up to 4 positions about 140 pt: keep a
	// group of bars within 110 pt so groups neither overlap nor drift off
	// their position label.
	w := vg.Points(min(40, 110/float64(max(1, len(ms)))))
	for i, m := range ms {
		vals := make(plotter.Values, len(pos))
		for j, ps := range pos {
			s := posSummary(m, ps)
			v := float64(s.P50)
			if pc == 99 {
				v = float64(s.P99)
			}
			vals[j] = v / 1e3
		}
		bc, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, err
		}
		bc.Color = pal[r.modeLabel(m)]
		bc.LineStyle.Width = 0
		bc.Offset = w * vg.Length(float64(i)-float64(len(ms)-1)/2)
		p.Add(bc)
		p.Legend.Add(r.modeLabel(m), bc)
	}
	p.NominalX(pos...)
	p.X.Min, p.X.Max = -0.6, float64(len(pos))-0.4
	p.Y.Min = 0
	p.Y.Max *= 1.3 // room for the legend
	return p, nil
}

// cdfPlot draws the empirical CDF of connect times at one position, one
// line per mode, x on a log scale (µs).
func cdfPlot(r *Result, size int, pos string, pal map[string]color.Color) (*plot.Plot, error) {
	p := newPlot("CDF at position "+pos, "connect time (µs, log scale)", "fraction of connections")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	any := false
	for _, m := range modesAt(r, size) {
		for _, ps := range m.Lookup {
			if ps.Position != pos || len(ps.SamplesNs) == 0 {
				continue
			}
			xs := sortedFloats(ps.SamplesNs)
			n := len(xs)
			step := max(1, n/400)
			var pts plotter.XYs
			for i := 0; i < n; i += step {
				pts = append(pts, plotter.XY{X: math.Max(xs[i]/1e3, 1e-3), Y: float64(i+1) / float64(n)})
			}
			pts = append(pts, plotter.XY{X: math.Max(xs[n-1]/1e3, 1e-3), Y: 1})
			l, err := plotter.NewLine(pts)
			if err != nil {
				return nil, err
			}
			l.Color = pal[r.modeLabel(m)]
			l.Width = vg.Points(1.5)
			p.Add(l)
			p.Legend.Add(r.modeLabel(m), l)
			any = true
		}
	}
	if !any {
		return nil, fmt.Errorf("no raw samples at position %s", pos)
	}
	p.Legend.Left = false
	p.Legend.Top = false
	p.Legend.XOffs = -vg.Points(5)
	p.Legend.YOffs = vg.Points(5)
	p.Y.Min, p.Y.Max = 0, 1
	return p, nil
}

// syncPlot stacks each mode's median full sync by phase (ms).
func syncPlot(r *Result, size int) (*plot.Plot, error) {
	ms := modesAt(r, size)
	p := newPlot(fmt.Sprintf("full sync wall time by phase (%s services, median repetition)", thousands(size)), "mode", "ms")
	var names, phases []string
	for _, m := range ms {
		names = append(names, r.modeLabel(m))
		for k := range medianSync(m).Phases {
			if !slices.Contains(phases, k) {
				phases = append(phases, k)
			}
		}
	}
	order := map[string]int{"render": 0, "ensure": 1, "restore": 2, "apply": 3}
	sort.Slice(phases, func(i, j int) bool {
		oi, iok := order[phases[i]]
		oj, jok := order[phases[j]]
		if iok != jok {
			return iok
		}
		if iok {
			return oi < oj
		}
		return phases[i] < phases[j]
	})
	phases = append(phases, "other")
	var below *plotter.BarChart
	for i, ph := range phases {
		vals := make(plotter.Values, len(ms))
		for j, m := range ms {
			s := medianSync(m)
			if ph == "other" {
				rest := s.Wall
				for _, d := range s.Phases {
					rest -= d
				}
				vals[j] = math.Max(0, float64(rest)/1e6)
			} else {
				vals[j] = float64(s.Phases[ph]) / 1e6
			}
		}
		bc, err := plotter.NewBarChart(vals, vg.Points(50))
		if err != nil {
			return nil, err
		}
		bc.Color = plotutil.Color(i + 2)
		bc.LineStyle.Width = 0
		if below != nil {
			bc.StackOn(below)
		}
		below = bc
		p.Add(bc)
		p.Legend.Add(ph, bc)
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(names))-0.4
	p.Y.Min = 0
	p.Y.Max = math.Max(p.Y.Max, 1e-3) * 1.4 // room for the legend
	return p, nil
}

// fairnessPlot draws, for each fixed-position service of a mode, every
// endpoint's hits over the equal share (1 = fair), endpoints by IP.
func fairnessPlot(m ModeResult, label string) (*plot.Plot, error) {
	title := "endpoint shares: " + label
	p := newPlot(title, "endpoint (by IP)", "hits / equal share")
	i := 0
	for _, ps := range m.Lookup {
		if len(ps.Hits) == 0 {
			continue
		}
		ips := make([]string, 0, len(ps.Hits))
		total := 0
		for ip, h := range ps.Hits {
			ips = append(ips, ip)
			total += h
		}
		sort.Strings(ips)
		if total == 0 {
			continue
		}
		var pts plotter.XYs
		for j, ip := range ips {
			pts = append(pts, plotter.XY{X: float64(j + 1), Y: float64(ps.Hits[ip]) * float64(len(ips)) / float64(total)})
		}
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, err
		}
		l.Color, s.Color = plotutil.Color(i), plotutil.Color(i)
		s.Shape = plotutil.Shape(i)
		p.Add(l, s)
		p.Legend.Add(ps.Position, l, s)
		i++
	}
	if i == 0 {
		return nil, fmt.Errorf("mode %s recorded no hits", m.Mode)
	}
	ref := plotter.NewFunction(func(float64) float64 { return 1 })
	ref.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(ref)
	p.Y.Min = 0
	p.Y.Max = math.Max(p.Y.Max, 1.1) * 1.3
	return p, nil
}

// programmingPlot is a histogram of programming.latency (ms).
func programmingPlot(m ModeResult, label string, pal map[string]color.Color) (*plot.Plot, error) {
	p := newPlot("programming latency: "+label, "ms", "changes")
	ns := programmingSamples(m)
	vals := make(plotter.Values, len(ns))
	for i, v := range ns {
		vals[i] = float64(v) / 1e6
	}
	h, err := plotter.NewHist(vals, 30)
	if err != nil {
		return nil, err
	}
	h.FillColor = pal[label]
	p.Add(h)
	return p, nil
}

// capacityPlot draws one figure against service count: the points, each
// mode's chosen fit, its 95% prediction band and the budget.
func capacityPlot(plan []ModeCapacity, fig string, pal map[string]color.Color, b Budgets) (*plot.Plot, error) {
	budget := float64(b.P99)
	title := "p99 connect latency at position last vs services"
	if fig == "sync.full" {
		budget, title = float64(b.Sync), "full sync wall time vs services"
	}
	p := newPlot(title+" (fit, 95% prediction band, budget dashed)", "services", "ms")
	xmax := 0.0
	for _, mc := range plan {
		for _, cf := range mc.Figures {
			if cf.Figure == fig && len(cf.X) > 0 {
				xmax = math.Max(xmax, slices.Max(cf.X))
			}
		}
	}
	for _, mc := range plan {
		for _, cf := range mc.Figures {
			if cf.Figure != fig || len(cf.X) == 0 {
				continue
			}
			c := pal[mc.Mode]
			var pts plotter.XYs
			for i := range cf.X {
				pts = append(pts, plotter.XY{X: cf.X[i], Y: cf.Y[i] / 1e6})
			}
			var line, upper, lower plotter.XYs
			for k := 0; k <= 60; k++ {
				x := xmax * 1.15 * float64(k) / 60
				m, lo, hi := cf.Fit.At(x)
				line = append(line, plotter.XY{X: x, Y: m / 1e6})
				upper = append(upper, plotter.XY{X: x, Y: hi / 1e6})
				lower = append(lower, plotter.XY{X: x, Y: lo / 1e6})
			}
			slices.Reverse(lower)
			band, err := plotter.NewPolygon(append(upper, lower...))
			if err != nil {
				return nil, err
			}
			r, g, bl, _ := c.RGBA()
			band.Color = color.NRGBA{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8), 50}
			band.LineStyle.Width = 0
			sc, err := plotter.NewScatter(pts)
			if err != nil {
				return nil, err
			}
			sc.Color = c
			l, err := plotter.NewLine(line)
			if err != nil {
				return nil, err
			}
			l.Color = c
			l.Width = vg.Points(1.5)
			p.Add(band, l, sc)
			p.Legend.Add(fmt.Sprintf("%s (%s)", mc.Mode, cf.Fit.Model), l, sc)
		}
	}
	if budget > 0 {
		bl := plotter.NewFunction(func(float64) float64 { return budget / 1e6 })
		bl.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
		bl.Color = color.RGBA{200, 0, 0, 255}
		p.Add(bl)
		p.Legend.Add("budget "+FormatNs(budget), bl)
	}
	p.X.Min = 0
	p.X.Max = xmax * 1.15
	p.Y.Min = math.Min(0, p.Y.Min)
	p.Legend.Left = true
	return p, nil
}

func capacityTable(plan []ModeCapacity) [][]string {
	t := [][]string{{"mode", "figure", "points", "model", "fit", "R²", "AICc linear", "AICc constant", "limit (fit)", "limit (upper 95% band)"}}
	for _, mc := range plan {
		for _, cf := range mc.Figures {
			t = append(t, []string{mc.Mode, cf.Figure, fmt.Sprint(len(cf.X)), cf.Fit.Model, cf.Fit.Equation(true), fmt.Sprintf("%.3f", cf.Fit.R2),
				fmt.Sprintf("%.1f", cf.Fit.AICcLinear), fmt.Sprintf("%.1f", cf.Fit.AICcConstant),
				limitText(cf.Limit.Services, cf.Limit.Unbounded, cf.Limit.Extrapolated), limitText(cf.Limit.Conservative, cf.Limit.ConservativeUnbounded, false)})
		}
	}
	return t
}

func htmlFigures(r *Result) [][]string {
	t := [][]string{{"figure", "mode", "services", "position", "value", "n"}}
	for _, f := range Figures(r) {
		t = append(t, []string{f.Name, f.Mode, thousands(f.Services), f.Where(), f.Text(), fmt.Sprint(f.N)})
	}
	return t
}

var pageTmpl = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{.Title}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ccc; }
.meta { color: #555; font-size: 0.9em; }
.findings li, .answers li { margin: 0.3em 0; }
.answers { background: #f4f8ff; border: 1px solid #bcd; padding: 0.6em 1.2em; }
.plots { display: flex; flex-wrap: wrap; gap: 8px; }
svg.plot { background: #fff; max-width: 100%; height: auto; }
table { border-collapse: collapse; font-size: 0.85em; margin: 1em 0; }
td, th { border: 1px solid #ccc; padding: 2px 6px; text-align: right; }
th { background: #eee; } td:first-child, td:nth-child(2) { text-align: left; }
.note { color: #555; font-size: 0.9em; }
#plot-check { color: #888; font-size: 0.8em; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{with .Description}}<p>{{.}}</p>{{end}}
<p class="meta">{{.Meta}}</p>
<h2 id="findings">What this run found</h2>
<ul class="findings">{{range .Findings}}<li>{{.}}</li>{{end}}</ul>
{{with .Answers}}<div class="answers"><b>Capacity answer</b><ul>{{range .}}<li>{{.}}</li>{{end}}</ul></div>{{end}}
{{range .Sections}}
<h2 id="{{.ID}}">{{.Title}}</h2>
{{if eq .ID "capacity"}}<p class="note">{{$.Criterion}}</p>{{end}}
<div class="plots">{{range .Plots}}{{.}}{{end}}</div>
{{range .Notes}}<p class="note">{{.}}</p>{{end}}
{{with .Table}}<table>{{range $i, $row := .}}<tr>{{range $row}}{{if eq $i 0}}<th>{{.}}</th>{{else}}<td>{{.}}</td>{{end}}{{end}}</tr>{{end}}</table>{{end}}
{{end}}
<h2 id="figures">All figures</h2>
<table>{{range $i, $row := .Figures}}<tr>{{range $row}}{{if eq $i 0}}<th>{{.}}</th>{{else}}<td>{{.}}</td>{{end}}{{end}}</tr>{{end}}</table>
<p id="plot-check">plots: not checked</p>
<script>
(function () {
  var errors = [];
  window.addEventListener("error", function (e) { errors.push(String(e.message)); });
  var n = 0, svgs = document.querySelectorAll("svg.plot");
  for (var i = 0; i < svgs.length; i++) {
    var b = svgs[i].getBBox();
    if (b.width > 0 && b.height > 0 && svgs[i].querySelectorAll("path").length > 0) n++;
  }
  document.getElementById("plot-check").textContent = "plots rendered: " + n + " of " + svgs.length + "; errors: " + errors.length;
})();
</script>
</body>
</html>
`))

// programmingSamples are a mode's programming.latency samples (ns): the
// observed changes of its churn phases.
func programmingSamples(m ModeResult) []int64 {
	var out []int64
	for _, c := range m.Churn {
		for _, s := range c.Samples {
			if s.LatencyNs >= 0 {
				out = append(out, s.LatencyNs)
			}
		}
	}
	return out
}

// htmlID makes a kernel name usable in an element id ("uml:6.12" -> "uml-6-12").
func htmlID(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '-'
	}, s)
}
