//go:build linux

package kubeproxy

import (
	"strings"
	"testing"
)

// conntrackLog is kube-proxy's log at -v 4 around its conntrack cleanup
// (pkg/proxy/conntrack/cleanup.go's lines as klog writes them), with an
// IPv6 cleanup, a failed clear and a line of another format.
const conntrackLog = `I1202 04:50:01.100000   17325 cleanup.go:45] "Started to reconcile conntrack entries" ipFamily="IPv4"
I1202 04:50:01.101000   17325 cleanup.go:117] "Finished reconciling conntrack entries" ipFamily="IPv4" entriesDeleted=2 took="1.1ms"
I1202 04:50:01.102000   17325 cleanup.go:117] "Finished reconciling conntrack entries" ipFamily="IPv6" entriesDeleted=5 took="0.4ms"
E1202 04:50:02.200000   17325 cleanup.go:115] "Failed to clear all conntrack entries" err="netlink: operation not permitted" ipFamily="IPv4" entriesDeleted=1 took="2ms"
{"ts":1764636994000.1,"msg":"Finished reconciling conntrack entries","v":4,"ipFamily":"IPv4","entriesDeleted":9}
I1202 04:50:03.300000   17325 cleanup.go:117] "Finished reconciling conntrack entries" ipFamily="IPv4" entriesDeleted=0 took="0.9ms"
`

// TestParseConntrackLog counts kube-proxy's IPv4 cleanups and the
// entries they deleted, a failed clear's deletions included and its line
// kept as an error; IPv6 and other formats are left out.
func TestParseConntrackLog(t *testing.T) {
	runs, deleted, errs := ParseConntrackLog([]byte(conntrackLog))
	if runs != 2 || deleted != 3 {
		t.Errorf("%d runs, %d deleted; want 2 IPv4 cleanups that deleted 2+1+0", runs, deleted)
	}
	if len(errs) != 1 || !strings.HasPrefix(errs[0], "Failed to clear all conntrack entries") || !strings.Contains(errs[0], "operation not permitted") {
		t.Errorf("errors %q, want the failed clear with its cause", errs)
	}
	if r, d, e := ParseConntrackLog(nil); r != 0 || d != 0 || e != nil {
		t.Errorf("empty log: %d, %d, %q", r, d, e)
	}
}

// TestConntrackOf reads kube-proxy's IPv4 cleanup metrics from a scrape:
// its duration histogram's count and its deleted-entries counter, and
// tells a scrape without the counter (kube-proxy before v1.33) apart.
func TestConntrackOf(t *testing.T) {
	m, err := ParseMetrics([]byte(`# TYPE kubeproxy_conntrack_reconciler_sync_duration_seconds histogram
kubeproxy_conntrack_reconciler_sync_duration_seconds_bucket{ip_family="IPv4",le="0.001"} 3
kubeproxy_conntrack_reconciler_sync_duration_seconds_bucket{ip_family="IPv4",le="+Inf"} 4
kubeproxy_conntrack_reconciler_sync_duration_seconds_sum{ip_family="IPv4"} 0.01
kubeproxy_conntrack_reconciler_sync_duration_seconds_count{ip_family="IPv4"} 4
kubeproxy_conntrack_reconciler_sync_duration_seconds_bucket{ip_family="IPv6",le="+Inf"} 9
kubeproxy_conntrack_reconciler_sync_duration_seconds_sum{ip_family="IPv6"} 0.01
kubeproxy_conntrack_reconciler_sync_duration_seconds_count{ip_family="IPv6"} 9
# TYPE kubeproxy_conntrack_reconciler_deleted_entries_total counter
kubeproxy_conntrack_reconciler_deleted_entries_total{ip_family="IPv6"} 7
kubeproxy_conntrack_reconciler_deleted_entries_total{ip_family="IPv4"} 11
`))
	if err != nil {
		t.Fatal(err)
	}
	if mk := conntrackOf(m); mk.runs != 4 || mk.deleted != 11 || !mk.hasCount {
		t.Errorf("%+v, want 4 IPv4 cleanups, 11 deleted", mk)
	}
	if mk := conntrackOf(Metrics{}); mk.runs != 0 || mk.hasCount {
		t.Errorf("no metrics: %+v", mk)
	}
}
