//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/topology"
)

// runNamespaces are the testbed namespaces of run id now.
func runNamespaces(id string) map[string]bool {
	out := map[string]bool{}
	names, _ := topology.Leftovers()
	for _, n := range names {
		if topology.RunIDOf(n) == id {
			out[n] = true
		}
	}
	return out
}

// nsInode is the inode of namespace file path (/run/netns/<name> or
// /proc/<pid>/ns/net).
func nsInode(path string) uint64 {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0
	}
	return st.Ino
}

// serviceChains counts the KUBE-SVC-* chains of the nat table in
// namespace ns, over both iptables back ends.
func serviceChains(t *testing.T, ns string) int {
	t.Helper()
	n := 0
	for _, save := range []string{"iptables-legacy-save", "iptables-nft-save"} {
		out, err := exec.Command("ip", "netns", "exec", ns, save, "-t", "nat").Output()
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, ":KUBE-SVC-") {
				n++
			}
		}
	}
	return n
}

// children are run id's testbed children by PID, with their command
// (/proc/<pid>/comm).
func children(id string) map[int]string {
	out := map[int]string{}
	for pid := range topology.ChildProcesses(id) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		out[pid] = strings.TrimSpace(string(b))
	}
	return out
}

// TestKernelTwoKubeProxyRunsIsolated: two runs at once, each with a
// kube-proxy row and so its own control plane (etcd, kube-apiserver,
// kube-proxy), 20 and 30 services: while both run, each run's testbed
// children live in its own namespaces only, each node's kernel holds its
// own run's service chains only (20 and 30, though both use the same
// ClusterIPs), and a plain `proxybench cleanup` touches neither; then
// one is killed with kill -9 and `cleanup --run <its id>` removes all of
// it and nothing of the other, which finishes on its own with its own
// figures (its run ID, its 30 services, no connection lost) and leaves
// nothing behind. The root namespace is unchanged.
func TestKernelTwoKubeProxyRunsIsolated(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore")
	testenv.RequireKube(t)
	testenv.RequireSlow(t, "two runs with a control plane each, at once: about 1-2 minutes")
	root := testenv.RootSnapshot(t)
	body := func(services int, soak string) string {
		return fmt.Sprintf("name: iso\nservices: {count: %d, endpoints: {count: 2}}\nmodes: [iptables]\nimplementation: [kube-proxy]\nrepetitions: 1\n"+
			"traffic: {connections: 50, positions: [first]}\nsoak: %s\n", services, soak)
	}
	idA, idB := topology.NewRunID(), topology.NewRunID()
	dir := t.TempDir()
	outA, outB := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	a := streamRun(t, "--kernel", "host", "--run-id", idA, "--output", outA, writeFile(t, body(20, "{duration: 5m, interval: 1s, rate: 10, churn: 1, idle: 0, quiet: 0}")))
	b := streamRun(t, "--kernel", "host", "--run-id", idB, "--output", outB, writeFile(t, body(30, "{duration: 20s, interval: 1s, rate: 20, churn: 2, idle: 1, quiet: 1}")))
	a.waitLine(t, ": soak ")
	b.waitLine(t, ": soak ")

	nsA, nsB := runNamespaces(idA), runNamespaces(idB)
	kidsA, kidsB := children(idA), children(idB)
	if len(nsA) == 0 || len(nsB) == 0 || len(kidsA) < 3 || len(kidsB) < 3 {
		t.Fatalf("namespaces %d and %d, testbed children %v and %v: want each run's etcd, kube-apiserver and kube-proxy", len(nsA), len(nsB), kidsA, kidsB)
	}
	inodes := func(ns map[string]bool) map[uint64]bool {
		out := map[uint64]bool{}
		for n := range ns {
			out[nsInode(filepath.Join("/run/netns", n))] = true
		}
		return out
	}
	inA, inB := inodes(nsA), inodes(nsB)
	for _, c := range []struct {
		id       string
		kids     map[int]string
		own, not map[uint64]bool
	}{{idA, kidsA, inA, inB}, {idB, kidsB, inB, inA}} {
		for pid, what := range c.kids {
			ino := nsInode(fmt.Sprintf("/proc/%d/ns/net", pid))
			if ino == 0 {
				continue // gone meanwhile (a rule program)
			}
			if !c.own[ino] || c.not[ino] {
				t.Errorf("run %s's child %d (%s) is in namespace inode %d, not one of its run's", c.id, pid, what, ino)
			}
		}
	}
	if n := serviceChains(t, topology.NetnsName(idA, "node0")); n != 20 {
		t.Errorf("run %s's node holds %d service chains, want its own 20", idA, n)
	}
	if n := serviceChains(t, topology.NetnsName(idB, "node0")); n != 30 {
		t.Errorf("run %s's node holds %d service chains, want its own 30", idB, n)
	}

	// A plain cleanup while both live touches neither.
	if stdout, stderr, code := run(t, nil, "cleanup"); code != 0 {
		t.Fatalf("cleanup: exit %d\n%s%s", code, stdout, stderr)
	}
	if len(runNamespaces(idA)) != len(nsA) || len(runNamespaces(idB)) != len(nsB) || len(topology.ChildProcesses(idA)) == 0 || len(topology.ChildProcesses(idB)) == 0 {
		t.Fatalf("a plain cleanup touched a live run")
	}

	// kill -9 of A, cleanup of A: nothing of A left, B whole.
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.cmd.Wait()
	if stdout, stderr, code := run(t, nil, "cleanup", "--run", idA); code != 0 {
		t.Fatalf("cleanup --run %s: exit %d\n%s%s", idA, code, stdout, stderr)
	}
	if left := leftOf(idA, nil); len(left) > 0 {
		t.Errorf("left of the killed run after its cleanup: %v", left)
	}
	if got := runNamespaces(idB); len(got) != len(nsB) {
		t.Errorf("the live run has %d namespaces after the other's cleanup, had %d", len(got), len(nsB))
	}
	for pid, what := range kidsB {
		long := strings.Contains(what, "etcd") || strings.Contains(what, "kube-")
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil && long {
			t.Errorf("the live run's child %d (%s) is gone after the other's cleanup", pid, what)
		}
	}

	// B finishes with its own figures.
	done := make(chan error, 1)
	go func() {
		for range b.lines {
		}
		done <- b.cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the surviving run: %v; stderr:\n%s", err, strings.Join(b.seen, "\n"))
		}
	case <-time.After(4 * time.Minute):
		t.Fatal("the surviving run did not finish within 4 minutes")
	}
	res, err := reports.Read(outB)
	if err != nil {
		t.Fatal(err)
	}
	if res.RunID != idB || len(res.Modes) != 1 || res.Modes[0].Soak == nil {
		t.Fatalf("result of %s: run ID %s, %d rows", idB, res.RunID, len(res.Modes))
	}
	sr := res.Modes[0].Soak
	if v := reports.SoakVerdicts(sr); sr.Header.RunID != idB || sr.Header.Services != 30 || v.Lost != 0 || !v.LostKnown || v.Attempts == 0 {
		t.Errorf("the surviving run's soak: run %s, %d services, %d connections, %d lost", sr.Header.RunID, sr.Header.Services, v.Attempts, v.Lost)
	}
	if _, err := os.Stat(outA); err == nil {
		t.Errorf("the killed run wrote a result")
	}
	if left := leftOf(idB, nil); len(left) > 0 {
		t.Errorf("the finished run left %v", left)
	}
	testenv.CompareRoot(t, root, testenv.RootSnapshot(t))
}
