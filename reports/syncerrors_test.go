package reports

import (
	"testing"
	"time"
)

// TestChurnSyncErrorsReport: one row per churn phase run with
// failure.syncErrors: the wrappers' counts, the failures' recovery (p50,
// max, the unrecovered and full-sync counts), the probes while stale,
// and kube-proxy's counters where the row has them ("-" for builtin and
// for a counter its mode does not serve); no section without injected
// errors.
func TestChurnSyncErrorsReport(t *testing.T) {
	s := time.Second.Nanoseconds()
	c := ChurnResult{MinSyncPeriodNs: s, Syncs: make([]SyncRecord, 10), FailedSyncs: 3, Injected: &InjectedErrors{Calls: 12, Failed: 3},
		Failures: []SyncFailure{{RecoveredNs: 2 * s, RecoveryKind: "full", Changes: 4, ProbeConns: 100, ProbeErrors: 1},
			{RecoveredNs: 4 * s, RecoveryKind: "full", Changes: 2, ProbeConns: 50}, {RecoveredNs: -1, Changes: 1, ProbeConns: 7}}}
	if got := ChurnSyncErrorsReport("iptables", &ModeResult{Churn: []ChurnResult{{}}}); got != nil {
		t.Errorf("sections %v without injected errors", got)
	}
	b := ChurnSyncErrorsReport("iptables", &ModeResult{Churn: []ChurnResult{c}})
	kc := c
	kc.KubeProxy = &ChurnKubeProxy{FailureCounters: map[string]float64{"kubeproxy_sync_proxy_rules_iptables_restore_failures_total": 3,
		"kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total": 2}}
	k := ChurnSyncErrorsReport("iptables (kube-proxy)", &ModeResult{Churn: []ChurnResult{kc}})
	if len(b) != 1 || len(k) != 1 || len(b[0].Rows) != 1 {
		t.Fatalf("sections %v, %v", b, k)
	}
	want := []string{"1s", "12", "3", "10", "3", "2.001", "4.001", "1", "2", "7", "157", "1", "-", "-", "-", "-"}
	for i, w := range want {
		if got := b[0].Rows[0].Cells[i].Text; got != w {
			t.Errorf("builtin %s: %q, want %q", b[0].Columns[i].Name, got, w)
		}
	}
	for i, w := range []string{"3", "2", "-", "-"} {
		if got := k[0].Rows[0].Cells[12+i].Text; got != w {
			t.Errorf("kube-proxy %s: %q, want %q", k[0].Columns[12+i].Name, got, w)
		}
	}
}
