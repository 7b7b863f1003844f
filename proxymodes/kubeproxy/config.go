// Package kubeproxy runs the real kube-proxy, one process per fake node,
// inside that node's network namespace, against the run's control plane
// (topology/controlplane): its KubeProxyConfiguration is written from the
// scenario, its version, log, metrics (scraped from its metrics endpoint
// in the node namespace and parsed with prometheus/common/expfmt), CPU time
// and peak memory are recorded.
package kubeproxy

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/proxybench/proxybench/scenarios"
)

// Owned lists the KubeProxyConfiguration fields the testbed sets itself
// (dotted paths). A scenario that sets one of them is bad input: they tie
// kube-proxy to the testbed (its node, addresses, API server), or would
// write a sysctl outside the node's namespace (conntrack: nf_conntrack_max
// is global, and kube-proxy writes it and the TCP timeouts unless they are
// 0), or keep its listeners inside the node namespace's loopback.
var Owned = []string{
	"apiVersion",
	"kind",
	"mode",
	"clusterCIDR",
	"hostnameOverride",
	"bindAddress",
	"healthzBindAddress",
	"metricsBindAddress",
	"clientConnection.kubeconfig",
	"conntrack.maxPerCore",
	"conntrack.min",
	"conntrack.tcpEstablishedTimeout",
	"conntrack.tcpCloseWaitTimeout",
	"conntrack.udpTimeout",
	"conntrack.udpStreamTimeout",
}

// MetricsPort and HealthzPort are kube-proxy's listeners, on 127.0.0.1 of
// the node namespace.
const (
	MetricsPort = 10249
	HealthzPort = 10256
)

// ConfigSpec is what Config writes.
type ConfigSpec struct {
	// Mode is kube-proxy's mode: iptables, ipvs or nftables.
	Mode string
	// Pass holds the scenario's own KubeProxyConfiguration fields, passed
	// through verbatim (e.g. {"iptables": {"minSyncPeriod": "1s"}}). It
	// must not set an Owned field.
	Pass map[string]any
	// ClusterCIDR is the scenario's clusterCIDR.
	ClusterCIDR netip.Prefix
	// ClusterCIDR6, when valid, is its IPv6 twin in a dual-stack run:
	// clusterCIDR is then "v4,v6", one per family, as kube-proxy's
	// --cluster-cidr takes a dual-stack cluster's (each family's proxier
	// masquerades traffic from outside its family's range).
	ClusterCIDR6 netip.Prefix
	// NodeName is hostnameOverride (the Node object's name).
	NodeName string
	// NodeIP is bindAddress (kube-proxy's primary node IP).
	NodeIP netip.Addr
	// Kubeconfig is the path of the node's kubeconfig.
	Kubeconfig string
	// MetricsAnyAddress binds the metrics endpoint to 0.0.0.0 of the node
	// namespace instead of 127.0.0.1 (a row monitored by Prometheus: its
	// server, in the control plane's namespace, scrapes kube-proxy over
	// the node's link, as a cluster's Prometheus scrapes
	// metricsBindAddress 0.0.0.0:10249).
	MetricsAnyAddress bool
}

// CheckPass returns an error naming the first Owned field pass sets (the
// fix: remove it, the testbed sets it), or a mode kube-proxy lacks.
func CheckPass(pass map[string]any) error {
	for _, f := range Owned {
		if has(pass, strings.Split(f, ".")) {
			return fmt.Errorf("kube-proxy config field %q is set by the testbed (it owns %s); fix: remove it from the scenario", f, strings.Join(Owned, ", "))
		}
	}
	return nil
}

func has(m map[string]any, path []string) bool {
	v, ok := m[path[0]]
	if !ok {
		return false
	}
	if len(path) == 1 {
		return true
	}
	sub, ok := v.(map[string]any)
	return ok && has(sub, path[1:])
}

// set assigns v at path in m, creating maps on the way.
func set(m map[string]any, path []string, v any) {
	for _, p := range path[:len(path)-1] {
		sub, ok := m[p].(map[string]any)
		if !ok {
			sub = map[string]any{}
			m[p] = sub
		}
		m = sub
	}
	m[path[len(path)-1]] = v
}

// deepCopy copies nested map[string]any values (other values are shared).
func deepCopy(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			v = deepCopy(sub)
		}
		out[k] = v
	}
	return out
}

// Config returns the KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1)
// YAML of spec: spec.Pass with the Owned fields set by the testbed, and
// the owned values as a flat map (dotted path → value) for the report.
func Config(spec ConfigSpec) ([]byte, map[string]string, error) {
	if err := CheckPass(spec.Pass); err != nil {
		return nil, nil, err
	}
	if !contains(scenarios.KubeProxyModes, spec.Mode) {
		return nil, nil, fmt.Errorf("kube-proxy mode %q: want one of %s", spec.Mode, strings.Join(scenarios.KubeProxyModes, ", "))
	}
	owned := map[string]any{
		"apiVersion":                      "kubeproxy.config.k8s.io/v1alpha1",
		"kind":                            "KubeProxyConfiguration",
		"mode":                            spec.Mode,
		"clusterCIDR":                     clusterCIDRs(spec),
		"hostnameOverride":                spec.NodeName,
		"bindAddress":                     spec.NodeIP.String(),
		"healthzBindAddress":              fmt.Sprintf("127.0.0.1:%d", HealthzPort),
		"metricsBindAddress":              fmt.Sprintf("127.0.0.1:%d", MetricsPort),
		"clientConnection.kubeconfig":     spec.Kubeconfig,
		"conntrack.maxPerCore":            0,
		"conntrack.min":                   0,
		"conntrack.tcpEstablishedTimeout": "0s",
		"conntrack.tcpCloseWaitTimeout":   "0s",
		"conntrack.udpTimeout":            "0s",
		"conntrack.udpStreamTimeout":      "0s",
	}
	if spec.MetricsAnyAddress {
		owned["metricsBindAddress"] = fmt.Sprintf("0.0.0.0:%d", MetricsPort)
	}
	cfg := deepCopy(spec.Pass)
	if cfg == nil {
		cfg = map[string]any{}
	}
	flat := map[string]string{}
	keys := make([]string, 0, len(owned))
	for k := range owned {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		set(cfg, strings.Split(k, "."), owned[k])
		flat[k] = fmt.Sprint(owned[k])
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kube-proxy config: %w", err)
	}
	return b, flat, nil
}

// clusterCIDRs is the config's clusterCIDR: spec.ClusterCIDR, then
// spec.ClusterCIDR6 when valid, comma-separated.
func clusterCIDRs(spec ConfigSpec) string {
	if spec.ClusterCIDR6.IsValid() {
		return spec.ClusterCIDR.String() + "," + spec.ClusterCIDR6.String()
	}
	return spec.ClusterCIDR.String()
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
