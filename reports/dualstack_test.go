package reports

import (
	"strings"
	"testing"
)

// TestDualStackReportKubeProxyRow: a kube-proxy row's families (one
// process for both, Shared) get kube-proxy's own sync metric in a column
// of its own, the IPv6 CPU shown as "-" (counted on IPv4) and a note
// saying so; a builtin row has neither the column nor the note, and its
// IPv6 CPU is its own figure.
func TestDualStackReportKubeProxyRow(t *testing.T) {
	lookup := []PositionResult{{Position: "first", Latency: Summary{Count: 10, P50: 30000, P99: 90000}}}
	kp := &ModeResult{DualStack: &DualStack{Connections: 10, IPv6Prefix: "2001:2::/96", Families: []FamilyResult{
		{Family: "IPv4", Synced: true, Shared: true, Sync: []SyncSample{{WallNs: 2e9, CPUNs: 5e8, Objects: 40, KubeProxyNs: 3e8}}, Lookup: lookup},
		{Family: "IPv6", Synced: true, Shared: true, Sync: []SyncSample{{WallNs: 2.5e9, Objects: 39, KubeProxyNs: 2e8}}, Lookup: lookup},
	}}}
	secs := DualStackReport("iptables (kube-proxy)", kp)
	if len(secs) != 1 {
		t.Fatalf("%d sections, want 1", len(secs))
	}
	sec := secs[0]
	col := -1
	for i, c := range sec.Columns {
		if c.Name == "kube-proxy sync.full" {
			col = i
		}
	}
	if col < 0 {
		t.Fatalf("no kube-proxy sync.full column in %+v", sec.Columns)
	}
	cell := func(row int, name string) string {
		for i, c := range sec.Columns {
			if c.Name == name {
				return sec.Rows[row].Cells[i].Text
			}
		}
		t.Fatalf("no column %s", name)
		return ""
	}
	if got := cell(0, "kube-proxy sync.full"); got != "300.0" {
		t.Errorf("IPv4 kube-proxy sync.full %q, want 300.0", got)
	}
	if got := cell(1, "kube-proxy sync.full"); got != "200.0" {
		t.Errorf("IPv6 kube-proxy sync.full %q, want 200.0", got)
	}
	if got := cell(1, "sync.full.cpu"); got != "-" {
		t.Errorf("IPv6 CPU %q, want - (the process's CPU is IPv4's)", got)
	}
	if got := cell(0, "sync.full.cpu"); got != "500.0" {
		t.Errorf("IPv4 CPU %q, want 500.0", got)
	}
	if got := cell(1, "first.p50"); got != "0.030" {
		t.Errorf("IPv6 first.p50 %q, want 0.030", got)
	}
	if len(sec.Notes) != 1 || !strings.Contains(sec.Notes[0], "one kube-proxy programs both families") {
		t.Errorf("notes %q, want the one-process note", sec.Notes)
	}

	builtin := &ModeResult{DualStack: &DualStack{Connections: 10, IPv6Prefix: "2001:2::/96", Families: []FamilyResult{
		{Family: "IPv4", Synced: true, Sync: []SyncSample{{WallNs: 2e8, CPUNs: 1e8, Objects: 40}}, Lookup: lookup},
		{Family: "IPv6", Synced: true, Sync: []SyncSample{{WallNs: 3e8, CPUNs: 2e8, Objects: 40}}, Lookup: lookup},
	}}}
	b := DualStackReport("iptables", builtin)[0]
	// The same columns as a kube-proxy row's (one merged table per
	// title), kube-proxy's metric "-".
	if len(b.Columns) != len(sec.Columns) || len(b.Rows[0].Cells) != len(b.Columns) || len(sec.Rows[0].Cells) != len(sec.Columns) {
		t.Fatalf("builtin %d columns / %d cells, kube-proxy %d columns / %d cells: want one shape", len(b.Columns), len(b.Rows[0].Cells), len(sec.Columns), len(sec.Rows[0].Cells))
	}
	if got := b.Rows[0].Cells[col].Text; got != "-" {
		t.Errorf("builtin kube-proxy sync.full %q, want -", got)
	}
	if len(b.Notes) != 0 {
		t.Errorf("builtin row notes %q, want none", b.Notes)
	}
	if got := b.Rows[1].Cells[3].Text; got != "200.0" {
		t.Errorf("builtin IPv6 CPU %q, want 200.0", got)
	}
}

// TestDualStackReportUnobservedMetric: a kube-proxy IPVS row whose IPv6
// sync metric never showed (ipv6Sync records no "kube-proxy.metric") and
// whose objects are not read back says so, not 0.0 and 0.
func TestDualStackReportUnobservedMetric(t *testing.T) {
	lookup := []PositionResult{{Position: "first", Latency: Summary{Count: 10, P50: 30000, P99: 90000}}}
	kp := &ModeResult{DualStack: &DualStack{Connections: 10, IPv6Prefix: "2001:2::/96", Families: []FamilyResult{
		{Family: "IPv4", Synced: true, Shared: true, Sync: []SyncSample{{WallNs: 2e9, CPUNs: 5e8, KubeProxyNs: 3e8}}, Lookup: lookup},
		{Family: "IPv6", Synced: true, Shared: true, Sync: []SyncSample{{WallNs: 2.5e9}}, Lookup: lookup},
	}}}
	sec := DualStackReport("ipvs (kube-proxy)", kp)[0]
	cell := func(row int, name string) string {
		for i, c := range sec.Columns {
			if c.Name == name {
				return sec.Rows[row].Cells[i].Text
			}
		}
		t.Fatalf("no column %s in %+v", name, sec.Columns)
		return ""
	}
	if got := cell(1, "kube-proxy sync.full"); got != "not observed" {
		t.Errorf("IPv6 kube-proxy sync.full %q, want \"not observed\"", got)
	}
	if got := cell(0, "kube-proxy sync.full"); got != "300.0" {
		t.Errorf("IPv4 kube-proxy sync.full %q, want 300.0", got)
	}
	if got := sec.Rows[1].Cells[4].Text; got != "not read" {
		t.Errorf("IPv6 objects %q, want \"not read\" (columns %+v)", got, sec.Columns)
	}
}
