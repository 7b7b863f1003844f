package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/internal/uml"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/topology"
)

// TestRunNFTablesAndIPVSInBuiltKernel boots the guest kernel make setup
// builds (uml:6.12, everything built in) and runs none, ipvs and nftables
// in that one guest: no split, no module loading, one report with IPVS and
// nftables side by side. CI (make setup; PROXYBENCH_REQUIRE_KERNEL=1) has
// the kernel, so there this never skips.
func TestRunNFTablesAndIPVSInBuiltKernel(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore", "ipset", "nft", "ipvsadm")
	k, err := uml.Find("uml:" + uml.DefaultKernelSeries)
	if err != nil {
		testenv.Skip(t, err.Error()+" (make setup builds it)")
	}
	body := "services: {count: 40}\nmodes: [none, ipvs, nftables]\nrepetitions: 1\ntraffic: {connections: 100, positions: [first, last]}\n"
	out := filepath.Join(t.TempDir(), "r.json")
	stdout, stderr, code := run(t, nil, "run", "--quiet", "--kernel", k.Name, "--output", out, writeFile(t, body))
	if code != 0 {
		t.Fatalf("exit %d:\n%s\n%s", code, stdout, stderr)
	}
	r, err := reports.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range r.Modes {
		got = append(got, m.Mode+"@"+m.Kernel)
		if len(m.SyncFull) != 1 || m.SyncFull[0].Wall <= 0 {
			t.Errorf("%s: sync.full %+v", m.Mode, m.SyncFull)
		}
		for _, p := range m.Lookup {
			if p.Errors+p.Misses != 0 || p.Latency.Count != 100 {
				t.Errorf("%s at %s: %d errors, %d misses, n %d: %v", m.Mode, p.Position, p.Errors, p.Misses, p.Latency.Count, p.ErrorText)
			}
		}
	}
	want := "none@" + k.Name + " ipvs@" + k.Name + " nftables@" + k.Name
	if strings.Join(got, " ") != want {
		t.Errorf("modes %v, want %s (all in one guest kernel)", got, want)
	}
	if len(r.Kernels) != 1 || r.Kernels[0].Name != k.Name || r.Kernels[0].Release != k.Release ||
		r.Kernels[0].InitNs <= 0 || r.Kernels[0].BootNs < r.Kernels[0].InitNs {
		t.Errorf("kernels recorded: %+v, want one %s (%s) with its boot times", r.Kernels, k.Name, k.Release)
	}
	if r.Machine.Kernel != k.Release || r.Machine.KernelWhere != "uml" {
		t.Errorf("machine kernel %q (%s), want %s in uml", r.Machine.Kernel, r.Machine.KernelWhere, k.Release)
	}
	if !strings.Contains(stdout, "| ipvs |") || !strings.Contains(stdout, "| nftables |") {
		t.Errorf("report lacks ipvs and nftables side by side:\n%s", stdout)
	}
	if strings.Contains(stderr, "module") {
		t.Errorf("a built-in kernel loads no modules; stderr:\n%s", stderr)
	}
}

// TestKernelFlagErrors: an unknown kernel, auto in a list, a kernel
// that is not built and a series Debian 12 has no source for are bad
// input (exit 2) naming the fix.
func TestKernelFlagErrors(t *testing.T) {
	testenv.RequireKernel(t)
	body := "services: {count: 5}\nmodes: [none]\nrepetitions: 1\n"
	for _, c := range []struct{ kernel, want string }{
		{"kvm", "uml:6.12"},
		{"auto,host", "auto cannot be combined"},
		{"uml:6.1", "make kernels KERNELS=6.1"},
		{"uml:4.19", "Debian 12 has no linux-source-4.19"},
	} {
		_, stderr, code := run(t, []string{"PROXYBENCH_CACHE=" + t.TempDir()}, "run", "--quiet", "--kernel", c.kernel, writeFile(t, body))
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("--kernel %s: exit %d, stderr %q; want exit 2 and %q", c.kernel, code, stderr, c.want)
		}
	}
}

// TestKernelRunWithKubeProxy runs a small scenario with iptables and
// nftables, each builtin and kube-proxy (issue 13), and checks the rows
// side by side in the result and report, the kube-proxy rows' sync.full
// read back from the node (checkReadBack), their cold start and restart
// (checkColdStart), that no process of the run ever sits in the root
// network namespace or listens there, and that after the run no process
// or namespace of it is left and the root namespace's rules, routes and
// sysctls are unchanged.
//
// The sync-disruption phase is scenarios/cold-start-10k.yaml's, small,
// on the same rows (once a test of its own, TestKernelRunColdStartWithKubeProxy:
// one run saves two control planes and kube-proxy first syncs).
func TestKernelRunWithKubeProxy(t *testing.T) {
	testenv.RequireKernel(t, "iptables", "iptables-legacy", "iptables-legacy-restore", "nft")
	kb := testenv.RequireKube(t)
	rootBefore := testenv.RootSnapshot(t)
	runID := topology.NewRunID()
	out := filepath.Join(t.TempDir(), "r.json")
	body := "services: {count: 30}\nmodes: [none, iptables, nftables]\nimplementation: [builtin, kube-proxy]\nrepetitions: 1\n" +
		"traffic: {connections: 100, positions: [first, last]}\n" +
		"syncDisruption: {syncs: [cold, restart], services: 8, probes: 2, timeout: 250ms, settle: 20s}\n"
	stdout := runWatched(t, runID, kb, "run", "--quiet", "--kernel", "host", "--run-id", runID, "--output", out, writeFile(t, body))
	r, err := reports.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, m := range r.Modes {
		rows = append(rows, m.Mode)
		if m.Implementation == "kube-proxy" {
			kp := m.KubeProxy
			if kp == nil || kp.Version == "" || kp.Probed == 0 || len(kp.Owned) == 0 || kp.CPUNs <= 0 || len(m.SyncFull) != 1 || m.SyncFull[0].Wall <= 0 {
				t.Errorf("%s: record %+v, sync.full %+v", m.Mode, kp, m.SyncFull)
				continue
			}
			if _, err := os.Stat(kp.Log); err != nil || !strings.HasPrefix(kp.Log, strings.TrimSuffix(out, ".json")+"/") {
				t.Errorf("%s: log %s not kept beside the result %s: %v", m.Mode, kp.Log, out, err)
			}
			checkReadBack(t, m)
		}
		if m.Mode != "none" {
			checkColdStart(t, m)
		}
		for _, p := range m.Lookup {
			if p.Errors+p.Misses != 0 || p.Latency.Count != 100 {
				t.Errorf("%s at %s: %d errors, %d misses, n %d", m.Mode, p.Position, p.Errors, p.Misses, p.Latency.Count)
			}
		}
	}
	if want := "none iptables iptables (kube-proxy) nftables nftables (kube-proxy)"; strings.Join(rows, " ") != want {
		t.Errorf("rows %q, want %q", strings.Join(rows, " "), want)
	}
	if !strings.Contains(stdout, "### builtin vs kube-proxy, side by side") {
		t.Errorf("report lacks the side-by-side table:\n%s", stdout)
	}
	if !strings.Contains(stdout, "kube-proxy's own: sync / end") {
		t.Errorf("report lacks kube-proxy's own account in the sync table:\n%s", stdout)
	}
	if left := topology.ChildProcesses(runID); len(left) > 0 {
		t.Errorf("processes of run %s left: %v", runID, left)
	}
	if left, _ := topology.Leftovers(); containsRun(left, runID) {
		t.Errorf("run %s left namespaces: %v", runID, left)
	}
	testenv.CompareRoot(t, rootBefore, testenv.RootSnapshot(t))
}

// checkColdStart checks a row's sync-disruption windows (syncs: [cold,
// restart], 8 services probed). The cold start really starts from a node
// without rules (every baseline probe fails: builtin's Cleanup, or
// kube-proxy --cleanup with kube-proxy's own back end), and every probed
// service answers after the new proxier's start; the restart keeps
// answering. A kube-proxy row's windows also hold kube-proxy's own
// account of its first sync, and its record lists the two halted
// processes.
func checkColdStart(t *testing.T, m reports.ModeResult) {
	t.Helper()
	if len(m.SyncDisruption) != 2 {
		t.Errorf("%s: windows %+v, want cold and restart", m.Mode, m.SyncDisruption)
		return
	}
	cold, restart := m.SyncDisruption[0], m.SyncDisruption[1]
	if cold.BeforeAttempts == 0 || cold.BeforeFailed != cold.BeforeAttempts {
		t.Errorf("%s cold: %d of %d baseline probes failed, want all (the rules were removed)", m.Mode, cold.BeforeFailed, cold.BeforeAttempts)
	}
	if cold.Probed != 8 || cold.Answered != 8 || cold.StartNs < 0 || cold.FirstAnswerNs <= 0 || cold.LastAnswerNs < cold.FirstAnswerNs {
		t.Errorf("%s cold: probed %d answered %d, start %d ns, first/last %d/%d ns; want 8 answering after a start inside the window",
			m.Mode, cold.Probed, cold.Answered, cold.StartNs, cold.FirstAnswerNs, cold.LastAnswerNs)
	}
	if restart.Answered != 8 || restart.BeforeAttempts == 0 || restart.BeforeFailed == restart.BeforeAttempts {
		t.Errorf("%s restart: answered %d, baseline %d of %d failed; want 8, and the baseline answering (the rules are there)",
			m.Mode, restart.Answered, restart.BeforeFailed, restart.BeforeAttempts)
	}
	if m.Implementation != "kube-proxy" {
		return
	}
	if cold.StartNs <= 0 {
		t.Errorf("%s cold: kube-proxy started %d ns into the window, want after its start", m.Mode, cold.StartNs)
	}
	for _, w := range []struct {
		name string
		w    reports.SyncWindow
	}{{"cold", cold}, {"restart", restart}} {
		if w.w.ProxyMetricNs <= 0 || w.w.ProxySyncEndNs < w.w.ProxyMetricNs {
			t.Errorf("%s %s: kube-proxy's own sync %d ns ending %d ns after its start; want a sync that ends after it began", m.Mode, w.name, w.w.ProxyMetricNs, w.w.ProxySyncEndNs)
		}
	}
	if kp := m.KubeProxy; kp == nil || len(kp.Earlier) != 2 || !strings.HasPrefix(kp.Earlier[0].Why, "halt+cleanup") || kp.Earlier[1].Why != "halt" {
		t.Errorf("%s: record's earlier processes %+v, want the cold start's halt+cleanup and the restart's halt", m.Mode, kp)
	}
}

// checkReadBack checks a kube-proxy row's sync.full reports what
// kube-proxy installed, read back from the node (as builtin rows count
// theirs), not the service count: at least a service and an endpoint
// rule or element per service; bytes for iptables (its saved KUBE-
// lines), none for nftables (not seen); and the back end it ran with,
// named with the tool that read it (iptables: legacy, as a run's
// kube-proxy rows default to). TestKernelProxierReadBack (slow) checks
// the same on the Proxier alone.
func checkReadBack(t *testing.T, m reports.ModeResult) {
	t.Helper()
	st := m.SyncFull[0]
	if st.Objects < 2*m.Services {
		t.Errorf("%s: sync.full objects %d for %d services, want kube-proxy's rules read back (>= %d); ruleset %q",
			m.Mode, st.Objects, m.Services, 2*m.Services, m.Info["ruleset"])
	}
	var backend, tool string
	switch m.BaseMode {
	case "iptables":
		backend, tool = "legacy", "iptables-legacy-save"
		if st.Bytes < 50*st.Objects {
			t.Errorf("%s: %d bytes for %d rules, want the saved KUBE- lines' size", m.Mode, st.Bytes, st.Objects)
		}
	case "nftables":
		backend, tool = "knftables", "nft -j list table ip kube-proxy"
		if st.Bytes != 0 {
			t.Errorf("%s: %d bytes, want 0 (not seen)", m.Mode, st.Bytes)
		}
	default:
		t.Errorf("%s: base mode %q", m.Mode, m.BaseMode)
	}
	if m.Info["backend"] != backend || !strings.Contains(m.Info["ruleset"], tool) {
		t.Errorf("%s: info backend %q ruleset %q, want %q read with %s", m.Mode, m.Info["backend"], m.Info["ruleset"], backend, tool)
	}
}

// runWatched runs this binary with args (a run of runID with kube-proxy
// rows, kb's binaries) and returns its stdout. While it runs it checks
// every 100 ms that no process of the run is in the root network
// namespace and none listens there; it fails the test if the run fails
// or no kube-proxy, kube-apiserver or etcd of the run was ever seen.
func runWatched(t *testing.T, runID string, kb testenv.KubeBinaries, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "PROXYBENCH_KUBE_BIN="+filepath.Dir(kb.KubeProxy))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	rootNet, _ := os.Readlink("/proc/self/ns/net")
	sawKube := false
	var runErr error
watch:
	for {
		select {
		case runErr = <-done:
			break watch
		case <-time.After(100 * time.Millisecond):
		}
		pids := []int{cmd.Process.Pid}
		for pid := range topology.ChildProcesses(runID) {
			pids = append(pids, pid)
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			if strings.HasPrefix(string(comm), "kube-") || strings.HasPrefix(string(comm), "etcd") {
				sawKube = true
			}
			if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && ns == rootNet {
				t.Errorf("process %d (%s) of run %s is in the root network namespace", pid, bytes.TrimSpace(comm), runID)
			}
		}
		if l := rootListeners(pids); len(l) > 0 {
			t.Errorf("run %s listens in the root namespace: %v", runID, l)
		}
	}
	if runErr != nil {
		t.Fatalf("run: %v\n%s\n%s", runErr, stdout.String(), stderr.String())
	}
	if !sawKube {
		t.Error("no kube-proxy, kube-apiserver or etcd of the run was seen while it ran")
	}
	return stdout.String()
}

// rootListeners returns the listening TCP sockets of the root network
// namespace (this process's /proc/net/tcp and tcp6) that one of pids holds.
func rootListeners(pids []int) []string {
	listen := map[string]string{} // socket inode -> local address
	for _, f := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		b, _ := os.ReadFile(f)
		for _, l := range strings.Split(string(b), "\n")[1:] {
			x := strings.Fields(l)
			if len(x) > 9 && x[3] == "0A" { // TCP_LISTEN
				listen[x[9]] = x[1]
			}
		}
	}
	var out []string
	for _, pid := range pids {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
			if ino, ok := strings.CutPrefix(l, "socket:["); ok {
				if a, ok := listen[strings.TrimSuffix(ino, "]")]; ok {
					out = append(out, fmt.Sprintf("pid %d: %s", pid, a))
				}
			}
		}
	}
	return out
}

// TestKernelHostModesFix: on a host kernel without IP_VS, `run --kernel
// host` of a scenario with ipvs exits 2, and its fix names the --modes
// this kernel can run (the new-user check ran the README's scenario with
// --kernel host and got only "or drop the mode").
func TestKernelHostModesFix(t *testing.T) {
	testenv.RequireKernel(t)
	body := "services: {count: 5}\nmodes: [none, iptables, ipvs]\nrepetitions: 1\n"
	_, stderr, code := run(t, nil, "validate", "--kernel", "host", writeFile(t, body))
	if code == 0 {
		t.Skip("this host kernel runs ipvs")
	}
	if code != 2 || !strings.Contains(stderr, "--modes none,iptables runs what this kernel can") {
		t.Errorf("exit %d, stderr %q; want exit 2 and the --modes that run here", code, stderr)
	}
}
