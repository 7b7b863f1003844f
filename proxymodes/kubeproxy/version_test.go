//go:build linux

package kubeproxy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
