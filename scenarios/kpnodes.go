package scenarios

import (
	"fmt"
	"math"
)

// Memory of kube-proxy on many nodes (topology.nodes > 1 with kube-proxy
// rows): each node runs its own kube-proxy, all against one control
// plane, so the machine's memory bounds the node count. validate takes
// the largest count this machine holds from these measured figures and
// /proc/meminfo's MemAvailable (Catalog.MemAvailable) and refuses more.

// MemPoint is one measured size: at Services ClusterIP services (3
// endpoints each), a kube-proxy's peak resident set (VmHWM) plus the
// largest rule program it ran (iptables-restore, nft: its children's
// VmHWM; every node's first sync runs one at once), and kube-apiserver's
// plus etcd's peak resident sets, bytes.
type MemPoint struct {
	Services     int
	KubeProxy    int64
	ControlPlane int64
	// Source says where the figures were measured.
	Source string
}

// KubeProxyMemory are the measured sizes, by service count (the larger of
// the iptables and nftables rows at each size). Between two sizes the
// figures are interpolated linearly, beyond the last extrapolated along
// the last two.
var KubeProxyMemory = []MemPoint{
	{Services: 1000, KubeProxy: 105 << 20, ControlPlane: 680 << 20,
		Source: "BenchmarkKubeProxyNodes20, 20 nodes, iptables (nft back end), kube-proxy v1.37.2, 2026-12-02 05:50 UTC, load 26-38: largest kube-proxy + its rule program 104.8 MiB (kube-proxies 80-84 MiB, iptables-restore up to 21.4 MiB), kube-apiserver + etcd 680.1 MiB"},
	{Services: 10000, KubeProxy: 360 << 20, ControlPlane: 1922 << 20,
		Source: "run kube-proxy-nodes-10k, 50 nodes × 10k services, iptables (legacy), kube-proxy v1.37.2, 2026-12-03 10:13-10:40 UTC, load 12-115 (/work/logs/s13/kpguest/nodes10k/kpn10k.json): largest kube-proxy VmHWM 231 MiB (197-231) + largest iptables-restore 129 MiB (84-129); kube-apiserver 1,757 MiB + etcd 165 MiB VmHWM. Sum of peaks: the machine's MemAvailable fell by at most 14.7 GiB over the run (261 MiB per node with the control plane taken off, the kernel's rule memory of about 52 MiB per node included), so 50 nodes fitted where this model allows about 40"},
}

// MemReserve is what the node-count limit leaves free of MemAvailable:
// proxybench itself, the probes, the kernel's rule memory and page cache
// for the logs (512 MiB), plus a tenth of MemAvailable for the noise of
// the other jobs on the machine.
const MemReserve = 512 << 20

// KubeProxyMemoryAt is the memory model at services: a kube-proxy's and
// the control plane's resident sets, bytes (KubeProxyMemory).
func KubeProxyMemoryAt(services int) (kubeProxy, controlPlane int64) {
	pts := KubeProxyMemory
	if len(pts) == 0 {
		return 0, 0
	}
	if services <= pts[0].Services || len(pts) == 1 {
		return pts[0].KubeProxy, pts[0].ControlPlane
	}
	i := 1
	for i < len(pts)-1 && services > pts[i].Services {
		i++
	}
	a, b := pts[i-1], pts[i]
	f := float64(services-a.Services) / float64(b.Services-a.Services)
	lerp := func(x, y int64) int64 { return x + int64(math.Round(f*float64(y-x))) }
	return lerp(a.KubeProxy, b.KubeProxy), lerp(a.ControlPlane, b.ControlPlane)
}

// MaxKubeProxyNodes is the largest node count with kube-proxy this machine
// holds at services, with memAvailable bytes free (MemAvailable):
// (memAvailable − MemReserve − memAvailable/10 − control plane) / per
// kube-proxy, at least 0.
func MaxKubeProxyNodes(services int, memAvailable int64) int {
	kp, cp := KubeProxyMemoryAt(services)
	free := memAvailable - MemReserve - memAvailable/10 - cp
	if kp <= 0 || free <= 0 {
		return 0
	}
	return int(free / kp)
}

// MaxNodes is the most nodes a testbed builds (topology.nodes: 1..64,
// the fabric block's size).
const MaxNodes = 64

// kubeProxyNodesCheck refuses a node count above MaxKubeProxyNodes for a
// scenario running kube-proxy on several nodes, at its largest size,
// naming the limit and the figures it used.
func (c *checker) kubeProxyNodesCheck() {
	s := c.s
	n := s.Topology.NodeCount()
	// Above MaxNodes the range check has refused it: one fix, not two.
	if n < 2 || n > MaxNodes || c.cat == nil || c.cat.MemAvailable == nil {
		return
	}
	avail, err := c.cat.MemAvailable()
	if err != nil {
		c.add("topology.nodes", fmt.Sprintf("%d nodes with kube-proxy: free memory unknown (%v)", n, err), "run on a machine with /proc/meminfo, or use topology.nodes: 1")
		return
	}
	services := 0
	for _, v := range s.Sizes() {
		services = max(services, v)
	}
	limit := MaxKubeProxyNodes(services, avail)
	if n <= limit {
		return
	}
	kp, cp := KubeProxyMemoryAt(services)
	mib := func(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
	c.add("topology.nodes", fmt.Sprintf("%d nodes with kube-proxy at %d services do not fit this machine: it holds at most %d (MemAvailable %.1f GiB, less %s reserve and a tenth, less the control plane's %s, over %s per kube-proxy and its rule program; measured figures, scenarios.KubeProxyMemory)",
		n, services, limit, float64(avail)/(1<<30), mib(MemReserve), mib(cp), mib(kp)),
		fmt.Sprintf("use topology.nodes: %d or fewer, or fewer services", max(limit, 1)))
}
