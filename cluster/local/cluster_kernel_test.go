//go:build linux

package local

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/proxybench/proxybench/internal/image"
	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/topology"
)

// clusterBinaries returns the binaries Up needs from bin/, skipping when
// one is missing (make kube, make kube-cluster, make build image).
func clusterBinaries(t testing.TB) (Binaries, string) {
	bin := repoBin(t)
	b := Binaries{Etcd: filepath.Join(bin, "etcd"), APIServer: filepath.Join(bin, "kube-apiserver"),
		ControllerManager: filepath.Join(bin, "kube-controller-manager"), Scheduler: filepath.Join(bin, "kube-scheduler"),
		Kubelet: filepath.Join(bin, "kubelet"), KubeProxy: filepath.Join(bin, "kube-proxy"), Proxybench: filepath.Join(bin, "proxybench"),
		Images: filepath.Join(bin, "proxybench-image.tar")}
	for _, f := range []string{b.Etcd, b.APIServer, b.ControllerManager, b.Scheduler, b.Kubelet, b.Proxybench, b.Images} {
		if _, err := os.Stat(f); err != nil {
			testenv.Skip(t, "needs "+f+" (make kube kube-cluster build image)")
		}
	}
	tag, err := ImageTag(b.Images)
	if err != nil {
		t.Fatal(err)
	}
	return b, tag
}

// TestKernelLocalClusterProbe is the probe of docs/cluster.md: one node
// (containerd 1.6 and a kubelet v1.37 in a user namespace) against a real
// control plane registers and goes Ready; a pod of the locally built agent
// image, imported with ctr, runs and answers from its pod address through
// the control plane's route; the host's kernel tunables, rules and routes
// are the same after Down, and nothing of the run is left.
func TestKernelLocalClusterProbe(t *testing.T) {
	testenv.RequireKernel(t, "nsenter", "ip", "containerd", "ctr", "runc")
	testenv.RequireSlow(t, "starts a control plane, a controller manager, a scheduler, containerd and a kubelet (about a minute at load 30)")
	b, tag := clusterBinaries(t)
	before := readTunables(t)
	defer checkTunables(t, before)
	root := testenv.RootSnapshot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	id := topology.NewRunID()
	c, err := Up(ctx, Spec{RunID: id, Nodes: 1, Bin: b, SandboxImage: image.Ref(image.Pause, tag), Log: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Down()
	checkTunables(t, before)
	t.Logf("1 node Ready in %v", c.Ready)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Labels: map[string]string{RunLabel: id}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "agent", Image: image.Ref(image.Agent, tag),
				ImagePullPolicy: corev1.PullNever, Args: []string{"--port", "8080"},
				// As the cluster engine's agents get them (cluster/objects.go).
				Env: []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
					{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}}}},
			AutomountServiceAccountToken: new(bool),
		},
	}
	if _, err := c.CP.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ip string
	deadline := time.Now().Add(2 * time.Minute)
	for ip == "" {
		p, err := c.CP.Client.CoreV1().Pods("default").Get(ctx, "probe", metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning {
			ip = p.Status.PodIP
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod not running after 2 min: %+v\nkubelet:\n%s\ncontainerd:\n%s", p.Status,
				tail(filepath.Join(c.Nodes[0].Dir, "kubelet.log"), 30), tail(filepath.Join(c.Nodes[0].Dir, "containerd.log"), 20))
		}
		time.Sleep(time.Second)
	}
	if !PodCIDR(0).Contains(mustAddr(t, ip)) {
		t.Errorf("pod IP %s outside node-0's pod CIDR %s", ip, PodCIDR(0))
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: c.CP.RestConfig().Dial}}
	var body []byte
	for i := 0; i < 20; i++ {
		resp, err := hc.Get(fmt.Sprintf("http://%s/healthz", net.JoinHostPort(ip, "8080")))
		if err == nil {
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !strings.Contains(string(body), ip) {
		t.Errorf("agent /healthz from the control plane = %q, want its pod IP %s", body, ip)
	}
	// A Service with a selector: kube-controller-manager writes its
	// EndpointSlice, kube-proxy (iptables, in the node's namespaces)
	// programs it, and a connection from the node to the ClusterIP lands
	// on the agent.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "probe", Labels: map[string]string{RunLabel: id}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{RunLabel: id},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	svc, err = c.CP.Client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodeHC := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var conn net.Conn
		err := c.Nodes[0].NS.Do(func() error {
			var err error
			conn, err = (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, network, addr)
			return err
		})
		return conn, err
	}}}
	var viaSvc []byte
	var lastErr error
	for i := 0; i < 60 && viaSvc == nil; i++ {
		resp, err := nodeHC.Get(fmt.Sprintf("http://%s/healthz", net.JoinHostPort(svc.Spec.ClusterIP, "80")))
		if err == nil {
			viaSvc, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			break
		}
		lastErr = err
		time.Sleep(time.Second)
	}
	if !strings.Contains(string(viaSvc), ip) {
		t.Errorf("agent /healthz through ClusterIP %s from node-0 = %q (last error %v), want its pod IP %s; kube-proxy:\n%s",
			svc.Spec.ClusterIP, viaSvc, lastErr, ip, tail(filepath.Join(c.Nodes[0].Dir, "kube-proxy.log"), 20))
	}
	if err := c.Down(); err != nil {
		t.Fatal(err)
	}
	checkTunables(t, before)
	testenv.CompareRoot(t, root, testenv.RootSnapshot(t))
	if kids := topology.ChildProcesses(id); len(kids) > 0 {
		t.Errorf("processes of run %s left: %v", id, kids)
	}
}

func mustAddr(t testing.TB, s string) netip.Addr {
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
