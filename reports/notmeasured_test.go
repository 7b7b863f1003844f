package reports

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/scenarios"
)

// notMeasuredResult: builtin nftables beside an nftables kube-proxy row
// whose rules were read back (objects known, bytes not: nftables sends
// them over netlink), whose incremental syncs carry no objects or bytes,
// and a cold-start window in which no connection succeeded.
func notMeasuredResult() *Result {
	kp := &measure.KubeProxy{Version: "v1.37.2"}
	full := measure.SyncStats{Kind: "full", Wall: time.Second, CPU: time.Second / 2, Objects: 4027}
	inc := measure.SyncStats{Kind: "incremental", Wall: 100 * time.Millisecond}
	return &Result{Scenario: &scenarios.Scenario{Name: "nm"}, Modes: []ModeResult{
		{Mode: "nftables", Services: 1000,
			SyncFull:               []measure.SyncStats{{Kind: "full", Wall: time.Second, Objects: 11009, Bytes: 12345}},
			SyncFullSummary:        Summary{Count: 1, P50: int64(time.Second)},
			SyncIncremental:        []measure.SyncStats{{Kind: "incremental", Wall: time.Millisecond, Objects: 3, Bytes: 200}},
			SyncIncrementalSummary: Summary{Count: 1, P50: int64(time.Millisecond), Max: int64(time.Millisecond)},
			SyncDisruption:         []SyncWindow{{Kind: "full (cold)", SyncNs: int64(time.Second), Attempts: 64, Failed: 64, Probed: 4, FirstAnswerNs: 1, LastAnswerNs: 2}}},
		{Mode: "nftables (kube-proxy)", Implementation: "kube-proxy", BaseMode: "nftables", Services: 1000, KubeProxy: kp,
			Info:                   map[string]string{"ruleset": "nft -j list table ip kube-proxy"},
			SyncFull:               []measure.SyncStats{full},
			SyncFullSummary:        Summary{Count: 1, P50: int64(time.Second)},
			SyncIncremental:        []measure.SyncStats{inc, inc, inc},
			SyncIncrementalSummary: Summary{Count: 3, P50: int64(100 * time.Millisecond), Max: int64(100 * time.Millisecond)},
			SyncDisruption:         []SyncWindow{{Kind: "full (cold)", SyncNs: int64(time.Second), Attempts: 10, Failed: 4, P50Ns: 1e6, P99Ns: 2e6, MaxNs: 3e6, Probed: 4}}},
	}}
}

func rowOf(out, section, prefix string) string {
	i := strings.Index(out, section)
	if i < 0 {
		return ""
	}
	for _, l := range strings.Split(out[i:], "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestNotMeasuredIsNotZero: a figure that was not measured shows "-" (or
// "(none succeeded)") in Markdown and is left out of gobench, never 0.
func TestNotMeasuredIsNotZero(t *testing.T) {
	r := notMeasuredResult()
	var b bytes.Buffer
	if err := WriteMarkdown(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	inc := rowOf(out, "### sync.incremental: one endpoint changed", "| nftables (kube-proxy) |")
	if !strings.HasSuffix(inc, "| - | - |") {
		t.Errorf("kube-proxy sync.incremental row %q: objects and bytes were not measured, want \"-\", not 0", inc)
	}
	if bi := rowOf(out, "### sync.incremental: one endpoint changed", "| nftables |"); !strings.HasSuffix(bi, "| 3 | 200 |") {
		t.Errorf("builtin sync.incremental row %q: want its objects 3 and bytes 200", bi)
	}
	cold := rowOf(out, "### traffic during syncs", "| nftables |")
	if !strings.Contains(cold, "(none succeeded)") || strings.Contains(cold, "0.0 / 0.0 / 0.0 ms") {
		t.Errorf("cold-start row %q: no connection succeeded, want \"(none succeeded)\", not 0.0 ms percentiles", cold)
	}
	if kpCold := rowOf(out, "### traffic during syncs", "| nftables (kube-proxy) |"); !strings.Contains(kpCold, "1.0 / 2.0 / 3.0 ms") {
		t.Errorf("kube-proxy cold-start row %q: want its measured 1.0 / 2.0 / 3.0 ms", kpCold)
	}
	b.Reset()
	if err := WriteGoBench(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(b.String(), "\n") {
		if !strings.HasPrefix(l, "BenchmarkSyncFull/") {
			continue
		}
		switch {
		case strings.Contains(l, "kube-proxy"):
			if strings.Contains(l, "bytes") || !strings.Contains(l, "4027 objects") {
				t.Errorf("gobench kube-proxy line %q: want 4027 objects and no bytes (not measured)", l)
			}
		default:
			if !strings.Contains(l, "11009 objects") || !strings.Contains(l, "12345 bytes") {
				t.Errorf("gobench builtin line %q: want 11009 objects and 12345 bytes", l)
			}
		}
	}
}
