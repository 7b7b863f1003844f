package kubeproxy

import (
	"net/netip"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestConfigPassesScenarioFieldsAndSetsOwned(t *testing.T) {
	spec := ConfigSpec{Mode: "nftables", ClusterCIDR: netip.MustParsePrefix("198.19.0.0/16"), NodeName: "node-3",
		NodeIP: netip.MustParseAddr("198.19.255.9"), Kubeconfig: "/tmp/x/node-3.kubeconfig",
		Pass: map[string]any{"nftables": map[string]any{"minSyncPeriod": "250ms"}, "conntrack": map[string]any{"tcpBeLiberal": true}}}
	b, owned, err := Config(spec)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := yaml.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if v := got["nftables"].(map[string]any)["minSyncPeriod"]; v != "250ms" {
		t.Errorf("nftables.minSyncPeriod = %v, want the scenario's 250ms", v)
	}
	ct := got["conntrack"].(map[string]any)
	if ct["tcpBeLiberal"] != true || ct["maxPerCore"] != float64(0) || ct["min"] != float64(0) || ct["tcpEstablishedTimeout"] != "0s" {
		t.Errorf("conntrack = %v: want the scenario's tcpBeLiberal and the testbed's zeros", ct)
	}
	for k, want := range map[string]string{"mode": "nftables", "hostnameOverride": "node-3", "bindAddress": "198.19.255.9",
		"metricsBindAddress": "127.0.0.1:10249", "clusterCIDR": "198.19.0.0/16", "kind": "KubeProxyConfiguration"} {
		if got[k] != want {
			t.Errorf("%s = %v, want %s", k, got[k], want)
		}
	}
	if got["clientConnection"].(map[string]any)["kubeconfig"] != spec.Kubeconfig {
		t.Errorf("clientConnection = %v", got["clientConnection"])
	}
	if len(owned) != len(Owned) {
		t.Errorf("owned fields reported: %d, want %d (%v)", len(owned), len(Owned), owned)
	}
	// The scenario's map is not modified.
	if _, ok := spec.Pass["mode"]; ok {
		t.Error("Config wrote into the scenario's map")
	}
}

func TestConfigRejectsOwnedField(t *testing.T) {
	for _, pass := range []map[string]any{
		{"clusterCIDR": "10.0.0.0/8"},
		{"conntrack": map[string]any{"maxPerCore": 32768}},
		{"metricsBindAddress": "0.0.0.0:10249"},
		{"clientConnection": map[string]any{"kubeconfig": "/etc/k"}},
	} {
		_, _, err := Config(ConfigSpec{Mode: "iptables", Pass: pass})
		if err == nil || !strings.Contains(err.Error(), "set by the testbed") || !strings.Contains(err.Error(), "fix:") {
			t.Errorf("pass %v: err %v, want an owned-field error with a fix", pass, err)
		}
	}
	if _, _, err := Config(ConfigSpec{Mode: "userspace"}); err == nil {
		t.Error("mode userspace accepted; kube-proxy has no such mode any more")
	}
}

const sample = `# HELP kubeproxy_sync_proxy_rules_duration_seconds [ALPHA] SyncProxyRules latency in seconds
# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.001"} 0
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.5"} 1
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="+Inf"} 3
kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv4"} 4.5
kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"} 3
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv6",le="0.001"} 0
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv6",le="0.5"} 2
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv6",le="+Inf"} 2
kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv6"} 0.2
kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv6"} 2
`

func TestMetricsHistogram(t *testing.T) {
	m, err := ParseMetrics([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	h, err := m.Histogram(MetricSync, "IPv4")
	if err != nil {
		t.Fatal(err)
	}
	if h.Count != 3 || h.Sum != 4.5 || h.Mean() != 1.5 || len(h.Buckets) != 2 || h.Buckets[1] != 1 {
		t.Errorf("IPv4 = %+v", h)
	}
	v6, _ := m.Histogram(MetricSync, "IPv6")
	if v6.Count != 2 || v6.Buckets[1] != 2 {
		t.Errorf("IPv6 = %+v", v6)
	}
	// The syncs since an earlier scrape that had seen one 0.5 s sync.
	earlier := Histogram{Count: 1, Sum: 0.5, Bounds: h.Bounds, Buckets: []uint64{0, 1}}
	if d := h.Sub(earlier); d.Count != 2 || d.Sum != 4 || d.Buckets[1] != 0 || d.Mean() != 2 {
		t.Errorf("Sub = %+v", d)
	}
	if _, err := m.Histogram(MetricProgramming, "IPv4"); err == nil {
		t.Error("missing family: no error")
	}
}

// TestConfigDualStackClusterCIDR: with ClusterCIDR6 the clusterCIDR is
// both families, IPv4 first, comma-separated as kube-proxy's
// --cluster-cidr takes a dual-stack cluster's; the IPv6 twin of a
// ProxierSpec's cluster CIDR is in its /96.
func TestConfigDualStackClusterCIDR(t *testing.T) {
	ps := ProxierSpec{ClusterCIDR: netip.MustParsePrefix("198.19.0.0/16"), IPv6: netip.MustParsePrefix("2001:2::/96")}
	if got := ps.clusterCIDR6(); got.String() != "2001:2::c613:0/112" {
		t.Fatalf("clusterCIDR6 %s, want 2001:2::c613:0/112", got)
	}
	if got := (ProxierSpec{ClusterCIDR: ps.ClusterCIDR}).clusterCIDR6(); got.IsValid() {
		t.Errorf("single-stack clusterCIDR6 %s, want none", got)
	}
	for _, tc := range []struct {
		six  netip.Prefix
		want string
	}{
		{ps.clusterCIDR6(), "198.19.0.0/16,2001:2::c613:0/112"},
		{netip.Prefix{}, "198.19.0.0/16"},
	} {
		b, owned, err := Config(ConfigSpec{Mode: "iptables", ClusterCIDR: ps.ClusterCIDR, ClusterCIDR6: tc.six, NodeName: "node-0", NodeIP: netip.MustParseAddr("198.19.255.1")})
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := yaml.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if got["clusterCIDR"] != tc.want || owned["clusterCIDR"] != tc.want {
			t.Errorf("clusterCIDR %v (owned %v), want %s", got["clusterCIDR"], owned["clusterCIDR"], tc.want)
		}
	}
}
