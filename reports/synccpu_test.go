package reports

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/scenarios"
)

// TestSyncFullCPUSameDefinition: builtin's CPU in the side-by-side table
// is the sync.full table's CPU p50 (the median over the runs), not the
// CPU of the median-wall run, which here differs (100 ms vs 500 ms).
func TestSyncFullCPUSameDefinition(t *testing.T) {
	runs := []measure.SyncStats{
		{Kind: "full", Wall: time.Second, CPU: 900 * time.Millisecond},
		{Kind: "full", Wall: 2 * time.Second, CPU: 100 * time.Millisecond},
		{Kind: "full", Wall: 3 * time.Second, CPU: 500 * time.Millisecond},
	}
	r := &Result{Scenario: &scenarios.Scenario{Name: "cpu"}, Modes: []ModeResult{
		{Mode: "iptables", Services: 10, SyncFull: runs, SyncFullSummary: Summarize([]int64{int64(time.Second), int64(2 * time.Second), int64(3 * time.Second)})},
		{Mode: "iptables (kube-proxy)", Implementation: "kube-proxy", BaseMode: "iptables", Services: 10,
			KubeProxy: &measure.KubeProxy{Version: "v1.37.2", CPUNs: 1, ChildCPUNs: 1}},
	}}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	want := "| " + dur(500*time.Millisecond) + " |"
	full := rowOf(out, "### sync.full: program every service", "| iptables |")
	side := rowOf(out, "### builtin vs kube-proxy, side by side", "| iptables | builtin |")
	if !strings.Contains(full, want) {
		t.Errorf("sync.full row %q: want CPU p50 %s", full, want)
	}
	if !strings.Contains(side, want) || strings.Contains(side, "| "+dur(100*time.Millisecond)+" |") {
		t.Errorf("side-by-side builtin row %q: want the same CPU p50 %s, not the median-wall run's %s", side, want, dur(100*time.Millisecond))
	}
}
