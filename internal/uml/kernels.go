//go:build linux

package uml

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Fragment is the config fragment (kconfig/proxybench.config) that
// kconfig/build.sh (make kernels) merges onto `make ARCH=um defconfig`.
//
//go:embed kconfig/proxybench.config
var Fragment []byte

// FragmentHash is the first 12 hex digits of Fragment's sha256: the cache
// key build.sh uses (<cache>/kernels/<pkgver>-<hash>/).
func FragmentHash() string {
	s := sha256.Sum256(Fragment)
	return hex.EncodeToString(s[:])[:12]
}

// CacheDir is where make kernels puts its kernels:
// $PROXYBENCH_CACHE/kernels, default /var/cache/proxybench/kernels.
func CacheDir() string {
	c := os.Getenv("PROXYBENCH_CACHE")
	if c == "" {
		c = "/var/cache/proxybench"
	}
	return filepath.Join(c, "kernels")
}

// DebianName is the name of Debian's prebuilt user-mode-linux kernel
// (package user-mode-linux, /usr/bin/linux.uml, IP_VS and netfilter as
// modules under ModulesRoot).
const DebianName = "uml:debian"

// Kernel is one user-mode-linux kernel a guest can boot.
type Kernel struct {
	// Name is how --kernel and reports name it: "uml:6.12" or "uml:6.1"
	// for a kernel built by make kernels, DebianName for Debian's, or the
	// binary's path for any other.
	Name string
	// Path is the kernel binary.
	Path string
	// Release is its uname -r.
	Release string
	// Series is the major.minor version ("6.12").
	Series string
	// Modular is true when the kernel loads its netfilter code as modules
	// (Debian's): the guest runs modprobe for Guest.Modules from
	// ModulesRoot/<Release>. A kernel built by make kernels has everything
	// built in and loads nothing.
	Modular bool
	// Source says where it came from (package and version, fragment hash).
	Source string
	// Stale is set when a built kernel's fragment differs from this
	// binary's Fragment (make kernels rebuilds it).
	Stale string
	// BuildSeconds is make kernels' build time, when known.
	BuildSeconds int

	cfgOnce sync.Once
	cfg     map[string]string
	cfgErr  error
}

// Config returns the kernel's build configuration (CONFIG_X -> "y", "m"
// or a value; options not set are absent), read from the binary itself
// (`linux --showconfig`, which every UML kernel supports: arch/um/kernel/config.c).
func (k *Kernel) Config() (map[string]string, error) {
	k.cfgOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, k.Path, "--showconfig").Output()
		if err != nil {
			k.cfgErr = fmt.Errorf("%s --showconfig: %w", k.Path, err)
			return
		}
		k.cfg = parseConfig(out)
		if len(k.cfg) == 0 {
			k.cfgErr = fmt.Errorf("%s --showconfig printed no configuration; is it a user-mode-linux kernel?", k.Path)
		}
	})
	return k.cfg, k.cfgErr
}

func parseConfig(b []byte) map[string]string {
	cfg := map[string]string{}
	s := bufio.NewScanner(bytes.NewReader(b))
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(s.Text()), "="); ok && strings.HasPrefix(k, "CONFIG_") {
			cfg[k] = strings.Trim(v, `"`)
		}
	}
	return cfg
}

// Has reports whether every option is built in (=y) or, in a modular
// kernel, a module (=m); missing lists those that are not.
func (k *Kernel) Has(opts ...string) (missing []string, err error) {
	cfg, err := k.Config()
	if err != nil {
		return nil, err
	}
	for _, o := range opts {
		v := cfg[o]
		if v != "y" && !(v == "m" && k.Modular) {
			missing = append(missing, o)
		}
	}
	return missing, nil
}

// debianKernel returns Debian's kernel, or an error naming the fix.
func debianKernel() (*Kernel, error) {
	path, err := exec.LookPath(DebianBinary)
	if err != nil {
		return nil, errors.New("user-mode-linux is not installed (no linux.uml on PATH); fix: run make setup (apt-get install user-mode-linux)")
	}
	ents, err := os.ReadDir(ModulesRoot)
	if err != nil || len(ents) == 0 {
		return nil, fmt.Errorf("user-mode-linux modules missing under %s; fix: run make setup (apt-get install user-mode-linux)", ModulesRoot)
	}
	rel := ents[len(ents)-1].Name()
	return &Kernel{Name: DebianName, Path: path, Release: rel, Series: series(rel), Modular: true,
		Source: "Debian package user-mode-linux"}, nil
}

func series(release string) string {
	f := strings.SplitN(release, ".", 3)
	if len(f) < 2 {
		return release
	}
	return f[0] + "." + strings.TrimRightFunc(f[1], func(r rune) bool { return r < '0' || r > '9' })
}

// readMeta reads a build's meta file (key=value lines, see kconfig/build.sh).
func readMeta(path string) map[string]string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	m := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

// Built returns the kernels make kernels built under CacheDir, newest
// first within a series; a kernel built from another fragment is listed
// with Stale set.
func Built() []*Kernel {
	metas, _ := filepath.Glob(filepath.Join(CacheDir(), "*", "meta"))
	var out []*Kernel
	for _, mp := range metas {
		m := readMeta(mp)
		bin := filepath.Join(filepath.Dir(mp), "linux")
		if m == nil || m["series"] == "" {
			continue
		}
		if st, err := os.Stat(bin); err != nil || st.Mode()&0o111 == 0 {
			continue
		}
		k := &Kernel{Name: "uml:" + m["series"], Path: bin, Release: m["release"], Series: m["series"],
			Source: fmt.Sprintf("make kernels: linux-source-%s %s, fragment %s", m["series"], m["pkgver"], m["fragment_sha256"])}
		k.BuildSeconds, _ = strconv.Atoi(m["build_seconds"])
		if m["fragment_sha256"] != FragmentHash() {
			k.Stale = fmt.Sprintf("built from fragment %s, this proxybench's is %s; run make kernels", m["fragment_sha256"], FragmentHash())
		}
		out = append(out, k)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Series != out[j].Series {
			return versionLess(out[j].Series, out[i].Series)
		}
		if (out[i].Stale == "") != (out[j].Stale == "") {
			return out[i].Stale == ""
		}
		return versionLess(out[j].Release, out[i].Release)
	})
	return out
}

// versionLess compares dotted versions numerically ("6.1" < "6.12").
func versionLess(a, b string) bool {
	fa, fb := strings.FieldsFunc(a, notDigit), strings.FieldsFunc(b, notDigit)
	for i := 0; i < len(fa) && i < len(fb); i++ {
		x, _ := strconv.Atoi(fa[i])
		y, _ := strconv.Atoi(fb[i])
		if x != y {
			return x < y
		}
	}
	return len(fa) < len(fb)
}

func notDigit(r rune) bool { return r < '0' || r > '9' }

// Kernels returns every user-mode-linux kernel found: the ones make
// kernels built (newest series first), then Debian's.
func Kernels() []*Kernel {
	out := Built()
	if d, err := debianKernel(); err == nil {
		out = append(out, d)
	}
	return out
}

// DefaultKernelSeries is the series `uml` prefers when make kernels built it.
const DefaultKernelSeries = "6.12"

// Find resolves a kernel name: "uml" (the default guest kernel: the
// source-built DefaultKernelSeries when present and current, else any
// current source-built kernel, else Debian's), "uml:<series>" (a kernel make
// kernels built), DebianName, or a path to a UML kernel binary. The error
// names the fix. It is the first of Candidates.
func Find(name string) (*Kernel, error) {
	ks, err := Candidates(name)
	if err != nil {
		return nil, err
	}
	return ks[0], nil
}

// Candidates lists every kernel name may resolve to, best first (Find's
// choice first), so that a caller can take the first whose configuration
// runs what it needs: for "uml" every current source-built kernel,
// DefaultKernelSeries first, else Debian's; for "uml:<series>" every
// current build of that series in the cache (Built's order: newest
// release first), since make kernels keeps one folder per package
// version and fragment; one kernel for the other names. A stale build
// (another fragment) is never listed; with only stale builds of the
// series the error says to run make kernels; for a series never built it
// names make kernels when the series can be built here (Buildable), else
// the series that can. Never empty without an error.
func Candidates(name string) ([]*Kernel, error) {
	switch {
	case name == "uml":
		var current, rest []*Kernel
		for _, k := range Built() {
			switch {
			case k.Stale != "":
			case k.Series == DefaultKernelSeries:
				current = append(current, k)
			default:
				rest = append(rest, k)
			}
		}
		if current = append(current, rest...); len(current) > 0 {
			return current, nil
		}
		d, err := debianKernel()
		if err != nil {
			return nil, err
		}
		return []*Kernel{d}, nil
	case strings.HasPrefix(name, "uml:") && name != DebianName:
		want := strings.TrimPrefix(name, "uml:")
		var stale *Kernel
		var current []*Kernel
		for _, k := range Built() {
			if k.Series == want {
				if k.Stale == "" {
					current = append(current, k)
				} else if stale == nil {
					stale = k
				}
			}
		}
		if len(current) > 0 {
			return current, nil
		}
		if stale != nil {
			return nil, fmt.Errorf("kernel %s is out of date (%s)", name, stale.Stale)
		}
		if !slices.Contains(Buildable(), want) {
			return nil, unbuildable(name, want)
		}
		return nil, fmt.Errorf("kernel %s is not built under %s; fix: make kernels KERNELS=%s (needs apt-get install linux-source-%s bc flex bison; about 25 min)", name, CacheDir(), want, want)
	}
	k, err := findOne(name)
	if err != nil {
		return nil, err
	}
	return []*Kernel{k}, nil
}

// SourceSeries are the series whose linux-source-<series> package Debian
// 12 ships (linux-source-6.12 and linux-source-6.1, the Makefile's
// KERNELS), newest first: what make kernels can build on any Debian 12.
var SourceSeries = []string{"6.12", "6.1"}

// SourceDir is where a linux-source-<series> package puts its tarball
// (linux-source-<series>.tar.xz), which kconfig/build.sh reads.
var SourceDir = "/usr/src"

// Buildable lists the series make kernels can build here, newest first:
// SourceSeries, and any other series whose source tarball is in SourceDir
// (a linux-source package from elsewhere).
func Buildable() []string {
	out := slices.Clone(SourceSeries)
	tarballs, _ := filepath.Glob(filepath.Join(SourceDir, "linux-source-*.tar.xz"))
	for _, t := range tarballs {
		s := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(t), "linux-source-"), ".tar.xz")
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return versionLess(out[j], out[i]) })
	return out
}

// unbuildable is the error for uml:<want>, a series neither built nor
// buildable here (no linux-source-<want>: Debian has none for it): it names
// the series that are (Buildable) and the kernels already built, so the
// fix is a --kernel that works, not an apt-get install that cannot.
func unbuildable(name, want string) error {
	series := Buildable()
	var pkgs, flags []string
	for _, s := range series {
		pkgs = append(pkgs, "linux-source-"+s)
		flags = append(flags, "--kernel uml:"+s)
	}
	built := ""
	var names []string
	for _, k := range Built() {
		if k.Stale == "" && !slices.Contains(names, k.Name) {
			names = append(names, k.Name)
		}
	}
	if len(names) > 0 {
		built = "; built here: " + strings.Join(names, ", ")
	}
	return fmt.Errorf("kernel %s: Debian 12 has no linux-source-%s to build it from; the series make kernels can build here: %s (from %s)%s; fix: %s (make kernels KERNELS=%q builds them, about 25 min each), or --kernel PATH of a user-mode-linux kernel binary",
		name, want, strings.Join(series, ", "), strings.Join(pkgs, ", "), built, strings.Join(flags, " or "), strings.Join(series, " "))
}

// findOne resolves DebianName or a kernel binary's path.
func findOne(name string) (*Kernel, error) {
	switch {
	case name == DebianName:
		return debianKernel()
	case strings.Contains(name, "/"):
		abs, err := filepath.Abs(name)
		if err != nil {
			return nil, err
		}
		st, err := os.Stat(abs)
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("kernel %s: not an executable file; give the path of a user-mode-linux kernel binary", name)
		}
		k := &Kernel{Name: name, Path: abs, Source: "binary " + abs}
		if m := readMeta(filepath.Join(filepath.Dir(abs), "meta")); m != nil && m["release"] != "" {
			k.Release, k.Series = m["release"], m["series"]
		} else if out, err := exec.Command(abs, "--version").Output(); err == nil {
			k.Release = strings.TrimSpace(string(out))
			k.Series = series(k.Release)
		} else {
			return nil, fmt.Errorf("kernel %s: %s --version failed (%v); is it a user-mode-linux kernel?", name, abs, err)
		}
		if st, err := os.Stat(filepath.Join(ModulesRoot, k.Release)); err == nil && st.IsDir() {
			k.Modular = true
		}
		return k, nil
	}
	return nil, fmt.Errorf("unknown kernel %q", name)
}

// Default returns the kernel `uml` names (see Find).
func Default() (*Kernel, error) { return Find("uml") }
