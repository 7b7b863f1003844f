//go:build linux

package uml

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeKernel writes a stand-in kernel binary (a shell script answering
// --showconfig and --version) and its meta file into a cache folder.
func fakeKernel(t *testing.T, cache, series, release, hash, config string) string {
	t.Helper()
	dir := filepath.Join(cache, "kernels", release+"-1-"+hash)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\ncase \"$1\" in --showconfig) cat <<'X'\n" + config + "\nX\n;; --version) echo " + release + ";; esac\n"
	if err := os.WriteFile(filepath.Join(dir, "linux"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	meta := "series=" + series + "\npkgver=" + release + "-1\nrelease=" + release + "\nfragment_sha256=" + hash + "\nbuild_seconds=1234\n"
	if err := os.WriteFile(filepath.Join(dir, "meta"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "linux")
}

// TestFindKernels: uml prefers the current source-built 6.12; uml:<series>
// finds a built kernel, says "out of date" for one built from another
// fragment and names make kernels for one never built; a path works;
// Has reads the kernel's own configuration.
func TestFindKernels(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("PROXYBENCH_CACHE", cache)
	full := "CONFIG_NF_TABLES=y\nCONFIG_NF_TABLES_IPV4=y\nCONFIG_IP_VS=y\n# CONFIG_MODULES is not set"
	p612 := fakeKernel(t, cache, "6.12", "6.12.117", FragmentHash(), full)
	fakeKernel(t, cache, "6.1", "6.1.192", "000000000000", full)

	k, err := Find("uml")
	if err != nil || k.Name != "uml:6.12" || k.Path != p612 || k.Modular || k.BuildSeconds != 1234 {
		t.Fatalf("Find(uml) = %+v, %v; want the built 6.12", k, err)
	}
	if _, err := Find("uml:6.1"); err == nil || !strings.Contains(err.Error(), "out of date") {
		t.Errorf("stale 6.1: err %v, want out of date", err)
	}
	if _, err := Find("uml:5.10"); err == nil || !strings.Contains(err.Error(), "make kernels KERNELS=5.10") {
		t.Errorf("unbuilt 5.10: err %v, want the make kernels fix", err)
	}
	byPath, err := Find(p612)
	if err != nil || byPath.Release != "6.12.117" || byPath.Series != "6.12" {
		t.Errorf("Find(path) = %+v, %v", byPath, err)
	}
	missing, err := k.Has("CONFIG_NF_TABLES_IPV4", "CONFIG_IP_VS", "CONFIG_NFT_NUMGEN")
	if err != nil || strings.Join(missing, ",") != "CONFIG_NFT_NUMGEN" {
		t.Errorf("Has: missing %v, err %v; want only CONFIG_NFT_NUMGEN", missing, err)
	}
	var names []string
	for _, k := range Built() {
		names = append(names, k.Name)
	}
	if strings.Join(names, ",") != "uml:6.12,uml:6.1" {
		t.Errorf("Built() = %v, want newest series first", names)
	}
	if _, err := Find("/nonexistent/linux"); err == nil {
		t.Error("a missing path must be an error")
	}
}

func TestVersionLess(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{{"6.1", "6.12", true}, {"6.12", "6.1", false}, {"6.12.9", "6.12.117", true}, {"6.1", "6.1", false}} {
		if got := versionLess(c.a, c.b); got != c.want {
			t.Errorf("versionLess(%s, %s) = %v", c.a, c.b, got)
		}
	}
	if s := series("6.1.176"); s != "6.1" {
		t.Errorf("series = %q", s)
	}
}
