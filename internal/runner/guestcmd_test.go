//go:build linux

package runner

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/internal/uml"
	"github.com/proxybench/proxybench/topology"
)

// TestGuestCommandHelper is not a test: inside a guest it prints the
// guest's marker and kernel release to stdout, and a line to stderr.
func TestGuestCommandHelper(t *testing.T) {
	if !uml.InGuest() {
		t.Skip("helper for TestKernelRunCommandInUML")
	}
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	fmt.Printf("in-guest release=%s\n", strings.TrimSpace(string(b)))
	fmt.Fprintln(os.Stderr, "to-stderr")
}

// TestKernelRunCommandInUML runs this test binary in a guest through
// RunCommandInUML: its stdout comes back alone (no console, no stderr),
// from the guest's kernel, and the run's work folder is gone afterwards.
func TestKernelRunCommandInUML(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireGuest(t)
	k, err := uml.Default()
	if err != nil {
		t.Fatal(err)
	}
	id := topology.NewRunID()
	out, err := RunCommandInUML(context.Background(), GuestCommand{RunID: id, Kernel: k, MemoryMiB: 512,
		Args: []string{"-test.run", "^TestGuestCommandHelper$", "-test.v"}})
	if err != nil {
		t.Fatal(err)
	}
	if out.ExitCode != 0 {
		t.Fatalf("exit %d; console:\n%s", out.ExitCode, out.Guest.Log)
	}
	s := string(out.Stdout)
	if !strings.Contains(s, "in-guest release="+k.Release+"\n") {
		t.Errorf("stdout lacks the guest's release %s:\n%s", k.Release, s)
	}
	if strings.Contains(s, "to-stderr") || strings.Contains(s, "uml: kernel") {
		t.Errorf("stdout carries stderr or console lines:\n%s", s)
	}
	if !strings.Contains(string(out.Guest.Log), "to-stderr") {
		t.Errorf("the console lacks the command's stderr:\n%s", out.Guest.Log)
	}
	if c, err := uml.CleanupOrphans(id, nil); err != nil || len(c.Removed) > 0 {
		t.Errorf("the guest's work folder was left: %v (%v)", c.Removed, err)
	}
	t.Logf("guest %s: boot %v, run %v", k.Name, out.Guest.Boot, out.Guest.Elapsed)
}
