//go:build linux

package cluster_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/proxybench/proxybench/cluster"
	"github.com/proxybench/proxybench/cluster/agent"
	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/topology/controlplane"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/apiobjects"
	"github.com/proxybench/proxybench/workload/traffic"
)

// TestKernelClusterAgentThroughAPIServer: the operator reaches an agent
// only through the API server's pods/proxy subresource. A real
// kube-apiserver, no kubelet: the test plays the kubelet, creating the
// pool and agent pods the run asks for and reporting them Running and
// Ready with addresses in a "node" namespace linked to the control
// plane's, where the agent (this package's, in process) and the echo
// server (answering for the pool's addresses) listen. Start waits for
// them, creates the Service and its EndpointSlice on the pool (the
// ClusterIP allocated by the API server, read back), and a direct lookup
// from the agent, posted and read back through pods/proxy, lands every
// connection on the pool. About 20-30 s (the control plane's start):
// behind RequireSlow.
func TestKernelClusterAgentThroughAPIServer(t *testing.T) {
	testenv.RequireKernel(t)
	bins := testenv.RequireKube(t)
	testenv.RequireSlow(t, "a control plane of its own (about 30 s on a loaded machine)")
	before := testenv.RootSnapshot(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node := testenv.NewNetns(t, "cnode")
	cp, err := controlplane.Start(ctx, controlplane.Spec{RunID: topology.NewRunID(), Nodes: []*topology.Netns{node},
		Bin: controlplane.Binaries{Etcd: bins.Etcd, APIServer: bins.APIServer}})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	// kube-apiserver proxies to no link-local address (the control-plane
	// link's): the agent's "pod IP" is on the node's lo, routed to from
	// the control-plane namespace over the link.
	nodeIP := netip.MustParseAddr("198.19.7.10")
	if _, err := cp.NS.Run(ctx, nil, "ip", "route", "add", "198.19.7.0/24", "via", cp.NodeAddr(0).String()); err != nil {
		t.Fatal(err)
	}
	pool := []netip.Addr{netip.MustParseAddr("198.19.7.1"), netip.MustParseAddr("198.19.7.2")}
	for _, a := range append(pool, nodeIP) {
		if err := node.AddAddr("lo", netip.PrefixFrom(a, 32)); err != nil {
			t.Fatal(err)
		}
	}
	echo, err := traffic.StartEcho(node, []uint16{8081})
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	ag := agent.New(ctx, agent.Health{Node: "node-a", Pod: "agent"}, []*topology.Netns{node})
	var l net.Listener
	if err := node.Do(func() error {
		l, err = net.Listen("tcp4", net.JoinHostPort(nodeIP.String(), fmt.Sprint(agent.Port)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = ag.Serve(ctx, l) }()
	if _, err := cp.Client.CoreV1().Nodes().Create(ctx, apiobjects.NodeObject(apiobjects.Node{Name: "node-a", InternalIP: nodeIP}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	run := topology.NewRunID()
	go playKubelet(ctx, t, cp.Client, cluster.Namespace(run), pool, nodeIP)

	c, err := cluster.Connect(ctx, cluster.Options{RunID: run, Image: "proxybench.local/proxybench:test", AgentTimeout: 20 * time.Second, CleanupWait: -1}, cp.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	svcs := []workload.Service{{Namespace: "x", Name: "s0", Ports: []workload.ServicePort{{Port: 80, TargetPort: 8081, Protocol: "TCP"}},
		Endpoints: []workload.Endpoint{workload.NewEndpoint(netip.MustParseAddr("198.19.1.1")), workload.NewEndpoint(netip.MustParseAddr("198.19.1.2"))}}}
	r, err := c.Start(ctx, svcs, 2)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = r.Close(context.Background())
		}
	}()
	if len(r.Pool) != 2 || r.Agents["node-a"] != "agent-x" || len(r.Services) != 1 || !cp.ServiceRange.Contains(r.Services[0].ClusterIP) {
		t.Fatalf("run: pool %v agents %v services %+v (service range %s)", r.Pool, r.Agents, r.Services, cp.ServiceRange)
	}
	sl, err := cp.Client.DiscoveryV1().EndpointSlices(r.NS).Get(ctx, apiobjects.SliceName(r.Services[0]), metav1.GetOptions{})
	if err != nil || sl.Labels[cluster.RunLabel] != run || len(sl.Endpoints) != 2 {
		t.Fatalf("EndpointSlice %+v, %v", sl, err)
	}
	a := r.Agent("node-a")
	h, err := a.Health(ctx)
	if err != nil || h.Node != "node-a" {
		t.Fatalf("health through pods/proxy: %+v, %v", h, err)
	}
	if err := a.StartLookup(ctx, agent.LookupRequest{ID: "d1", Services: r.Services, Position: workload.PosFirst, Direct: true,
		Connections: 30, Concurrency: 2, Timeout: time.Second, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	st, err := a.WaitLookup(ctx, "d1")
	if err != nil {
		t.Fatal(err)
	}
	res := st.Result
	if res == nil || len(res.LatenciesNs) != 30 || res.Errors != 0 || res.Misses != 0 || res.Hits[0][pool[0]]+res.Hits[0][pool[1]] != 30 {
		t.Fatalf("direct lookup through pods/proxy: %+v", res)
	}
	closed = true
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if ns, err := cp.Client.CoreV1().Namespaces().Get(ctx, r.NS, metav1.GetOptions{}); err == nil && ns.DeletionTimestamp == nil {
		t.Errorf("namespace %s not deleted by Close", r.NS)
	}
	if l, err := cp.Client.CoreV1().Pods(r.NS).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("pods left after Close: %d, %v", len(l.Items), err)
	}

	// The whole engine on the same fake node: with no service proxy
	// here the ClusterIP lookups fail (counted, each with its cause),
	// the direct ones land on the pool, and the programming probes,
	// which no proxy can satisfy, fail the run after their deadline with
	// the lookups kept in the result.
	sc, err := scenarios.Catalog{}.Parse([]byte("services: {count: 2, targetPort: 8081, endpoints: {count: 1}}\n"+
		"traffic: {connections: 20, warmup: 2, concurrency: 2, timeout: 200ms, positions: [first, last]}\nrepetitions: 1\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	run2 := topology.NewRunID()
	go playKubelet(ctx, t, cp.Client, cluster.Namespace(run2), pool, nodeIP)
	out, err := cluster.Execute(ctx, sc, cluster.Options{RunID: run2, Image: "proxybench.local/proxybench:test", AgentTimeout: 20 * time.Second,
		CleanupWait: -1, ProbeDeadline: time.Second}, cp.RestConfig())
	if err == nil || !strings.Contains(err.Error(), "programming latency on node-a") {
		t.Errorf("Execute without a service proxy: %v, want the programming probe's failure", err)
	}
	if out == nil || out.Engine != "cluster" || out.Cluster == nil || len(out.Cluster.Nodes) != 1 || len(out.Modes) != 2 {
		t.Fatalf("result %+v", out)
	}
	n := out.Cluster.Nodes[0]
	if len(n.Direct) != 2 || len(n.Lookup) != 2 {
		t.Fatalf("node %+v", n)
	}
	for i := range n.Direct {
		if len(n.Direct[i].SamplesNs) != 20 || n.Direct[i].Errors != 0 || n.Lookup[i].Errors != 20 {
			t.Errorf("position %s: %d direct samples, %d direct errors, %d ClusterIP errors; want 20, 0, 20",
				n.Direct[i].Position, len(n.Direct[i].SamplesNs), n.Direct[i].Errors, n.Lookup[i].Errors)
		}
	}
	if out.Cluster.KubeProxy.Absent == "" || out.Modes[0].Mode != "none" {
		t.Errorf("kube-proxy facts %+v, rows %s, %s", out.Cluster.KubeProxy, out.Modes[0].Mode, out.Modes[1].Mode)
	}
	cancel()
	cp.Stop()
	testenv.CompareRoot(t, before, testenv.RootSnapshot(t))
}

// playKubelet waits for namespace ns and then creates what a kubelet
// would run for it: two pool pods (addresses pool) and an agent pod on
// node-a (address agentIP), each reported Running and Ready.
func playKubelet(ctx context.Context, t *testing.T, c kubernetes.Interface, ns string, pool []netip.Addr, agentIP netip.Addr) {
	for ctx.Err() == nil {
		if _, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	pods := []struct {
		name, component string
		ip              netip.Addr
	}{{"pool-a", cluster.ComponentPool, pool[0]}, {"pool-b", cluster.ComponentPool, pool[1]}, {"agent-x", cluster.ComponentAgent, agentIP}}
	for _, p := range pods {
		run := strings.TrimPrefix(ns, cluster.NamespacePrefix)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: ns, Labels: map[string]string{cluster.RunLabel: run, cluster.ComponentLabel: p.component}},
			Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Image: "proxybench.local/proxybench:test"}}}}
		got, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Errorf("fake kubelet: %v", err)
			return
		}
		got.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: p.ip.String(), PodIPs: []corev1.PodIP{{IP: p.ip.String()}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Errorf("fake kubelet: %v", err)
			return
		}
	}
}
