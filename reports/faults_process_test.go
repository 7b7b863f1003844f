package reports

import (
	"strings"
	"testing"
)

// TestProcessFaultSections: each fault's section has one row per case with its
// figures, a row whose data plane never converged fails (junit), and
// the API outage's notes give the rules over time.
func TestProcessFaultSections(t *testing.T) {
	conv := Convergence{Changed: 20, RulesNs: 12e9, ProbesNs: 13e9, Probes: 900, Stale: 40, LastStaleNs: 11e9, MaxStale: 20, MaxMissing: 20,
		Samples: []ConvergenceSample{{AtNs: 0, Stale: 20, Missing: 20}, {AtNs: 5e8, Stale: 20, Missing: 20}, {AtNs: 12e9, Stale: 0, Missing: 0}}}
	never := conv
	never.RulesNs, never.ProbesNs = -1, -1
	mr := &ModeResult{
		APIOutage: []APIOutageCase{{Component: "kube-apiserver", DownNs: 10e9, ReadyNs: 2e9, Writes: 100, WriteErrors: 80, WrittenNs: 15e9, Conv: conv},
			{Component: "etcd", DownNs: 10e9, WrittenNs: -1, Conv: never}},
		Restart: []RestartCase{{Case: "changes", GapNs: 2e9, SyncNs: 5e8, EntryStamps: true, Flows: []RestartFlow{
			{Moved: true, EntryDeleted: true, Sent: 100, Lost: 3, BlackholedNs: 6e7, ToRemoved: 1},
			{Moved: false, HeldBroken: true, Sent: 100, Lost: 0}}}},
		Crash: []CrashCase{{Crash: 1, BackoffNs: 10e9, StartNs: 10e9, SyncNs: 1e9, KubeProxySyncNs: 3e8, Conv: conv},
			{Crash: 2, BackoffNs: 20e9, Conv: never}},
	}
	cell := func(s Section, row int, col string) string {
		for i, c := range s.Columns {
			if c.Name == col {
				return s.Rows[row].Cells[i].Text
			}
		}
		t.Fatalf("%s: no column %q", s.Phase, col)
		return ""
	}
	api := APIOutageReport("iptables (kube-proxy)", mr)[0]
	if len(api.Rows) != 2 || cell(api, 0, "rules converged") != "12.000" || cell(api, 0, "written") != "15.000" || cell(api, 1, "written") != "never" {
		t.Errorf("API outage rows %+v", api.Rows)
	}
	if api.Rows[0].Fail != "" || !strings.Contains(api.Rows[1].Fail, "etcd") {
		t.Errorf("fails %q %q", api.Rows[0].Fail, api.Rows[1].Fail)
	}
	if len(api.Notes) != 2 || !strings.Contains(api.Notes[0], "0.0 s 20 stale/20 missing, 12.0 s 0 stale/0 missing") {
		t.Errorf("notes %q", api.Notes)
	}
	// An attempt whose answer was lost but was committed: a note says so.
	mr.APIOutage[0].AnswersLost, mr.APIOutage[0].WriteError = 8, "svc-00004: context deadline exceeded"
	if n := APIOutageReport("x", mr)[0].Notes; len(n) != 3 || !strings.Contains(n[1], "8 of 20 changes") || !strings.Contains(n[1], "context deadline exceeded") {
		t.Errorf("lost answers: notes %q", n)
	}
	rs := RestartReport("iptables", mr)[0]
	if cell(rs, 0, "moved") != "1" || cell(rs, 0, "entries deleted") != "1" || cell(rs, 0, "lost") != "3" || cell(rs, 0, "black-holed max") != "0.060" ||
		cell(rs, 0, "held broken") != "1" || cell(rs, 0, "datagrams") != "200" || cell(rs, 0, "kube-proxy's own sync") != "-" {
		t.Errorf("restart row %+v", rs.Rows[0])
	}
	// Without conntrack timestamps, entries deleted is not measured.
	mr.Restart[0].EntryStamps = false
	if rs := RestartReport("iptables", mr)[0]; cell(rs, 0, "entries deleted") != "-" || len(rs.Notes) != 1 {
		t.Errorf("no stamps: %+v %q", rs.Rows[0], rs.Notes)
	}
	cr := CrashReport("iptables (kube-proxy)", mr)[0]
	if cell(cr, 0, "outage") != "13.000" || cell(cr, 0, "kube-proxy's own sync") != "0.300" || cr.Rows[0].Fail != "" || !strings.Contains(cr.Rows[1].Fail, "crash 2") {
		t.Errorf("crash rows %+v", cr.Rows)
	}
	if len(APIOutageReport("x", &ModeResult{})) != 0 || len(RestartReport("x", &ModeResult{})) != 0 || len(CrashReport("x", &ModeResult{})) != 0 {
		t.Error("a row without the fault has a section")
	}
}
