package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/internal/uml"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/topology"
)

// kubeCheckout makes a checkout-like folder co, with co/bin holding a
// copy of this test's proxybench binary, kube-apiserver and etcd (links
// to kb's) and a kube-proxy that appends its arguments to co/calls (one
// line per call) and then execs kb's kube-proxy (a link to it when
// !logCalls). It returns co/bin/proxybench and co/calls.
func kubeCheckout(t *testing.T, kb testenv.KubeBinaries, logCalls bool) (exe, calls string) {
	t.Helper()
	co := t.TempDir()
	_ = os.Chmod(co, 0o755)
	dir := filepath.Join(co, "bin")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe = filepath.Join(dir, "proxybench")
	if err := os.Link(bin, exe); err != nil {
		copyFile(t, bin, exe)
	}
	for _, p := range []string{kb.APIServer, kb.Etcd} {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(real, filepath.Join(dir, filepath.Base(p))); err != nil {
			t.Fatal(err)
		}
	}
	real, err := filepath.EvalSymlinks(kb.KubeProxy)
	if err != nil {
		t.Fatal(err)
	}
	calls = filepath.Join(co, "calls")
	if !logCalls {
		if err := os.Symlink(real, filepath.Join(dir, "kube-proxy")); err != nil {
			t.Fatal(err)
		}
		return exe, calls
	}
	script := "#!/bin/sh\necho \"$*\" >> '" + calls + "'\nexec '" + real + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "kube-proxy"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return exe, calls
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// envWithout is this process's environment without variable name.
func envWithout(name string) []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, name+"=") {
			env = append(env, e)
		}
	}
	return env
}

// kubeCalls counts the calls a kubeCheckout kube-proxy logged: its
// --version, its --help and its dry runs (--write-config-to).
func kubeCalls(t *testing.T, calls string) (version, help, dryRun int) {
	t.Helper()
	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		switch {
		case l == "--version":
			version++
		case l == "--help":
			help++
		case strings.Contains(l, "--write-config-to"):
			dryRun++
		}
	}
	return version, help, dryRun
}

const tinyKubeProxy = "services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\nrepetitions: 1\ntraffic: {connections: 100, positions: [first, last]}\n"

// TestKernelRunFindsKubeBinFromAnotherFolder runs a checkout's
// bin/proxybench from a folder that has no bin/, without
// $PROXYBENCH_KUBE_BIN, for a 10-service iptables (kube-proxy) run on the
// host: it finds kube-proxy, kube-apiserver and etcd beside itself and
// measures the row. The kube-proxy binary is checked once in the whole
// run: one --version, one --help, one dry run (there were 4, 4 and 2
// before cmd's Preflight was handed to the run). A copy of proxybench
// with nothing beside it, run from that folder, is bad input naming
// every folder looked in and the fix, and creates nothing.
func TestKernelRunFindsKubeBinFromAnotherFolder(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy", "iptables-legacy-restore")
	kb := testenv.RequireKube(t)
	exe, calls := kubeCheckout(t, kb, true)
	elsewhere := t.TempDir()
	_ = os.Chmod(elsewhere, 0o755)
	scenario := writeFile(t, tinyKubeProxy+"kernel: host\n")
	env := envWithout("PROXYBENCH_KUBE_BIN")

	runID := topology.NewRunID()
	out := filepath.Join(t.TempDir(), "r.json")
	cmd := exec.Command(exe, "run", "--quiet", "--run-id", runID, "--output", out, scenario)
	cmd.Dir = elsewhere
	cmd.Env = env
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s run from %s: %v\n%s", exe, elsewhere, err, b)
	}
	r, err := reports.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Modes) != 1 || r.Modes[0].Mode != "iptables (kube-proxy)" || len(r.Modes[0].SyncFull) != 1 {
		t.Errorf("rows %+v, want one iptables (kube-proxy) row with its sync.full", r.Modes)
	}
	version, help, dryRun := kubeCalls(t, calls)
	if version != 1 || help != 1 || dryRun != 1 {
		t.Errorf("kube-proxy --version %d times, --help %d, dry run %d; want each once per run (calls: %s)", version, help, dryRun, calls)
	}
	if left := topology.ChildProcesses(runID); len(left) > 0 {
		t.Errorf("processes of run %s left: %v", runID, left)
	}

	// A copy with nothing beside it: nothing found, bad input.
	lone := filepath.Join(t.TempDir(), "proxybench")
	copyFile(t, bin, lone)
	runID = topology.NewRunID()
	cmd = exec.Command(lone, "run", "--quiet", "--run-id", runID, "--output", filepath.Join(t.TempDir(), "r.json"), scenario)
	cmd.Dir = elsewhere
	cmd.Env = env // a PROXYBENCH_KUBE_BIN of the caller's would find them
	_, stderr, code := runCmd(t, cmd, nil)
	if code != 2 {
		t.Fatalf("exit %d, want 2: %s", code, stderr)
	}
	for _, w := range []string{"implementation:", filepath.Dir(lone) + " (beside proxybench) lacks kube-proxy, kube-apiserver, etcd",
		filepath.Join(elsewhere, "bin") + " (bin/ of the current folder) does not exist", "fix: run make kube", "PROXYBENCH_KUBE_BIN"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("error %q does not say %q", strings.TrimSpace(stderr), w)
		}
	}
	assertNoNamespaces(t, runID)
	if ents, _ := os.ReadDir(elsewhere); len(ents) > 0 {
		t.Errorf("the runs left files in their folder: %v", ents)
	}
}

// TestKernelRunFindsKubeBinInGuest: a copy of proxybench kept outside
// any bin/, run from a checkout (its ./bin holds kube-proxy,
// kube-apiserver and etcd) with --kernel uml:6.12, runs its iptables
// (kube-proxy) row in the guest: the guest, whose own folder is its work
// folder, gets the folder the host found (before, it looked for
// /mnt/pb/bin/kube-proxy and exited 2). About 30 s; PROXYBENCH_SLOW=1
// (make test-guest-kube).
func TestKernelRunFindsKubeBinInGuest(t *testing.T) {
	testenv.RequireGuest(t)
	testenv.RequireKernel(t, "iptables-legacy", "iptables-legacy-restore")
	testenv.RequireSlow(t, "boots a guest with a control plane (about 30 s)")
	k, err := uml.Find("uml:" + uml.DefaultKernelSeries)
	if err != nil {
		testenv.Skip(t, err.Error()+" (make setup builds it)")
	}
	exe, _ := kubeCheckout(t, testenv.RequireKube(t), false)
	co := filepath.Dir(filepath.Dir(exe))
	lone := filepath.Join(t.TempDir(), "proxybench")
	copyFile(t, bin, lone)
	_ = os.Chmod(filepath.Dir(lone), 0o755)
	out := filepath.Join(t.TempDir(), "r.json")
	cmd := exec.Command(lone, "run", "--quiet", "--kernel", k.Name, "--output", out, writeFile(t, tinyKubeProxy))
	cmd.Dir = co
	cmd.Env = envWithout("PROXYBENCH_KUBE_BIN")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s run from %s with --kernel %s: %v\n%s", lone, co, k.Name, err, b)
	}
	r, err := reports.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Modes) != 1 || r.Modes[0].Mode != "iptables (kube-proxy)" || r.Modes[0].Kernel != k.Name {
		t.Errorf("rows %+v, want iptables (kube-proxy) on %s", r.Modes, k.Name)
	}
}
