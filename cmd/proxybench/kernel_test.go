package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/internal/uml"
	"github.com/proxybench/proxybench/reports"
)

// TestRunNFTablesAndIPVSInBuiltKernel boots the guest kernel make setup
// builds (uml:6.12, everything built in) and runs none, ipvs and nftables
// in that one guest: no split, no module loading, one report with IPVS and
// nftables side by side. CI (make setup; PROXYBENCH_REQUIRE_KERNEL=1) has
// the kernel, so there this never skips.
func TestRunNFTablesAndIPVSInBuiltKernel(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore", "ipset", "nft", "ipvsadm")
	k, err := uml.Find("uml:" + uml.DefaultKernelSeries)
	if err != nil {
		testenv.Skip(t, err.Error()+" (make setup builds it)")
	}
	body := "services: {count: 40}\nmodes: [none, ipvs, nftables]\nrepetitions: 1\ntraffic: {connections: 100, positions: [first, last]}\n"
	out := filepath.Join(t.TempDir(), "r.json")
	stdout, stderr, code := run(t, nil, "run", "--quiet", "--kernel", k.Name, "--output", out, writeFile(t, body))
	if code != 0 {
		t.Fatalf("exit %d:\n%s\n%s", code, stdout, stderr)
	}
	r, err := reports.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range r.Modes {
		got = append(got, m.Mode+"@"+m.Kernel)
		if len(m.SyncFull) != 1 || m.SyncFull[0].Wall <= 0 {
			t.Errorf("%s: sync.full %+v", m.Mode, m.SyncFull)
		}
		for _, p := range m.Lookup {
			if p.Errors+p.Misses != 0 || p.Latency.Count != 100 {
				t.Errorf("%s at %s: %d errors, %d misses, n %d: %v", m.Mode, p.Position, p.Errors, p.Misses, p.Latency.Count, p.ErrorText)
			}
		}
	}
	want := "none@" + k.Name + " ipvs@" + k.Name + " nftables@" + k.Name
	if strings.Join(got, " ") != want {
		t.Errorf("modes %v, want %s (all in one guest kernel)", got, want)
	}
	if len(r.Kernels) != 1 || r.Kernels[0].Name != k.Name || r.Kernels[0].Release != k.Release ||
		r.Kernels[0].InitNs <= 0 || r.Kernels[0].BootNs < r.Kernels[0].InitNs {
		t.Errorf("kernels recorded: %+v, want one %s (%s) with its boot times", r.Kernels, k.Name, k.Release)
	}
	if r.Machine.Kernel != k.Release || r.Machine.KernelWhere != "uml" {
		t.Errorf("machine kernel %q (%s), want %s in uml", r.Machine.Kernel, r.Machine.KernelWhere, k.Release)
	}
	if !strings.Contains(stdout, "| ipvs |") || !strings.Contains(stdout, "| nftables |") {
		t.Errorf("report lacks ipvs and nftables side by side:\n%s", stdout)
	}
	if strings.Contains(stderr, "module") {
		t.Errorf("a built-in kernel loads no modules; stderr:\n%s", stderr)
	}
}

// TestKernelFlagErrors: an unknown kernel, auto in a list and a kernel
// that is not built are bad input (exit 2) naming the fix.
func TestKernelFlagErrors(t *testing.T) {
	testenv.RequireKernel(t)
	body := "services: {count: 5}\nmodes: [none]\nrepetitions: 1\n"
	for _, c := range []struct{ kernel, want string }{
		{"kvm", "uml:6.12"},
		{"auto,host", "auto cannot be combined"},
		{"uml:4.19", "make kernels KERNELS=4.19"},
	} {
		_, stderr, code := run(t, []string{"PROXYBENCH_CACHE=" + t.TempDir()}, "run", "--quiet", "--kernel", c.kernel, writeFile(t, body))
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("--kernel %s: exit %d, stderr %q; want exit 2 and %q", c.kernel, code, stderr, c.want)
		}
	}
}
