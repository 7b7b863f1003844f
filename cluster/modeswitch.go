package cluster

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/proxybench/proxybench/internal/runner"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/reports"
)

// RestartedAtAnnotation is the pod-template annotation a mode switch sets
// on DaemonSet kube-system/kube-proxy to roll it, as `kubectl rollout
// restart` does with kubectl.kubernetes.io/restartedAt.
const RestartedAtAnnotation = "proxybench.io/restartedAt"

// DefaultSwitchWait bounds the wait for every node to report a switched
// mode (kube-proxy's /proxyMode) after the ConfigMap edit and the roll.
const DefaultSwitchWait = 3 * time.Minute

// DefaultMetricsPort is kube-proxy's metrics port when its configuration
// names none (KubeProxyConfiguration.metricsBindAddress 127.0.0.1:10249).
const DefaultMetricsPort = 10249

// ModeSwitchRules are the permissions --allow-mode-switch needs beyond
// KubeSystemRules and ClusterRules: in kube-system, editing kube-proxy's
// ConfigMap and rolling its DaemonSet (a patch of its pod template);
// cluster-wide, reading each node's kube-proxy (/proxyMode, /metrics)
// through the API server's node proxy (nodes/proxy get). Access checks
// them only for a run with the switch allowed. Without nodes/proxy a run
// still measures; kube-proxy's own histogram per node is then absent with
// the reason.
func ModeSwitchRules() (kubeSystem, clusterWide []rbacv1.PolicyRule) {
	return []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"kube-proxy"}, Verbs: []string{"update"}},
			{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, ResourceNames: []string{"kube-proxy"}, Verbs: []string{"patch"}},
		}, []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes/proxy"}, Verbs: []string{"get"}},
		}
}

// metricsPort is the port of a KubeProxyConfiguration's
// metricsBindAddress (DefaultMetricsPort when unset or unparsable).
func metricsPort(config string) int {
	var cfg struct {
		MetricsBindAddress string `json:"metricsBindAddress"`
	}
	if yaml.Unmarshal([]byte(config), &cfg) != nil || cfg.MetricsBindAddress == "" {
		return DefaultMetricsPort
	}
	_, p, err := net.SplitHostPort(cfg.MetricsBindAddress)
	if err != nil {
		return DefaultMetricsPort
	}
	n, err := strconv.Atoi(p)
	if err != nil || n <= 0 {
		return DefaultMetricsPort
	}
	return n
}

// DefaultMinSyncPeriod is kube-proxy's minSyncPeriod when its
// configuration sets none (or 0 in iptables and nftables modes, whose
// defaulting reads 0 as unset): 1 s.
const DefaultMinSyncPeriod = time.Second

// minSyncPeriod is the minSyncPeriod kube-proxy runs mode with under
// KubeProxyConfiguration config: the top-level minSyncPeriod
// (v1alpha2) when set, else the mode's own section's (v1alpha1:
// iptables.minSyncPeriod, nftables.minSyncPeriod, ipvs.minSyncPeriod),
// else DefaultMinSyncPeriod; 0 in iptables and nftables is the default
// too (kubeproxy.KubeProxyMinSync). A configuration that does not parse
// gives the default.
func minSyncPeriod(config, mode string) time.Duration {
	var cfg map[string]any
	if yaml.Unmarshal([]byte(config), &cfg) != nil {
		return DefaultMinSyncPeriod
	}
	parse := func(v any) (time.Duration, bool) {
		s, ok := v.(string)
		if !ok {
			return 0, false
		}
		d, err := time.ParseDuration(s)
		return d, err == nil
	}
	d, ok := parse(cfg["minSyncPeriod"])
	if !ok {
		if sec, isMap := cfg[mode].(map[string]any); isMap {
			d, ok = parse(sec["minSyncPeriod"])
		}
	}
	// 0 is unset where kube-proxy's defaulting reads it so (not in ipvs).
	if !ok || (d == 0 && kubeproxy.KubeProxyMinSync(mode, 0) != 0) {
		return DefaultMinSyncPeriod
	}
	return d
}

// WithMode returns KubeProxyConfiguration config (YAML or JSON) with its
// mode set to mode and every other field as it was, as YAML. A
// configuration that does not parse is an error.
func WithMode(config, mode string) (string, error) {
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(config), &m); err != nil {
		return "", fmt.Errorf("kube-proxy configuration does not parse: %w", err)
	}
	m["mode"] = mode
	out, err := yaml.Marshal(m)
	return string(out), err
}

// nodeProxyGet reads path from port on node through the API server's
// node proxy over plain HTTP, as kube-proxy serves its metrics and
// /proxyMode (GET /api/v1/nodes/http:NODE:PORT/proxy/PATH: the name's
// scheme prefix; without it the API server speaks HTTPS, the kubelet's
// scheme, and kube-proxy's port rejects it): the operator needs no
// network path to the node.
func (c *Cluster) nodeProxyGet(ctx context.Context, node string, port int, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// JSON for the API server's own errors (a Status), plain text from kube-proxy.
	b, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", "http:"+node+":"+strconv.Itoa(port), "proxy", path).
		SetHeader("Accept", "application/json, */*").DoRaw(ctx)
	if err != nil && len(b) > 0 {
		body := strings.TrimSpace(string(b))
		if len(body) > 300 {
			body = body[:300]
		}
		err = fmt.Errorf("%w (answer: %s)", err, body)
	}
	return b, err
}

// NodeMode is the mode node's kube-proxy runs in by its own /proxyMode
// answer (metrics port port), read through the node proxy.
func (c *Cluster) NodeMode(ctx context.Context, node string, port int) (string, error) {
	b, err := c.nodeProxyGet(ctx, node, port, "proxyMode")
	if err != nil {
		return "", fmt.Errorf("node %s: kube-proxy /proxyMode through the node proxy: %w", node, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// NodeMetrics scrapes node's kube-proxy metrics (port) through the node
// proxy.
func (c *Cluster) NodeMetrics(ctx context.Context, node string, port int) (kubeproxy.Metrics, error) {
	b, err := c.nodeProxyGet(ctx, node, port, "metrics")
	if err != nil {
		return nil, fmt.Errorf("node %s: kube-proxy metrics through the node proxy: %w", node, err)
	}
	m, err := kubeproxy.ParseMetrics(b)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", node, err)
	}
	return m, nil
}

// ownHistograms are a node's kube-proxy histograms (IPv4) the result
// keeps over the programming changes: network programming and sync
// duration.
type ownHistograms struct {
	programming, sync kubeproxy.Histogram
}

// scrapeOwn reads every node's programming and sync histograms; a node
// whose kube-proxy cannot be read gets the reason instead. A histogram
// not exposed yet is empty: kube-proxy creates a series at its first
// observation, and one restarted by a mode switch has observed no
// programming latency before the first change (the after scrape of a
// kube-proxy that never observed any has Count 0).
func (c *Cluster) scrapeOwn(ctx context.Context, nodes []reports.ClusterNode, port int) (map[string]ownHistograms, map[string]string) {
	hs, why := map[string]ownHistograms{}, map[string]string{}
	hist := func(m kubeproxy.Metrics, name string) (kubeproxy.Histogram, error) {
		h, err := m.Histogram(name, "IPv4")
		if kubeproxy.IsNoMetric(err) {
			return kubeproxy.Histogram{}, nil
		}
		return h, err
	}
	for _, n := range nodes {
		m, err := c.NodeMetrics(ctx, n.Name, port)
		var h ownHistograms
		if err == nil {
			h.programming, err = hist(m, kubeproxy.MetricProgramming)
		}
		if err == nil {
			h.sync, err = hist(m, kubeproxy.MetricSync)
		}
		if err != nil {
			why[n.Name] = err.Error()
			continue
		}
		hs[n.Name] = h
	}
	return hs, why
}

// idleAt is when every node's kube-proxy may sync a change at once: the
// latest kubeproxy.IdleAt over the nodes' last syncs (each node's
// metrics, through the node proxy), as the namespace engine waits before
// its writes. A node whose metrics cannot be read (or that shows no
// sync) counts as having synced at seen, when the operator saw the
// previous change reach every node (zero before the first change: no
// wait). The last-sync gauge is the node's clock: on a cluster whose
// nodes' clocks run apart from the operator's, the wait is off by the
// skew.
func (c *Cluster) idleAt(ctx context.Context, nodes []reports.ClusterNode, port int, minSync time.Duration, seen time.Time) time.Time {
	at := kubeproxy.IdleAt(seen, minSync)
	for _, n := range nodes {
		last := seen
		if m, err := c.NodeMetrics(ctx, n.Name, port); err == nil {
			if ts := m.LastSync(); !ts.IsZero() {
				last = ts
			}
		}
		if t := kubeproxy.IdleAt(last, minSync); t.After(at) {
			at = t
		}
	}
	return at
}

// SwitchMode switches the cluster's kube-proxy from mode from to mode as
// the seeds describe a mode change: mode set in config (ConfigMap
// kube-system/kube-proxy's config.conf, every other field kept) and the
// result applied (applyConfig), then every node in nodes waited for
// until it reports mode (waitMode). The switch is recorded whatever
// happens; an error says which nodes did not report the mode.
func (c *Cluster) SwitchMode(ctx context.Context, from, mode, config string, nodes []string, wait time.Duration) (reports.ClusterSwitch, error) {
	next, err := WithMode(config, mode)
	if err != nil {
		return reports.ClusterSwitch{From: from, To: mode, Started: time.Now(), Error: err.Error()}, err
	}
	return c.applyAndWait(ctx, from, mode, next, nodes, wait)
}

// applyAndWait writes config (of mode mode) and rolls the DaemonSet
// (applyConfig), then waits for every node to report mode (waitMode),
// recording it as the switch from from.
func (c *Cluster) applyAndWait(ctx context.Context, from, mode, config string, nodes []string, wait time.Duration) (reports.ClusterSwitch, error) {
	sw := reports.ClusterSwitch{From: from, To: mode, Started: time.Now()}
	var err error
	if sw.RolledDaemonSet, err = c.applyConfig(ctx, config); err == nil {
		err = c.waitMode(ctx, mode, metricsPort(config), nodes, wait)
	}
	if err != nil {
		sw.Error = err.Error()
		return sw, err
	}
	sw.ReadyNs = time.Since(sw.Started).Nanoseconds()
	return sw, nil
}

// applyConfig writes config as ConfigMap kube-system/kube-proxy's
// config.conf and rolls DaemonSet kube-system/kube-proxy (its pod
// template annotated with RestartedAtAnnotation); rolled is false for a
// cluster without the DaemonSet, such as `proxybench cluster up`'s,
// whose holder restarts its kube-proxies on the ConfigMap's change.
func (c *Cluster) applyConfig(ctx context.Context, config string) (rolled bool, err error) {
	if err := c.writeConfig(ctx, config); err != nil {
		return false, err
	}
	return c.rollDaemonSet(ctx)
}

// waitMode waits up to wait until every node in nodes reports mode on
// its kube-proxy's /proxyMode (metrics port port); the error names the
// nodes that did not, with what each answered.
func (c *Cluster) waitMode(ctx context.Context, mode string, port int, nodes []string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		var behind []string
		for _, n := range nodes {
			if got, err := c.NodeMode(ctx, n, port); err != nil || got != mode {
				behind = append(behind, fmt.Sprintf("%s (%s)", n, orErr(got, err)))
			}
		}
		if len(behind) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			sort.Strings(behind)
			return fmt.Errorf("mode switch to %s: after %s, nodes not reporting it: %s", mode, wait, strings.Join(behind, ", "))
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func orErr(got string, err error) string {
	if err != nil {
		return err.Error()
	}
	return "reports " + got
}

// writeConfig replaces config.conf of ConfigMap kube-system/kube-proxy.
func (c *Cluster) writeConfig(ctx context.Context, config string) error {
	cm, err := c.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read ConfigMap kube-system/kube-proxy: %w", err)
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[KubeProxyConfigKey] = config
	if _, err := c.Client.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update ConfigMap kube-system/kube-proxy: %w", err)
	}
	return nil
}

// rollDaemonSet annotates DaemonSet kube-system/kube-proxy's pod template
// so its controller replaces every pod; false, nil when there is no such
// DaemonSet.
func (c *Cluster) rollDaemonSet(ctx context.Context) (bool, error) {
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, RestartedAtAnnotation, time.Now().Format(time.RFC3339Nano))
	_, err := c.Client.AppsV1().DaemonSets("kube-system").Patch(ctx, "kube-proxy", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("roll DaemonSet kube-system/kube-proxy: %w", err)
	}
	return true, nil
}

// programmingOwn fills each node's kube-proxy histogram growth between
// two scrapes (before, after) into nodes: ProgrammingOwn and SyncOwn, or
// ProgrammingOwnAbsent with the reason.
func programmingOwn(nodes []reports.ClusterNode, before, after map[string]ownHistograms, why map[string]string) {
	for i := range nodes {
		n := &nodes[i]
		b, okb := before[n.Name]
		a, oka := after[n.Name]
		if !okb || !oka {
			n.ProgrammingOwnAbsent = why[n.Name]
			if n.ProgrammingOwnAbsent == "" {
				n.ProgrammingOwnAbsent = "kube-proxy's metrics could not be read before and after the changes"
			}
			continue
		}
		h, sh := runner.HistogramOf(a.programming.Sub(b.programming)), runner.HistogramOf(a.sync.Sub(b.sync))
		n.ProgrammingOwn, n.SyncOwn = &h, &sh
	}
}
