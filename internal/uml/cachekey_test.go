//go:build linux

package uml

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCICacheKeyIsTheKernelDir: .ci/cache-key names the CI kernel's cache
// entry by the fragment's hash, under CacheDir, and when that kernel is
// built here its folder is exactly the one Find uses, so a CI cache
// restored under that key is found by make setup and the tests.
func TestCICacheKeyIsTheKernelDir(t *testing.T) {
	out, err := exec.Command("bash", "../../.ci/cache-key").CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "known to apt") {
			t.Skipf("no linux-source package known to apt here: %s", out)
		}
		t.Fatalf(".ci/cache-key: %v\n%s", err, out)
	}
	var line []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "kernel-"+DefaultKernelSeries {
			line = f
		}
	}
	if line == nil {
		t.Fatalf(".ci/cache-key names no kernel-%s cache:\n%s", DefaultKernelSeries, out)
	}
	key, dir := line[1], line[2]
	if !strings.HasSuffix(key, "-"+FragmentHash()) || dir != filepath.Join(CacheDir(), key) {
		t.Errorf("kernel cache %s at %s: want a key ending in the fragment hash %s, under %s", key, dir, FragmentHash(), CacheDir())
	}
	if k, err := Find("uml:" + DefaultKernelSeries); err == nil && filepath.Dir(k.Path) != dir {
		t.Errorf("the built uml:%s is %s, but .ci/cache-key caches %s", DefaultKernelSeries, k.Path, dir)
	}
	if !strings.Contains(string(out), "\nkube ") {
		t.Errorf(".ci/cache-key names no kube cache:\n%s", out)
	}
}
