//go:build linux

package local

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/topology"
)

// hostTunables are the host-global tunables a kubelet writes at start.
var hostTunables = []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops"}

// readTunables reads hostTunables from the host's /proc/sys.
func readTunables(t testing.TB) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, k := range hostTunables {
		b, err := os.ReadFile("/proc/sys/" + k)
		if err != nil {
			t.Fatal(err)
		}
		m[k] = strings.TrimSpace(string(b))
	}
	return m
}

// checkTunables fails the test when a host tunable differs from before,
// after setting it back at once.
func checkTunables(t testing.TB, before map[string]string) {
	t.Helper()
	for k, v := range readTunables(t) {
		if v != before[k] {
			_ = os.WriteFile("/proc/sys/"+k, []byte(before[k]), 0o644)
			t.Errorf("host tunable %s changed from %s to %s (set back)", k, before[k], v)
		}
	}
}

// repoBin is the checkout's bin/ folder.
func repoBin(t testing.TB) string {
	root, ok := testenv.RepoRoot()
	if !ok {
		testenv.Skip(t, "cannot find the checkout's bin/ folder")
	}
	return filepath.Join(root, "bin")
}

// TestKernelNodeHolder: a node holder runs in a user namespace that passes
// the kubelet guard (0 maps to its unprivileged host uid); inside it, root
// cannot write the host's kernel tunables (the writes a kubelet makes at
// start fail), while a sysctl of the node's own network namespace is its
// to set; the holder's exit takes every process of the node along, and
// Stop leaves no namespace or folder.
func TestKernelNodeHolder(t *testing.T) {
	testenv.RequireKernel(t, "nsenter", "ip")
	pb := filepath.Join(repoBin(t), "proxybench")
	if _, err := os.Stat(pb); err != nil {
		testenv.Skip(t, "needs bin/proxybench (go build -o bin/proxybench ./cmd/proxybench)")
	}
	before := readTunables(t)
	defer checkTunables(t, before)
	ctx := context.Background()
	id := topology.NewRunID()
	n, err := StartNode(ctx, NodeSpec{RunID: id, Index: 0, Proxybench: pb})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	if err := CheckKubeletUserNS(n.Holder()); err != nil {
		t.Fatalf("the holder's namespace fails the guard: %v", err)
	}
	m, _ := os.ReadFile("/proc/" + strconv.Itoa(n.Holder()) + "/uid_map")
	if f := strings.Fields(string(m)); len(f) != 3 || f[0] != "0" || f[1] != strconv.Itoa(DefaultHostUID) || f[2] != strconv.Itoa(IDCount) {
		t.Errorf("holder uid_map = %q, want 0 %d %d", m, DefaultHostUID, IDCount)
	}
	// As the kubelet would, with the values it writes.
	for k, v := range map[string]string{"vm/overcommit_memory": "1", "kernel/panic": "10", "kernel/panic_on_oops": "1"} {
		out, err := n.Run(ctx, "sh", "-c", "echo "+v+" > /proc/sys/"+k)
		if err == nil {
			t.Errorf("root of the node wrote /proc/sys/%s: %s", k, out)
		}
	}
	if out, err := n.Run(ctx, "sysctl", "-qw", "net.ipv4.ip_forward=1"); err != nil {
		t.Errorf("the node's own net.ipv4.ip_forward: %v: %s", err, out)
	}
	if out, err := n.Run(ctx, "id", "-u"); err != nil || strings.TrimSpace(string(out)) != "0" {
		t.Errorf("id -u inside = %q, %v; want 0", out, err)
	}
	sleeper := n.Command(ctx, "sleep", "300")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	var sleepPid int
	for i := 0; i < 100 && sleepPid == 0; i++ {
		if k := children(sleeper.Process.Pid); len(k) > 0 {
			sleepPid = k[0]
		}
		time.Sleep(20 * time.Millisecond)
	}
	dir := n.Dir
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	_ = sleeper.Wait()
	if sleepPid != 0 {
		if _, err := os.Stat("/proc/" + strconv.Itoa(sleepPid)); err == nil {
			t.Errorf("process %d of the node outlived its holder", sleepPid)
		}
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("node folder %s left", dir)
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), "pb-"+id+"-") {
		t.Errorf("namespace of run %s left: %s", id, out)
	}
}

// TestKernelNodeContainerd: containerd 1.6 starts as root of a node's user
// namespace with the node's configuration, and the make image tarball
// imports into its CRI namespace (both images, unpacked for the native
// snapshotter).
func TestKernelNodeContainerd(t *testing.T) {
	testenv.RequireKernel(t, "nsenter", "ip", "containerd", "ctr", "runc")
	bin := repoBin(t)
	pb, tar := filepath.Join(bin, "proxybench"), filepath.Join(bin, "proxybench-image.tar")
	if _, err := os.Stat(pb); err != nil {
		testenv.Skip(t, "needs "+pb+" (go build -o bin/proxybench ./cmd/proxybench)")
	}
	before := readTunables(t)
	defer checkTunables(t, before)
	ctx := context.Background()
	n, err := StartNode(ctx, NodeSpec{RunID: topology.NewRunID(), Index: 0, Proxybench: pb})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	if _, err := n.StartContainerd(ctx, "containerd", PodCIDR(0), "proxybench.local/pause:test", time.Minute); err != nil {
		t.Fatal(err)
	}
	defer func() { t.Logf("containerd log:\n%s", tail(filepath.Join(n.Dir, "containerd.log"), 30)) }()
	if _, err := os.Stat(tar); err != nil {
		testenv.Skip(t, "containerd started; the import needs "+tar+" (make image)")
	}
	out, err := n.ImportImages(ctx, tar)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("imported:\n%s", out)
	ls, err := n.Ctr(ctx, "images", "ls", "-q")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"proxybench.local/proxybench:", "proxybench.local/pause:"} {
		if !strings.Contains(string(ls), want) {
			t.Errorf("images after import:\n%s\nwant one named %s*", ls, want)
		}
	}
}
