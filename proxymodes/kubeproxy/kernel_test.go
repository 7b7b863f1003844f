//go:build linux

package kubeproxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/topology/controlplane"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/apiobjects"
	"github.com/proxybench/proxybench/workload/traffic"
)

// startReadyHelper runs this test binary's test (a helper run that
// prints "ready" once its testbed is up) with env added to its
// environment and args to its flags, and returns once it printed "ready"
// (its further output is discarded); the helper is killed when the test
// ends. It fails the test if the helper ends without "ready".
func startReadyHelper(t *testing.T, test, env string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run", "^" + test + "$", "-test.v"}, args...)...)
	cmd.Env = append(os.Environ(), env)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	sc := bufio.NewScanner(out)
	var lines []string
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		lines = append(lines, l)
		if l == "ready" {
			go io.Copy(io.Discard, out)
			return cmd
		}
	}
	t.Fatalf("%s did not get ready:\n%s", test, strings.Join(lines, "\n"))
	return nil
}

// echoTestbed builds a one-node testbed of run runID with one client pod
// and an echo server on the backend's port 8080; both are removed when the
// test ends.
func echoTestbed(ctx context.Context, t *testing.T, runID string) *topology.Testbed {
	t.Helper()
	tb, err := topology.Build(ctx, topology.Spec{RunID: runID, ClientPods: 1, ServiceCIDR: serviceCIDR, PodCIDR: podCIDR, NodeCIDR: nodeCIDR})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.Teardown() })
	echo, err := traffic.StartEcho(tb.Backend, []uint16{8080})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	return tb
}

var (
	serviceCIDR = netip.MustParsePrefix("198.18.0.0/16")
	podCIDR     = netip.MustParsePrefix("198.19.0.0/17")
	nodeCIDR    = netip.MustParsePrefix("198.19.255.0/24")
	clusterCIDR = netip.MustParsePrefix("198.19.0.0/16")
)

// services returns n ClusterIP services; service i has i%3+1 endpoints,
// port 80 → 8080.
func services(n int) []workload.Service {
	out := make([]workload.Service, n)
	pod := podCIDR.Addr().Next()
	for i := range out {
		eps := make([]workload.Endpoint, i%3+1)
		for k := range eps {
			eps[k] = workload.Endpoint{IP: pod, Ready: true, Weight: 1}
			pod = pod.Next()
		}
		vip := serviceCIDR.Addr()
		for range i + 1 {
			vip = vip.Next()
		}
		out[i] = workload.Service{Namespace: workload.Namespace, Name: fmt.Sprintf("svc-%05d", i), ClusterIP: vip,
			Ports:     []workload.ServicePort{{Name: "p80", Port: 80, TargetPort: 8080, Protocol: "TCP"}},
			Endpoints: eps}
	}
	return out
}

// testbed is one node, one client, the AnyIP backend, the control plane
// and kube-proxy in mode on the node, with svcs created through the API.
type testbed struct {
	tb   *topology.Testbed
	cp   *controlplane.ControlPlane
	kp   *kubeproxy.Proxy
	echo *traffic.EchoServer
}

func (b *testbed) close() {
	b.kp.Stop()
	b.cp.Stop()
	if b.echo != nil {
		b.echo.Close()
		b.echo = nil
	}
	b.tb.Teardown()
}

func start(t testing.TB, ctx context.Context, runID, mode string, svcs []workload.Service, dir string) (*testbed, error) {
	b, err := startWith(t, ctx, runID, mode, "", svcs, dir)
	if err != nil {
		return b, err
	}
	return b, b.kp.WaitHealthy(ctx, 2*time.Minute)
}

// startWith is start with kube-proxy binary bin ("": the default), not
// waiting for kube-proxy to be healthy.
func startWith(t testing.TB, ctx context.Context, runID, mode, bin string, svcs []workload.Service, dir string) (*testbed, error) {
	bins := testenv.RequireKube(t)
	if bin == "" {
		bin = bins.KubeProxy
	}
	b := &testbed{}
	var err error
	b.tb, err = topology.Build(ctx, topology.Spec{RunID: runID, ClientPods: 1, ServiceCIDR: serviceCIDR, PodCIDR: podCIDR, NodeCIDR: nodeCIDR})
	if err != nil {
		return b, err
	}
	if b.echo, err = traffic.StartEcho(b.tb.Backend, []uint16{8080}); err != nil {
		return b, err
	}
	b.cp, err = controlplane.Start(ctx, controlplane.Spec{RunID: runID, Nodes: b.tb.Nodes,
		Avoid: []netip.Prefix{serviceCIDR, podCIDR, nodeCIDR},
		Bin:   controlplane.Binaries{Etcd: bins.Etcd, APIServer: bins.APIServer}})
	if err != nil {
		return b, err
	}
	node := apiobjects.Node{Name: "node-0", InternalIP: b.tb.NodeBackendAddr}
	st, err := apiobjects.Create(ctx, b.cp.Client, apiobjects.Spec{ServiceCIDR: serviceCIDR, Nodes: []apiobjects.Node{node}, Services: svcs})
	if err != nil {
		return b, err
	}
	t.Logf("control plane ready in %v; %d services, %d slices created in %v", b.cp.Ready, st.Services, st.EndpointSlices, st.Elapsed)
	kc := filepath.Join(dir, "node-0.kubeconfig")
	if err := b.cp.WriteKubeconfig(0, kc); err != nil {
		return b, err
	}
	b.kp, err = kubeproxy.Start(ctx, kubeproxy.Spec{RunID: runID, Node: b.tb.Node, Binary: bin, Dir: dir,
		Config: kubeproxy.ConfigSpec{Mode: mode, ClusterCIDR: clusterCIDR, NodeName: node.Name, NodeIP: node.InternalIP, Kubeconfig: kc,
			Pass: map[string]any{"iptables": map[string]any{"minSyncPeriod": "0s"}}}})
	return b, err
}

// everyAnswers waits up to timeout for every ClusterIP of svcs to answer
// on port 80 from tb's first client, and checks each answer came from
// one of the service's endpoints on 8080. It returns the first service
// that never answered or landed elsewhere.
func everyAnswers(tb *topology.Testbed, svcs []workload.Service, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, s := range svcs {
		eps := map[netip.Addr]bool{}
		for _, e := range s.Endpoints {
			eps[e.IP] = true
		}
		for {
			var landed netip.AddrPort
			err := tb.Clients[0].Do(func() error {
				var err error
				landed, _, _, err = traffic.DialEcho(s.ClusterIP, 80, 2*time.Second)
				return err
			})
			if err == nil {
				if !eps[landed.Addr()] || landed.Port() != 8080 {
					return fmt.Errorf("%s %s:80 landed on %v, not an endpoint:8080", s.Name, s.ClusterIP, landed)
				}
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s %s:80 does not answer through kube-proxy: %w", s.Name, s.ClusterIP, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// TestKernelClusterIPThroughKubeProxy starts etcd, kube-apiserver and one
// kube-proxy (iptables) in a testbed, checks every ClusterIP answers from
// one of its endpoints through kube-proxy's rules and that kube-proxy's
// sync metric counted the sync, and that the host's root namespace is
// unchanged and no process of the run is left.
func TestKernelClusterIPThroughKubeProxy(t *testing.T) {
	testenv.RequireKernel(t, "iptables", "iptables-save", "iptables-restore")
	testenv.RequireKube(t)
	before := testenv.RootSnapshot(t)
	ctx := context.Background()
	runID := topology.NewRunID()
	svcs := services(6)
	b, err := start(t, ctx, runID, "iptables", svcs, t.TempDir())
	defer func() {
		if b.kp != nil {
			t.Logf("kube-proxy log tail:\n%s", b.kp.LogTail(15))
		}
		b.close()
	}()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-proxy %s, owned config fields %v", b.kp.Version, b.kp.Owned)
	if err := everyAnswers(b.tb, svcs, time.Minute); err != nil {
		t.Fatal(err)
	}
	nat, err := b.tb.Node.Run(ctx, nil, "iptables-save", "-t", "nat")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(nat), "-j KUBE-SVC-"); n < len(svcs) {
		t.Errorf("node's nat table has %d jumps to KUBE-SVC- chains, want >= %d:\n%s", n, len(svcs), nat)
	}
	m, err := b.kp.Scrape(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h, err := m.Histogram(kubeproxy.MetricSync, "IPv4")
	if err != nil {
		t.Fatal(err)
	}
	if h.Count < 1 || h.Sum <= 0 {
		t.Errorf("%s{IPv4}: count %d sum %v, want a sync", kubeproxy.MetricSync, h.Count, h.Sum)
	}
	t.Logf("kube-proxy IPv4 syncs: %d, mean %.3f s; usage %+v", h.Count, h.Mean(), b.kp.Usage())
	b.close()
	if left := topology.ChildProcesses(runID); len(left) > 0 {
		t.Errorf("processes of run %s left after teardown: %v", runID, left)
	}
	after := testenv.RootSnapshot(t)
	testenv.CompareRoot(t, before, after)
}

// helperEnv makes the test binary act as a run that is then killed.
const helperEnv = "PROXYBENCH_KUBEPROXY_HELPER"

// TestKernelHelperRun is not a test: under helperEnv=<runid>:<dir>[:<mode>]
// it starts a testbed with the control plane and kube-proxy (mode
// iptables unless given), waits until every ClusterIP answers from one of
// its endpoints through kube-proxy's rules (everyAnswers), prints "ready"
// and sleeps until killed. It prints "error: ..." and exits 1 instead
// when a service does not answer.
func TestKernelHelperRun(t *testing.T) {
	v := os.Getenv(helperEnv)
	if v == "" {
		t.Skip("helper process for TestKernelCleanupAfterKill")
	}
	id, dir, _ := strings.Cut(v, ":")
	dir, mode, _ := strings.Cut(dir, ":")
	if mode == "" {
		mode = "iptables"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	svcs := services(3)
	b, err := start(t, context.Background(), id, mode, svcs, dir)
	if err == nil {
		// kube-proxy is healthy once it synced; in a guest under load
		// the first answers can still take a while.
		err = everyAnswers(b.tb, svcs, 5*time.Minute)
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	time.Sleep(10 * time.Minute)
}

// TestKernelCleanupAfterKill: a run (its etcd, kube-apiserver and
// kube-proxy included) killed with SIGKILL; topology.Cleanup leaves it
// alone while it lives, and after the kill leaves no process, namespace or
// temporary folder of that run.
func TestKernelCleanupAfterKill(t *testing.T) {
	testenv.RequireKernel(t, "iptables", "iptables-restore")
	testenv.RequireKube(t)
	runID := topology.NewRunID()
	cmd := startReadyHelper(t, "TestKernelHelperRun", helperEnv+"="+runID+":"+t.TempDir())
	kids := topology.ChildProcesses(runID)
	if len(kids) < 3 {
		t.Fatalf("run %s has %d child processes, want etcd, kube-apiserver and kube-proxy", runID, len(kids))
	}
	// A live run is never touched.
	done, _, err := topology.Cleanup(runID)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) > 0 {
		t.Fatalf("cleanup removed %v of a live run", done)
	}
	for pid := range kids {
		if syscall.Kill(pid, 0) != nil {
			t.Errorf("cleanup of a live run killed pid %d", pid)
		}
	}
	// etcd's store is on tmpfs: that folder must go with the run too.
	var scratch []string
	for _, root := range topology.ScratchRoots() {
		m, _ := filepath.Glob(filepath.Join(root, topology.Prefix+runID+"-*"))
		scratch = append(scratch, m...)
	}
	if shm, _ := filepath.Glob(filepath.Join(topology.ShmDir, topology.Prefix+runID+"-etcd-*")); len(shm) == 0 {
		t.Errorf("no etcd folder of run %s in %s (have %v)", runID, topology.ShmDir, scratch)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	done, skipped, err := topology.Cleanup(runID)
	t.Logf("cleanup: %v (skipped %v)", done, skipped)
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) > 0 {
		t.Errorf("cleanup kept %v after the run was killed", skipped)
	}
	if left := topology.ChildProcesses(runID); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
	names, _ := topology.Leftovers()
	for _, n := range names {
		if topology.RunIDOf(n) == runID {
			t.Errorf("namespace %s left", n)
		}
	}
	for _, root := range topology.ScratchRoots() {
		if dirs, _ := filepath.Glob(filepath.Join(root, topology.Prefix+runID+"-*")); len(dirs) > 0 {
			t.Errorf("folders left: %v (of %v)", dirs, scratch)
		}
	}
}
