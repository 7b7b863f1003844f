//go:build linux

package kubeproxy_test

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/monitoring"
	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/topology/controlplane"
)

const alwaysRules = `groups:
- name: test
  rules:
  - alert: AlwaysTrue
    expr: vector(1) > 0
    for: 2s
    labels:
      severity: none
  - alert: KubeProxyScraped
    expr: up{job="kube-proxy"} == 1
  - record: test:kubeproxy_syncs
    expr: sum(kubeproxy_sync_proxy_rules_duration_seconds_count)
`

// TestKernelPrometheusAlertFires: a kube-proxy Proxier with a Monitor
// runs Debian's Prometheus in its control plane's namespace; Prometheus
// scrapes kube-proxy over the node's link (its up is 1: the
// KubeProxyScraped alert fires), an always-true alert fires after its
// for:, a recording rule records kube-proxy's sync count, and Evaluate
// reads all of it back through the namespace. Nothing listens in the
// root namespace; the TSDB stays after Cleanup.
func TestKernelPrometheusAlertFires(t *testing.T) {
	testenv.RequireKernel(t, "iptables", "iptables-save", "iptables-restore", "prometheus", "promtool")
	bins := testenv.RequireKube(t)
	before := testenv.RootSnapshot(t)
	ctx := context.Background()
	rs, err := monitoring.Parse("always.yaml", []byte(alwaysRules))
	if err != nil {
		t.Fatal(err)
	}
	if err := monitoring.Check(ctx, "", rs); err != nil {
		t.Fatalf("promtool refuses the test's rules: %v", err)
	}
	runID := topology.NewRunID()
	tb := echoTestbed(ctx, t, runID)
	dir := t.TempDir()
	p, err := kubeproxy.NewProxier(kubeproxy.ProxierSpec{Mode: "iptables", Node: tb.Node, NodeIP: tb.NodeBackendAddr,
		ClusterCIDR: clusterCIDR, ServiceCIDR: serviceCIDR, Avoid: []netip.Prefix{serviceCIDR, podCIDR, nodeCIDR},
		KubeProxy: bins.KubeProxy, Bin: controlplane.Binaries{Etcd: bins.Etcd, APIServer: bins.APIServer}, Dir: dir,
		Monitor: &kubeproxy.Monitor{Interval: time.Second, Rules: rs}})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanupProxier(t, p, runID)
	if _, err := p.Sync(ctx, services(6)); err != nil {
		t.Fatal(err)
	}
	srv, first, _ := p.Prometheus()
	if srv == nil {
		t.Fatal("Prometheus() is nil after the first Sync of a monitored Proxier")
	}
	if out, err := exec.Command("ss", "-Hltn", "sport = :9090").Output(); err == nil && strings.TrimSpace(string(out)) != "" {
		t.Errorf("something listens on :9090 in the root namespace:\n%s", out)
	}
	var m reports.Monitoring
	deadline := time.Now().Add(90 * time.Second)
	for {
		m = reports.Monitoring{}
		err = monitoring.Evaluate(ctx, srv.Client, rs, monitoring.Window{Start: first, End: time.Now(), Step: time.Second}, &m)
		if err == nil && firing(m, "AlwaysTrue") && firing(m, "KubeProxyScraped") && recorded(m, "test:kubeproxy_syncs") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 90 s: err %v; alerts %+v; records %+v; targets %+v\nprometheus log:\n%s", err, m.Alerts, m.Records, m.Targets, srv.LogTail(20))
		}
		time.Sleep(time.Second)
	}
	for _, a := range m.Alerts {
		t.Logf("alert %s %v: %s, active at +%.1fs, fired at +%.1fs, value %v", a.Alert, a.Labels, a.State,
			a.PendingAt.Sub(first).Seconds(), a.FiredAt.Sub(first).Seconds(), deref(a.Value))
		if a.Alert == "AlwaysTrue" {
			if a.Value == nil || *a.Value != 1 || a.Labels["severity"] != "none" {
				t.Errorf("AlwaysTrue: value %v labels %v, want 1 and severity none", deref(a.Value), a.Labels)
			}
			if a.FiredAt.Sub(*a.PendingAt) < 2*time.Second {
				t.Errorf("AlwaysTrue fired %v after it became active, before its for: 2s", a.FiredAt.Sub(*a.PendingAt))
			}
		}
	}
	if len(m.Targets) != 1 || m.Targets[0].Up == 0 || !strings.HasPrefix(m.Targets[0].Instance, "169.254.") {
		t.Errorf("targets %+v: want kube-proxy scraped over the node's 169.254 link", m.Targets)
	}
	if len(m.Missing) != 0 || m.Prometheus == "" {
		t.Errorf("missing %v, version %q: want every metric found and the server's version", m.Missing, m.Prometheus)
	}
	tsdb := srv.TSDB()
	if err := p.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if s, _, _ := p.Prometheus(); s != nil {
		t.Error("Prometheus() still set after Cleanup")
	}
	if entries, err := os.ReadDir(tsdb); err != nil || len(entries) == 0 {
		t.Errorf("TSDB %s after Cleanup: %v entries, %v: want it kept", tsdb, len(entries), err)
	}
	if _, err := os.Stat(filepath.Join(dir, "prometheus", "prometheus.yml")); err != nil {
		t.Error(err)
	}
	testenv.CompareRoot(t, before, testenv.RootSnapshot(t))
}

func firing(m reports.Monitoring, alert string) bool {
	for _, a := range m.Alerts {
		if a.Alert == alert && a.State == "firing" {
			return true
		}
	}
	return false
}

func recorded(m reports.Monitoring, record string) bool {
	for _, r := range m.Records {
		if r.Record == record && r.Values > 0 && r.Last != nil && *r.Last >= 1 {
			return true
		}
	}
	return false
}

func deref(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}
