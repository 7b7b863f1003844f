//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/topology"
)

// TestRunSimWithoutRoot: run --engine sim works as an unprivileged user
// (uid 65534 when the test runs as root), creates no namespace, and
// writes a result of the same schema with engine sim and the default
// calibration named.
func TestRunSimWithoutRoot(t *testing.T) {
	dir, err := os.MkdirTemp("", "proxybench-sim") // reachable by uid 65534, unlike t.TempDir's parent
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	_ = os.Chmod(dir, 0o777)
	out := filepath.Join(dir, "sim.json")
	runID := topology.NewRunID()
	cmd := exec.Command(bin, "run", "1k-services", "--run-id", runID, "--engine", "sim", "--modes", "none,iptables,nftables,ipvs,userspace", "--output", out, "--quiet")
	cmd.Dir = dir
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	stdout, stderr, code := runCmd(t, cmd, nil)
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, stderr)
	}
	if !strings.Contains(stdout, "engine: sim") || !strings.Contains(stdout, "default: true") {
		t.Fatalf("stdout does not name the engine and calibration:\n%s", stdout)
	}
	r, err := reports.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Engine != "sim" || r.Machine.KernelWhere != "sim" || len(r.Modes) != 5 {
		t.Fatalf("engine %q, kernelWhere %q, %d modes", r.Engine, r.Machine.KernelWhere, len(r.Modes))
	}
	for _, m := range r.Modes {
		if m.Info["calibration.default"] != "true" || len(m.Lookup) != 4 || m.SyncFullSummary.Count != 3 {
			t.Fatalf("mode %s: info %v, %d positions, %d full syncs", m.Mode, m.Info, len(m.Lookup), m.SyncFullSummary.Count)
		}
	}
	if after, _ := topology.Leftovers(); containsRun(after, runID) {
		t.Fatalf("sim created namespaces: %v", after)
	}
	// run's summary is report --format md's: the findings included.
	md, stderr, code := run(t, nil, "report", out, "--format", "md")
	if code != 0 {
		t.Fatalf("report --format md: exit %d: %s", code, stderr)
	}
	if !strings.Contains(md, "### findings") || !strings.Contains(stdout, md) {
		t.Errorf("run's stdout summary is not report --format md's (findings: in report %v, in run %v)\nrun:\n%s\nreport:\n%s",
			strings.Contains(md, "### findings"), strings.Contains(stdout, "### findings"), stdout, md)
	}
	// Every report format renders it.
	for _, f := range []string{"md", "html", "csv", "junit", "gobench"} {
		if _, stderr, code := run(t, nil, "report", out, "--format", f, "--output", filepath.Join(dir, "r."+f)); code != 0 {
			t.Fatalf("report --format %s: exit %d: %s", f, code, stderr)
		}
	}
}

// TestValidateSimKubeProxy: validate accepts a kube-proxy row with engine
// sim (the refusal is gone), run --engine sim runs it on the shipped
// calibration's kube-proxy costs, and a calibration without them is
// refused with exit 2 naming the fix.
func TestValidateSimKubeProxy(t *testing.T) {
	dir := t.TempDir()
	sc := filepath.Join(dir, "kps.yaml")
	if err := os.WriteFile(sc, []byte("name: kps\nengine: sim\nmodes: [iptables]\nimplementation: [kube-proxy]\nservices: {count: 100}\nchurn: {rate: 10, duration: 5s}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := run(t, nil, "validate", sc); code != 0 {
		t.Fatalf("validate: exit %d: %s", code, stderr)
	}
	out := filepath.Join(dir, "kps.json")
	if _, stderr, code := run(t, nil, "run", sc, "--quiet", "--output", out); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	r, err := reports.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Modes) != 1 || r.Modes[0].Mode != "iptables (kube-proxy)" || r.Modes[0].Churn[0].KubeProxy == nil {
		t.Fatalf("rows: %+v", r.Modes)
	}
	old := filepath.Join(dir, "old.json")
	if err := os.WriteFile(old, []byte(strings.Replace(string(mustRead(t, "../../sim/default_calibration.json")), `"implementations"`, `"x-implementations"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := run(t, nil, "run", sc, "--quiet", "--calibration", old, "--output", filepath.Join(dir, "x.json"))
	if code != 2 || !strings.Contains(stderr, "calibrate --implementation kube-proxy") {
		t.Fatalf("old calibration: exit %d, stderr %s", code, stderr)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
