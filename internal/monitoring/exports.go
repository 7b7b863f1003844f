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
	return hasFamily(KubeProxyMetrics, name)
}

// LiveExports reports whether proxybench's own live metrics endpoint
// (Live.Handler: job LiveJob) has family name: LiveMetrics, with a
// histogram's suffixes, and the Go runtime's and process's go_* and
// process_* (client_golang's collectors).
func LiveExports(name string) bool {
	return strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || hasFamily(LiveMetrics, name)
}

// RowExports reports whether a row's Prometheus can hold family name:
// kube-proxy's (KubeProxyExports) or proxybench's own live metrics
// (LiveExports). The warning before a run about a rule reading a name no
// row exports uses it.
func RowExports(name string) bool { return KubeProxyExports(name) || LiveExports(name) }

// hasFamily reports whether name is one of families, or a histogram's
// _bucket, _sum or _count series of one.
func hasFamily(families []string, name string) bool {
	if slices.Contains(families, name) {
		return true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, suf); ok && slices.Contains(families, b) {
			return true
		}
	}
	return false
}
