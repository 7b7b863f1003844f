package reports

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/perf/benchmath"
	"golang.org/x/perf/benchunit"
	"gonum.org/v1/gonum/stat"
)

// MarshalJSON writes non-finite medians, ratios, floors and p-values (a
// zero base, too few runs, a figure not in both sides) as null, which encoding/json cannot otherwise encode.
func (c Change) MarshalJSON() ([]byte, error) {
	type plain Change
	fin := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return &v
	}
	return json.Marshal(struct {
		plain
		Base      *float64 `json:"base"`
		New       *float64 `json:"new"`
		Ratio     *float64 `json:"ratio"`
		Floor     *float64 `json:"floor"`
		FloorDown *float64 `json:"floorDown"`
		P         *float64 `json:"p"`
		Verdict   string   `json:"verdict"`
		Text      string   `json:"text"`
	}{plain(c), fin(c.Base), fin(c.New), fin(c.Ratio), fin(c.Floor), fin(c.FloorDown), fin(c.P), jsonVerdict(c), c.String()})
}

// jsonVerdict is Verdict with its empty value spelled out as the text
// output does: "no verdict" (not significant) or "within tolerance"
// (significant, smaller than the tolerance).
func jsonVerdict(c Change) string {
	if c.Verdict == "" {
		return c.VerdictText()
	}
	return c.Verdict
}

// WriteComparisonJSON writes {"changes": [...]}, one object per judged
// figure with its per-run values, p-value, floors (floor: of an increase,
// floorDown: of a decrease) and verdict: "regression", "improvement",
// "no verdict", "within tolerance", "too few runs" or "not in both".
func WriteComparisonJSON(w io.Writer, cs []Change) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(struct {
		Changes []Change `json:"changes"`
	}{cs})
}

// WriteComparisonJUnit writes JUnit XML with one testcase per gated
// figure (Change.Gated): a flagged regression fails (message: the change, floor and
// p-value), a figure with too few runs is skipped with the runs it
// needs, every other one passes with its line in system-out.
func WriteComparisonJUnit(w io.Writer, cs []Change, opt CompareOptions) error {
	opt = opt.withDefaults()
	s := junitSuite{Name: "proxybench.compare", Time: "0", Props: []junitProp{
		{"alpha", fmt.Sprint(opt.Alpha)}, {"tolerance", fmt.Sprint(opt.Tolerance)}, {"test", "Mann-Whitney U, two-sided (golang.org/x/perf/benchmath)"},
	}}
	for _, c := range cs {
		if !c.Gated {
			continue
		}
		jc := junitCase{Name: c.Key(), Classname: "proxybench.compare." + c.Mode, Time: "0", SystemOut: c.String()}
		switch {
		case c.Regression():
			jc.Failure = &junitFailure{Message: c.String(), Type: "regression", Text: c.String()}
		case c.Verdict == "too few runs", c.Verdict == NotInBoth:
			jc.Skipped = &junitSkipped{Message: c.VerdictText()}
		}
		s.Cases = append(s.Cases, jc)
	}
	return writeJUnit(w, s)
}

// WriteSelfCheck reads a comparison as an A/A experiment (the same build
// measured twice): every flagged figure is a false alarm. It prints the
// comparison, the false-alarm and significance rates against the nominal
// α, and the noise floor per figure name (smallest, median and largest
// over modes and positions).
func WriteSelfCheck(w io.Writer, cs []Change, opt CompareOptions) error {
	opt = opt.withDefaults()
	if _, err := fmt.Fprintf(w, "A/A self-check: both sides measure the same build on this machine, so every flagged figure is a false alarm.\n\n"); err != nil {
		return err
	}
	if err := WriteComparison(w, cs, opt); err != nil {
		return err
	}
	judged, alarms, sig := 0, 0, 0
	gJudged, gAlarms := 0, 0
	floors := map[string][]float64{}
	var names []string
	few := 0
	for _, c := range cs {
		if c.Verdict == "too few runs" {
			few++
		}
		if c.Verdict == "too few runs" || !c.Judged() {
			continue
		}
		judged++
		if c.Flagged() {
			alarms++
		}
		if c.Gated {
			gJudged++
			if c.Flagged() {
				gAlarms++
			}
		}
		if c.Significant {
			sig++
		}
		if _, ok := floors[c.Figure]; !ok {
			names = append(names, c.Figure)
		}
		if !math.IsInf(c.Floor, 0) {
			floors[c.Figure] = append(floors[c.Figure], c.Floor)
		}
	}
	var b strings.Builder
	rate := func(n int) float64 {
		if judged == 0 {
			return math.NaN()
		}
		return float64(n) / float64(judged) * 100
	}
	fmt.Fprintf(&b, "\nfalse alarms: %d of %d judged figures (%.1f%%) flagged as a regression or improvement beyond the %.0f%% tolerance\n", alarms, judged, rate(alarms), opt.Tolerance*100)
	if len(opt.Gate) > 0 && gJudged > 0 {
		fmt.Fprintf(&b, "false alarms of the gated figures (%s): %d of %d (%.1f%%)\n", strings.Join(opt.Gate, ", "), gAlarms, gJudged, float64(gAlarms)/float64(gJudged)*100)
	}
	fmt.Fprintf(&b, "significant at α = %g whatever the size: %d of %d (%.1f%%); with no change the U test does so at most α of the time\n", opt.Alpha, sig, judged, rate(sig))
	if few > 0 {
		fmt.Fprintf(&b, "too few runs: %d figures (need ≥ %d runs per side at α = %g)\n", few, NeedRuns(opt.Alpha), opt.Alpha)
	}
	b.WriteString("\nnoise floor (smallest change the runs can resolve) per figure, over modes and positions:\n\n")
	b.WriteString("| figure | n | smallest | median | largest |\n|---|--:|--:|--:|--:|\n")
	for _, n := range names {
		fs := floors[n]
		if len(fs) == 0 {
			fmt.Fprintf(&b, "| %s | 0 | n/a | n/a | n/a |\n", n)
			continue
		}
		slices.Sort(fs)
		fmt.Fprintf(&b, "| %s | %d | %.1f%% | %.1f%% | %.1f%% |\n", n, len(fs), fs[0]*100, stat.Quantile(0.5, stat.Empirical, fs, nil)*100, fs[len(fs)-1]*100)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteBenchstat writes the comparison in the table shape of benchstat
// (golang.org/x/perf/cmd/benchstat): one table per figure, a row per
// mode, position and size, each side's median across runs ± the
// relative half-width of its 95% confidence interval, and the change or
// "~" with the U test's p-value and run count; footnotes carry
// benchmath's warnings (too few runs for an interval or a verdict).
// Durations are in seconds with SI prefixes ("sec/op"), ratios plain.
func WriteBenchstat(w io.Writer, cs []Change, basePaths, newPaths []string) error {
	label := func(ps []string) string {
		if len(ps) == 1 {
			return filepath.Base(ps[0])
		}
		return fmt.Sprintf("%s (+%d)", filepath.Base(ps[0]), len(ps)-1)
	}
	bl, nl := label(basePaths), label(newPaths)
	var notes []string
	note := func(errs []error) string {
		var marks []string
		for _, e := range errs {
			i := slices.Index(notes, e.Error())
			if i < 0 {
				notes = append(notes, e.Error())
				i = len(notes) - 1
			}
			marks = append(marks, superscript(i+1))
		}
		if len(marks) == 0 {
			return ""
		}
		return " " + strings.Join(marks, " ")
	}
	var out strings.Builder
	var names, absent []string
	for _, c := range cs {
		if !c.Judged() {
			absent = append(absent, c.Key()+": "+c.VerdictText())
			continue
		}
		if !slices.Contains(names, c.Figure) {
			names = append(names, c.Figure)
		}
	}
	for ti, name := range names {
		dur := c0(cs, name).Unit == "ns"
		bytes := c0(cs, name).Unit == "bytes"
		unit := "ratio"
		switch {
		case dur:
			unit = "sec/op"
		case bytes:
			unit = "B"
		}
		type row struct{ name, base, cur, delta string }
		var rows []row
		for _, c := range cs {
			if c.Figure != name || !c.Judged() {
				continue
			}
			th := &benchmath.Thresholds{CompareAlpha: c.Alpha}
			bs := benchmath.NewSample(slices.Clone(c.BaseRuns), th)
			ns := benchmath.NewSample(slices.Clone(c.NewRuns), th)
			bsum := benchmath.AssumeNothing.Summary(bs, 0.95)
			nsum := benchmath.AssumeNothing.Summary(ns, 0.95)
			cmp := benchmath.AssumeNothing.Compare(bs, ns)
			val := func(v float64) string {
				if dur {
					return benchunit.Scale(v/1e9, benchunit.Decimal)
				}
				if bytes {
					return benchunit.Scale(v, benchunit.Binary)
				}
				return fmt.Sprintf("%.3f", v)
			}
			rn := "mode=" + c.Mode
			if c.Kernel != "" {
				rn += "@" + c.Kernel
			}
			if c.Position != "" {
				rn += "/pos=" + c.Position
			}
			rn += fmt.Sprintf("/services=%d", c.Services)
			rows = append(rows, row{rn,
				val(bsum.Center) + " ± " + bsum.PctRangeString() + note(bsum.Warnings),
				val(nsum.Center) + " ± " + nsum.PctRangeString() + note(nsum.Warnings),
				cmp.FormatDelta(bsum.Center, nsum.Center) + " (" + cmp.String() + ")" + note(cmp.Warnings)})
		}
		wn, wb, wc := utf8.RuneCountInString(name), 0, 0
		for _, r := range rows {
			wn = max(wn, utf8.RuneCountInString(r.name))
			wb = max(wb, utf8.RuneCountInString(r.base), utf8.RuneCountInString(bl), len(unit))
			wc = max(wc, utf8.RuneCountInString(r.cur)+2+maxLen(rows, func(x row) string { return x.delta }), utf8.RuneCountInString(nl))
		}
		if ti > 0 {
			out.WriteString("\n")
		}
		fmt.Fprintf(&out, "%s │ %s │ %s │\n", pad(name, wn), center(bl, wb), center(nl, wc))
		fmt.Fprintf(&out, "%s │ %s │ %s │\n", pad("", wn), center(unit, wb), pad(center(unit, utf8.RuneCountInString(unit)+2)+"  vs base", wc))
		for _, r := range rows {
			fmt.Fprintf(&out, "%s   %s   %s\n", pad(r.name, wn), lpad(r.base, wb), r.cur+"  "+r.delta)
		}
	}
	for i, n := range notes {
		fmt.Fprintf(&out, "%s %s\n", superscript(i+1), n)
	}
	for _, a := range absent {
		fmt.Fprintf(&out, "%s\n", a)
	}
	_, err := io.WriteString(w, out.String())
	return err
}

func c0(cs []Change, name string) Change {
	for _, c := range cs {
		if c.Figure == name {
			return c
		}
	}
	return Change{}
}

func maxLen[T any](xs []T, f func(T) string) int {
	m := 0
	for _, x := range xs {
		m = max(m, utf8.RuneCountInString(f(x)))
	}
	return m
}

func pad(s string, w int) string {
	return s + strings.Repeat(" ", max(0, w-utf8.RuneCountInString(s)))
}

func lpad(s string, w int) string {
	return strings.Repeat(" ", max(0, w-utf8.RuneCountInString(s))) + s
}

func center(s string, w int) string {
	n := utf8.RuneCountInString(s)
	if n >= w {
		return s
	}
	l := (w - n) / 2
	return strings.Repeat(" ", l) + s + strings.Repeat(" ", w-n-l)
}

// superscript writes n as superscript digits, as benchstat marks notes.
func superscript(n int) string {
	digits := []rune("⁰¹²³⁴⁵⁶⁷⁸⁹")
	var b strings.Builder
	for _, d := range fmt.Sprint(n) {
		b.WriteRune(digits[d-'0'])
	}
	return b.String()
}
