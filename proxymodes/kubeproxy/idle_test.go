package kubeproxy

import (
	"testing"
	"time"
)

// TestIdleAt: minSyncPeriod and the margin after the last sync's end; no
// sync seen is no wait.
func TestIdleAt(t *testing.T) {
	last := time.Unix(1796294000, 0)
	if got, want := IdleAt(last, time.Second), last.Add(1010*time.Millisecond); !got.Equal(want) {
		t.Errorf("IdleAt = %v, want %v", got, want)
	}
	if got := IdleAt(time.Time{}, time.Second); !got.IsZero() {
		t.Errorf("IdleAt(zero) = %v, want zero", got)
	}
	m, err := ParseMetrics([]byte("# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge\n" +
		"kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv6\"} 1.5e9\n" +
		"kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv4\"} 1.7962942e9\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.LastSync(), time.Unix(1796294200, 0); !got.Equal(want) {
		t.Errorf("LastSync = %v, want the IPv4 series' %v", got, want)
	}
}
