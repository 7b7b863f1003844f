//go:build linux

package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResolveKubeProxy: a relative kubeProxy.binaries path is found in the
// current folder first, else relative to the checkout holding the default
// bin/ (so shipped scenarios naming bin/kube-proxy-v1.36.3 work from any
// folder); when missing, every place looked is named.
func TestResolveKubeProxy(t *testing.T) {
	repo := t.TempDir()
	bin := filepath.Join(repo, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	kp := filepath.Join(bin, "kube-proxy-v1.36.3")
	if err := os.WriteFile(kp, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PROXYBENCH_KUBE_BIN", bin)
	elsewhere := t.TempDir()
	t.Chdir(elsewhere)
	if got, looked := ResolveKubeProxy("bin/kube-proxy-v1.36.3"); got != kp || looked != nil {
		t.Errorf("from another folder: %s (looked %v), want %s", got, looked, kp)
	}
	// The current folder wins.
	local := filepath.Join(elsewhere, "bin", "kube-proxy-v1.36.3")
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(local, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, _ := ResolveKubeProxy("bin/kube-proxy-v1.36.3"); got != local {
		t.Errorf("with one here: %s, want %s", got, local)
	}
	got, looked := ResolveKubeProxy("bin/kube-proxy-v9")
	if got != filepath.Join(elsewhere, "bin", "kube-proxy-v9") || len(looked) < 2 ||
		!strings.Contains(strings.Join(looked, ","), filepath.Join(bin, "kube-proxy-v9")) {
		t.Errorf("missing: %s, looked %v; want every place tried", got, looked)
	}
	if got, looked := ResolveKubeProxy("/no/such/kube-proxy"); got != "/no/such/kube-proxy" || looked != nil {
		t.Errorf("absolute: %s, %v", got, looked)
	}
}
