package reports

import (
	"encoding/csv"
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Formats lists the report formats WriteFormat accepts.
var Formats = []string{"md", "html", "csv", "junit", "gobench", "openmetrics"}

// ReportOptions configures WriteFormat.
type ReportOptions struct {
	// Budgets answer the capacity question of a sweep (md and html).
	Budgets Budgets
	// Gates, when set, make the junit format one testcase per gate check
	// instead of one per figure.
	Gates []GateResult
}

// DefaultBudgets are the capacity budgets when none are given.
var DefaultBudgets = Budgets{P99: 2 * time.Millisecond, Sync: 5 * time.Second}

// WriteFormat renders r in format (one of Formats).
func WriteFormat(w io.Writer, r *Result, format string, opt ReportOptions) error {
	if opt.Budgets == (Budgets{}) {
		opt.Budgets = DefaultBudgets
	}
	switch format {
	case "md":
		return WriteReportMarkdown(w, r, opt.Budgets)
	case "html":
		return WriteHTML(w, r, opt.Budgets)
	case "csv":
		return WriteCSV(w, r)
	case "junit":
		if opt.Gates != nil {
			return WriteJUnitGates(w, r, opt.Gates)
		}
		return WriteJUnitFigures(w, r)
	case "gobench":
		return WriteGoBench(w, r)
	case "openmetrics":
		return WriteOpenMetrics(w, r)
	}
	return fmt.Errorf("unknown report format %q; use one of %s", format, strings.Join(Formats, ", "))
}

// WriteReportMarkdown is WriteMarkdown followed by the findings (one
// sentence per mode) and, for a sweep, the capacity plan.
func WriteReportMarkdown(w io.Writer, r *Result, b Budgets) error {
	if err := WriteMarkdown(w, r); err != nil {
		return err
	}
	var s strings.Builder
	s.WriteString("\n### findings\n\n")
	for _, f := range Findings(r) {
		fmt.Fprintf(&s, "- %s\n", f)
	}
	if plan := CapacityPlan(r, b); plan != nil {
		fmt.Fprintf(&s, "\n### capacity: largest service count under p99 lookup ≤ %s (position last) and full sync ≤ %s\n\n", b.P99, b.Sync)
		s.WriteString(capacityCriterion + "\n\n")
		s.WriteString("| mode | figure | model | fit | R² | AICc linear | AICc constant | limit (fit) | limit (upper 95% band) |\n")
		s.WriteString("|---|---|---|---|--:|--:|--:|--:|--:|\n")
		for _, mc := range plan {
			for _, cf := range mc.Figures {
				fmt.Fprintf(&s, "| %s | %s | %s | %s | %.3f | %.1f | %.1f | %s | %s |\n", mc.Mode, cf.Figure, cf.Fit.Model,
					cf.Fit.Equation(true), cf.Fit.R2, cf.Fit.AICcLinear, cf.Fit.AICcConstant,
					limitText(cf.Limit.Services, cf.Limit.Unbounded, cf.Limit.Extrapolated), limitText(cf.Limit.Conservative, cf.Limit.ConservativeUnbounded, false))
			}
		}
		s.WriteString("\n")
		for _, mc := range plan {
			fmt.Fprintf(&s, "- **%s**\n", mc.Answer(b))
		}
	}
	_, err := io.WriteString(w, s.String())
	return err
}

// capacityCriterion states how the capacity fits choose their model.
const capacityCriterion = "Each figure is fitted against the service count with a constant and a linear model " +
	"(least squares, one point per repetition and size); the model with the lower AICc (corrected Akaike information criterion) is used. " +
	"Limits solve the fitted mean, and conservatively its upper 95% prediction bound, for the budget; " +
	"a limit beyond the largest measured size is extrapolated."

func limitText(n int, unbounded, extrapolated bool) string {
	switch {
	case unbounded:
		return "≥ " + thousands(n) + " (no limit)"
	case n == 0:
		return "none"
	case extrapolated:
		return thousands(n) + " (extrapolated)"
	}
	return thousands(n)
}

// WriteCSV writes one row per figure: mode, services, position, figure,
// value, unit, n (values in unit; durations in ns). A mode run in the
// user-mode-linux guest of a split run is written "mode@uml". Then one
// row per numeric cell of r.AllSections (csvSectionRecords): mode the
// section row's name, figure "<phase>.<figure>", value in its column's
// unit (durations in ns).
func WriteCSV(w io.Writer, r *Result) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"mode", "services", "position", "figure", "value", "unit", "n"})
	for _, f := range Figures(r) {
		mode := f.Mode
		if f.Kernel != "" {
			mode += "@" + f.Kernel
		}
		_ = cw.Write([]string{mode, strconv.Itoa(f.Services), f.Where(), f.Name,
			strconv.FormatFloat(f.Value, 'g', -1, 64), f.Unit, strconv.Itoa(f.N)})
	}
	for _, rec := range csvSectionRecords(r) {
		_ = cw.Write(rec)
	}
	cw.Flush()
	return cw.Error()
}

type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Time     string      `xml:"time,attr"`
	Props    []junitProp `xml:"properties>property,omitempty"`
	Cases    []junitCase `xml:"testcase"`
}

type junitProp struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

func junitSuiteFor(r *Result, kind string) junitSuite {
	name := "proxybench"
	if r.Scenario != nil {
		name += "." + r.Scenario.Name
	}
	s := junitSuite{Name: name + "." + kind, Time: fmt.Sprintf("%.3f", r.Finished.Sub(r.Started).Seconds()), Props: []junitProp{
		{"runID", r.RunID}, {"hostname", r.Machine.Hostname}, {"kernel", r.Machine.Kernel},
		{"kernelWhere", r.Machine.KernelWhere}, {"cpuModel", r.Machine.CPUModel},
	}}
	// A partial result is one failing testcase, so a CI dashboard cannot
	// read a run that stopped early as a complete one.
	if note := PartialNote(r); note != "" {
		s.Props = append(s.Props, junitProp{"partial", r.Partial})
		s.Cases = append(s.Cases, junitCase{Name: "run complete", Classname: "proxybench.run", Time: "0",
			Failure: &junitFailure{Message: note, Type: "partial", Text: note}})
	}
	return s
}

func writeJUnit(w io.Writer, s junitSuite) error {
	s.Tests = len(s.Cases)
	for _, c := range s.Cases {
		if c.Failure != nil {
			s.Failures++
		}
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(junitSuites{Suites: []junitSuite{s}}); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// WriteJUnitFigures writes JUnit XML with one passing testcase per figure
// (classname proxybench.<mode>, name the figure's Key, the value in
// system-out), so CI dashboards chart every figure, then one testcase per
// row of r.AllSections (junitSectionCases; failing when the row's Fail is
// set).
func WriteJUnitFigures(w io.Writer, r *Result) error {
	s := junitSuiteFor(r, "figures")
	for _, f := range Figures(r) {
		s.Cases = append(s.Cases, junitCase{Name: f.Key(), Classname: "proxybench." + f.Mode, Time: "0",
			SystemOut: fmt.Sprintf("%s = %s (%g %s, n=%d)", f.Key(), f.Text(), f.Value, f.Unit, f.N)})
	}
	s.Cases = append(s.Cases, junitSectionCases(r)...)
	return writeJUnit(w, s)
}

// WriteJUnitGates writes JUnit XML with one testcase per gate check (a
// gate with no matching measurement is one failing testcase); a failing
// check carries the measured value and the threshold. Then one testcase
// per row of r.AllSections, as WriteJUnitFigures.
func WriteJUnitGates(w io.Writer, r *Result, gates []GateResult) error {
	s := junitSuiteFor(r, "gates")
	for _, g := range gates {
		if len(g.Checks) == 0 {
			s.Cases = append(s.Cases, junitCase{Name: g.Gate.String(), Classname: "proxybench.gates", Time: "0",
				Failure: &junitFailure{Message: g.Reason, Type: "gate", Text: g.Gate.String() + ": " + g.Reason}})
		}
		for _, c := range g.Checks {
			name := fmt.Sprintf("%s %s %s", c.Figure.Key(), g.Gate.Op, g.Gate.Value)
			msg := fmt.Sprintf("measured %s, want %s %s", c.Figure.Text(), g.Gate.Op, g.Gate.Value)
			jc := junitCase{Name: name, Classname: "proxybench." + c.Figure.Mode, Time: "0", SystemOut: msg}
			if !c.Pass {
				jc.Failure = &junitFailure{Message: msg, Type: "gate", Text: name + ": " + msg}
			}
			s.Cases = append(s.Cases, jc)
		}
	}
	s.Cases = append(s.Cases, junitSectionCases(r)...)
	return writeJUnit(w, s)
}

// WriteGoBench writes Go benchmark text that benchstat reads
// (golang.org/x/perf/benchfmt): configuration lines, then one line per
// repetition:
//
//	BenchmarkLookup/mode=iptables/pos=last/services=10000  2000  24919 ns/op  334800 p99-ns
//	BenchmarkSyncFull/mode=iptables/services=10000  1  1020000000 ns/op  812000000 cpu-ns  110009 objects  15000000 bytes
//
// For Lookup, the iteration count is the repetition's connections, ns/op
// its median connect time and p99-ns its 99th percentile; for SyncFull,
// ns/op is one full sync's wall time; BenchmarkTimeToError has one line
// per position and cause of failed connections (refused, timeout, ...),
// its count as iterations and the median time from connect to error as
// ns/op. The name's key=value parts let
// benchstat group by mode, position or size (-col /mode). Then one line
// per numeric cell of r.AllSections (writeGoBenchSections):
//
//	BenchmarkSection/phase=syncDisruption/row=iptables,_full_(cold_start)/figure=sync.wall 	1	503000000 ns
func WriteGoBench(w io.Writer, r *Result) error {
	var b strings.Builder
	b.WriteString("goos: linux\n")
	fmt.Fprintf(&b, "kernel: %s\n", r.Machine.Kernel)
	if r.Scenario != nil {
		fmt.Fprintf(&b, "pkg: proxybench/%s\n", r.Scenario.Name)
	}
	if r.Machine.CPUModel != "" {
		fmt.Fprintf(&b, "cpu: %s\n", r.Machine.CPUModel)
	}
	if r.Partial != "" {
		// A benchfmt configuration line: benchstat shows it, and keeps a
		// partial run's figures apart from complete ones.
		fmt.Fprintf(&b, "partial: %s\n", strings.ReplaceAll(r.Partial, "\n", " "))
	}
	// Benchmark names must keep the kernels and swept schedulers apart,
	// or benchstat pools them: "iptables@uml", "ipvs-wrr".
	bench := strings.NewReplacer(" (uml)", "@uml", "/", "-", " ", "_")
	for _, m := range r.Modes {
		size := modeSize(r, m)
		name := bench.Replace(r.modeLabel(m))
		for _, s := range m.SyncFull {
			// objects and bytes only where measured: the Markdown's "-"
			// (kube-proxy rows without a read-back, nftables' bytes) is
			// no unit here, never a 0.
			units := ""
			if objs, bytes, _ := syncObjects(m, s); objs != "-" || bytes != "-" {
				if objs != "-" {
					units += fmt.Sprintf("\t%s objects", objs)
				}
				if bytes != "-" {
					units += fmt.Sprintf("\t%s bytes", bytes)
				}
			}
			fmt.Fprintf(&b, "BenchmarkSyncFull/mode=%s/services=%d \t1\t%d ns/op\t%d cpu-ns%s\n",
				name, size, int64(s.Wall), int64(s.CPU), units)
		}
		for _, p := range m.Lookup {
			for _, c := range repetitionChunks(r, p.SamplesNs) {
				if len(c) == 0 {
					continue
				}
				sum := Summarize(c)
				fmt.Fprintf(&b, "BenchmarkLookup/mode=%s/pos=%s/services=%d \t%d\t%d ns/op\t%d p99-ns\n",
					name, p.Position, size, len(c), sum.P50, sum.P99)
			}
			// Failed connections per cause: one line over all
			// repetitions, ns/op the median time from connect to error.
			for _, k := range sortedKeys(p.ErrorKinds) {
				if t := errorTimes(p.ErrorKinds[k]); t.Count > 0 {
					fmt.Fprintf(&b, "BenchmarkTimeToError/mode=%s/pos=%s/cause=%s/services=%d \t%d\t%d ns/op\t%d p90-ns\t%d p99-ns\t%d max-ns\n",
						name, p.Position, k, size, t.Count, t.P50, t.P90, t.P99, t.Max)
				}
			}
		}
	}
	writeGoBenchSections(&b, r)
	_, err := io.WriteString(w, b.String())
	return err
}
