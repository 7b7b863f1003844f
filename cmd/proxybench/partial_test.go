//go:build linux

package main

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/internal/uml"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/topology"
)

// TestSignalDuringTrafficSavesPartial: SIGINT (and SIGTERM) during mode
// iptables' traffic exits 130, removes the testbed and leaves a result
// marked partial holding mode none (finished) and iptables' sync phases,
// which report and compare read and label.
func TestSignalDuringTrafficSavesPartial(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore")
	sigs := []syscall.Signal{syscall.SIGINT, syscall.SIGTERM}
	if testing.Short() {
		sigs = sigs[:1] // the same path; 12 s each
	}
	for _, sig := range sigs {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "r.json")
			body := "services: {count: 50}\nmodes: [none, iptables]\nrepetitions: 1\ntraffic: {connections: 20000, positions: [first]}\n"
			runID := topology.NewRunID()
			cmd := exec.Command(bin, "run", writeFile(t, body), "--run-id", runID, "--output", out)
			var stdout bytes.Buffer
			cmd.Stdout = &stdout
			stderrPipe, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			sent := false
			sc := bufio.NewScanner(stderrPipe)
			for sc.Scan() {
				stderr.WriteString(sc.Text() + "\n")
				if !sent && strings.HasPrefix(sc.Text(), "iptables: traffic") {
					time.Sleep(500 * time.Millisecond)
					_ = cmd.Process.Signal(sig)
					sent = true
				}
			}
			err = cmd.Wait()
			var ee *exec.ExitError
			if !sent || !errors.As(err, &ee) || ee.ExitCode() != 130 {
				t.Fatalf("signal sent %t, exit %v, want 130; stderr:\n%s", sent, err, stderr.String())
			}
			if !strings.Contains(stderr.String(), "interrupted by "+map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM"}[sig]) ||
				!strings.Contains(stderr.String(), "partial result (finished: none, iptables (partly)) saved at "+out) {
				t.Errorf("stderr does not say why and where:\n%s", stderr.String())
			}
			if left, _ := topology.Leftovers(); countRun(left, runID) != 0 {
				t.Errorf("testbed %s left: %v", runID, left)
			}
			r, err := reports.Read(out)
			if err != nil {
				t.Fatal(err)
			}
			if r.Partial == "" || len(r.Modes) != 2 || r.Modes[0].Partial != "" || len(r.Modes[0].Lookup) != 1 ||
				r.Modes[1].Partial == "" || len(r.Modes[1].SyncFull) != 1 || len(r.Modes[1].Lookup) != 0 {
				t.Fatalf("partial result: partial %q, modes %d: %+v", r.Partial, len(r.Modes), r.Modes)
			}
			if !strings.Contains(stdout.String(), "PARTIAL RESULT") {
				t.Errorf("stdout summary does not say partial:\n%s", stdout.String())
			}
			rep, rerr, code := run(t, nil, "report", out)
			if code != 0 || !strings.Contains(rep, "PARTIAL RESULT") || !strings.Contains(rep, "iptables: stopped early") {
				t.Errorf("report exit %d (%s):\n%s", code, rerr, rep)
			}
			cmp, cerr, code := run(t, nil, "compare", out, out)
			if code != 0 || !strings.Contains(cerr, "is a partial result") {
				t.Errorf("compare exit %d (%s):\n%s", code, cerr, cmp)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Errorf("output folder holds %v, want only r.json (no temporary files)", ents)
			}
		})
	}
}

// TestSignalDuringGuestRunKeepsFinishedModes: SIGINT while the
// user-mode-linux guest measures iptables' traffic kills the guest, yet the
// partial result keeps mode none, which the guest had finished (its run
// checkpoints after every mode into the host folder), as that kernel's.
func TestSignalDuringGuestRunKeepsFinishedModes(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore")
	k, err := uml.Find("uml:" + uml.DefaultKernelSeries)
	if err != nil {
		testenv.Skip(t, err.Error()+" (make setup builds it)")
	}
	out := filepath.Join(t.TempDir(), "r.json")
	// 3000 connections take the guest several seconds per mode.
	body := "services: {count: 50}\nmodes: [none, iptables]\nrepetitions: 1\ntraffic: {connections: 3000, positions: [first]}\n"
	cmd := exec.Command(bin, "run", writeFile(t, body), "--kernel", k.Name, "--run-id", topology.NewRunID(), "--output", out)
	cmd.Stdout = &bytes.Buffer{}
	stderrPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	sent := false
	sc := bufio.NewScanner(stderrPipe)
	for sc.Scan() {
		stderr.WriteString(sc.Text() + "\n")
		if !sent && strings.Contains(sc.Text(), "iptables: traffic") {
			time.Sleep(200 * time.Millisecond)
			_ = cmd.Process.Signal(syscall.SIGINT)
			sent = true
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !sent || !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("signal sent %t, exit %v, want 130; stderr:\n%s", sent, err, stderr.String())
	}
	r, err := reports.Read(out)
	if err != nil {
		t.Fatalf("no partial result: %v; stderr:\n%s", err, stderr.String())
	}
	if r.Partial == "" || len(r.Modes) != 1 || r.Modes[0].Mode != "none" || r.Modes[0].Kernel != k.Name ||
		len(r.Modes[0].Lookup) != 1 || r.Modes[0].Lookup[0].Latency.Count == 0 {
		t.Fatalf("partial result: partial %q, modes %+v; want the guest's finished mode none", r.Partial, r.Modes)
	}
	if !strings.Contains(stderr.String(), "partial result (finished: none) saved at "+out) {
		t.Errorf("stderr does not say where:\n%s", stderr.String())
	}
}
