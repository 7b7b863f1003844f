//go:build linux

package kubeproxy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestVersionRefuses: a program that is not kube-proxy is one line naming
// it, what was found (--version's first line, cut) and the fix.
func TestVersionRefuses(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "kube-proxy")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	long := filepath.Join(dir, "chatty")
	if err := os.WriteFile(long, []byte("#!/bin/sh\necho "+strings.Repeat("x", 200)+"\necho second\necho third\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ bin, want string }{
		{filepath.Join(dir, "missing"), "does not exist"},
		{dir, "is a folder"},
		{plain, "is not executable (mode -rw-r--r--); fix: chmod +x"},
		{"/bin/false", "--version` failed (exit status 1)"},
		{long, `printed "` + strings.Repeat("x", 60) + `..." and 2 more lines, not "Kubernetes vX.Y.Z"`},
	} {
		_, err := Version(context.Background(), c.bin)
		if err == nil {
			t.Errorf("%s: accepted", c.bin)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, c.want) || !strings.Contains(msg, "fix:") || strings.Contains(msg, "\n") || strings.Contains(msg, "second") {
			t.Errorf("%s: %q, want one line with %q and a fix", c.bin, msg, c.want)
		}
	}
}

// TestVersionHangs: a binary that never answers --version (or --help) is
// refused after answerTimeout, naming it, even when a child of it keeps
// its output open; it used to hang validate and run forever.
func TestVersionHangs(t *testing.T) {
	defer func(d time.Duration) { answerTimeout = d }(answerTimeout)
	answerTimeout = 300 * time.Millisecond
	dir := t.TempDir()
	for _, c := range []struct{ name, script, want string }{
		{"hangs", "#!/bin/sh\nsleep 300\n", "did not answer --version within 0.3 s; fix:"},
		{"hangs-help", "#!/bin/sh\ncase \"$1\" in --version) echo 'Kubernetes v1.37.2';; *) sleep 300;; esac\n", "did not answer --help within 0.3 s; fix:"},
	} {
		bin := filepath.Join(dir, c.name)
		if err := os.WriteFile(bin, []byte(c.script), 0o755); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := Version(context.Background(), bin); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), bin+" "+c.want) {
				t.Errorf("%s: %v, want %q", c.name, err, c.want)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s: Version still running after a minute", c.name)
		}
	}
}
