package reports

import (
	"bytes"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/scenarios"
)

// TestUnobservedChangesListed: a churn phase's unobserved changes are
// listed in the Markdown report with what the probes after each saw; a
// phase without any has no such table.
func TestUnobservedChangesListed(t *testing.T) {
	r := &Result{Scenario: &scenarios.Scenario{Name: "churn"}, Modes: []ModeResult{{Mode: "ipvs", Churn: []ChurnResult{{
		MinSyncPeriodNs: 2e8, Changes: 2, Observed: 1, Unobserved: 1,
		Samples: []ChurnSample{
			{Kind: "endpoint-add", AtNs: 1e8, LatencyNs: 5e7},
			{Kind: "endpoint-remove", AtNs: 25e7, LatencyNs: -1, Probes: &ProbeCounts{Hits: 7, Elsewhere: 11, Failed: 3}},
		},
	}}}}}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, r); err != nil {
		t.Fatal(err)
	}
	if md := b.String(); !strings.Contains(md, "| ipvs | 200ms | endpoint-remove | 0.250 | 7 | 11 | 3 |") {
		t.Errorf("no row for the unobserved removal in:\n%s", md)
	}
	r.Modes[0].Churn[0].Samples[1].LatencyNs = 1e6
	b.Reset()
	if err := WriteMarkdown(&b, r); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "not observed") {
		t.Errorf("a table of unobserved changes with none unobserved:\n%s", b.String())
	}
}
