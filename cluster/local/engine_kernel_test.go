//go:build linux

package local

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// ones too, each node has programming latencies and kube-proxy's own
// histograms, the kube-proxy facts come from ConfigMap
// kube-system/kube-proxy (mode iptables), and the run's namespace is gone
// afterwards. Then (slow tier only) two unusable runs on the same cluster, each Unusable
// within 30 s naming the cause, its namespace deleted: an image the nodes
// do not have (pull policy Never: ErrImageNeverPull) and a node without
// an agent (a Node object no kubelet serves, the agents pinned to it).
// Then, after Down, the host's tunables (vm.overcommit_memory,
// kernel.panic, kernel.panic_on_oops) and the root namespace's rules,
// routes, links and sysctls are as before Up, and no process of the
// cluster is left. In the default suite (docs/cluster.md gives its time).
func TestKernelClusterEngineOnLocalCluster(t *testing.T) {
	testenv.RequireKernel(t, "nsenter", "ip", "containerd", "ctr", "runc")
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
	t0 := time.Now()
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
	for _, n := range res.Cluster.Nodes {
		if n.ProgrammingOwn != nil && n.SyncOwn != nil {
			t.Logf("%s iptables: black-box programming %v ms; kube-proxy's own mean %.1f ms (%d), its syncs' mean %.1f ms (%d)", n.Name,
				msList(n.ProgrammingNs), n.ProgrammingOwn.Mean()*1e3, n.ProgrammingOwn.Count, n.SyncOwn.Mean()*1e3, n.SyncOwn.Count)
		}
	}
	t.Logf("the run with the mode switch: %s", time.Since(t0).Round(time.Second))

	// Unusable runs: an image no node has, and a node no kubelet serves
	// (about 35 s: in the slow tier, to keep the default suite under 10
	// minutes).
	if !testenv.Slow() {
		t.Logf("the unusable-cluster cases run with %s=1 (make test-slow)", testenv.SlowEnv)
		downAndCheck(t, c, id, before, root)
		return
	}
	ghost := "node-ghost"
	gn := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ghost, Labels: map[string]string{RunLabel: id}}, Spec: corev1.NodeSpec{Unschedulable: true}}
	if _, err := c.CP.Client.CoreV1().Nodes().Create(ctx, gn, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []struct {
		name  string
		opts  cluster.Options
		wants []string
	}{
		{"an image the nodes do not have", cluster.Options{Image: "proxybench.local/proxybench:absent-" + tag, PullPolicy: "Never"},
			[]string{"pool pods Ready after 10s", "ErrImageNeverPull", "--image proxybench.local/proxybench:absent-" + tag}},
		{"a node without the agent", cluster.Options{Image: image.Ref(image.Agent, tag), PullPolicy: "Never", Nodes: []string{"node-0", ghost}},
			[]string{"no Ready agent on node(s) ", ghost + " after 10s", "on " + ghost + ": no kubelet has reported it"}},
	} {
		o := u.opts
		o.RunID, o.AgentTimeout, o.Log = topology.NewRunID(), 10*time.Second, os.Stderr
		t1 := time.Now()
		_, err := cluster.Execute(ctx, sc, o, c.CP.RestConfig())
		took := time.Since(t1)
		t.Logf("%s: %s: %v", u.name, took.Round(100*time.Millisecond), err)
		if !cluster.IsUnusable(err) || took > 30*time.Second {
			t.Errorf("%s: %v after %s, want Unusable within 30 s", u.name, err, took)
		}
		for _, w := range u.wants {
			if err != nil && !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", u.name, err, w)
			}
		}
		if _, err := c.CP.Client.CoreV1().Namespaces().Get(ctx, cluster.Namespace(o.RunID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: namespace %s not deleted (%v)", u.name, cluster.Namespace(o.RunID), err)
		}
	}
	downAndCheck(t, c, id, before, root)
}

// downAndCheck stops cluster c (run id) and checks that the host's
// tunables and the root namespace are as before Up and that no process
// of the cluster is left.
func downAndCheck(t *testing.T, c *Cluster, id string, before map[string]string, root map[string]string) {
	t.Helper()
	if err := c.Down(); err != nil {
		t.Fatal(err)
	}
	checkTunables(t, before)
	testenv.CompareRoot(t, root, testenv.RootSnapshot(t))
	if kids := topology.ChildProcesses(id); len(kids) > 0 {
		t.Errorf("processes of cluster %s left: %v", id, kids)
	}
}

// msList is ns durations as whole milliseconds.
func msList(ns []int64) string {
	out := make([]string, len(ns))
	for i, v := range ns {
		out[i] = fmt.Sprint(time.Duration(v).Milliseconds())
	}
	return strings.Join(out, " ")
}
