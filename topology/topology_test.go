//go:build linux

package topology_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/topology"
)

func spec(runID string, clients int) topology.Spec {
	return topology.Spec{RunID: runID, ClientPods: clients,
		ServiceCIDR: netip.MustParsePrefix("198.18.0.0/16"), PodCIDR: netip.MustParsePrefix("198.19.0.0/17"),
		NodeCIDR: netip.MustParsePrefix("198.19.255.0/24")}
}

// TestBuildIsolatedAndNamed: every namespace carries the run ID, no
// namespace has a default route (no route out of the testbed), the backend
// answers the whole pod CIDR locally, and Teardown removes everything.
func TestBuildIsolatedAndNamed(t *testing.T) {
	testenv.RequireKernel(t)
	before := testenv.RootSnapshot(t)
	id := topology.NewRunID()
	tb, err := topology.Build(context.Background(), spec(id, 3))
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Teardown()
	names := tb.Names()
	if len(names) != 5 {
		t.Fatalf("namespaces %v, want node, backend and 3 clients", names)
	}
	for _, n := range names {
		if !strings.HasPrefix(n, "pb-"+id+"-") {
			t.Errorf("namespace %q lacks the run ID", n)
		}
		ns, err := topology.OpenNetns(n)
		if err != nil {
			t.Fatal(err)
		}
		h, err := ns.Netlink()
		if err != nil {
			t.Fatal(err)
		}
		routes, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: 0}, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range routes {
			if r.Dst == nil || r.Dst.String() == "0.0.0.0/0" {
				t.Errorf("%s has a default route: %v", n, r)
			}
		}
		links, _ := h.LinkList()
		for _, l := range links {
			if l.Attrs().Name != "lo" && l.Attrs().Name != "eth0" && !strings.HasPrefix(l.Attrs().Name, "pb"+id) {
				t.Errorf("%s: link %q lacks the run ID", n, l.Attrs().Name)
			}
		}
		h.Close()
		ns.Close()
	}
	if len(tb.ClientAddrs) != 3 || !netip.MustParsePrefix("198.19.255.0/24").Contains(tb.ClientAddrs[2]) {
		t.Errorf("client addresses %v", tb.ClientAddrs)
	}
	if err := tb.Teardown(); err != nil {
		t.Fatal(err)
	}
	left, _ := topology.Leftovers()
	for _, n := range left {
		if strings.HasPrefix(n, "pb-"+id) {
			t.Errorf("left after teardown: %s", n)
		}
	}
	testenv.CompareRoot(t, before, testenv.RootSnapshot(t))
}

// TestBuildFailureCreatesNothing: a spec that fails half-way (a client
// count the node CIDR cannot hold) leaves no namespace.
func TestBuildFailureCreatesNothing(t *testing.T) {
	testenv.RequireKernel(t)
	id := topology.NewRunID()
	s := spec(id, 100)
	s.NodeCIDR = netip.MustParsePrefix("198.19.255.0/28")
	if _, err := topology.Build(context.Background(), s); err == nil {
		t.Fatal("Build accepted 101 links in a /28")
	}
	// A failure after namespaces exist: a cancelled context mid-build.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := topology.Build(ctx, spec(id, 2)); err == nil {
		t.Fatal("Build ignored a cancelled context")
	}
	left, _ := topology.Leftovers()
	for _, n := range left {
		if strings.HasPrefix(n, "pb-"+id) {
			t.Errorf("failed Build left %s", n)
		}
	}
}

// TestCleanupByRunID removes only the named run's namespaces, and never
// those of a run still going (a process holds one of its namespaces).
func TestCleanupByRunID(t *testing.T) {
	testenv.RequireKernel(t)
	a, b, c := topology.NewRunID(), topology.NewRunID(), topology.NewRunID()
	var held *topology.Netns
	for _, id := range []string{a, b, c} {
		ns, err := topology.CreateNetns(topology.NetnsName(id, "node0"))
		if err != nil {
			t.Fatal(err)
		}
		if id == c {
			held = ns // this process keeps c's namespace open: c is live
			continue
		}
		ns.Close()
	}
	awaitThreadsOut(t, topology.NetnsName(a, "node0"), topology.NetnsName(b, "node0"))
	defer topology.Cleanup(b)
	done, skipped, err := topology.Cleanup(a)
	if err != nil || len(done) != 1 || done[0] != topology.NetnsName(a, "node0") || len(skipped) != 0 {
		t.Fatalf("cleanup %s: %v %v %v", a, done, skipped, err)
	}
	left, _ := topology.Leftovers()
	found := false
	for _, n := range left {
		found = found || n == topology.NetnsName(b, "node0")
	}
	if !found {
		t.Errorf("cleanup of run %s removed run %s's namespace", a, b)
	}
	// A live run is skipped, whether named or not.
	done, skipped, err = topology.Cleanup(c)
	if err != nil || len(done) != 0 || len(skipped) != 1 {
		t.Errorf("cleanup of live run %s: removed %v, skipped %v, %v", c, done, skipped, err)
	}
	if stale, _ := topology.Stale(); containsName(stale, topology.NetnsName(c, "node0")) || !containsName(stale, topology.NetnsName(b, "node0")) {
		t.Errorf("Stale() = %v: want b's namespace and not live c's", stale)
	}
	held.Close()
	if done, _, err := topology.Cleanup(c); err != nil || len(done) != 1 {
		t.Errorf("cleanup after the run ended: %v %v", done, err)
	}
}

func containsName(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}

// TestCleanupKillsOrphans: a testbed child (ChildEnv) left running in a
// namespace by a killed run does not keep the run live: Cleanup kills it
// and removes the namespace. An untagged process inside (a user's shell)
// keeps its run live, and so does a run whose owner holds its namespace
// while Netns.Run runs a program there (tagged with the run ID).
func TestCleanupKillsOrphans(t *testing.T) {
	testenv.RequireKernel(t, "sleep")
	orphanID, userID, ownedID := topology.NewRunID(), topology.NewRunID(), topology.NewRunID()
	nss := map[string]*topology.Netns{}
	for _, id := range []string{orphanID, userID, ownedID} {
		ns, err := topology.CreateNetns(topology.NetnsName(id, "node0"))
		if err != nil {
			t.Fatal(err)
		}
		nss[id] = ns
		defer topology.Cleanup(id)
	}
	// start runs sleep inside id's namespace, then drops the handle: only
	// the process inside holds the namespace.
	start := func(id string, env []string) *exec.Cmd {
		cmd := exec.Command("sleep", "600")
		cmd.Env = env
		if err := nss[id].Do(cmd.Start); err != nil {
			t.Fatal(err)
		}
		nss[id].Close()
		return cmd
	}
	orphan := start(orphanID, []string{topology.ChildEnv + "=" + orphanID})
	orphanDone := make(chan error, 1)
	go func() { orphanDone <- orphan.Wait() }()
	user := start(userID, nil)
	awaitThreadsOut(t, nss[orphanID].Name)
	defer func() { user.Process.Kill(); user.Wait() }()
	ctx, cancel := context.WithCancel(context.Background())
	ownedDone := make(chan error, 1)
	go func() {
		_, err := nss[ownedID].Run(ctx, nil, "sleep", "601")
		ownedDone <- err
	}()
	defer func() { cancel(); <-ownedDone; nss[ownedID].Close() }()
	// Wait until Netns.Run's sleep runs; it carries this process as owner.
	var env string
	for env == "" {
		select {
		case err := <-ownedDone:
			t.Fatalf("Netns.Run ended early: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
		env = childEnv("sleep\x00601\x00")
	}
	if !strings.Contains(env, "\x00"+topology.ChildEnv+"="+ownedID+"\x00") {
		t.Errorf("Netns.Run's program lacks its run ID (%s): %q", topology.ChildEnv, env)
	}

	done, skipped, err := topology.Cleanup(orphanID)
	want := []string{fmt.Sprintf("process %d (sleep, run %s)", orphan.Process.Pid, orphanID), nss[orphanID].Name}
	if err != nil || !slices.Equal(done, want) || len(skipped) != 0 {
		t.Fatalf("cleanup of the killed run %s: removed %v, kept %v, %v; want removed %v", orphanID, done, skipped, err, want)
	}
	if err := <-orphanDone; err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the orphan's exit: %v, want killed", err)
	}
	for _, id := range []string{userID, ownedID} {
		if done, skipped, err := topology.Cleanup(id); err != nil || len(done) != 0 || len(skipped) != 1 {
			t.Errorf("cleanup of live run %s: removed %v, kept %v, %v", id, done, skipped, err)
		}
	}
}

// childEnv returns the environment (NUL-separated, with a leading NUL) of
// a child of this process running the command line cmdline (NUL-separated,
// as in /proc/<pid>/cmdline), "" if there is none.
func childEnv(cmdline string) string {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil || string(b) != cmdline {
			continue
		}
		st, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
			env, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "environ"))
			return "\x00" + string(env)
		}
	}
	return ""
}

// awaitThreadsOut waits until no thread of this process is inside the
// named namespaces: the throwaway thread CreateNetns or Do used ends only
// after the call returned (the Go runtime ends a locked thread after its
// goroutine), and until then this process holds the namespace.
func awaitThreadsOut(t *testing.T, names ...string) {
	t.Helper()
	inos := map[string]bool{}
	for _, n := range names {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join("/run/netns", n), &st); err != nil {
			t.Fatal(err)
		}
		inos[fmt.Sprintf("net:[%d]", st.Ino)] = true
	}
	for {
		inside := false
		tasks, _ := os.ReadDir("/proc/self/task")
		for _, task := range tasks {
			l, _ := os.Readlink(filepath.Join("/proc/self/task", task.Name(), "ns", "net"))
			inside = inside || inos[l]
		}
		if !inside {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
