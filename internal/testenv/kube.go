package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// KubeBinaries are the Kubernetes programs `make kube` builds into bin/.
type KubeBinaries struct {
	KubeProxy, APIServer, Etcd string
}

// RepoRoot returns the checkout's top folder (the one holding go.mod and
// internal/kubebin), found upwards from the working directory.
func RepoRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "internal", "kubebin", "go.mod")); err == nil {
			return dir, true
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", false
		}
		dir = up
	}
}

// RequireKube returns the paths of bin/kube-proxy, bin/kube-apiserver and
// bin/etcd (or of the folder $PROXYBENCH_KUBE_BIN). It skips the test when
// one is missing, which is a failure under PROXYBENCH_REQUIRE_KERNEL=1
// (make setup builds them: make kube).
func RequireKube(t testing.TB) KubeBinaries {
	t.Helper()
	dir := os.Getenv("PROXYBENCH_KUBE_BIN")
	if dir == "" {
		root, ok := RepoRoot()
		if !ok {
			Skip(t, "cannot find the checkout's bin/ folder (set PROXYBENCH_KUBE_BIN)")
		}
		dir = filepath.Join(root, "bin")
	}
	b := KubeBinaries{filepath.Join(dir, "kube-proxy"), filepath.Join(dir, "kube-apiserver"), filepath.Join(dir, "etcd")}
	for _, p := range []string{b.KubeProxy, b.APIServer, b.Etcd} {
		if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			Skip(t, "needs "+p+" (make kube builds kube-proxy, kube-apiserver and etcd; make setup runs it)")
		}
	}
	return b
}
