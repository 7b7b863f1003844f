//go:build linux

package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/internal/uml"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/scenarios"
)

// fakeBuiltKernel puts a stand-in uml:<series> kernel (a script answering
// --showconfig with config) into a fresh PROXYBENCH_CACHE.
func fakeBuiltKernel(t *testing.T, series, config string) {
	t.Helper()
	cache := t.TempDir()
	t.Setenv("PROXYBENCH_CACHE", cache)
	dir := filepath.Join(cache, "kernels", series+".1-1-"+uml.FragmentHash())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\ncat <<'X'\n" + config + "\nX\n"
	if err := os.WriteFile(filepath.Join(dir, "linux"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	meta := "series=" + series + "\nrelease=" + series + ".1\nfragment_sha256=" + uml.FragmentHash() + "\n"
	if err := os.WriteFile(filepath.Join(dir, "meta"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
}

// allOptions is a configuration with every option KernelOptions asks for.
func allOptions(sc *scenarios.Scenario) string {
	var b strings.Builder
	for _, m := range modes.Names() {
		for _, o := range KernelOptions(sc, m) {
			b.WriteString(o + "=y\n")
		}
	}
	return b.String()
}

// TestPlanKernels: on a host without IP_VS, auto runs what the host can
// (none, nftables) on the host and only ipvs in the guest kernel, with
// none and the bridge (nftables, as iptables is not asked for) beside it;
// a guest kernel lacking the nf_tables ip family gets no bridge, and the
// reason says so; a listed kernel that cannot run a mode is bad input
// naming kernel, mode and option.
func TestPlanKernels(t *testing.T) {
	testenv.RequireKernel(t)
	if _, err := os.Stat("/proc/net/ip_vs"); err == nil {
		t.Skip("this host has IP_VS: auto would stay on the host")
	}
	sc := &scenarios.Scenario{Modes: []string{"none", "ipvs", "nftables"}}
	sc.SetDefaults()
	ctx := context.Background()

	fakeBuiltKernel(t, "6.12", allOptions(sc))
	p, err := PlanKernels(ctx, sc, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Targets) != 2 || p.Targets[0].Name != "host" || strings.Join(p.Targets[0].Modes, ",") != "none,nftables" ||
		p.Targets[1].Name != "uml:6.12" || strings.Join(p.Targets[1].Modes, ",") != "none,ipvs,nftables" || p.Targets[1].Bridge != "nftables" {
		t.Errorf("auto with a full guest kernel: %+v (%s), want none,nftables on the host and none,ipvs,nftables (bridge nftables) in uml:6.12", p.Targets, p.Why)
	}

	noIP := strings.ReplaceAll(allOptions(sc), "CONFIG_NF_TABLES_IPV4=y\n", "")
	fakeBuiltKernel(t, "6.12", noIP)
	p, err = PlanKernels(ctx, sc, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Targets) != 2 || p.Targets[0].Name != "host" || p.Targets[1].Name != "uml:6.12" ||
		strings.Join(p.Targets[1].Modes, ",") != "none,ipvs" || p.Targets[1].Bridge != "" || !strings.Contains(p.Why, "no bridge") {
		t.Errorf("auto with a guest kernel without nftables: %+v (%s), want host + uml:6.12 running none,ipvs, saying there is no bridge", p.Targets, p.Why)
	}

	sc.Kernel = "uml:6.12"
	_, err = PlanKernels(ctx, sc, "")
	if !IsInput(err) || !strings.Contains(err.Error(), "nftables") || !strings.Contains(err.Error(), "CONFIG_NF_TABLES_IPV4") {
		t.Errorf("uml:6.12 without the ip family: err %v, want bad input naming nftables and CONFIG_NF_TABLES_IPV4", err)
	}
	sc.Kernel, sc.Modes = "host,uml:6.12", []string{"none", "ipvs"}
	_, err = PlanKernels(ctx, sc, "")
	if !IsInput(err) || !strings.Contains(err.Error(), "ipvs") {
		t.Errorf("host in a list with ipvs: err %v, want bad input naming ipvs", err)
	}
	sc.Modes = []string{"none", "iptables"}
	p, err = PlanKernels(ctx, sc, "")
	if err != nil || strings.Join(p.Names(), ",") != "host,uml:6.12" {
		t.Errorf("host,uml:6.12 with none,iptables: %v, %v", p.Names(), err)
	}
}

// fakeKernel is a stand-in guest kernel (a script answering --showconfig
// with every option of every mode but those in without).
func fakeKernel(t *testing.T, name string, sc *scenarios.Scenario, without ...string) *uml.Kernel {
	t.Helper()
	cfg := allOptions(sc)
	for _, o := range without {
		cfg = strings.ReplaceAll(cfg, o+"=y\n", "")
	}
	path := filepath.Join(t.TempDir(), "linux")
	if err := os.WriteFile(path, []byte("#!/bin/sh\ncat <<'X'\n"+cfg+"\nX\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return &uml.Kernel{Name: name, Path: path, Release: strings.TrimPrefix(name, "uml:") + ".1"}
}

// TestAutoPlanHostFirst: auto on a host without IP_VS (probe given, no
// root) runs iptables, nftables, userspace and none on the host and ipvs
// with none and the bridge iptables in the first guest kernel that runs
// ipvs; a host that runs everything stays alone; a host that runs only
// none hands every mode to one guest; no guest with IP_VS is bad input.
func TestAutoPlanHostFirst(t *testing.T) {
	sc := &scenarios.Scenario{Modes: []string{"none", "iptables", "ipvs", "nftables", "userspace"}}
	sc.SetDefaults()
	noIPVS := []ModeStatus{{"none", true, "ok"}, {"iptables", true, "ok"}, {"ipvs", false, "no /proc/net/ip_vs"}, {"nftables", true, "ok"}, {"userspace", true, "ok"}}
	k612 := fakeKernel(t, "uml:6.12", sc)
	noVS := fakeKernel(t, "uml:novs", sc, "CONFIG_IP_VS")

	p, err := autoPlan(sc, noIPVS, []*uml.Kernel{noVS, k612})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Targets) != 2 {
		t.Fatalf("targets %+v (%s), want host and uml:6.12", p.Targets, p.Why)
	}
	h, g := p.Targets[0], p.Targets[1]
	if h.Name != "host" || h.UML != nil || strings.Join(h.Modes, ",") != "none,iptables,nftables,userspace" {
		t.Errorf("host target %s %v, want none,iptables,nftables,userspace on the host", h.Name, h.Modes)
	}
	if g.Name != "uml:6.12" || g.UML != k612 || strings.Join(g.Modes, ",") != "none,iptables,ipvs" || g.Bridge != "iptables" || g.Baseline != "none" {
		t.Errorf("guest target %s %v bridge %q baseline %q, want uml:6.12 running none,iptables,ipvs, bridge iptables, baseline none", g.Name, g.Modes, g.Bridge, g.Baseline)
	}
	for _, want := range []string{"ipvs: no /proc/net/ip_vs", "bridge", "uml:novs", "--kernel uml"} {
		if !strings.Contains(p.Why, want) {
			t.Errorf("why %q lacks %q", p.Why, want)
		}
	}

	all := []ModeStatus{{"none", true, "ok"}, {"iptables", true, "ok"}, {"ipvs", true, "ok"}, {"nftables", true, "ok"}, {"userspace", true, "ok"}}
	if p, err := autoPlan(sc, all, []*uml.Kernel{k612}); err != nil || strings.Join(p.Names(), ",") != "host" || len(p.Targets[0].Modes) != 5 {
		t.Errorf("a host with every mode: %+v, %v; want the host alone", p.Targets, err)
	}

	sc2 := &scenarios.Scenario{Modes: []string{"none", "ipvs"}}
	sc2.SetDefaults()
	if p, err := autoPlan(sc2, []ModeStatus{{"none", true, "ok"}, {"ipvs", false, "no IP_VS"}}, []*uml.Kernel{k612}); err != nil ||
		strings.Join(p.Names(), ",") != "uml:6.12" || strings.Join(p.Targets[0].Modes, ",") != "none,ipvs" {
		t.Errorf("a host running only none: %+v, %v; want every mode in uml:6.12", p.Targets, err)
	}

	if _, err := autoPlan(sc, noIPVS, []*uml.Kernel{noVS}); !IsInput(err) || !strings.Contains(err.Error(), "ipvs") || !strings.Contains(err.Error(), "CONFIG_IP_VS") {
		t.Errorf("no guest with IP_VS: %v, want bad input naming ipvs and CONFIG_IP_VS", err)
	}
}

// fakeBuild adds a current stand-in build of uml:<series> (release rel,
// answering --showconfig with config) to cache, as make kernels lays it
// out (<cache>/kernels/<pkgver>-<fragment>/linux and meta).
func fakeBuild(t *testing.T, cache, series, rel, config string) string {
	t.Helper()
	dir := filepath.Join(cache, "kernels", rel+"-1-"+uml.FragmentHash())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "linux")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\ncat <<'X'\n"+config+"\nX\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	meta := "series=" + series + "\nrelease=" + rel + "\nfragment_sha256=" + uml.FragmentHash() + "\n"
	if err := os.WriteFile(filepath.Join(dir, "meta"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestKernelOptionsPickDualStackIPVSKernel: a dual-stack ipvs row needs
// CONFIG_IP6_NF_TARGET_REJECT (KUBE-IPVS-FILTER's ip6tables REJECT), so
// with two cached uml:6.12 builds, the newest without it, --kernel
// uml:6.12 and auto take the one with it, while a single-stack run keeps
// the newest; with only the build without it the dual-stack run is bad
// input (exit 2) naming the option and make kernels.
func TestKernelOptionsPickDualStackIPVSKernel(t *testing.T) {
	dual := &scenarios.Scenario{Modes: []string{"none", "ipvs"}, Kernel: "uml:6.12"}
	dual.Network.IPFamilies = []string{scenarios.IPv4, scenarios.IPv6}
	dual.Services.IPFamilyPolicy = scenarios.RequireDualStack
	dual.SetDefaults()
	if !dual.DualStack() {
		t.Fatal("scenario is not dual-stack")
	}
	single := &scenarios.Scenario{Modes: []string{"none", "ipvs"}, Kernel: "uml:6.12"}
	single.SetDefaults()
	const opt = "CONFIG_IP6_NF_TARGET_REJECT"
	full := allOptions(dual)
	if !strings.Contains(full, opt+"=y") {
		t.Fatalf("a dual-stack ipvs row does not ask for %s: %v", opt, KernelOptions(dual, "ipvs"))
	}
	if got := KernelOptions(single, "ipvs"); strings.Contains(strings.Join(got, ","), opt) {
		t.Errorf("a single-stack ipvs row asks for %s: %v", opt, got)
	}
	lacking := strings.ReplaceAll(full, opt+"=y\n", "")

	cache := t.TempDir()
	t.Setenv("PROXYBENCH_CACHE", cache)
	newer := fakeBuild(t, cache, "6.12", "6.12.118", lacking)
	older := fakeBuild(t, cache, "6.12", "6.12.117", full)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		sc   *scenarios.Scenario
		want string
	}{{"dual-stack", dual, older}, {"single-stack", single, newer}} {
		p, err := PlanKernels(ctx, tc.sc, "")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(p.Targets) != 1 || p.Targets[0].UML == nil || p.Targets[0].UML.Path != tc.want {
			t.Errorf("%s with --kernel uml:6.12: %+v, want the build %s", tc.name, p.Targets, tc.want)
		}
	}

	ks, err := uml.Candidates("uml:6.12")
	if err != nil || len(ks) != 2 || ks[0].Path != newer {
		t.Fatalf("candidates %v, %v: want both builds, newest first", ks, err)
	}
	st := []ModeStatus{{"none", true, "ok"}, {"ipvs", false, "no /proc/net/ip_vs"}}
	if p, err := autoPlan(dual, st, ks); err != nil || len(p.Targets) != 1 || p.Targets[0].UML.Path != older {
		t.Errorf("auto, dual-stack: %+v, %v; want the build %s", p.Targets, err, older)
	}

	if err := os.RemoveAll(filepath.Dir(older)); err != nil {
		t.Fatal(err)
	}
	_, err = PlanKernels(ctx, dual, "")
	if !IsInput(err) || !strings.Contains(err.Error(), opt) || !strings.Contains(err.Error(), "make kernels") || !strings.Contains(err.Error(), "ipvs") {
		t.Errorf("dual-stack with only a build without %s: %v, want bad input naming ipvs, the option and make kernels", opt, err)
	}
	if _, err := autoPlan(dual, st, []*uml.Kernel{ks[0]}); !IsInput(err) || !strings.Contains(err.Error(), opt) || !strings.Contains(err.Error(), "make kernels") {
		t.Errorf("auto, dual-stack, only a build without %s: %v, want bad input naming it", opt, err)
	}
}
