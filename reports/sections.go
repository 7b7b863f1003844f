package reports

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// The renderers of Sections: each format calls one function here, over
// r.AllSections(), so a new phase's Section shows in every format without
// a renderer knowing the phase:
//
//   - md: writeSectionsMarkdown, a "### <Title>" table per section (first
//     column the row label, units in the headers, a "check" column when a
//     row fails), its intro above and notes below; sections of a phase
//     with a bespoke Markdown writer are left to it (bespokeMarkdown);
//   - html: htmlSectionsOf, the same table as a page section;
//   - csv: csvSectionRecords, one record per numeric cell;
//   - junit: junitSectionCases, one testcase per row, failing when
//     SectionRow.Fail is set;
//   - gobench: writeGoBenchSections, one line per numeric cell;
//   - openmetrics: openMetricsSectionFamilies, one gauge family per
//     phase and figure.

// AllSections returns r's sections: r.Sections, then a section built
// from the typed fields (ModeResult.Transitions, .SyncDisruption,
// .Lifecycle, .ConnReuse, and .Churn's kube-proxy accounts) of each of
// the phases that have them but no section in r.Sections, as results
// saved before phases returned sections have (one row set per
// ModeResult, labelled as the Markdown tables label it), then the
// sections that put kube-proxy rows' per-change figures beside
// builtin's (PhaseSideBySide). r is not changed.
func (r *Result) AllSections() []Section {
	out := append([]Section(nil), r.Sections...)
	have := map[string]bool{}
	for _, s := range r.Sections {
		have[s.Phase] = true
	}
	for _, b := range typedSections {
		if have[b.phase] {
			continue
		}
		for i := range r.Modes {
			for _, sec := range b.report(r.label(r.Modes[i]), &r.Modes[i]) {
				out = mergeSection(out, sec)
			}
		}
	}
	return append(out, PhaseSideBySide(r)...)
}

// typedSections are the phases whose figures a ModeResult keeps in typed
// fields, with their Report, in the Markdown report's order.
var typedSections = []struct {
	phase  string
	report func(label string, mr *ModeResult) []Section
}{
	{PhaseLookupKernel, LookupKernelReport},
	{PhaseTransitions, TransitionsReport},
	{PhaseSyncDisruption, SyncDisruptionReport},
	{PhaseLifecycle, LifecycleReport},
	{PhaseConnReuse, ConnReuseReport},
	{PhaseChurn, ChurnKubeProxyReport},
	{PhaseSoak, SoakReport},
	{PhaseOutOfBand, OutOfBandReport},
	{PhaseSliceChurn, SliceChurnReport},
}

// SyncDisruptionReport is the sync-disruption phase's sections of one
// row, in the shape of internal/runner's Phase.Report: label is the
// row's label, mr its result; SyncDisruptionSection of mr.SyncDisruption,
// none when mr has no window.
func SyncDisruptionReport(label string, mr *ModeResult) []Section {
	if len(mr.SyncDisruption) == 0 {
		return nil
	}
	return []Section{SyncDisruptionSection(label, mr.SyncDisruption)}
}

// LifecycleReport is the lifecycle phase's sections of one row (as
// SyncDisruptionReport): LifecycleSection of mr.Lifecycle, none when mr
// has no change.
func LifecycleReport(label string, mr *ModeResult) []Section {
	if len(mr.Lifecycle) == 0 {
		return nil
	}
	return []Section{LifecycleSection(label, mr.Lifecycle)}
}

// ConnReuseReport is the conn-reuse phase's sections of one row (as
// SyncDisruptionReport): ConnReuseSection of mr.ConnReuse, none when mr
// has no pass.
func ConnReuseReport(label string, mr *ModeResult) []Section {
	if len(mr.ConnReuse) == 0 {
		return nil
	}
	return []Section{ConnReuseSection(label, mr.ConnReuse)}
}

// TransitionsReport is the transitions phase's sections of one row (as
// SyncDisruptionReport): TransitionsSection of mr.Transitions with the
// DNS check mr.DNS, none when mr has no transition.
func TransitionsReport(label string, mr *ModeResult) []Section {
	if len(mr.Transitions) == 0 {
		return nil
	}
	return []Section{TransitionsSection(label, mr.Transitions, mr.DNS)}
}

// RowNames names every row of s, each name unique within s: the row's
// label, then the text of its key cells (Column.Key; "-" and empty left
// out) joined by ", " ("iptables, full (cold start)"), then " #2", " #3"
// for rows still alike. csv, junit, gobench and openmetrics identify a
// row by it.
func (s Section) RowNames() []string { return rowNames(s, map[string]int{}) }

// rowNames is RowNames with seen shared between sections (counts per
// name), so that rows of two sections of one phase get distinct names.
func rowNames(s Section, seen map[string]int) []string {
	out := make([]string, len(s.Rows))
	for i, row := range s.Rows {
		parts := []string{row.Row}
		for j, c := range s.Columns {
			if c.Key && j < len(row.Cells) {
				if t := row.Cells[j].Text; t != "" && t != "-" {
					parts = append(parts, t)
				}
			}
		}
		out[i] = uniqueName(strings.Join(parts, ", "), seen)
	}
	return out
}

// uniqueName returns name, or name " #n" when seen already holds it
// n-1 times, and counts it in seen.
func uniqueName(name string, seen map[string]int) string {
	seen[name]++
	if n := seen[name]; n > 1 {
		alt := fmt.Sprintf("%s #%d", name, n)
		for seen[alt] > 0 {
			n++
			alt = fmt.Sprintf("%s #%d", name, n)
		}
		seen[alt]++
		return alt
	}
	return name
}

// columnNames names s's columns, each unique within s (" #2" for a
// repeated name).
func columnNames(s Section) []string {
	seen := map[string]int{}
	out := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		out[i] = uniqueName(c.Name, seen)
	}
	return out
}

// columnHeader is a column's name with its unit in brackets ("sync wall
// (s)"); counts, yes/no and text columns show the name alone.
func columnHeader(c Column) string {
	switch c.Unit {
	case "", "count", "bool":
		return c.Name
	}
	return c.Name + " (" + c.Unit + ")"
}

// firstHeader heads a section's first column: the result row ("mode")
// for a row-scoped section, what the row describes ("row") for a
// run-scoped one.
func firstHeader(s Section) string {
	if s.Scope == "run" {
		return "row"
	}
	return "mode"
}

// hasFail reports whether any row of s fails its phase's check.
func hasFail(s Section) bool {
	for _, row := range s.Rows {
		if row.Fail != "" {
			return true
		}
	}
	return false
}

// checkText is a row's check cell: "FAIL: why", or "ok".
func checkText(row SectionRow) string {
	if row.Fail != "" {
		return "FAIL: " + row.Fail
	}
	return "ok"
}

// cellText is row's cell i as shown ("-" when the row has fewer cells
// than the section has columns).
func cellText(row SectionRow, i int) string {
	if i >= len(row.Cells) || row.Cells[i].Text == "" {
		return "-"
	}
	return row.Cells[i].Text
}

// tableOf lays s out as rows of text, the first row the header.
func tableOf(s Section) [][]string {
	fail := hasFail(s)
	head := []string{firstHeader(s)}
	for _, c := range s.Columns {
		head = append(head, columnHeader(c))
	}
	if fail {
		head = append(head, "check")
	}
	t := [][]string{head}
	for _, row := range s.Rows {
		line := []string{row.Row}
		for i := range s.Columns {
			line = append(line, cellText(row, i))
		}
		if fail {
			line = append(line, checkText(row))
		}
		t = append(t, line)
	}
	return t
}

// writeSectionsMarkdown writes every section of r but those left to a
// bespoke writer (bespokeMarkdown): "### <Title>", the intro, a table
// (numeric columns right-aligned) and the notes as a list.
func writeSectionsMarkdown(b *strings.Builder, r *Result) {
	for _, s := range r.AllSections() {
		if bespokeMarkdownShows(r, s.Phase) {
			continue
		}
		writeSectionMarkdown(b, s)
	}
}

// writeSectionMarkdown writes one section as writeSectionsMarkdown does.
func writeSectionMarkdown(b *strings.Builder, s Section) {
	md := strings.NewReplacer("|", `\|`, "\n", " ")
	fmt.Fprintf(b, "\n### %s\n\n", md.Replace(s.Title))
	if s.Intro != "" {
		b.WriteString(s.Intro + "\n\n")
	}
	t := tableOf(s)
	align := []string{"---"}
	for _, c := range s.Columns {
		if c.Unit != "" {
			align = append(align, "--:")
		} else {
			align = append(align, "---")
		}
	}
	if hasFail(s) {
		align = append(align, "---")
	}
	for i, line := range t {
		for j := range line {
			line[j] = md.Replace(line[j])
		}
		b.WriteString("| " + strings.Join(line, " | ") + " |\n")
		if i == 0 {
			b.WriteString("|" + strings.Join(align, "|") + "|\n")
		}
	}
	if len(s.Notes) > 0 {
		b.WriteString("\n")
		for _, n := range s.Notes {
			b.WriteString("- " + n + "\n")
		}
	}
}

// htmlSectionsOf is every section of r as a page section: its title, the
// intro and notes, and tableOf's table.
func htmlSectionsOf(r *Result) []htmlSection {
	var out []htmlSection
	seen := map[string]int{}
	for _, s := range r.AllSections() {
		if s.Phase == PhaseLookupKernel {
			continue // WriteHTML puts it beside lookup.latency
		}
		sec := htmlSection{ID: uniqueName("section-"+htmlID(s.Phase), seen), Title: s.Title, Table: tableOf(s)}
		sec.ID = strings.ReplaceAll(sec.ID, " #", "-")
		if s.Intro != "" {
			sec.Notes = append(sec.Notes, s.Intro)
		}
		sec.Notes = append(sec.Notes, s.Notes...)
		out = append(out, sec)
	}
	return out
}

// sectionValue is one numeric cell of a section, as the machine-readable
// formats export it.
type sectionValue struct {
	Phase, Title string
	// Row is the row's name (Section.RowNames, unique within its phase),
	// Column the column's name (unique within its section), Figure its
	// export name (Column.Figure, default the name).
	Row, Column, Figure string
	Unit                string
	Value               float64
}

// sectionValues lists the numeric cells of secs, section by section, row
// by row. Row names are unique within a phase across its sections.
func sectionValues(secs []Section) []sectionValue {
	var out []sectionValue
	seen := map[string]map[string]int{}
	for _, s := range secs {
		if seen[s.Phase] == nil {
			seen[s.Phase] = map[string]int{}
		}
		rows := rowNames(s, seen[s.Phase])
		cols := columnNames(s)
		for i, row := range s.Rows {
			for j, c := range s.Columns {
				if j >= len(row.Cells) || row.Cells[j].Value == nil {
					continue
				}
				fig := c.Figure
				if fig == "" {
					fig = cols[j]
				}
				out = append(out, sectionValue{Phase: s.Phase, Title: s.Title, Row: rows[i], Column: cols[j], Figure: fig,
					Unit: c.Unit, Value: *row.Cells[j].Value})
			}
		}
	}
	return out
}

// csvSectionRecords are the CSV records of r's sections, in WriteCSV's
// columns: mode is the section row's name (Section.RowNames), figure
// "<phase>.<figure>", value in its column's unit but durations in ns (as
// every duration of the CSV); services, position and n are empty.
// Text-only cells are not written.
func csvSectionRecords(r *Result) [][]string {
	var out [][]string
	for _, v := range sectionValues(r.AllSections()) {
		val, unit := inNs(v.Value, v.Unit)
		out = append(out, []string{v.Row, "", "", v.Phase + "." + v.Figure,
			strconv.FormatFloat(val, 'g', -1, 64), unit, ""})
	}
	return out
}

// junitSectionCases is one testcase per section row: name
// "<phase>/<row name>", classname proxybench.<phase>, every cell in
// system-out, and a failure (type "section") when the row's Fail is set.
func junitSectionCases(r *Result) []junitCase {
	var out []junitCase
	seen := map[string]map[string]int{}
	for _, s := range r.AllSections() {
		if seen[s.Phase] == nil {
			seen[s.Phase] = map[string]int{}
		}
		rows := rowNames(s, seen[s.Phase])
		for i, row := range s.Rows {
			name := s.Phase + "/" + rows[i]
			var cells []string
			for j, c := range s.Columns {
				cells = append(cells, columnHeader(c)+" = "+cellText(row, j))
			}
			jc := junitCase{Name: name, Classname: "proxybench." + s.Phase, Time: "0",
				SystemOut: s.Title + ": " + strings.Join(cells, "; ")}
			if row.Fail != "" {
				jc.Failure = &junitFailure{Message: row.Fail, Type: "section", Text: name + ": " + row.Fail}
			}
			out = append(out, jc)
		}
	}
	return out
}

// benchPart sanitises a name part of a benchmark line as WriteGoBench
// does ("iptables@uml", spaces to _, / to -), and = to - so that the
// part's key=value split stays where it is.
var benchPart = strings.NewReplacer(" (uml)", "@uml", "/", "-", " ", "_", "=", "-", "\t", "_", "\n", "_")

// writeGoBenchSections writes one Go benchmark line per numeric section
// cell (NaN and infinities left out), its value in its column's unit
// ("value" when the column has none) but durations in ns, as the other
// lines' ns/op and p99-ns:
//
//	BenchmarkSection/phase=syncDisruption/row=iptables,_full_(cold_start)/figure=sync.wall 	1	503000000 ns
func writeGoBenchSections(b *strings.Builder, r *Result) {
	for _, v := range sectionValues(r.AllSections()) {
		if math.IsNaN(v.Value) || math.IsInf(v.Value, 0) {
			continue
		}
		val, unit := inNs(v.Value, v.Unit)
		unit = benchPart.Replace(unit)
		if unit == "" {
			unit = "value"
		}
		fmt.Fprintf(b, "BenchmarkSection/phase=%s/row=%s/figure=%s \t1\t%s %s\n", benchPart.Replace(v.Phase),
			benchPart.Replace(v.Row), benchPart.Replace(v.Figure), strconv.FormatFloat(val, 'f', -1, 64), unit)
	}
}

// perSecond is how many of a duration unit make a second (0: unit is not
// a duration).
func perSecond(unit string) float64 {
	switch unit {
	case "s":
		return 1
	case "ms":
		return 1e3
	case "µs", "us":
		return 1e6
	case "ns":
		return 1e9
	}
	return 0
}

// inNs converts a cell's value to ns when its unit is a duration (whole
// ns, as the result's raw samples), the convention of WriteCSV and
// WriteGoBench; other units pass unchanged.
func inNs(v float64, unit string) (float64, string) {
	switch k := perSecond(unit); {
	case k == 0, unit == "ns":
		return v, unit
	default:
		return math.Round(v * (1e9 / k)), "ns"
	}
}

// metricName turns a phase or figure name into a metric name part:
// camelCase to snake_case, every other character but [a-z0-9] to _
// ("syncDisruption" -> "sync_disruption", "sync.wall" -> "sync_wall").
func metricName(s string) string {
	var b strings.Builder
	prev := byte('_')
	for _, c := range s {
		switch {
		case c >= 'A' && c <= 'Z':
			if prev != '_' {
				b.WriteByte('_')
			}
			c += 'a' - 'A'
			b.WriteRune(c)
			prev = byte(c)
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			b.WriteRune(c)
			prev = byte(c)
		default:
			if prev != '_' {
				b.WriteByte('_')
				prev = '_'
			}
		}
	}
	return strings.Trim(b.String(), "_")
}

// openMetricsSectionFamilies is one gauge family per phase and figure of
// r's sections: proxybench_section_<phase>_<figure> in snake case, with
// _seconds (value in seconds) for a duration column (unit s, ms, µs or
// ns) and _bytes for a bytes column, e.g.
// proxybench_section_sync_disruption_sync_wall_seconds; labels scenario,
// run_id, phase, row (Section.RowNames) and column. Rows are unique
// within a phase and columns within a section, so no two series of a
// family share their labels.
func openMetricsSectionFamilies(r *Result) []*dto.MetricFamily {
	scen := ""
	if r.Scenario != nil {
		scen = r.Scenario.Name
	}
	fams := map[string]*dto.MetricFamily{}
	var order []string
	for _, v := range sectionValues(r.AllSections()) {
		name := "proxybench_section_" + metricName(v.Phase) + "_" + metricName(v.Figure)
		val, unit := v.Value, v.Unit
		if k := perSecond(v.Unit); k > 0 {
			name += "_seconds"
			val, unit = val/k, "seconds"
		} else if v.Unit == "bytes" {
			name += "_bytes"
		}
		f, ok := fams[name]
		if !ok {
			help := fmt.Sprintf("%s (phase %s): %s", v.Title, v.Phase, v.Column)
			if unit != "" {
				help += " (" + unit + ")"
			}
			f = &dto.MetricFamily{Name: proto.String(name), Help: proto.String(help), Type: dto.MetricType_GAUGE.Enum()}
			fams[name] = f
			order = append(order, name)
		}
		var labels []*dto.LabelPair
		for _, kv := range [][2]string{{"scenario", scen}, {"run_id", r.RunID}, {"phase", v.Phase}, {"row", v.Row}, {"column", v.Column}} {
			labels = append(labels, &dto.LabelPair{Name: proto.String(kv[0]), Value: proto.String(kv[1])})
		}
		f.Metric = append(f.Metric, &dto.Metric{Label: labels, Gauge: &dto.Gauge{Value: proto.Float64(val)}})
	}
	out := make([]*dto.MetricFamily, 0, len(order))
	for _, n := range order {
		out = append(out, fams[n])
	}
	return out
}
