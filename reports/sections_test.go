package reports

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/perf/benchfmt"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/scenarios"
)

// sectionsFixture is the stored fixture with two sections of phases no
// renderer knows: a row-scoped one (two rows of one result row, told
// apart by a key column) and a run-scoped one whose first row fails.
func sectionsFixture(t *testing.T, rowPhase, runPhase string) *Result {
	t.Helper()
	r := loadFixture(t)
	row := Section{Phase: rowPhase, Title: "a row-scoped probe", Scope: "row", Intro: "What the probe measures.",
		Columns: []Column{{Name: "case", Key: true}, {Name: "wall", Unit: "s", Figure: "wall"}, {Name: "ok", Unit: "bool"}}}
	for _, c := range []struct {
		name string
		wall float64
	}{{"cold", 0.25}, {"warm", 0.125}} {
		if err := row.AddRow("iptables @1000", Text(c.name), Num(c.wall, "%.3f"), Bool(true)); err != nil {
			t.Fatal(err)
		}
	}
	run := Section{Phase: runPhase, Title: "mode switch under traffic", Scope: "run", Notes: []string{"a note under the table"},
		Columns: []Column{{Name: "outage", Unit: "ms"}, {Name: "failed", Unit: "count"}, {Name: "leftovers"}}}
	if err := run.AddRow("iptables → nftables (builtin)", Num(42.5, "%.1f"), Int(3), Text("KUBE-SERVICES in nat")); err != nil {
		t.Fatal(err)
	}
	run.Rows[0].Fail = "leftover rules after --cleanup"
	if err := run.AddRow("nftables → iptables (builtin)", Num(7, "%.1f"), Int(0), Missing()); err != nil {
		t.Fatal(err)
	}
	if err := run.AddRow("bad", Int(1)); err == nil {
		t.Error("AddRow took 1 cell for 3 columns")
	}
	r.Sections = []Section{row, run}
	return r
}

const switchFail = "leftover rules after --cleanup"

// sectionChecks check, per format, that the output of sectionsFixture
// shows both sections: their titles or phase and row names, values, and
// (md, junit) the failing row.
func sectionChecks(rowPhase, runPhase string) map[string]func(t *testing.T, out string) {
	return map[string]func(t *testing.T, out string){
		"md": func(t *testing.T, out string) {
			for _, want := range []string{
				"### a row-scoped probe\n\nWhat the probe measures.\n\n| mode | case | wall (s) | ok |\n|---|---|--:|--:|\n",
				"| iptables @1000 | warm | 0.125 | yes |",
				"### mode switch under traffic\n\n| row | outage (ms) | failed | leftovers | check |\n",
				"| iptables → nftables (builtin) | 42.5 | 3 | KUBE-SERVICES in nat | FAIL: " + switchFail + " |",
				"| nftables → iptables (builtin) | 7.0 | 0 | - | ok |",
				"- a note under the table\n",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("md lacks %q", want)
				}
			}
		},
		"html": func(t *testing.T, out string) {
			for _, want := range []string{`<h2 id="section-` + htmlID(rowPhase) + `">a row-scoped probe</h2>`,
				`<h2 id="section-` + htmlID(runPhase) + `">mode switch under traffic</h2>`, "<th>outage (ms)</th>",
				"<td>42.5</td>", "<td>FAIL: " + switchFail + "</td>", "<td>0.125</td>", "What the probe measures."} {
				if !strings.Contains(out, want) {
					t.Errorf("html lacks %q", want)
				}
			}
		},
		"csv": func(t *testing.T, out string) {
			recs, err := csv.NewReader(strings.NewReader(out)).ReadAll() // one field count for every record
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range [][]string{
				{"iptables → nftables (builtin)", "", "", runPhase + ".outage", "4.25e+07", "ns", ""},
				{"iptables @1000, warm", "", "", rowPhase + ".wall", "1.25e+08", "ns", ""},
				{"iptables @1000, cold", "", "", rowPhase + ".ok", "1", "bool", ""},
			} {
				if !slices.ContainsFunc(recs, func(r []string) bool { return slices.Equal(r, want) }) {
					t.Errorf("csv lacks %q", want)
				}
			}
		},
		"junit": func(t *testing.T, out string) {
			var v junitSuites
			if err := xml.Unmarshal([]byte(out), &v); err != nil {
				t.Fatal(err)
			}
			cases := map[string]junitCase{}
			for _, c := range v.Suites[0].Cases {
				cases[c.Name] = c
			}
			if c, ok := cases[runPhase+"/iptables → nftables (builtin)"]; !ok || c.Failure == nil || c.Failure.Message != switchFail {
				t.Errorf("failing row: %+v (present %v)", c, ok)
			}
			if c, ok := cases[runPhase+"/nftables → iptables (builtin)"]; !ok || c.Failure != nil || !strings.Contains(c.SystemOut, "outage (ms) = 7.0") {
				t.Errorf("passing row: %+v (present %v)", c, ok)
			}
			if c, ok := cases[rowPhase+"/iptables @1000, cold"]; !ok || !strings.Contains(c.SystemOut, "wall (s) = 0.250") {
				t.Errorf("row-scoped row: %+v (present %v)", c, ok)
			}
			if v.Suites[0].Failures != 1 {
				t.Errorf("failures %d, want 1", v.Suites[0].Failures)
			}
		},
		"gobench": func(t *testing.T, out string) {
			got := map[string]benchfmt.Value{}
			rd := benchfmt.NewReader(strings.NewReader(out), "gobench")
			for rd.Scan() {
				switch rec := rd.Result().(type) {
				case *benchfmt.SyntaxError:
					t.Errorf("benchfmt: %v", rec)
				case *benchfmt.Result:
					if strings.HasPrefix(string(rec.Name), "Section/") && len(rec.Values) == 1 {
						got[string(rec.Name)] = rec.Values[0]
					}
				}
			}
			for name, want := range map[string]benchfmt.Value{
				"Section/phase=" + runPhase + "/row=iptables_→_nftables_(builtin)/figure=outage": {Value: 42.5e6, Unit: "ns"},
				"Section/phase=" + rowPhase + "/row=iptables_@1000,_warm/figure=wall":            {Value: 0.125e9, Unit: "ns"},
				"Section/phase=" + runPhase + "/row=iptables_→_nftables_(builtin)/figure=failed": {Value: 3, Unit: "count"},
			} {
				g := got[name]
				if g.OrigUnit != "" { // benchfmt tidied it (ns to sec)
					g.Value, g.Unit = g.OrigValue, g.OrigUnit
				}
				if g.Value != want.Value || g.Unit != want.Unit {
					t.Errorf("%s = %+v, want %g %s", name, g, want.Value, want.Unit)
				}
			}
		},
		"openmetrics": func(t *testing.T, out string) {
			if !strings.HasSuffix(out, "# EOF\n") {
				t.Error("no # EOF terminator")
			}
			p := expfmt.NewTextParser(model.UTF8Validation)
			fams, err := p.TextToMetricFamilies(strings.NewReader(out))
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range map[string]struct {
				row string
				v   float64
			}{
				"proxybench_section_" + metricName(runPhase) + "_outage_seconds": {"iptables → nftables (builtin)", 0.0425},
				"proxybench_section_" + metricName(rowPhase) + "_wall_seconds":   {"iptables @1000, warm", 0.125},
			} {
				found := false
				for _, m := range fams[name].GetMetric() {
					l := map[string]string{}
					for _, p := range m.GetLabel() {
						l[p.GetName()] = p.GetValue()
					}
					if l["row"] == want.row {
						found = true
						if m.GetGauge().GetValue() != want.v || l["scenario"] != "fixture" || l["run_id"] != "f1x7ur" || l["phase"] == "" {
							t.Errorf("%s{%v} = %g, want %g", name, l, m.GetGauge().GetValue(), want.v)
						}
					}
				}
				if !found {
					t.Errorf("no %s{row=%q} in %v", name, want.row, fams[name])
				}
			}
		},
	}
}

func render(t *testing.T, r *Result, format string) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteFormat(&b, r, format, ReportOptions{}); err != nil {
		t.Fatalf("%s: %v", format, err)
	}
	return b.String()
}

// TestSectionsEveryFormat: every format of Formats renders a row-scoped
// and a run-scoped section (titles or phase and row names, values, the
// failing row), with a check for each format, and so does a phase whose
// name no renderer has seen.
func TestSectionsEveryFormat(t *testing.T) {
	for _, phases := range [][2]string{{"probeRow", "modeSwitch"}, {"aPhaseAddedLater", "anotherNewOne"}} {
		r := sectionsFixture(t, phases[0], phases[1])
		checks := sectionChecks(phases[0], phases[1])
		for _, f := range Formats {
			t.Run(phases[0]+"/"+f, func(t *testing.T) {
				check, ok := checks[f]
				if !ok {
					t.Fatalf("format %s has no section check: add one to sectionChecks", f)
				}
				check(t, render(t, r, f))
			})
		}
	}
}

// TestSectionsJUnitGates: with gates, junit keeps the sections' testcases.
func TestSectionsJUnitGates(t *testing.T) {
	r := sectionsFixture(t, "probeRow", "modeSwitch")
	var b bytes.Buffer
	gates := EvaluateGates(r, []scenarios.Gate{gate(t, "sync.full", "", "", "<", "5s")})
	if err := WriteFormat(&b, r, "junit", ReportOptions{Gates: gates}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `name="modeSwitch/iptables → nftables (builtin)"`) || !strings.Contains(b.String(), switchFail) {
		t.Errorf("gates junit lacks the sections' testcases:\n%.2000s", b.String())
	}
}

// TestRowNamesUnique: rows alike in label and key cells get " #n"; key
// cells "-" are left out of the name; names stay unique across two
// sections of one phase (their series share a gauge family).
func TestRowNamesUnique(t *testing.T) {
	s := Section{Phase: "p", Columns: []Column{{Name: "k", Key: true}, {Name: "v", Unit: "count"}}}
	for _, k := range []Cell{Text("a"), Text("a"), Missing(), Text("b")} {
		if err := s.AddRow("x", k, Int(1)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := s.RowNames(), []string{"x, a", "x, a #2", "x", "x, b"}; !slices.Equal(got, want) {
		t.Errorf("RowNames = %q, want %q", got, want)
	}
	t2 := s
	t2.Title = "other"
	var rows []string
	for _, v := range sectionValues([]Section{s, t2}) {
		rows = append(rows, v.Row)
	}
	if len(rows) != 8 || len(slices.Compact(slices.Sorted(slices.Values(rows)))) != 8 {
		t.Errorf("rows of two sections of one phase: %q", rows)
	}
	if got := metricName("syncDisruption"); got != "sync_disruption" {
		t.Errorf("metricName = %q", got)
	}
	if got := metricName("new.toOld (µs)"); got != "new_to_old_s" {
		t.Errorf("metricName = %q", got)
	}
}

// phaseFixture is a result saved before phases returned sections: an
// iptables row on the host and an ipvs row in the guest with every typed
// phase field the four builders read, and no Sections.
func phaseFixture() *Result {
	sc := &scenarios.Scenario{Name: "phases", Repetitions: 1, Services: scenarios.ServicesSpec{Count: 1000}}
	full := measure.SyncStats{Kind: "full", Wall: 500 * time.Millisecond, Objects: 11009}
	mode := func(name, kernel string) ModeResult {
		return ModeResult{Mode: name, Kernel: kernel, Services: 1000, SyncFull: []measure.SyncStats{full},
			SyncFullSummary: Summary{Count: 1, P50: int64(full.Wall), Min: int64(full.Wall), Max: int64(full.Wall)}}
	}
	ipt, ipvs := mode("iptables", ""), mode("ipvs", "uml")
	ipt.SyncDisruption = []SyncWindow{
		{Kind: "full (cold start)", SyncNs: 1_503_000_000, Objects: 11009, Attempts: 64, Failed: 64, Slow: 0, SlowAbove: 100 * time.Millisecond,
			StartNs: 20_000_000, Probed: 4, Answered: 3, FirstAnswerNs: 1_200_000_000, LastAnswerNs: -1,
			FailedSamples: []string{"connect: connection refused"}, BeforeAttempts: 10},
		{Kind: "incremental", SyncNs: 4_000_000, Attempts: 20, Failed: 1, Slow: 2, SlowAbove: 100 * time.Millisecond,
			P50Ns: 1_500_000, P99Ns: 150_000_000, MaxNs: 160_000_000, BeforeAttempts: 18, BeforeFailed: 0,
			ProxyMetricNs: 3_000_000, ProxySyncEndNs: 5_000_000},
	}
	ipt.Lifecycle = []LifecycleChange{
		{Name: "removal", Held: 12, HeldOnChanged: 4, Broken: 4, New: 50, NewFailed: 0, NewToOld: 0, LastToOldNs: -1, FirstSuccessNs: 2_000_000},
		{Name: "restart", Held: 12, HeldOnChanged: 4, Broken: 0, New: 50, NewToOld: 3, LastToOldNs: 250_000_000, FirstSuccessNs: 1_000_000,
			ActiveAfter: []map[string]int{{"198.19.0.2": 6, "198.19.0.9": 6}}},
	}
	ipt.ConnReuse = []ConnReusePass{{ReuseMode: -1, Kernel: "6.1.0-test", Connections: 400, Ports: 100, Errors: 0, Slow: 0,
		P50Ns: 80_000, P99Ns: 200_000, MaxNs: 900_000, Endpoints: 3}}
	ipvs.ConnReuse = []ConnReusePass{
		{ReuseMode: 1, Kernel: "5.4.0", Connections: 400, Ports: 100, Errors: 1, Slow: 100, P50Ns: 90_000, P99Ns: 1_010_000_000,
			MaxNs: 1_020_000_000, Endpoints: 3, Reused: 300, ReusedSameEndpoint: 100, Sysctls: map[string]string{"net.ipv4.vs.expire_nodest_conn": "1"}},
		{ReuseMode: 0, Kernel: "5.4.0", Connections: 400, Ports: 100, P50Ns: 90_000, P99Ns: 300_000, MaxNs: 700_000, Endpoints: 3,
			Reused: 300, ReusedSameEndpoint: 300},
	}
	ipt.Transitions = []Transition{
		{Name: "endpoint-removal", Cleanup: true, RecoveryNs: 4_000_000, Observe: 3 * time.Second, Sent: 30, Live: 29, Lost: 1,
			ConntrackDeleted: 1, FlowsBefore: []string{"198.19.0.5"}, SyncNs: 2_500_000},
		{Name: "endpoint-removal", Cleanup: false, RecoveryNs: -1, Observe: 3 * time.Second, Sent: 30, Stale: 30, SyncNs: 2_400_000},
	}
	ipt.DNS = &DNSCheck{UDPSent: 3, UDPOK: 3, TCPSent: 3, TCPOK: 2}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return &Result{SchemaVersion: SchemaVersion, RunID: "ph4se", Engine: "real", Started: t0, Finished: t0.Add(time.Minute),
		Machine: Machine{Kernel: "6.1.0-test", KernelWhere: "host+uml"}, Scenario: sc,
		Kernels: []KernelRun{{Name: "host", Release: "6.1.0-test", Where: "host"}, {Name: "uml", Release: "5.4.0", Where: "uml"}},
		Modes:   []ModeResult{ipt, ipvs}}
}

// cell returns the cell of s's row i in the column named col.
func cell(t *testing.T, s Section, i int, col string) Cell {
	t.Helper()
	for j, c := range s.Columns {
		if c.Name == col {
			return s.Rows[i].Cells[j]
		}
	}
	t.Fatalf("%s: no column %q", s.Phase, col)
	return Cell{}
}

// wantCell checks a cell's text and value (nil: the cell has no value:
// not measured, or text).
func wantCell(t *testing.T, s Section, i int, col, text string, value *float64) {
	t.Helper()
	c := cell(t, s, i, col)
	switch {
	case c.Text != text:
		t.Errorf("%s row %d %s: text %q, want %q", s.Phase, i, col, c.Text, text)
	case (c.Value == nil) != (value == nil):
		t.Errorf("%s row %d %s: value %v, want %v", s.Phase, i, col, c.Value, value)
	case value != nil && *c.Value != *value:
		t.Errorf("%s row %d %s: value %g, want %g", s.Phase, i, col, *c.Value, *value)
	}
}

func v(f float64) *float64 { return &f }

// checkShape: every row has one cell per column and the section's label;
// the phase is the scenario block's name.
func checkShape(t *testing.T, s Section, phase, label string, rows int) {
	t.Helper()
	if s.Phase != phase || s.Scope != "row" || s.Title == "" || len(s.Rows) != rows {
		t.Fatalf("%s: phase %q scope %q title %q, %d rows; want %d", phase, s.Phase, s.Scope, s.Title, len(s.Rows), rows)
	}
	for i, row := range s.Rows {
		if len(row.Cells) != len(s.Columns) || row.Row != label || row.Fail != "" {
			t.Errorf("%s row %d: %d cells for %d columns, label %q, fail %q", phase, i, len(row.Cells), len(s.Columns), row.Row, row.Fail)
		}
	}
	if n := s.RowNames(); len(slices.Compact(slices.Sorted(slices.Values(n)))) != rows {
		t.Errorf("%s: row names not unique by their key columns: %q", phase, n)
	}
}

func TestSyncDisruptionSection(t *testing.T) {
	m := phaseFixture().Modes[0]
	s := SyncDisruptionSection("iptables", m.SyncDisruption)
	checkShape(t, s, "syncDisruption", "iptables", 2)
	wantCell(t, s, 0, "sync", "full (cold start)", nil)
	wantCell(t, s, 0, "sync wall", "1.503", v(1.503))
	wantCell(t, s, 0, "start", "0.020", v(0.02))
	wantCell(t, s, 0, "first answer", "1.200", v(1.2))
	wantCell(t, s, 0, "last answer", "never", nil)
	wantCell(t, s, 0, "answered", "3", v(3))
	wantCell(t, s, 0, "objects", "11009", v(11009))
	wantCell(t, s, 0, "connect p50", "none succeeded", nil) // not 0.0 ms
	wantCell(t, s, 0, "kube-proxy's own sync", "-", nil)    // builtin row
	wantCell(t, s, 0, "errors seen", "connect: connection refused", nil)
	wantCell(t, s, 1, "objects", "-", nil) // 0: not measured
	wantCell(t, s, 1, "start", "-", nil)   // incremental
	wantCell(t, s, 1, "connect p99", "150.0", v(150))
	wantCell(t, s, 1, "slow above", "100", v(100))
	wantCell(t, s, 1, "kube-proxy's own sync end", "0.005", v(0.005))
	wantCell(t, s, 1, "before: attempts", "18", v(18))
	if n := s.RowNames(); n[0] != "iptables, full (cold start)" {
		t.Errorf("row name %q", n[0])
	}
}

func TestLifecycleSection(t *testing.T) {
	m := phaseFixture().Modes[0]
	s := LifecycleSection("iptables", m.Lifecycle)
	checkShape(t, s, "lifecycle", "iptables", 2)
	wantCell(t, s, 0, "change", "removal", nil)
	wantCell(t, s, 0, "held on changed", "4", v(4))
	wantCell(t, s, 0, "last to old", "-", nil)
	wantCell(t, s, 0, "first success", "0.002", v(0.002))
	wantCell(t, s, 1, "to old endpoint", "3", v(3))
	wantCell(t, s, 1, "last to old", "0.250", v(0.25))
	if want := []string{"iptables restart, active connections per endpoint after batch 1 (the restarted endpoint has a new address): 198.19.0.2 6, 198.19.0.9 6"}; !slices.Equal(s.Notes, want) {
		t.Errorf("notes %q, want %q", s.Notes, want)
	}
}

func TestConnReuseSection(t *testing.T) {
	m := phaseFixture().Modes[1]
	s := ConnReuseSection("ipvs (uml)", m.ConnReuse)
	checkShape(t, s, "connReuse", "ipvs (uml)", 2)
	wantCell(t, s, 0, "conn_reuse_mode", "1", nil)
	wantCell(t, s, 0, "expire_nodest_conn", "1", nil)
	wantCell(t, s, 0, "expire_quiescent_template", "-", nil)
	wantCell(t, s, 0, "share > 1 s", "25.00", v(25))
	wantCell(t, s, 0, "p99", "1010.00", v(1010))
	wantCell(t, s, 0, "reused port → same endpoint", "33.3", v(100*100.0/300))
	wantCell(t, s, 1, "reused port → same endpoint", "100.0", v(100))
	if n := s.RowNames(); !slices.Equal(n, []string{"ipvs (uml), 5.4.0, 1", "ipvs (uml), 5.4.0, 0"}) {
		t.Errorf("row names %q", n)
	}
	ipt := ConnReuseSection("iptables", phaseFixture().Modes[0].ConnReuse)
	wantCell(t, ipt, 0, "conn_reuse_mode", "-", nil) // not IPVS
	wantCell(t, ipt, 0, "reused port → same endpoint", "-", nil)
	if n := ipt.RowNames(); n[0] != "iptables, 6.1.0-test" {
		t.Errorf("row name %q", n[0])
	}
}

func TestTransitionsSection(t *testing.T) {
	m := phaseFixture().Modes[0]
	s := TransitionsSection("iptables", m.Transitions, m.DNS)
	checkShape(t, s, "transitions", "iptables", 2)
	wantCell(t, s, 0, "conntrack cleanup", "on (kube-proxy)", nil)
	wantCell(t, s, 0, "live endpoint after", "0.004", v(0.004))
	wantCell(t, s, 0, "flows before (reply src)", "198.19.0.5", nil)
	wantCell(t, s, 0, "sync", "2.5", v(2.5))
	wantCell(t, s, 1, "live endpoint after", "never (3s)", nil)
	wantCell(t, s, 1, "stale", "30", v(30))
	wantCell(t, s, 1, "flows before (reply src)", "-", nil)
	if len(s.Notes) != 1 || !strings.Contains(s.Notes[0], "53/UDP 3/3, 53/TCP 2/3") {
		t.Errorf("notes %q", s.Notes)
	}
	if n := s.RowNames(); !slices.Equal(n, []string{"iptables, endpoint-removal, on (kube-proxy)", "iptables, endpoint-removal, off"}) {
		t.Errorf("row names %q", n)
	}
	if s := TransitionsSection("iptables", m.Transitions, nil); len(s.Notes) != 0 {
		t.Errorf("no DNS check, notes %q", s.Notes)
	}
}

// TestAllSectionsFromTypedFields: a saved result without Sections gets
// one section per typed phase (rows per ModeResult, labelled as the
// Markdown labels them: "ipvs (uml)" in a run on two kernels); a phase
// already in Sections is not built again.
func TestAllSectionsFromTypedFields(t *testing.T) {
	r := phaseFixture()
	var phases []string
	for _, s := range r.AllSections() {
		phases = append(phases, s.Phase)
		if s.Phase == PhaseConnReuse {
			var labels []string
			for _, row := range s.Rows {
				labels = append(labels, row.Row)
			}
			if !slices.Equal(labels, []string{"iptables (host)", "ipvs (uml)", "ipvs (uml)"}) {
				t.Errorf("connReuse rows %q", labels)
			}
		}
	}
	if want := []string{"transitions", "syncDisruption", "lifecycle", "connReuse"}; !slices.Equal(phases, want) {
		t.Errorf("phases %q, want %q", phases, want)
	}
	if len(r.Sections) != 0 {
		t.Error("AllSections changed r.Sections")
	}
	r.MergeSection(SyncDisruptionSection("from the phase", r.Modes[0].SyncDisruption[:1]))
	n := 0
	for _, s := range r.AllSections() {
		if s.Phase == PhaseSyncDisruption {
			n++
			if len(s.Rows) != 1 || s.Rows[0].Row != "from the phase" {
				t.Errorf("syncDisruption from Sections: %+v", s.Rows)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d syncDisruption sections, want the one in Sections", n)
	}
	empty := &ModeResult{Mode: "none"}
	for name, report := range map[string]func(string, *ModeResult) []Section{"syncDisruption": SyncDisruptionReport,
		"lifecycle": LifecycleReport, "connReuse": ConnReuseReport, "transitions": TransitionsReport} {
		if got := report("none", empty); got != nil {
			t.Errorf("%s: a row without its figures has sections %+v", name, got)
		}
		if got := report("iptables", &r.Modes[0]); len(got) != 1 || got[0].Phase != name || got[0].Rows[0].Row != "iptables" {
			t.Errorf("%s: sections %+v", name, got)
		}
	}
}

// TestTypedPhasesEveryFormat: each of the four phases of a result saved
// without sections (decoded from JSON) shows in every format; Markdown
// shows it once, in its bespoke table.
func TestTypedPhasesEveryFormat(t *testing.T) {
	b, err := json.Marshal(phaseFixture())
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	for _, ph := range []struct{ phase, title, figure, row string }{
		{PhaseTransitions, "UDP endpoint transitions", "recovery", "iptables (host), endpoint-removal, on (kube-proxy)"},
		{PhaseSyncDisruption, "traffic during syncs", "sync.wall", "iptables (host), incremental"},
		{PhaseLifecycle, "endpoint lifecycle with held connections", "held", "iptables (host), restart"},
		{PhaseConnReuse, "connection reuse from TIME_WAIT", "connections", "ipvs (uml), 5.4.0, 0"},
	} {
		for _, f := range Formats {
			out := render(t, &r, f)
			var want []string
			switch f {
			case "md":
				// The bespoke table, once per kernel with the phase's
				// figures; no generic one.
				want := 0
				for _, k := range r.KernelNames() {
					if bespokeMarkdownShows(r.ForKernel(k), ph.phase) {
						want++
					}
				}
				if n := strings.Count(out, "### "+ph.title); n != want || want == 0 {
					t.Errorf("md: %d tables %q, want the bespoke one per kernel (%d)", n, ph.title, want)
				}
				continue
			case "html":
				want = []string{`<h2 id="section-` + ph.phase + `">` + ph.title}
			case "csv":
				recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
				if err != nil {
					t.Fatal(err)
				}
				if !slices.ContainsFunc(recs, func(rec []string) bool { return rec[0] == ph.row && rec[3] == ph.phase+"."+ph.figure }) {
					t.Errorf("%s: csv has no record of %s %s.%s", ph.phase, ph.row, ph.phase, ph.figure)
				}
			case "junit":
				want = []string{`name="` + ph.phase + "/" + ph.row + `"`}
			case "gobench":
				want = []string{"BenchmarkSection/phase=" + ph.phase + "/row=" + benchPart.Replace(ph.row) + "/figure=" + ph.figure + " "}
			case "openmetrics":
				want = []string{"proxybench_section_" + metricName(ph.phase) + "_" + metricName(ph.figure), `row="` + ph.row + `"`}
			default:
				t.Fatalf("format %s has no check here", f)
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("%s: %s lacks %q", ph.phase, f, w)
				}
			}
		}
	}
}

// TestBespokeMarkdownFallsBack: a section of a phase with a bespoke
// Markdown writer is rendered generically when the result has no typed
// figures for that writer (a phase that kept only its Section).
func TestBespokeMarkdownFallsBack(t *testing.T) {
	r := notMeasuredResult()
	s := SyncDisruptionSection("nftables", r.Modes[0].SyncDisruption)
	for i := range r.Modes {
		r.Modes[i].SyncDisruption = nil
	}
	r.Sections = []Section{s}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if n := strings.Count(out, "### traffic during syncs"); n != 1 || !strings.Contains(out, "| nftables | full (cold) |") {
		t.Errorf("%d syncDisruption tables, want the generic one:\n%s", n, out)
	}
}
