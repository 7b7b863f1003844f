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
// finds a built kernel and says "out of date" for one built from another
// fragment (one never built: TestUnbuiltSeries); a path works;
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

// TestUnbuiltSeries: a series never built gets make kernels as its fix
// only when it can be built here (Debian 12's linux-source-6.12 and
// linux-source-6.1, or a source tarball in SourceDir); uml:9.9, which
// Debian lacks, names the series that can be built and the kernels built,
// not an apt-get install of a package that does not exist.
func TestUnbuiltSeries(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("PROXYBENCH_CACHE", cache)
	src := t.TempDir()
	defer func(d string) { SourceDir = d }(SourceDir)
	SourceDir = src
	fakeKernel(t, cache, "6.12", "6.12.118", FragmentHash(), "CONFIG_NF_TABLES=y")

	_, err := Find("uml:6.1")
	if err == nil || !strings.Contains(err.Error(), "make kernels KERNELS=6.1 (needs apt-get install linux-source-6.1") {
		t.Errorf("unbuilt 6.1: err %v, want the make kernels fix", err)
	}
	_, err = Find("uml:9.9")
	if err == nil {
		t.Fatal("uml:9.9 found")
	}
	for _, w := range []string{"kernel uml:9.9: Debian 12 has no linux-source-9.9", "can build here: 6.12, 6.1 (from linux-source-6.12, linux-source-6.1)",
		"built here: uml:6.12", "fix: --kernel uml:6.12 or --kernel uml:6.1", `make kernels KERNELS="6.12 6.1"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("uml:9.9: %q does not say %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "install linux-source-9.9") {
		t.Errorf("uml:9.9: %q suggests a package Debian does not have", err)
	}
	// A source tarball from elsewhere makes its series buildable.
	if err := os.WriteFile(filepath.Join(src, "linux-source-9.9.tar.xz"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(Buildable(), ","); got != "9.9,6.12,6.1" {
		t.Errorf("Buildable() = %s, want 9.9,6.12,6.1", got)
	}
	if _, err := Find("uml:9.9"); err == nil || !strings.Contains(err.Error(), "make kernels KERNELS=9.9") {
		t.Errorf("uml:9.9 with its tarball: err %v, want the make kernels fix", err)
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
