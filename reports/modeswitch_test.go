package reports

import (
	"bytes"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/scenarios"
)

// TestModeSwitchSections: a switch's sections carry kube-proxy's own
// sync time, the cleanup times, how held connections broke and the
// recovery counts; a last answer before the switch's start shows as a
// negative time (not as unknown); per-service rows are named by their
// service; and the figures' names are distinct between the two sections.
func TestModeSwitchSections(t *testing.T) {
	before := int64(-20e6)
	sw := ModeSwitch{From: "iptables", To: "nftables", Implementation: "kube-proxy", Version: "v1.37.2",
		Services: []SwitchService{
			{Service: "svc-00000", ClusterIP: "198.18.0.1", Attempts: 9, Failed: 2, OutageNs: 372e6, LastOldNs: &before, FirstNewNs: 352e6},
			{Service: "svc-00001", ClusterIP: "198.18.0.2", Attempts: 9, FirstNewNs: -1},
		},
		Window: SyncWindow{Attempts: 18, Failed: 2}, FirstSyncNs: 2e9, ProxyMetricNs: 3e8,
		StartupCleanup: "kube-proxy's own (platformCleanup)", StartupCleanupNs: 1e8,
		Established: 8, Survived: 7, BrokenHow: []string{"reset"},
		Cleanup: "kube-proxy --cleanup", CleanupNs: 5e8, Recovery: &SyncWindow{Attempts: 30, Failed: 4}, RecoveryOutageNs: 1e9, RecoveryFirstSyncNs: 9e8}
	secs := ModeSwitchSections([]ModeSwitch{sw})
	if len(secs) != 2 {
		t.Fatalf("%d sections", len(secs))
	}
	cell := func(s Section, row int, col string) string {
		for i, c := range s.Columns {
			if c.Name == col {
				return s.Rows[row].Cells[i].Text
			}
		}
		t.Fatalf("no column %q in %s", col, s.Title)
		return ""
	}
	sum, per := secs[0], secs[1]
	for col, want := range map[string]string{"its sync by kube-proxy's metric": "0.300", "startup cleanup took": "0.100", "cleanup took": "0.500",
		"broken how": "reset", "recovery attempts": "30", "recovery failed": "4"} {
		if got := cell(sum, 0, col); got != want {
			t.Errorf("%s = %q, want %q", col, got, want)
		}
	}
	if got := cell(per, 0, "last old"); got != "-0.020" {
		t.Errorf("last old = %q, want -0.020 (the last answer came before the switch)", got)
	}
	if got := cell(per, 1, "last old"); got != "-" {
		t.Errorf("unknown last old = %q, want -", got)
	}
	names := per.RowNames()
	if !strings.HasSuffix(names[0], ", svc-00000") || !strings.HasSuffix(names[1], ", svc-00001") {
		t.Errorf("per-service rows named %q, want their service", names)
	}
	figs := map[string]string{}
	for _, s := range secs {
		for _, c := range s.Columns {
			if c.Unit == "" {
				continue
			}
			if c.Figure == "" || strings.Contains(c.Figure, " ") {
				t.Errorf("%s: column %q has figure name %q", s.Title, c.Name, c.Figure)
			}
			if other, dup := figs[c.Figure]; dup {
				t.Errorf("figure %q in %q and %q", c.Figure, other, s.Title)
			}
			figs[c.Figure] = s.Title
		}
	}
}

// TestSwitchFindings: the findings say per switch its outage, the held
// connections it broke and what stays after the cleanup.
func TestSwitchFindings(t *testing.T) {
	sw := ModeSwitch{From: "userspace", To: "iptables", Implementation: "builtin",
		Services:    []SwitchService{{Service: "a", OutageNs: 546e6}},
		Established: 8, Survived: 0, Cleanup: "builtin",
		Leftovers:    []Leftover{{Kind: "iptables chain", Name: "KUBE-PORTALS-HOST", Count: 1}},
		AfterCleanup: []Leftover{{Kind: "iptables chain", Name: "KUBE-FIREWALL", Count: 1}}}
	got := switchFindings([]ModeSwitch{sw})
	if len(got) != 1 {
		t.Fatalf("%d findings", len(got))
	}
	for _, want := range []string{"userspace → iptables (builtin)", "outage up to 546", "broke 8 of 8 held connections", "left 1 objects", "1 objects stay after the cleanup (KUBE-FIREWALL)"} {
		if !strings.Contains(got[0], want) {
			t.Errorf("finding %q lacks %q", got[0], want)
		}
	}
}

// TestSkippedListed: what a run skipped is listed under its own heading,
// with or without kube-proxy rows.
func TestSkippedListed(t *testing.T) {
	r := &Result{Scenario: &scenarios.Scenario{Name: "s"}, Skipped: []string{"modeSwitch iptables → ipvs: ipvs not among the modes run"}}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "### skipped\n\n- modeSwitch iptables → ipvs: ipvs not among") {
		t.Errorf("skipped not listed:\n%s", b.String())
	}
}
