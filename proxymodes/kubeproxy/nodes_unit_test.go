//go:build linux

package kubeproxy

import (
	"testing"
	"time"
)

// TestSettleBound: the wait for every node's sync after the watch
// delivery writes is 30 s, or twice the slowest node's first sync when
// that is longer.
func TestSettleBound(t *testing.T) {
	for _, tc := range []struct {
		firsts []time.Duration
		want   time.Duration
	}{
		{nil, 30 * time.Second},
		{[]time.Duration{5 * time.Second, 9 * time.Second}, 30 * time.Second},
		{[]time.Duration{20 * time.Second, 57 * time.Second, 3 * time.Second}, 114 * time.Second},
	} {
		p := &Proxier{}
		for _, f := range tc.firsts {
			p.nodes.others = append(p.nodes.others, &otherNode{first: f})
		}
		if got := p.settleBound(); got != tc.want {
			t.Errorf("first syncs %v: bound %v, want %v", tc.firsts, got, tc.want)
		}
	}
}

// TestFirstFullOf: a node's first full sync is its full-sync histogram's
// observation (not the overall sync histogram's, which also counts
// partial syncs), the mean when it holds several, none before it is
// observed, and IPVS mode's one sync histogram when there is no
// full-sync family.
func TestFirstFullOf(t *testing.T) {
	const both = `# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="+Inf"} 3
kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv4"} 2.5
kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"} 3
# TYPE kubeproxy_sync_full_proxy_rules_duration_seconds histogram
kubeproxy_sync_full_proxy_rules_duration_seconds_bucket{ip_family="IPv6",le="+Inf"} 1
kubeproxy_sync_full_proxy_rules_duration_seconds_sum{ip_family="IPv6"} 9
kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv6"} 1
`
	for _, tc := range []struct {
		name, text string
		want       time.Duration
		ok         bool
	}{
		{"one full", both + `kubeproxy_sync_full_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="+Inf"} 1
kubeproxy_sync_full_proxy_rules_duration_seconds_sum{ip_family="IPv4"} 0.16
kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv4"} 1
`, 160 * time.Millisecond, true},
		{"two full", both + `kubeproxy_sync_full_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="+Inf"} 2
kubeproxy_sync_full_proxy_rules_duration_seconds_sum{ip_family="IPv4"} 3
kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv4"} 2
`, 1500 * time.Millisecond, true},
		{"not yet observed", both + `kubeproxy_sync_full_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="+Inf"} 0
kubeproxy_sync_full_proxy_rules_duration_seconds_sum{ip_family="IPv4"} 0
kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv4"} 0
`, 0, false},
		{"ipvs", `# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="+Inf"} 1
kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv4"} 4
kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"} 1
`, 4 * time.Second, true},
		{"nothing", "", 0, false},
	} {
		m, err := ParseMetrics([]byte(tc.text))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, ok := firstFullOf(m)
		if ok != tc.ok || (ok && (got-tc.want).Abs() > time.Microsecond) {
			t.Errorf("%s: %v, %t; want %v, %t", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
