//go:build linux

package main

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/internal/uml"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/topology"
)

// startedRun is a `proxybench run` child whose stderr lines are read as
// they come.
type startedRun struct {
	cmd   *exec.Cmd
	lines chan string
	seen  []string
}

// streamRun starts `proxybench run` with args, its stderr read line by
// line; the test kills it if it is still running at the end.
func streamRun(t *testing.T, args ...string) *startedRun {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"run"}, args...)...)
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	r := &startedRun{cmd: cmd, lines: make(chan string, 1024)}
	go func() {
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
		close(r.lines)
	}()
	return r
}

// waitLine waits up to 2 minutes for a stderr line containing s.
func (r *startedRun) waitLine(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				t.Fatalf("run exited before printing %q; stderr:\n%s", s, strings.Join(r.seen, "\n"))
			}
			r.seen = append(r.seen, l)
			if strings.Contains(l, s) {
				return
			}
		case <-deadline:
			t.Fatalf("no %q on the run's stderr within 2 minutes; stderr:\n%s", s, strings.Join(r.seen, "\n"))
		}
	}
}

// guestOf returns the work folder and host processes of run id's guest.
func guestOf(id string) (string, []uml.GuestProcess) {
	for d, ps := range uml.GuestProcesses() {
		if uml.RunIDOfDir(d) == id {
			return d, ps
		}
	}
	return "", nil
}

// leftOf lists what run id left on this host: guest processes, guest
// work folders, pb-<id>-* namespaces and folders, testbed children,
// ~/.uml/<umid> folders of the given kernel pids.
func leftOf(id string, kernels []int) []string {
	var left []string
	if d, ps := guestOf(id); len(ps) > 0 {
		left = append(left, "guest processes of "+d)
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), uml.WorkDirPattern(id)+"*"))
	left = append(left, dirs...)
	for _, root := range topology.ScratchRoots() {
		m, _ := filepath.Glob(filepath.Join(root, topology.Prefix+id+"-*"))
		left = append(left, m...)
	}
	names, _ := topology.Leftovers()
	for _, n := range names {
		if topology.RunIDOf(n) == id {
			left = append(left, "netns "+n)
		}
	}
	for pid := range topology.ChildProcesses(id) {
		left = append(left, "testbed child "+strconv.Itoa(pid))
	}
	home, _ := os.UserHomeDir()
	pidFiles, _ := filepath.Glob(filepath.Join(home, ".uml", "*", "pid"))
	for _, f := range pidFiles {
		b, _ := os.ReadFile(f)
		for _, k := range kernels {
			if strings.TrimSpace(string(b)) == strconv.Itoa(k) {
				left = append(left, filepath.Dir(f))
			}
		}
	}
	return left
}

// TestKernelCleanupKilledGuestRun: `proxybench run` of a small guest
// scenario (50 services, none then ipvs, in uml:6.12) killed with
// kill -9 at four moments of its guest (as the guest is started, right
// after the boot line, when the guest's own proxybench builds its
// testbed, and after the guest's checkpoint of mode none, during ipvs),
// then `proxybench cleanup` (plain for the boot line, --run <id> for the
// others): nothing of
// the killed run is left (no guest process, no work folder, no pb-<id>-*
// namespace or folder, no ~/.uml/<umid> of its kernel), the guest's
// finished mode is saved at the run's --output (and nothing when it had
// finished none), and a second guest run alive all along is never
// touched: cleanup names it as kept and its guest processes survive.
func TestKernelCleanupKilledGuestRun(t *testing.T) {
	testenv.RequireKernel(t, "ipset")
	testenv.RequireGuest(t)
	k, err := uml.Find("uml:" + uml.DefaultKernelSeries)
	if err != nil {
		testenv.Skip(t, err.Error()+" (make setup builds it)")
	}
	t0 := time.Now()
	// The live run: a slow churn keeps its guest going, cheaply.
	liveID := topology.NewRunID()
	liveBody := "services: {count: 20, endpoints: {count: 1}}\nmodes: [ipvs]\nrepetitions: 1\ntraffic: {connections: 20, positions: [first]}\n" +
		"churn: {rate: 1, duration: 10m, probes: 1}\numl: {memoryMiB: 384}\n"
	live := streamRun(t, "--kernel", k.Name, "--run-id", liveID, "--output", filepath.Join(t.TempDir(), "live.json"), writeFile(t, liveBody))
	live.waitLine(t, "guest: building testbed")
	liveDir, liveProcs := guestOf(liveID)
	if len(liveProcs) == 0 {
		t.Fatalf("no guest process of the live run %s", liveID)
	}
	t.Cleanup(func() {
		live.cmd.Process.Kill()
		live.cmd.Wait()
		run(t, nil, "cleanup", "--run", liveID)
	})

	body := "services: {count: 50, endpoints: {count: 1}}\nmodes: [none, ipvs]\nrepetitions: 1\ntraffic: {connections: 200, positions: [first]}\numl: {memoryMiB: 384}\n"
	sc := writeFile(t, body)
	for i, m := range []struct {
		name, line string
		saved      bool // the guest had finished mode none
	}{
		{"before boot", "user-mode-linux guest " + k.Name + " (", false},
		{"boot", "modules loaded", false},
		{"guest testbed", "guest: building testbed", false},
		{"after checkpoint", "guest: ipvs: sync.full", true},
	} {
		t.Run(m.name, func(t *testing.T) {
			id := topology.NewRunID()
			out := filepath.Join(t.TempDir(), "r.json")
			r := streamRun(t, "--kernel", k.Name, "--run-id", id, "--output", out, sc)
			r.waitLine(t, m.line)
			dir, procs := guestOf(id)
			if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			r.cmd.Wait()
			var kernels []int
			for _, p := range procs {
				kernels = append(kernels, p.PID)
			}
			args := []string{"cleanup", "--run", id}
			if i == 1 {
				args = []string{"cleanup"}
			}
			stdout, stderr, code := run(t, nil, args...)
			t.Logf("killed at %q (guest %s, %d host processes); %v:\n%s", m.line, dir, len(procs), args, stdout)
			if code != 0 {
				t.Fatalf("%v: exit %d\n%s%s", args, code, stdout, stderr)
			}
			if left := leftOf(id, kernels); len(left) > 0 {
				t.Errorf("left after kill -9 and %v: %v", args, left)
			}
			if i == 1 && !strings.Contains(stdout, "kept user-mode-linux guest of run "+liveID) {
				t.Errorf("cleanup does not name the live run %s's guest as kept:\n%s", liveID, stdout)
			}
			res, rerr := reports.Read(out)
			switch {
			case m.saved && rerr != nil:
				t.Errorf("the guest's finished mode none was not saved at %s: %v\n%s", out, rerr, stdout)
			case m.saved && (res.Partial == "" || len(res.Modes) != 1 || res.Modes[0].Mode != "none" || res.Modes[0].Kernel != k.Name || res.Machine.KernelWhere != "uml"):
				t.Errorf("saved %s: partial %q, rows %d; want mode none of %s, partial", out, res.Partial, len(res.Modes), k.Name)
			case !m.saved && rerr == nil:
				t.Errorf("a result was saved at %s though the guest had finished no mode", out)
			}
			if m.saved && !strings.Contains(stdout, "saved what the killed run's guest had finished: "+out) {
				t.Errorf("cleanup does not say where it saved the guest's checkpoint:\n%s", stdout)
			}
			for _, p := range liveProcs {
				if syscall.Kill(p.PID, 0) != nil {
					t.Fatalf("the live run %s's guest process %d is gone after cleaning up run %s", liveID, p.PID, id)
				}
			}
			if _, err := os.Stat(liveDir); err != nil {
				t.Fatalf("the live run %s's work folder: %v", liveID, err)
			}
		})
	}
	// Still the same guest (it may have more processes by now: one per
	// address space of its own programs).
	d, ps := guestOf(liveID)
	for _, p := range liveProcs {
		if d != liveDir || !slices.ContainsFunc(ps, func(q uml.GuestProcess) bool { return q.PID == p.PID }) {
			t.Errorf("the live run's guest process %d is gone: now %s %v", p.PID, d, ps)
		}
	}
	// The live run, killed in turn, goes with cleanup --run.
	live.cmd.Process.Kill()
	live.cmd.Wait()
	stdout, _, code := run(t, nil, "cleanup", "--run", liveID)
	if left := leftOf(liveID, nil); code != 0 || len(left) > 0 {
		t.Errorf("after killing the live run %s: cleanup exit %d, left %v:\n%s", liveID, code, left, stdout)
	}
	t.Logf("whole test %v", time.Since(t0).Round(time.Millisecond))
}

// TestKernelCleanupHostRunKilledAnyMoment: a short host run (20
// services, none then iptables) killed with kill -9 at random moments of
// its life (seeded, logged: uniform over the duration of one whole run
// measured first), then `proxybench cleanup --run <id>`: whatever the
// moment (before the testbed, while it is built, mid-sync with
// iptables-restore running, during traffic, while it is torn down),
// nothing of the run is left: no pb-<id>-* namespace, folder or testbed
// child.
func TestKernelCleanupHostRunKilledAnyMoment(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore")
	body := "services: {count: 20, endpoints: {count: 1}}\nmodes: [none, iptables]\nrepetitions: 1\ntraffic: {connections: 100, positions: [first]}\n"
	sc := writeFile(t, body)
	t0 := time.Now()
	if stdout, stderr, code := run(t, nil, "run", "--quiet", "--kernel", "host", "--output", filepath.Join(t.TempDir(), "whole.json"), sc); code != 0 {
		t.Fatalf("the whole run: exit %d\n%s%s", code, stdout, stderr)
	}
	whole := time.Since(t0)
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("one whole run: %v; kill moments seeded %d", whole.Round(time.Millisecond), seed)
	for range 4 {
		at := time.Duration(rng.Int64N(int64(whole)))
		id := topology.NewRunID()
		cmd := exec.Command(bin, "run", "--quiet", "--kernel", "host", "--run-id", id, "--output", filepath.Join(t.TempDir(), "r.json"), sc)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(at)
		now, _ := topology.Leftovers()
		namespaces := countRun(now, id)
		cmd.Process.Kill()
		cmd.Wait()
		stdout, stderr, code := run(t, nil, "cleanup", "--run", id)
		if code != 0 {
			t.Errorf("killed at %v: cleanup exit %d\n%s%s", at, code, stdout, stderr)
		}
		if left := leftOf(id, nil); len(left) > 0 {
			t.Errorf("killed at %v (%d namespaces then): left after cleanup: %v\n%s", at.Round(time.Millisecond), namespaces, left, stdout)
		}
		t.Logf("killed at %v (%d namespaces then); cleanup: %s", at.Round(time.Millisecond), namespaces, strings.ReplaceAll(strings.TrimSpace(stdout), "\n", "; "))
	}
}

// TestKernelCleanupKilledKubeProxyNodes (issue 24): a run with
// kube-proxy rows on several nodes (one control plane, one kube-proxy per
// node) killed with SIGKILL while the kube-proxies make their first syncs;
// `cleanup --run` then leaves no process (etcd, kube-apiserver, any
// kube-proxy), namespace or scratch folder (the etcd tmpfs folder
// included) of that run, and the root namespace is as before. 3 nodes x 50
// services by default; PROXYBENCH_KILL_NODES=20 PROXYBENCH_KILL_SERVICES=1000
// is the size (make test-slow does not set them).
func TestKernelCleanupKilledKubeProxyNodes(t *testing.T) {
	testenv.RequireKernel(t, "iptables", "iptables-restore")
	kb := testenv.RequireKube(t)
	testenv.RequireSlow(t, "a control plane and one kube-proxy per node: about 40 s at 3 nodes")
	nodes, services := 3, 50
	for _, v := range []struct {
		env string
		to  *int
	}{{"PROXYBENCH_KILL_NODES", &nodes}, {"PROXYBENCH_KILL_SERVICES", &services}} {
		if s := os.Getenv(v.env); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a positive integer", v.env, s)
			}
			*v.to = n
		}
	}
	before := testenv.RootSnapshot(t)
	body := fmt.Sprintf("services: {count: %d, endpoints: {count: 3}}\nmodes: [iptables]\nimplementation: [kube-proxy]\nrepetitions: 1\n"+
		"topology: {nodes: %d, clientPods: %d}\ntraffic: {connections: 50, positions: [first]}\n", services, nodes, min(nodes, 8))
	id := topology.NewRunID()
	cmd := exec.Command(bin, "run", "--quiet", "--kernel", "host", "--run-id", id, "--output", filepath.Join(t.TempDir(), "r.json"), writeFile(t, body))
	cmd.Env = append(os.Environ(), "PROXYBENCH_KUBE_BIN="+filepath.Dir(kb.KubeProxy))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	kubeProxies := func() int {
		n := 0
		for pid := range topology.ChildProcesses(id) {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.HasPrefix(string(b), "kube-proxy") {
				n++
			}
		}
		return n
	}
	t0 := time.Now()
	for kubeProxies() < nodes {
		if time.Since(t0) > 10*time.Minute {
			t.Fatalf("%d of %d kube-proxies started after 10 min", kubeProxies(), nodes)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	kids := len(topology.ChildProcesses(id))
	now, _ := topology.Leftovers()
	namespaces := countRun(now, id)
	cmd.Process.Kill()
	cmd.Wait()
	t.Logf("killed %v after the start, %d kube-proxies up: %d testbed processes, %d namespaces", time.Since(t0).Round(time.Millisecond), nodes, kids, namespaces)
	if kids < nodes+2 || namespaces < nodes+1 {
		t.Fatalf("the run had %d processes and %d namespaces when killed, want at least %d (etcd, kube-apiserver, %d kube-proxies) and %d", kids, namespaces, nodes+2, nodes, nodes+1)
	}
	stdout, stderr, code := run(t, nil, "cleanup", "--run", id)
	if code != 0 {
		t.Fatalf("cleanup exit %d\n%s%s", code, stdout, stderr)
	}
	t.Logf("cleanup: %s", strings.ReplaceAll(strings.TrimSpace(stdout), "\n", "; "))
	if left := leftOf(id, nil); len(left) > 0 {
		t.Errorf("left after cleanup: %v", left)
	}
	testenv.CompareRoot(t, before, testenv.RootSnapshot(t))
}
