package reports

import (
	"bytes"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/scenarios"
)

// TestPartialRendered: a partial result (a mode with only sync.full) is
// labelled in Markdown and HTML, and renders without the missing phases.
func TestPartialRendered(t *testing.T) {
	r := &Result{SchemaVersion: SchemaVersion, RunID: "abc123", Engine: "real", Scenario: &scenarios.Scenario{Name: "p"},
		Partial: "interrupted by SIGINT",
		Modes: []ModeResult{
			{Mode: "none", Services: 10, Lookup: []PositionResult{{Position: "first", SamplesNs: []int64{1000, 2000}, Latency: Summarize([]int64{1000, 2000})}}},
			{Mode: "iptables", Services: 10, Partial: "mode iptables at 10 services: traffic at first: context canceled", SyncFullSummary: Summarize([]int64{5e6})},
		}}
	var md bytes.Buffer
	if err := WriteReportMarkdown(&md, r, DefaultBudgets); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PARTIAL RESULT", "interrupted by SIGINT", "finished: none, iptables (partly)", "iptables: stopped early"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	var html bytes.Buffer
	if err := WriteHTML(&html, r, DefaultBudgets); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.String(), "PARTIAL RESULT") {
		t.Error("HTML does not say the result is partial")
	}
	if PartialNote(&Result{Scenario: r.Scenario}) != "" {
		t.Error("a complete result has a partial note")
	}
}
