package reports

import (
	"strings"
	"testing"
	"time"
)

// TestClusterSectionsModesAndSwitch: a run that switched modes renders
// one lookup and one programming table with a row per mode, kube-proxy's
// own figures beside the black-box ones (absent with its reason where a
// node had none), and the switches with the restore; an unrestored
// switch says so.
func TestClusterSectionsModesAndSwitch(t *testing.T) {
	own := &KubeProxyHistogram{Count: 4, SumSeconds: 1, Buckets: []Bucket{{LE: "0.25", Count: 2}, {LE: "0.5", Count: 4}, {LE: "+Inf", Count: 4}}}
	node := func(name string, o *KubeProxyHistogram, absent string) ClusterNode {
		return ClusterNode{Name: name, Lookup: []PositionResult{{Position: "first"}}, ProgrammingNs: []int64{1e8, 2e8}, ProgrammingOwn: o, ProgrammingOwnAbsent: absent}
	}
	c := &ClusterRun{Server: "https://x", Nodes: []ClusterNode{node("node-0", own, ""), node("node-1", own, "")},
		Modes: []ClusterModeRun{{Mode: "nftables", Row: "nftables (kube-proxy)", Nodes: []ClusterNode{node("node-0", own, ""), node("node-1", nil, "forbidden")}}},
		ModeSwitch: &ClusterModeSwitch{OriginalMode: "iptables", Restored: true, Switches: []ClusterSwitch{
			{From: "iptables", To: "nftables", ReadyNs: int64(3 * time.Second), RolledDaemonSet: true},
			{From: "nftables", To: "iptables", ReadyNs: int64(2 * time.Second), Restore: true}}}}
	secs := ClusterSections(c, "iptables (kube-proxy)")
	titles := map[string]Section{}
	for _, s := range secs {
		if _, dup := titles[s.Title]; dup {
			t.Errorf("section %q twice", s.Title)
		}
		titles[s.Title] = s
	}
	prog, ok := titles["programming latency per node"]
	if !ok {
		t.Fatalf("no programming section in %v", secs)
	}
	rows := map[string]int{}
	for _, r := range prog.Rows {
		rows[r.Row]++
	}
	if rows["iptables (kube-proxy)"] != 3 || rows["nftables (kube-proxy)"] != 3 {
		t.Errorf("programming rows per mode %v, want 3 each (2 nodes and all)", rows)
	}
	if len(titles["cluster nodes"].Rows) != 2 || len(titles["lookup latency per node"].Rows) != 4 {
		t.Errorf("facts %d rows, lookups %d rows", len(titles["cluster nodes"].Rows), len(titles["lookup latency per node"].Rows))
	}
	if !strings.Contains(strings.Join(prog.Notes, "\n"), "node-1: kube-proxy's own histogram absent: forbidden") {
		t.Errorf("notes %q lack node-1's reason", prog.Notes)
	}
	first := prog.Rows[0].Cells
	if got := first[5].Text; got != "250.0" { // p50 of 4 observations: the 0.25 s bound
		t.Errorf("kube-proxy's own p50 %q, want 250.0 ms", got)
	}
	sw := titles["mode switches"]
	if len(sw.Rows) != 2 || !strings.Contains(sw.Rows[1].Cells[0].Text, "restore") || !strings.Contains(strings.Join(sw.Notes, " "), "restored") {
		t.Errorf("switch section %+v", sw)
	}
	c.ModeSwitch.Restored, c.ModeSwitch.RestoreError = false, "node-1 (reports nftables)"
	for _, s := range ClusterSections(c, "iptables (kube-proxy)") {
		if s.Title == "mode switches" && !strings.Contains(strings.Join(s.Notes, " "), "NOT RESTORED: node-1") {
			t.Errorf("unrestored switch notes %q", s.Notes)
		}
	}
}
