//go:build linux

package local

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/proxybench/proxybench/topology"
)

func TestTmpProbeReady(t *testing.T) {
	bin := repoBin(t)
	b := Binaries{Etcd: filepath.Join(bin, "etcd"), APIServer: filepath.Join(bin, "kube-apiserver"),
		ControllerManager: filepath.Join(bin, "kube-controller-manager"), Scheduler: filepath.Join(bin, "kube-scheduler"),
		Kubelet: filepath.Join(bin, "kubelet"), KubeProxy: filepath.Join(bin, "kube-proxy"), Proxybench: filepath.Join(bin, "proxybench")}
	before := readTunables(t)
	defer checkTunables(t, before)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := Up(ctx, Spec{RunID: topology.NewRunID(), Nodes: 1, Bin: b, SandboxImage: "proxybench.local/pause:x", Log: os.Stderr, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	checkTunables(t, before)
	t.Logf("ready in %v", c.Ready)
	nodes, err := c.CP.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		t.Logf("node %s addresses %v podCIDR %s info %+v", n.Name, n.Status.Addresses, n.Spec.PodCIDR, n.Status.NodeInfo)
	}
	t.Logf("kubelet:\n%s", tail(filepath.Join(c.Nodes[0].Dir, "kubelet.log"), 15))
	t.Logf("kube-proxy:\n%s", tail(filepath.Join(c.Nodes[0].Dir, "kube-proxy.log"), 20))
	c.Down()
}
