package monitoring

import (
	"slices"
	"strings"
)

// KubeProxyMetrics are the metric families kube-proxy v1.37 exports on
// its metrics endpoint (k8s.io/kubernetes pkg/proxy/metrics, metrics.go
// and metrics_linux.go; the winkernel ones never appear on Linux), by
// base name: a histogram's _bucket, _sum and _count count as it.
var KubeProxyMetrics = []string{
	"kubeproxy_conntrack_reconciler_deleted_entries_total",
	"kubeproxy_conntrack_reconciler_sync_duration_seconds",
	"kubeproxy_network_programming_duration_seconds",
	"kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total",
	"kubeproxy_nftables_localhost_nodeport_listeners",
	"kubeproxy_proxy_healthz_total",
	"kubeproxy_proxy_livez_total",
	"kubeproxy_sync_full_proxy_rules_duration_seconds",
	"kubeproxy_sync_partial_proxy_rules_duration_seconds",
	"kubeproxy_sync_proxy_rules_duration_seconds",
	"kubeproxy_sync_proxy_rules_endpoint_changes_pending",
	"kubeproxy_sync_proxy_rules_endpoint_changes_total",
	"kubeproxy_sync_proxy_rules_iptables_last",
	"kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total",
	"kubeproxy_sync_proxy_rules_iptables_restore_failures_total",
	"kubeproxy_sync_proxy_rules_iptables_total",
	"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
	"kubeproxy_sync_proxy_rules_last_timestamp_seconds",
	"kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total",
	"kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
	"kubeproxy_sync_proxy_rules_no_local_endpoints_total",
	"kubeproxy_sync_proxy_rules_service_changes_pending",
	"kubeproxy_sync_proxy_rules_service_changes_total",
	// component-base's registry, in every Kubernetes component.
	"kubernetes_build_info",
	"kubernetes_feature_enabled",
	"registered_metrics_total",
	"disabled_metrics_total",
	"hidden_metrics_total",
}

// componentPrefixes are families every Kubernetes component's registry
// exports under a prefix: the Go runtime, the process and client-go's
// REST client (component-base/metrics/prometheus/restclient).
var componentPrefixes = []string{"go_", "process_", "rest_client_", "workqueue_"}

// KubeProxyExports reports whether kube-proxy's metrics endpoint has
// family name (KubeProxyMetrics, the component prefixes, with a
// histogram's suffixes).
func KubeProxyExports(name string) bool {
	for _, p := range componentPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	if slices.Contains(KubeProxyMetrics, name) {
		return true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, suf); ok && slices.Contains(KubeProxyMetrics, b) {
			return true
		}
	}
	return false
}
