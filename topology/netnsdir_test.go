//go:build linux

package topology_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// TestCreateNetnsFailureLeavesNothing: when CreateNetns made the
// namespace but a later step failed (bringing lo up), it returns no
// Netns and deletes the namespace: its callers return on the error (a
// doctor probe's pb-<id>-probe, a scratch sync's, a test's t.Fatal) and
// would leave it behind.
func TestCreateNetnsFailureLeavesNothing(t *testing.T) {
	testenv.RequireKernel(t)
	id := topology.NewRunID()
	name := topology.NetnsName(id, "probe")
	defer topology.Cleanup(id)
	injected := errors.New("injected set-up failure")
	restore := topology.FailSetUp(injected)
	ns, err := topology.CreateNetns(name)
	restore()
	if !errors.Is(err, injected) || ns != nil {
		t.Fatalf("CreateNetns = %v, %v; want nil and the set-up error", ns, err)
	}
	if _, err := os.Stat(filepath.Join("/run/netns", name)); err == nil {
		t.Errorf("a failed CreateNetns left %s", name)
	}
	if left, _ := topology.Leftovers(); slices.ContainsFunc(left, func(n string) bool { return topology.RunIDOf(n) == id }) {
		t.Errorf("a failed CreateNetns left namespaces of run %s: %v", id, left)
	}
}
