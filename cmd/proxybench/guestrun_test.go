//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/internal/runner"
	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/topology"
)

// TestGuestRunPlan: the guest's entry, `guest-run PLAN.json`, run here
// on the host's kernel: it runs the plan's modes with the plan's run ID,
// writes the result where the plan says, each row recording where it
// ran (the plan's where: uml), prints progress lines and no report (no
// Markdown, no result line), and leaves nothing behind. A plan that is
// not one is bad input (exit 2).
func TestGuestRunPlan(t *testing.T) {
	testenv.RequireKernel(t)
	sc, err := runner.Catalog().Parse([]byte("services: {count: 10}\nmodes: [none, iptables]\nrepetitions: 1\ntraffic: {connections: 20, positions: [first]}\n"), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	runID := topology.NewRunID()
	out := filepath.Join(dir, "result.json")
	p, err := runner.NewGuestPlan(sc, runner.Options{RunID: runID, Version: "test", Where: runner.WhereGuest, ArtifactDir: filepath.Join(dir, "result")}, "", out)
	if err != nil {
		t.Fatal(err)
	}
	p.Modes = []string{"none"} // the target's modes
	plan := filepath.Join(dir, "plan.json")
	if err := p.Write(plan); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run(t, nil, runner.GuestRunCommand, plan)
	if code != 0 {
		t.Fatalf("guest-run: exit %d\n%s%s", code, stdout, stderr)
	}
	if stdout != "" || !strings.Contains(stderr, "none: traffic") {
		t.Errorf("stdout %q (want none: no report), stderr (want progress lines):\n%s", stdout, stderr)
	}
	r, err := reports.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.RunID != runID || r.Tool != "proxybench test" || r.Partial != "" || len(r.Modes) != 1 || r.Modes[0].Mode != "none" || r.Modes[0].Kernel != string(runner.WhereGuest) {
		t.Errorf("result run %s (%s), partial %q, rows %+v; want run %s, one row none recording %s", r.RunID, r.Tool, r.Partial, r.Modes, runID, runner.WhereGuest)
	}
	if left, _ := topology.Leftovers(); containsRun(left, runID) {
		t.Errorf("run %s left namespaces: %v", runID, left)
	}

	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"argv": ["run"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := run(t, nil, runner.GuestRunCommand, bad); code != 2 || !strings.Contains(stderr, "guest plan") {
		t.Errorf("a bad plan: exit %d, stderr %q; want 2 naming the plan", code, stderr)
	}
}
