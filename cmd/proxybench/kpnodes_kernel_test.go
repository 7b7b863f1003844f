//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/topology"
)

// TestKernelRunKubeProxyNodes: `run` with kube-proxy rows on 3 nodes (a
// few services, traffic and a short churn): one control plane, one
// kube-proxy per node, each with its own Node object, log and first
// sync, every node's rules answering (lookups from client pods on every
// node without error), watch delivery timed to every node, each node's
// own programming histogram and the data plane per probed node under
// churn, the control plane's CPU, memory and watch events, and the nodes
// sections in the report; no process or namespace of the run is left and
// the root namespace is unchanged.
func TestKernelRunKubeProxyNodes(t *testing.T) {
	testenv.RequireKernel(t, "iptables", "nft")
	kb := testenv.RequireKube(t)
	testenv.RequireSlow(t, "a control plane and 3 kube-proxies per row, ~30-60 s under load")
	rootBefore := testenv.RootSnapshot(t)
	runID := topology.NewRunID()
	out := filepath.Join(t.TempDir(), "r.json")
	const services = 6
	body := "services: {count: 6}\nmodes: [iptables]\nimplementation: [kube-proxy]\nrepetitions: 1\n" +
		"topology: {nodes: 3, clientPods: 3}\n" +
		"traffic: {connections: 60, positions: [first, last]}\n" +
		"churn: {rate: 4, duration: 3s, grace: 15s, probes: 6, mix: {endpointAdd: 1, endpointRemove: 1, readinessFlip: 1, serviceCreate: 0, serviceDelete: 0}}\n"
	stdout := runWatched(t, runID, kb, "run", "--quiet", "--kernel", "host", "--run-id", runID, "--output", out, writeFile(t, body))
	r, err := reports.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Modes) != 1 || r.Modes[0].Mode != "iptables (kube-proxy)" {
		t.Fatalf("rows %+v", r.Modes)
	}
	m := r.Modes[0]
	kp := m.KubeProxy
	if kp == nil || len(kp.Nodes) != 3 {
		t.Fatalf("record %+v, want 3 nodes", kp)
	}
	logs := map[string]bool{}
	for i, n := range kp.Nodes {
		if n.Node != "node-"+string(rune('0'+i)) || n.FirstSyncNs <= 0 || n.CPUNs <= 0 || n.PeakRSSBytes <= 0 || n.Syncs == 0 || n.Err != "" {
			t.Errorf("node %d: %+v", i, n)
		}
		// Its informers delivered at least every EndpointSlice once.
		if n.EndpointSliceEvents < services || n.ServiceEvents < services {
			t.Errorf("%s: %v EndpointSlice and %v Service events, want at least %d each", n.Node, n.EndpointSliceEvents, n.ServiceEvents, services)
		}
		if _, err := os.Stat(n.Log); err != nil || logs[n.Log] {
			t.Errorf("%s: log %q missing or shared: %v", n.Node, n.Log, err)
		}
		logs[n.Log] = true
	}
	if len(kp.WatchDelivery) != 3 {
		t.Errorf("watch delivery %+v, want 3 nodes", kp.WatchDelivery)
	}
	for _, d := range kp.WatchDelivery {
		if len(d.DelayNs) != 10 {
			t.Errorf("%s: %d watch delivery samples, want 10", d.Node, len(d.DelayNs))
		}
		for _, v := range d.DelayNs {
			if v <= 0 || v > 10e9 {
				t.Errorf("%s: watch delivery %d ns", d.Node, v)
			}
		}
	}
	if cp := kp.ControlPlane; cp == nil || cp.APIServerCPUNs <= 0 || cp.EtcdCPUNs <= 0 || cp.APIServerPeakRSSBytes <= 0 || cp.WatchEvents["endpointslices"] <= 0 {
		t.Errorf("control plane %+v", kp.ControlPlane)
	}
	for _, p := range m.Lookup {
		if p.Errors+p.Misses != 0 || p.Latency.Count != 60 {
			t.Errorf("lookup at %s: %d errors, %d misses, n %d", p.Position, p.Errors, p.Misses, p.Latency.Count)
		}
	}
	if len(m.Churn) != 1 || m.Churn[0].KubeProxy == nil {
		t.Fatalf("churn %+v", m.Churn)
	}
	c := m.Churn[0]
	if len(c.ProbeNodes) != 3 || len(c.NodeLatency) != 3 {
		t.Errorf("churn probe nodes %v, node latency %d, want 3 each", c.ProbeNodes, len(c.NodeLatency))
	}
	for _, s := range c.Samples {
		if len(s.NodeLatencyNs) != 3 {
			t.Errorf("sample %+v: want a latency per node", s)
			break
		}
	}
	if nodes := c.KubeProxy.Nodes; len(nodes) != 2 {
		t.Errorf("churn nodes %+v, want node-1 and node-2", nodes)
	} else {
		for _, n := range nodes {
			if n.Programming.Count == 0 || n.Events <= 0 || n.Err != "" {
				t.Errorf("churn %s: %+v", n.Node, n)
			}
		}
	}
	if c.KubeProxy.APIServerCPUNs <= 0 {
		t.Errorf("apiserver CPU over churn %d", c.KubeProxy.APIServerCPUNs)
	}
	for _, title := range []string{"kube-proxy on many nodes", "kube-proxy per node"} {
		if !strings.Contains(stdout, title) {
			t.Errorf("report lacks %q:\n%s", title, stdout)
		}
	}
	if left := topology.ChildProcesses(runID); len(left) > 0 {
		t.Errorf("processes of run %s left: %v", runID, left)
	}
	if left, _ := topology.Leftovers(); containsRun(left, runID) {
		t.Errorf("run %s left namespaces: %v", runID, left)
	}
	testenv.CompareRoot(t, rootBefore, testenv.RootSnapshot(t))
}
