//go:build linux

package local

import (
	"context"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/proxybench/proxybench/cluster"
	"github.com/proxybench/proxybench/internal/image"
	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
)

// TestKernelClusterEngineOnLocalCluster: the cluster engine at small scale
// (4 services, 2 endpoints each, 2 nodes) on a local cluster with
// kube-proxy in iptables mode, with --allow-mode-switch to nftables and
// back (the cluster's holder following the ConfigMap, as `cluster up`'s
// does): its agents on both nodes, the lookups
// through the ClusterIPs land without errors on every node, the direct
// ones too, each node has programming latencies, the kube-proxy facts
// come from ConfigMap kube-system/kube-proxy (mode iptables), and the
// run's namespace is gone afterwards. Then the host's tunables and root
// namespace are as before and no process of the cluster is left. About
// 1.5-2 min at a load of 30 on 2 cores: behind RequireSlow.
func TestKernelClusterEngineOnLocalCluster(t *testing.T) {
	testenv.RequireKernel(t, "nsenter", "ip", "containerd", "ctr", "runc")
	testenv.RequireSlow(t, "a local cluster of 2 nodes and a cluster-engine run (1.5-2 min at load 30)")
	b, tag := clusterBinaries(t)
	before := readTunables(t)
	defer checkTunables(t, before)
	root := testenv.RootSnapshot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	id := topology.NewRunID()
	c, err := Up(ctx, Spec{RunID: id, Nodes: 2, Bin: b, SandboxImage: image.Ref(image.Pause, tag), Log: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Down()
	c.FollowKubeProxyConfig(ctx, time.Second, os.Stderr)
	sc, err := scenarios.Catalog{}.Parse([]byte("modes: [none, iptables, nftables]\nservices: {count: 4, targetPort: 8081, endpoints: {count: 2}}\n"+
		"traffic: {connections: 40, warmup: 4, concurrency: 2, timeout: 1s, positions: [first, last]}\nrepetitions: 1\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	run := topology.NewRunID()
	res, err := cluster.Execute(ctx, sc, cluster.Options{RunID: run, Image: image.Ref(image.Agent, tag),
		PullPolicy: "Never", AgentTimeout: 2 * time.Minute, Log: os.Stderr, AllowModeSwitch: true, SwitchWait: 40 * time.Second}, c.CP.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	if res.Engine != "cluster" || res.Cluster == nil || len(res.Cluster.Nodes) != 2 || len(res.Modes) != 3 {
		t.Fatalf("result: engine %q, %d modes, cluster %+v", res.Engine, len(res.Modes), res.Cluster)
	}
	if res.Cluster.KubeProxy.Mode != "iptables" || res.Modes[1].Mode != "iptables (kube-proxy)" {
		t.Errorf("kube-proxy facts %+v, rows %s, %s; want iptables from the ConfigMap", res.Cluster.KubeProxy, res.Modes[0].Mode, res.Modes[1].Mode)
	}
	for _, n := range res.Cluster.Nodes {
		if len(n.Lookup) != 2 || len(n.Direct) != 2 {
			t.Errorf("node %s: %d lookup and %d direct positions, want 2 and 2", n.Name, len(n.Lookup), len(n.Direct))
			continue
		}
		for i := range n.Lookup {
			if len(n.Lookup[i].SamplesNs) != 40 || n.Lookup[i].Errors != 0 || len(n.Direct[i].SamplesNs) != 40 || n.Direct[i].Errors != 0 {
				t.Errorf("node %s position %s: %d ClusterIP samples (%d errors), %d direct (%d errors); want 40 each, no error",
					n.Name, n.Lookup[i].Position, len(n.Lookup[i].SamplesNs), n.Lookup[i].Errors, len(n.Direct[i].SamplesNs), n.Direct[i].Errors)
			}
		}
		if len(n.ProgrammingNs) == 0 {
			t.Errorf("node %s: no programming latency", n.Name)
		}
	}
	// --allow-mode-switch: iptables, then nftables, then back; every node
	// reported each mode, the nftables row measured on both nodes, and the
	// ConfigMap holds the original configuration again.
	ms := res.Cluster.ModeSwitch
	if ms == nil || !ms.Restored || len(ms.Switches) != 2 || ms.Switches[0].To != "nftables" || ms.Switches[1].To != "iptables" || !ms.Switches[1].Restore {
		t.Errorf("mode switch record %+v", ms)
	}
	if len(res.Cluster.Modes) != 1 || res.Modes[2].Mode != "nftables (kube-proxy)" || len(res.Cluster.Modes[0].Nodes) != 2 {
		t.Errorf("switched modes %+v, rows %v", res.Cluster.Modes, res.Modes)
	} else {
		for _, n := range res.Cluster.Modes[0].Nodes {
			if len(n.Lookup) != 2 || n.Lookup[0].Errors != 0 || len(n.ProgrammingNs) == 0 {
				t.Errorf("nftables on %s: %+v", n.Name, n)
			}
		}
	}
	if cm, err := c.CP.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{}); err != nil || ms == nil || cm.Data["config.conf"] != ms.Original {
		t.Errorf("ConfigMap kube-system/kube-proxy after the run: not the original (%v)", err)
	}
	for _, n := range res.Cluster.Nodes {
		if n.ProgrammingOwn == nil || n.ProgrammingOwn.Count == 0 {
			t.Errorf("node %s: kube-proxy's own programming histogram %+v (absent: %s)", n.Name, n.ProgrammingOwn, n.ProgrammingOwnAbsent)
		}
	}
	if _, err := c.CP.Client.CoreV1().Namespaces().Get(ctx, cluster.Namespace(run), metav1.GetOptions{}); err == nil {
		t.Errorf("the run's namespace %s is still there", cluster.Namespace(run))
	}
	if err := c.Down(); err != nil {
		t.Fatal(err)
	}
	checkTunables(t, before)
	testenv.CompareRoot(t, root, testenv.RootSnapshot(t))
	if kids := topology.ChildProcesses(id); len(kids) > 0 {
		t.Errorf("processes of cluster %s left: %v", id, kids)
	}
}
