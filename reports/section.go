package reports

import (
	"fmt"
	"strconv"
)

// Section is one phase's part of a report, as data: a titled table whose
// rows belong to the result's rows (ModeResult, by label) or to the run.
// A phase of internal/runner returns it from its Run; the result keeps it
// in Result.Sections, and every report format (md, html, csv, junit,
// gobench, openmetrics) renders every section of Result.AllSections
// through this one shape (sections.go), so a new phase shows in each
// format without touching a renderer.
type Section struct {
	// Phase names the phase that wrote it ("modeSwitch"); Title is the
	// report heading ("mode switch under traffic").
	Phase string `json:"phase"`
	Title string `json:"title"`
	// Scope is "row" (each SectionRow belongs to one ModeResult) or
	// "run" (the section spans rows, e.g. a switch from one mode to
	// another).
	Scope string `json:"scope"`
	// Intro says what the table measures, one paragraph; Notes follow it.
	Intro string   `json:"intro,omitempty"`
	Notes []string `json:"notes,omitempty"`
	// Columns name the cells of every row, in order.
	Columns []Column     `json:"columns"`
	Rows    []SectionRow `json:"rows"`
}

// Column is one column of a Section. Unit is the unit of its numeric
// cells ("s", "ms", "ns", "count", "ratio", "bool"); "" for a text column.
// Figure, when set, is the figure name the column's values are exported
// under (csv, openmetrics, gobench); default the column's name.
// Key marks a column that tells apart the rows of one result row (a
// sync's kind, a lifecycle change): the machine-readable formats name a
// row by its label and its key cells' text (Section.RowNames).
type Column struct {
	Name   string `json:"name"`
	Unit   string `json:"unit,omitempty"`
	Figure string `json:"figure,omitempty"`
	Key    bool   `json:"key,omitempty"`
}

// SectionRow is one row of a Section: Row is the label of the result row
// it belongs to (a ModeResult's mode label, or for a run-scoped section
// what the row describes, such as "iptables → nftables (builtin)");
// Cells follow Section.Columns. Fail, when set, says why the row fails a
// check the phase makes (junit reports it as a failure).
type SectionRow struct {
	Row   string `json:"row"`
	Cells []Cell `json:"cells"`
	Fail  string `json:"fail,omitempty"`
}

// Cell is one cell: Text as shown, and Value when the cell is a number
// (in its column's unit), so the machine-readable formats export it.
type Cell struct {
	Text  string   `json:"text"`
	Value *float64 `json:"value,omitempty"`
}

// Num is a numeric cell shown with format (fmt verbs: "%.3f").
func Num(v float64, format string) Cell { return Cell{Text: fmt.Sprintf(format, v), Value: &v} }

// Int is an integer cell.
func Int(v int) Cell {
	f := float64(v)
	return Cell{Text: strconv.Itoa(v), Value: &f}
}

// Text is a text cell.
func Text(s string) Cell { return Cell{Text: s} }

// Bool is a yes/no cell exported as 1 or 0.
func Bool(b bool) Cell {
	f := 0.0
	s := "no"
	if b {
		f, s = 1, "yes"
	}
	return Cell{Text: s, Value: &f}
}

// Missing is a cell with no figure ("-"), e.g. a phase that stopped early.
func Missing() Cell { return Cell{Text: "-"} }

// AddRow appends a row of cells (one per column; an error when the count
// differs, a bug in the phase that builds it).
func (s *Section) AddRow(row string, cells ...Cell) error {
	if len(cells) != len(s.Columns) {
		return fmt.Errorf("section %s: row %q has %d cells for %d columns", s.Phase, row, len(cells), len(s.Columns))
	}
	s.Rows = append(s.Rows, SectionRow{Row: row, Cells: cells})
	return nil
}

// MergeSection adds sec to r.Sections: its rows are appended to the
// section of the same phase and title already there (one table per phase
// across rows, as each row's phase returns its own rows), else it is
// appended whole.
func (r *Result) MergeSection(sec Section) { r.Sections = mergeSection(r.Sections, sec) }

// mergeSection is MergeSection over a list: secs with sec merged in.
func mergeSection(secs []Section, sec Section) []Section {
	for i := range secs {
		if secs[i].Phase == sec.Phase && secs[i].Title == sec.Title {
			secs[i].Rows = append(secs[i].Rows, sec.Rows...)
			for _, n := range sec.Notes {
				if !containsString(secs[i].Notes, n) {
					secs[i].Notes = append(secs[i].Notes, n)
				}
			}
			return secs
		}
	}
	return append(secs, sec)
}

func containsString(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
