//go:build linux

package kubeproxy_test

import (
	"context"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
  - alert: ProxybenchScraped
    expr: up{job="proxybench"} == 1
  - record: test:proxybench_objects
    expr: max(proxybench_sync_proxy_rules_objects{implementation="kube-proxy"})
`

// TestKernelPrometheusAlertFires: a kube-proxy Proxier with a Monitor
// runs Debian's Prometheus in its control plane's namespace; Prometheus
// scrapes kube-proxy over the node's link (its up is 1: the
// KubeProxyScraped alert fires) and proxybench's own live metrics served
// in that namespace (job proxybench up: ProxybenchScraped fires; the
// first sync's rule objects, observed by the test as the runner does, are
// recorded), an always-true alert fires after its for:, a recording rule
// records kube-proxy's sync count, and Evaluate reads all of it back
// through the namespace. Nothing of the test or its children listens in
// the root namespace; the TSDB stays after Cleanup.
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
	live := monitoring.NewLive()
	row := live.BeginRow(monitoring.RowLabels{Mode: "iptables", Implementation: "kube-proxy", Kernel: "host", Row: "iptables (kube-proxy)"})
	p, err := kubeproxy.NewProxier(kubeproxy.ProxierSpec{Mode: "iptables", Node: tb.Node, NodeIP: tb.NodeBackendAddr,
		ClusterCIDR: clusterCIDR, ServiceCIDR: serviceCIDR, Avoid: []netip.Prefix{serviceCIDR, podCIDR, nodeCIDR},
		KubeProxy: bins.KubeProxy, Bin: controlplane.Binaries{Etcd: bins.Etcd, APIServer: bins.APIServer}, Dir: dir,
		Monitor: &kubeproxy.Monitor{Interval: time.Second, Rules: rs, Live: live.Handler()}})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanupProxier(t, p, runID)
	st, err := p.Sync(ctx, services(6))
	if err != nil {
		t.Fatal(err)
	}
	row.Sync(st.Kind, st.Wall, st.Objects, false)
	if st.Objects <= 0 {
		t.Fatalf("first sync read back %d objects: the recorded test:proxybench_objects would be 0", st.Objects)
	}
	srv, first, _ := p.Prometheus()
	if srv == nil {
		t.Fatal("Prometheus() is nil after the first Sync of a monitored Proxier")
	}
	if out, err := exec.Command("ss", "-Hltn", "sport = :9090 or sport = :9091").Output(); err == nil && strings.TrimSpace(string(out)) != "" {
		t.Errorf("something listens on :9090 or :9091 in the root namespace:\n%s", out)
	}
	if l := testenv.RootListeners(t, slices.Collect(maps.Keys(topology.ChildProcesses(runID)))...); len(l) > 0 {
		t.Errorf("the test or its children listen in the root namespace:\n%s", strings.Join(l, "\n"))
	}
	var m reports.Monitoring
	deadline := time.Now().Add(90 * time.Second)
	for {
		m = reports.Monitoring{}
		err = monitoring.Evaluate(ctx, srv.Client, rs, monitoring.Window{Start: first, End: time.Now(), Step: time.Second}, &m)
		if err == nil && firing(m, "AlwaysTrue") && firing(m, "KubeProxyScraped") && recorded(m, "test:kubeproxy_syncs") &&
			firing(m, "ProxybenchScraped") && recorded(m, "test:proxybench_objects") {
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
	// Sorted by instance: proxybench at 127.0.0.1, kube-proxy at 169.254.
	if len(m.Targets) != 2 || m.Targets[1].Up == 0 || m.Targets[1].Job != "kube-proxy" || !strings.HasPrefix(m.Targets[1].Instance, "169.254.") {
		t.Errorf("targets %+v: want kube-proxy scraped over the node's 169.254 link", m.Targets)
	}
	if len(m.Targets) != 2 || m.Targets[0].Up == 0 || m.Targets[0].Job != monitoring.LiveJob || m.Targets[0].Instance != monitoring.LiveAddr {
		t.Errorf("targets %+v: want proxybench's own metrics scraped at %s", m.Targets, monitoring.LiveAddr)
	}
	for _, r := range m.Records {
		if r.Record == "test:proxybench_objects" && (r.Last == nil || int(*r.Last) != st.Objects) {
			t.Errorf("test:proxybench_objects last %v, want the first sync's %d objects", deref(r.Last), st.Objects)
		}
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
