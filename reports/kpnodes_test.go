package reports

import (
	"math"
	"testing"

	"github.com/proxybench/proxybench/measure"
)

// hist is a programming histogram with n observations all in the bucket
// ending at le seconds (bounds 0.1, 1, 10).
func hist(n int, le string) KubeProxyHistogram {
	h := KubeProxyHistogram{Count: uint64(n)}
	for _, b := range []string{"0.1", "1", "10"} {
		c := 0
		if b >= le { // string order is the numeric order of these three
			c = n
		}
		h.Buckets = append(h.Buckets, Bucket{LE: b, Count: c})
	}
	h.Buckets = append(h.Buckets, Bucket{LE: "+Inf", Count: n})
	return h
}

func nodesCell(t *testing.T, s Section, row int, col string) Cell {
	t.Helper()
	for i, c := range s.Columns {
		if c.Name == col {
			return s.Rows[row].Cells[i]
		}
	}
	t.Fatalf("section %q has no column %q", s.Title, col)
	return Cell{}
}

func value(t *testing.T, c Cell) float64 {
	t.Helper()
	if c.Value == nil {
		t.Fatalf("cell %q has no value", c.Text)
	}
	return *c.Value
}

// The nodes sections: first syncs first/median/last over the nodes, the
// programming histograms summed over nodes with the worst node by its own
// p99, the data plane per probed node, the control plane's figures, and
// one table row per node.
func TestKubeProxyNodesSections(t *testing.T) {
	mr := &ModeResult{Mode: "iptables (kube-proxy)", KubeProxy: &measure.KubeProxy{
		Nodes: []measure.KubeProxyNode{
			{Node: "node-0", FirstSyncNs: 3e9, CPUNs: 1e9, PeakRSSBytes: 100 << 20},
			{Node: "node-1", FirstSyncNs: 1e9, CPUNs: 2e9, PeakRSSBytes: 100 << 20},
			{Node: "node-2", FirstSyncNs: 2e9, CPUNs: 3e9, PeakRSSBytes: 100 << 20},
		},
		ControlPlane: &measure.ControlPlaneUse{APIServerCPUNs: 40e9, EtcdCPUNs: 4e9, APIServerPeakRSSBytes: 512 << 20, WatchEvents: map[string]float64{"endpointslices": 30, "services": 9}},
		WatchDelivery: []measure.WatchDelivery{
			{Node: "node-0", DelayNs: []int64{10e6, 20e6}},
			{Node: "node-1", DelayNs: []int64{30e6, 40e6}},
			{Node: "node-2", DelayNs: []int64{-1, 60e6}},
		},
	}}
	mr.Churn = []ChurnResult{{ProbeNodes: []int{0, 2},
		Samples: []ChurnSample{{NodeLatencyNs: []int64{100e6, 900e6}}, {NodeLatencyNs: []int64{200e6, -1}}},
		KubeProxy: &ChurnKubeProxy{Programming: hist(10, "0.1"), APIServerCPUNs: 5e9, EtcdCPUNs: 1e9,
			Nodes: []ChurnKubeProxyNode{{Node: "node-1", Programming: hist(10, "1")}, {Node: "node-2", Programming: hist(10, "10")}}}}}
	secs := KubeProxyNodesReport("iptables (kube-proxy)", mr)
	if len(secs) != 2 {
		t.Fatalf("%d sections", len(secs))
	}
	sum, tab := secs[0], secs[1]
	for col, want := range map[string]float64{"nodes": 3, "first sync first": 1, "first sync median": 2, "first sync last": 3,
		"programming n": 30, "apiserver CPU churn": 5, "apiserver CPU row": 40, "etcd CPU row": 4, "apiserver peak RSS": 512,
		"kube-proxy CPU all nodes": 6, "kube-proxy peak RSS all nodes": 300,
		"data plane worst node p99": 900} {
		if got := value(t, nodesCell(t, sum, 0, col)); math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", col, got, want)
		}
	}
	if w := nodesCell(t, sum, 0, "worst node").Text; w != "node-2" {
		t.Errorf("worst node %q, want node-2 (its observations all above 1 s)", w)
	}
	if w := nodesCell(t, sum, 0, "data plane worst node").Text; w != "node-2" {
		t.Errorf("data plane worst node %q", w)
	}
	// node-1 and node-2 are 0.02 and 0.04 s after node-0 for the same
	// writes (node-2's first missed): mean 0.02+0.02+0.04 / 3.
	if got := value(t, nodesCell(t, sum, 0, "watch delay over node-0 mean")); math.Abs(got-80.0/3) > 1e-6 {
		t.Errorf("watch delay over node-0 %v ms", got)
	}
	if len(tab.Rows) != 3 || nodesCell(t, tab, 2, "node").Text != "node-2" {
		t.Fatalf("table rows %+v", tab.Rows)
	}
	if got := value(t, nodesCell(t, tab, 0, "data plane n")); got != 2 {
		t.Errorf("node-0 data plane n %v", got)
	}
	if c := nodesCell(t, tab, 1, "data plane n"); c.Value != nil {
		t.Errorf("node-1 was not probed: %q", c.Text)
	}
	if got := value(t, nodesCell(t, tab, 2, "watch delivery max")); got != 60 {
		t.Errorf("node-2 watch delivery max %v", got)
	}
	if KubeProxyNodesReport("x", &ModeResult{KubeProxy: &measure.KubeProxy{}}) != nil {
		t.Error("a one-node row has a nodes section")
	}
}
