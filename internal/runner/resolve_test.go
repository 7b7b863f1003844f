//go:build linux

package runner

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/scenarios"
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

// fakeBin makes dir holding an executable file per name.
func fakeBin(t *testing.T, dir string, names ...string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKubeBinPlaces: $PROXYBENCH_KUBE_BIN alone when set (made absolute
// against the current folder); else the executable's folder, symlinks
// resolved, then bin/ of the current folder, each once.
func TestKubeBinPlaces(t *testing.T) {
	dirs := func(ps []KubeBinPlace) string {
		var s []string
		for _, p := range ps {
			s = append(s, p.Dir+" ("+p.Why+")")
		}
		return strings.Join(s, "; ")
	}
	if got, want := dirs(kubeBinPlaces("kb", "/co/bin/proxybench", "/work")), "/work/kb ($PROXYBENCH_KUBE_BIN)"; got != want {
		t.Errorf("with the variable: %s, want %s", got, want)
	}
	if got, want := dirs(kubeBinPlaces("", "/co/bin/proxybench", "/work")), "/co/bin (beside proxybench); /work/bin (bin/ of the current folder)"; got != want {
		t.Errorf("without: %s, want %s", got, want)
	}
	if got, want := dirs(kubeBinPlaces("", "/co/bin/proxybench", "/co")), "/co/bin (beside proxybench)"; got != want {
		t.Errorf("run from the checkout: %s, want %s", got, want)
	}
	// A symlink to the checkout's bin/proxybench finds that bin/.
	co := t.TempDir()
	fakeBin(t, filepath.Join(co, "bin"), "proxybench")
	link := filepath.Join(t.TempDir(), "proxybench")
	if err := os.Symlink(filepath.Join(co, "bin", "proxybench"), link); err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(filepath.Join(co, "bin"))
	if got := kubeBinPlaces("", link, "/elsewhere"); len(got) != 2 || got[0].Dir != real {
		t.Errorf("through a symlink: %s, want %s first", dirs(got), real)
	}
}

// TestFindKubeBin: the first place holding every name wins, beside
// proxybench before ./bin; a place lacking one is passed over; when none
// holds them the error names each place and what it lacks.
func TestFindKubeBin(t *testing.T) {
	co, cwd := t.TempDir(), t.TempDir()
	exe := filepath.Join(co, "bin", "proxybench")
	fakeBin(t, filepath.Join(co, "bin"), "proxybench", "kube-apiserver")
	places := kubeBinPlaces("", exe, cwd)
	got, err := findKubeBin(places, []string{"kube-apiserver", "etcd"})
	if err == nil || got != "" {
		t.Fatalf("nothing complete: %q, %v", got, err)
	}
	for _, w := range []string{filepath.Join(co, "bin") + " (beside proxybench) lacks etcd", filepath.Join(cwd, "bin") + " (bin/ of the current folder) does not exist"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	// ./bin holds both: found there, from the other folder.
	fakeBin(t, filepath.Join(cwd, "bin"), "kube-apiserver", "etcd")
	if got, err := findKubeBin(places, []string{"kube-apiserver", "etcd"}); err != nil || got != filepath.Join(cwd, "bin") {
		t.Errorf("./bin complete: %q, %v", got, err)
	}
	// Beside proxybench complete too: it comes first.
	fakeBin(t, filepath.Join(co, "bin"), "etcd")
	if got, err := findKubeBin(places, []string{"kube-apiserver", "etcd"}); err != nil || got != filepath.Join(co, "bin") {
		t.Errorf("both complete: %q, %v; want beside proxybench", got, err)
	}
	// Not executable is missing.
	if err := os.Chmod(filepath.Join(co, "bin", "etcd"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := findKubeBin(places, []string{"kube-apiserver", "etcd"}); got != filepath.Join(cwd, "bin") {
		t.Errorf("etcd beside proxybench not executable: %q, want ./bin", got)
	}
	// The variable is the only place.
	t.Setenv(KubeBinEnv, filepath.Join(co, "bin"))
	if _, err := FindKubeBin("kube-apiserver", "etcd"); err == nil || !strings.Contains(err.Error(), "($"+KubeBinEnv+") lacks etcd") || strings.Contains(err.Error(), cwd) {
		t.Errorf("with %s: %v", KubeBinEnv, err)
	}
}

// TestKubeProxyBinariesControlPlaneMissing: a scenario with kube-proxy
// rows and no folder holding kube-apiserver and etcd is an *InputError
// on implementation naming every place looked in and the fix, before any
// kube-proxy binary runs.
func TestKubeProxyBinariesControlPlaneMissing(t *testing.T) {
	empty := t.TempDir()
	t.Setenv(KubeBinEnv, empty)
	sc := &scenarios.Scenario{Modes: []string{"iptables"}, Implementation: []string{scenarios.ImplKubeProxy}}
	_, err := kubeProxyBinaries(t.Context(), sc)
	var ie *InputError
	if !errors.As(err, &ie) || ie.Field != "implementation" || !strings.Contains(ie.Msg, empty+" ($"+KubeBinEnv+") lacks kube-proxy, kube-apiserver, etcd") ||
		!strings.Contains(ie.Fix, "make kube") || !strings.Contains(ie.Fix, KubeBinEnv) {
		t.Errorf("got %v", err)
	}
}

// TestCheckedCovers: Run reuses Preflight's check of the kube-proxy rows
// only for the scenario it was made for, with a subset of its modes (a
// kernel's share); another mode, binary or kube-proxy config is checked
// again.
func TestCheckedCovers(t *testing.T) {
	sc := &scenarios.Scenario{Modes: []string{"iptables", "nftables"}, Implementation: []string{scenarios.ImplBuiltin, scenarios.ImplKubeProxy}}
	c := &Checked{modes: slices.Clone(sc.Modes), scenario: scenarioKey(sc)}
	if !c.covers(sc) {
		t.Error("the scenario checked is not covered")
	}
	sub := *sc
	sub.Modes = []string{"nftables"}
	if !c.covers(&sub) {
		t.Error("a subset of its modes is not covered")
	}
	more := *sc
	more.Modes = []string{"iptables", "ipvs"}
	if c.covers(&more) {
		t.Error("a mode not checked (ipvs) is covered")
	}
	other := *sc
	other.KubeProxy.Binaries = []string{"/opt/kube-proxy"}
	if c.covers(&other) {
		t.Error("another kube-proxy binary is covered")
	}
	cfg := *sc
	cfg.KubeProxy.Config = map[string]any{"featureGates": map[string]any{"X": true}}
	if c.covers(&cfg) {
		t.Error("another kubeProxy.config is covered")
	}
	var none *Checked
	if none.covers(sc) {
		t.Error("nil covers")
	}
}
