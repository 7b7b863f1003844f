//go:build linux

package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/proxybench/proxybench/topology"
)

// TestCheckKubeletUIDMap: the guard lets a kubelet start only in a user
// namespace whose uid 0 is a non-root host uid and which maps nothing onto
// host uid 0.
func TestCheckKubeletUIDMap(t *testing.T) {
	for _, c := range []struct {
		name, uidMap string
		ok           bool
		want         string // in the error
	}{
		{"the initial namespace (a kubelet on the host)", "         0          0 4294967295\n", false, "maps onto host uid 0"},
		{"0 mapped to 0 in a new namespace (still writes /proc/sys)", "0 0 1\n", false, "maps onto host uid 0"},
		{"rootless: 0 to 100000, 65536 ids", "         0     100000      65536\n", true, ""},
		{"a second range that reaches host uid 0", "0 100000 65536\n65536 0 1\n", false, "maps onto host uid 0"},
		{"uid 0 not mapped", "1 100001 65535\n", false, "uid 0 is not mapped"},
		{"no mapping written yet", "", false, "empty"},
		{"garbage", "0 100000\n", false, "three numbers"},
		{"zero count", "0 100000 0\n", false, "count 0"},
	} {
		err := CheckKubeletUIDMap([]byte(c.uidMap))
		if c.ok != (err == nil) {
			t.Errorf("%s: %q: err = %v, want ok=%v", c.name, c.uidMap, err, c.ok)
			continue
		}
		if err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to say %q", c.name, err, c.want)
		}
	}
}

// TestCheckKubeletUserNSRefusesThisProcess: this test runs in the host's
// (or its sandbox's) namespace, so the guard must refuse it; when the test
// runs as a non-root user in a rootless namespace it maps 0 elsewhere, so
// only the initial namespace's map is asserted on.
func TestCheckKubeletUserNSRefusesThisProcess(t *testing.T) {
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		t.Skipf("no /proc/self/uid_map: %v", err)
	}
	m, err := ParseIDMap(b)
	if err != nil {
		t.Fatal(err)
	}
	err = CheckKubeletUserNS(os.Getpid())
	if m[0].Outside == 0 && err == nil {
		t.Fatalf("uid map %q maps onto host uid 0, yet the guard let a kubelet start here", b)
	}
	if err != nil && !strings.Contains(err.Error(), "process ") {
		t.Errorf("err = %v, want it to name the process", err)
	}
}

// TestStartKubeletRefusedOutsideUserNS: a node whose holder runs in this
// process's user namespace (uid 0 maps to 0 when the test is root) gets
// no kubelet: StartKubelet refuses before forking anything.
func TestStartKubeletRefusedOutsideUserNS(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("as non-root this namespace may map 0 elsewhere; the refusal needs the host's map")
	}
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	holder, err := topology.StartPlain("test", "holder", cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Kill()
	marker := filepath.Join(t.TempDir(), "kubelet-ran")
	n := &Node{Name: "node-0", RunID: "test", Dir: t.TempDir(), holder: holder}
	p, err := n.StartKubelet("/bin/sh", "-c", "touch "+marker)
	if err == nil {
		p.Kill()
		t.Fatal("StartKubelet started a program in the host's user namespace")
	}
	if !strings.Contains(err.Error(), "refusing to start kubelet") || !strings.Contains(err.Error(), "maps onto host uid 0") {
		t.Errorf("err = %v, want the guard's refusal", err)
	}
	if len(n.procs) != 0 || len(children(holder.Pid())) != 0 {
		t.Errorf("something was started: procs %d", len(n.procs))
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the refused program ran")
	}
	if _, err := n.StartHostRoot("kubelet", "/usr/bin/kubelet"); err == nil || !strings.Contains(err.Error(), "StartKubelet") {
		t.Errorf("StartHostRoot(kubelet) = %v, want it refused", err)
	}
	// Start refuses a kubelet binary whatever the namespace.
	if _, err := n.Start("kubelet", "/usr/bin/kubelet"); err == nil || !strings.Contains(err.Error(), "StartKubelet") {
		t.Errorf("Start(kubelet) = %v, want it sent to StartKubelet", err)
	}
}
