//go:build linux

package kubeproxy_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/topology/controlplane"
	"github.com/proxybench/proxybench/workload"
)

// BenchmarkKubeProxyNodes20: 20 nodes each running kube-proxy (iptables,
// nft back end) against one control plane, 1,000 services × 3 endpoints
// (issue 24's targets: every first sync within 60 s of the objects
// existing, on a quiet machine; the control plane plus the 20
// kube-proxies under 8 GiB resident). It reports the first syncs from
// the API objects created (first, median and last node, s), the control
// plane's start and the objects' creation (s), and the resident sets
// (MiB): kube-apiserver + etcd peak, the kube-proxies' peaks summed, their
// rule programs' largest, the largest kube-proxy plus its rule program
// (scenarios.KubeProxyMemory's per-node figure), and the total; it logs
// each kube-proxy's. PROXYBENCH_KP_NODES, PROXYBENCH_KP_SERVICES and
// PROXYBENCH_KP_MODE (iptables, nftables) change the size.
//
//	go test -run '^$' -bench KubeProxyNodes20 -benchtime 1x ./proxymodes/kubeproxy
//	PROXYBENCH_KP_NODES=5 PROXYBENCH_KP_SERVICES=10000 go test -run '^$' -bench KubeProxyNodes20 -benchtime 1x ./proxymodes/kubeproxy
func BenchmarkKubeProxyNodes20(b *testing.B) {
	testenv.RequireKernel(b, "iptables", "iptables-restore", "nft")
	kb := testenv.RequireKube(b)
	nodes, n, mode := envInt(b, "PROXYBENCH_KP_NODES", 20), envInt(b, "PROXYBENCH_KP_SERVICES", 1000), "iptables"
	if m := os.Getenv("PROXYBENCH_KP_MODE"); m != "" {
		mode = m
	}
	b.Logf("%d nodes × kube-proxy %s, %d services × 3 endpoints", nodes, mode, n)
	svcs := services(n)
	pod := podCIDR.Addr().Next()
	for i := range svcs { // 3 endpoints each, every one its own pod address
		svcs[i].Endpoints = svcs[i].Endpoints[:0]
		for range 3 {
			svcs[i].Endpoints = append(svcs[i].Endpoints, workload.Endpoint{IP: pod, Ready: true, Weight: 1})
			pod = pod.Next()
		}
	}
	for b.Loop() {
		ctx := context.Background()
		runID := topology.NewRunID()
		tb, err := topology.Build(ctx, topology.Spec{RunID: runID, ClientPods: 1, Nodes: nodes, ServiceCIDR: serviceCIDR, PodCIDR: podCIDR, NodeCIDR: nodeCIDR})
		if err != nil {
			b.Fatal(err)
		}
		ips := make([]netip.Addr, nodes)
		for i, ns := range tb.Nodes {
			if ips[i], err = kubeproxy.NodeIP(ns, nodeCIDR); err != nil {
				tb.Teardown()
				b.Fatal(err)
			}
		}
		p, err := kubeproxy.NewProxier(kubeproxy.ProxierSpec{Mode: mode, Node: tb.Nodes[0], NodeIP: ips[0], Others: tb.Nodes[1:], OtherIPs: ips[1:],
			ClusterCIDR: clusterCIDR, ServiceCIDR: serviceCIDR, Avoid: []netip.Prefix{serviceCIDR, podCIDR, nodeCIDR}, KubeProxy: kb.KubeProxy, IPTablesBackend: "nft",
			Bin: controlplane.Binaries{Etcd: kb.Etcd, APIServer: kb.APIServer}, Dir: filepath.Join(b.TempDir(), "kp"), FirstSyncTimeout: 10 * time.Minute})
		if err != nil {
			tb.Teardown()
			b.Fatal(err)
		}
		st, err := p.Sync(ctx, svcs)
		rec := p.KubeProxyRecord(ctx)
		cerr := p.Cleanup(ctx)
		tb.Teardown()
		if err != nil {
			b.Fatal(err)
		}
		if cerr != nil {
			b.Fatal(cerr)
		}
		if len(rec.Nodes) != nodes || rec.ControlPlane == nil {
			b.Fatalf("record has %d nodes, control plane %v", len(rec.Nodes), rec.ControlPlane)
		}
		var firsts []float64
		var kpRSS, childRSS, perKP int64
		for _, nd := range rec.Nodes {
			if nd.FirstSyncNs <= 0 {
				b.Fatalf("%s: no first sync (%s)", nd.Node, nd.Err)
			}
			firsts = append(firsts, float64(nd.FirstSyncNs)/1e9)
			kpRSS += nd.PeakRSSBytes
			childRSS = max(childRSS, nd.ChildPeakRSSBytes)
			perKP = max(perKP, nd.PeakRSSBytes+nd.ChildPeakRSSBytes)
			b.Logf("%s: first sync %.2f s, peak RSS %.1f MiB, CPU %.2f s + %.2f s", nd.Node, float64(nd.FirstSyncNs)/1e9, float64(nd.PeakRSSBytes)/(1<<20), float64(nd.CPUNs)/1e9, float64(nd.ChildCPUNs)/1e9)
		}
		slices.Sort(firsts)
		cp := rec.ControlPlane.APIServerPeakRSSBytes + rec.ControlPlane.EtcdPeakRSSBytes
		mib := func(v int64) float64 { return float64(v) / (1 << 20) }
		b.ReportMetric(firsts[0], "firstsync-first-s")
		b.ReportMetric(firsts[len(firsts)/2], "firstsync-median-s")
		b.ReportMetric(firsts[len(firsts)-1], "firstsync-last-s")
		b.ReportMetric(float64(rec.ControlPlaneNs)/1e9, "controlplane-s")
		b.ReportMetric(float64(rec.APIObjectsNs)/1e9, "objects-s")
		b.ReportMetric(mib(cp), "controlplane-MiB")
		b.ReportMetric(mib(kpRSS), "kubeproxies-MiB")
		b.ReportMetric(mib(childRSS), "program-max-MiB")
		b.ReportMetric(mib(perKP), "per-kubeproxy-max-MiB")
		b.ReportMetric(mib(cp+kpRSS), "total-MiB")
		b.ReportMetric(float64(rec.ControlPlane.APIServerCPUNs)/1e9, "apiserver-cpu-s")
		b.ReportMetric(float64(rec.ControlPlane.EtcdCPUNs)/1e9, "etcd-cpu-s")
		b.Logf("sync.full (node-0, data plane unprobed) %v; control plane %.0f MiB (apiserver %.0f, etcd %.0f); kube-proxies %.0f MiB", st.Wall, mib(cp),
			mib(rec.ControlPlane.APIServerPeakRSSBytes), mib(rec.ControlPlane.EtcdPeakRSSBytes), mib(kpRSS))
	}
}

// envInt is the integer in environment variable name, def when unset.
func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
