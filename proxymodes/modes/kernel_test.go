//go:build linux

package modes_test

import (
	"bufio"
	"bytes"
	"slices"
	"testing"

	"github.com/proxybench/proxybench/internal/uml"
	"github.com/proxybench/proxybench/proxymodes/modes"
)

// TestKernelOptionsInFragment: every mode lists the kernel options it
// needs, and make kernels' fragment builds in each option of every mode
// with any setting (both iptables back ends, every IPVS scheduler), so a
// source-built kernel runs every mode.
func TestKernelOptionsInFragment(t *testing.T) {
	built := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(uml.Fragment))
	for sc.Scan() {
		if opt, ok := bytes.CutSuffix(bytes.TrimSpace(sc.Bytes()), []byte("=y")); ok {
			built[string(opt)] = true
		}
	}
	for _, m := range modes.All {
		if m.KernelOptions == nil {
			t.Errorf("mode %s lists no kernel options", m.Name)
			continue
		}
		opts := m.KernelOptions(nil)
		if len(opts) == 0 {
			t.Errorf("mode %s: KernelOptions(nil) is empty", m.Name)
		}
		for _, o := range opts {
			if !built[o] {
				t.Errorf("mode %s needs %s, which internal/uml/kconfig/proxybench.config does not build in", m.Name, o)
			}
		}
	}
}

// TestKernelOptionsFollowSettings: the options follow the scenario: the
// nft back end of iptables needs nf_tables' ip family and nft_compat, the
// legacy one does not; ipvs needs its scheduler's module, not the others'.
func TestKernelOptionsFollowSettings(t *testing.T) {
	nftOnly := []string{"CONFIG_NF_TABLES_IPV4", "CONFIG_NFT_COMPAT"}
	legacy, _ := load(t, "defaults")
	nft, _ := load(t, "nft-backend")
	for _, name := range []string{"iptables", "userspace", "ipvs"} {
		m, err := modes.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if legacy.IPTables.Backend != "legacy" || nft.IPTables.Backend != "nft" {
			t.Fatalf("scenario back ends %q, %q: want legacy, nft", legacy.IPTables.Backend, nft.IPTables.Backend)
		}
		l, n := m.KernelOptions(legacy), m.KernelOptions(nft)
		for _, o := range nftOnly {
			if slices.Contains(l, o) {
				t.Errorf("%s with the legacy back end asks for %s", name, o)
			}
			if !slices.Contains(n, o) {
				t.Errorf("%s with the nft back end does not ask for %s: %v", name, o, n)
			}
		}
		if !slices.Contains(l, "CONFIG_IP_NF_NAT") {
			t.Errorf("%s does not ask for CONFIG_IP_NF_NAT: %v", name, l)
		}
	}
	ipvs, _ := modes.Lookup("ipvs")
	wrr, _ := load(t, "ipvs")
	got := ipvs.KernelOptions(wrr)
	if wrr.IPVS.Scheduler != "wrr" || !slices.Contains(got, "CONFIG_IP_VS_WRR") || slices.Contains(got, "CONFIG_IP_VS_MH") {
		t.Errorf("ipvs with scheduler %q: %v, want CONFIG_IP_VS_WRR and not CONFIG_IP_VS_MH", wrr.IPVS.Scheduler, got)
	}
	if all := ipvs.KernelOptions(nil); !slices.Contains(all, "CONFIG_IP_VS_MH") || !slices.Contains(all, "CONFIG_IP_VS_RR") {
		t.Errorf("ipvs with any setting: %v, want every scheduler", all)
	}
}
