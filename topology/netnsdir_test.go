//go:build linux

package topology_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/topology"
)

// TestCreateNetnsSurvivesIPNetns: CreateNetns leaves /run/netns a mount
// point of its own (as `ip netns add` does), so a later iproute2 command
// does not bind-mount the folder over the testbed's namespace, which would
// hide it from /run/netns and from cleanup (pb-e52b29-kube was left so).
func TestCreateNetnsSurvivesIPNetns(t *testing.T) {
	testenv.RequireKernel(t)
	testenv.RequireTool(t, "ip")
	id := topology.NewRunID()
	name := topology.NetnsName(id, "node0")
	ns, err := topology.CreateNetns(name)
	if err != nil {
		t.Fatal(err)
	}
	ns.Close()
	defer topology.Cleanup(id)
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var dirMounted bool
	for _, l := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == "/run/netns" {
			dirMounted = true
		}
	}
	if !dirMounted {
		t.Fatalf("/run/netns is not a mount point after CreateNetns:\n%s", mi)
	}
	other := topology.NetnsName(id, "client0")
	if out, err := exec.Command("ip", "netns", "add", other).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	if _, err := os.Stat(filepath.Join("/run/netns", name)); err != nil {
		t.Fatalf("namespace %s hidden after ip netns add: %v", name, err)
	}
	done, _, err := topology.Cleanup(id)
	if err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	for _, n := range []string{name, other} {
		if _, err := os.Stat(filepath.Join("/run/netns", n)); err == nil {
			t.Errorf("cleanup left %s (removed %v)", n, done)
		}
	}
}
