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

// TestPlanKernels: on a host without IP_VS, auto runs none, ipvs and
// nftables in ONE guest kernel that has everything (no split); with only
// kernels lacking the nf_tables ip family it splits and says why; a listed
// kernel that cannot run a mode is bad input naming kernel, mode and option.
func TestPlanKernels(t *testing.T) {
	testenv.RequireKernel(t)
	if _, err := os.Stat("/proc/net/ip_vs"); err == nil {
		t.Skip("this host has IP_VS: auto would stay on the host")
	}
	sc := &scenarios.Scenario{Modes: []string{"none", "ipvs", "nftables"}}
	sc.SetDefaults()
	ctx := context.Background()

	fakeBuiltKernel(t, "6.12", allOptions(sc))
	p, err := PlanKernels(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Targets) != 1 || p.Targets[0].Name != "uml:6.12" || strings.Join(p.Targets[0].Modes, ",") != "none,ipvs,nftables" {
		t.Errorf("auto with a full guest kernel: %+v (%s), want every mode in uml:6.12", p.Targets, p.Why)
	}

	noIP := strings.ReplaceAll(allOptions(sc), "CONFIG_NF_TABLES_IPV4=y\n", "")
	fakeBuiltKernel(t, "6.12", noIP)
	p, err = PlanKernels(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Targets) != 2 || p.Targets[0].Name != "host" || p.Targets[1].Name != "uml:6.12" ||
		strings.Join(p.Targets[1].Modes, ",") != "none,ipvs" || !strings.Contains(p.Why, "CONFIG_NF_TABLES_IPV4") {
		t.Errorf("auto without a full kernel: %+v (%s), want host + uml:6.12 running none,ipvs, naming CONFIG_NF_TABLES_IPV4", p.Targets, p.Why)
	}

	sc.Kernel = "uml:6.12"
	_, err = PlanKernels(ctx, sc)
	if !IsInput(err) || !strings.Contains(err.Error(), "nftables") || !strings.Contains(err.Error(), "CONFIG_NF_TABLES_IPV4") {
		t.Errorf("uml:6.12 without the ip family: err %v, want bad input naming nftables and CONFIG_NF_TABLES_IPV4", err)
	}
	sc.Kernel, sc.Modes = "host,uml:6.12", []string{"none", "ipvs"}
	_, err = PlanKernels(ctx, sc)
	if !IsInput(err) || !strings.Contains(err.Error(), "ipvs") {
		t.Errorf("host in a list with ipvs: err %v, want bad input naming ipvs", err)
	}
	sc.Modes = []string{"none", "iptables"}
	p, err = PlanKernels(ctx, sc)
	if err != nil || strings.Join(p.Names(), ",") != "host,uml:6.12" {
		t.Errorf("host,uml:6.12 with none,iptables: %v, %v", p.Names(), err)
	}
}
