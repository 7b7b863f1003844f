//go:build linux

package kubeproxy_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/topology/controlplane"
	"github.com/proxybench/proxybench/workload"
)

// TestKernelProxierIncrementalRecord: the runner's sync.incremental and
// fairness phases against kube-proxy (iptables, its default minSyncPeriod
// of 1 s), on two services with two named ports each (scenarios/dns.yaml's
// layout). Twice (the second move follows a sync back, the case the
// first fault below broke): one endpoint moved, then moved back, each a
// Sync that waits for kube-proxy; then Cleanup and a new first Sync (the
// fairness phase's fresh resync: a new control plane and kube-proxy).
//
// It pins two faults of the old Proxier, which made the dns scenario's
// kube-proxy rows report sync.incremental n=3 at about 1 s with no
// partial sync in the record:
//   - each change was written right after kube-proxy's previous sync (the
//     sync back), so kube-proxy held it for the rest of its minSyncPeriod
//     before syncing: the change must be queued at least minSyncPeriod
//     after the sync before it ended (last_queued_timestamp against the
//     previous last_timestamp);
//   - the record was replaced by the new first Sync's kube-proxy, whose
//     counters start at zero: the record must count the four partial syncs
//     of the first process (Earlier) beside the second one's full sync.
func TestKernelProxierIncrementalRecord(t *testing.T) {
	testenv.RequireKernel(t, "iptables", "iptables-save", "iptables-restore")
	bins := testenv.RequireKube(t)
	ctx := context.Background()
	runID := topology.NewRunID()
	svcs := services(2)
	for i := range svcs {
		svcs[i].Ports = []workload.ServicePort{{Name: "dns-tcp", Port: 53, TargetPort: 5353, Protocol: "TCP"},
			{Name: "dns", Port: 53, TargetPort: 5353, Protocol: "UDP"}}
	}
	tb := echoTestbed(ctx, t, runID)
	p, err := kubeproxy.NewProxier(kubeproxy.ProxierSpec{Mode: "iptables", Node: tb.Node, NodeIP: tb.NodeBackendAddr,
		ClusterCIDR: clusterCIDR, ServiceCIDR: serviceCIDR, Avoid: []netip.Prefix{serviceCIDR, podCIDR, nodeCIDR},
		KubeProxy: bins.KubeProxy, Bin: controlplane.Binaries{Etcd: bins.Etcd, APIServer: bins.APIServer}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanupProxier(t, p, runID)
	if _, err := p.Sync(ctx, svcs); err != nil {
		t.Fatal(err)
	}
	// gauge reads an IPv4 gauge of kube-proxy's metrics as a time.
	gauge := func(name string) time.Time {
		t.Helper()
		m, err := p.Scrape(ctx)
		if err != nil {
			t.Fatal(err)
		}
		f, ok := m[name]
		if !ok {
			t.Fatalf("kube-proxy exposes no %s", name)
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "ip_family" && l.GetValue() == "IPv4" {
					return time.Unix(0, int64(s.GetGauge().GetValue()*1e9))
				}
			}
		}
		t.Fatalf("%s has no IPv4 series", name)
		return time.Time{}
	}
	const minSync = time.Second // kube-proxy's default, which the test does not override
	const reps = 2
	for rep := 0; rep < reps; rep++ {
		moved := append([]workload.Service(nil), svcs...)
		eps := append([]workload.Endpoint(nil), moved[1].Endpoints...)
		eps[0].IP = netip.MustParseAddr("198.19.100.1") // a pod address in podCIDR no service uses
		moved[1].Endpoints = eps
		prev := gauge("kubeproxy_sync_proxy_rules_last_timestamp_seconds")
		st, err := p.Sync(ctx, moved)
		if err != nil {
			t.Fatal(err)
		}
		queued := gauge("kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds")
		if queued.Sub(prev) < minSync {
			t.Errorf("rep %d: the change was queued %v after kube-proxy's previous sync ended, want >= its minSyncPeriod %v (else kube-proxy holds it and sync.incremental measures the hold)",
				rep, queued.Sub(prev), minSync)
		}
		if st.Kind != "incremental" || st.Phases["kube-proxy"] <= 0 {
			t.Errorf("rep %d: %+v, want an incremental sync with kube-proxy's own sync time", rep, st)
		}
		if _, err := p.Sync(ctx, svcs); err != nil {
			t.Fatal(err)
		}
	}
	// The fairness phase's fresh resync.
	if err := p.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Sync(ctx, svcs); err != nil {
		t.Fatal(err)
	}
	r := p.KubeProxyRecord(ctx)
	if r == nil {
		t.Fatal("no kube-proxy record")
	}
	partial, _ := measure.MetricDelta(r.AfterFullSync, r.AtEnd, kubeproxy.MetricSyncPartial, "IPv4")
	full, _ := measure.MetricDelta(nil, r.AtEnd, kubeproxy.MetricSyncFull, "IPv4")
	if partial < 2*reps {
		t.Errorf("record: %d partial IPv4 syncs after sync.full, want >= %d (%d incremental syncs and their syncs back); earlier processes %+v",
			partial, 2*reps, reps, r.Earlier)
	}
	if full < 2 {
		t.Errorf("record: %d full IPv4 syncs, want >= 2 (one per kube-proxy process)", full)
	}
	if len(r.Earlier) != 1 || r.Earlier[0].Why != "cleanup" || r.Earlier[0].CPUNs <= 0 {
		t.Errorf("record's earlier processes %+v, want the one stopped by Cleanup, with its CPU", r.Earlier)
	}
	t.Logf("record: %d full + %d partial IPv4 syncs over %d processes; earlier: %+v", full, partial, len(r.Earlier)+1, r.Earlier)
}
