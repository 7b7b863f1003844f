//go:build linux

package runner

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/scenarios"

	"github.com/proxybench/proxybench/topology"
)

// ModeStatus says whether this machine can run one mode, and why not.
type ModeStatus struct {
	Mode      string
	Available bool
	Reason    string
}

// Doctor probes, in a throwaway namespace pb-<runid>-doctor that it
// removes afterwards, which modes this machine can run.
//
// Modes are probed with the default scenario's settings for binaries.
func Doctor(ctx context.Context) []ModeStatus {
	sc := &scenarios.Scenario{}
	sc.SetDefaults()
	if os.Geteuid() != 0 {
		r := "needs root (network namespaces); run as root"
		return []ModeStatus{{"none", false, r}, {"iptables", false, r}, {"ipvs", false, r}, {"nftables", false, r}, {"userspace", false, r}}
	}
	name := topology.NetnsName(topology.NewRunID(), "doctor")
	ns, err := topology.CreateNetns(name)
	if err != nil {
		r := "cannot create a network namespace: " + err.Error()
		return []ModeStatus{{"none", false, r}, {"iptables", false, r}}
	}
	defer func() { ns.Close(); _ = topology.DeleteNetns(name) }()
	var out []ModeStatus
	for _, name := range proxymodes.Names() {
		m, _ := proxymodes.Lookup(name)
		st := ModeStatus{Mode: name}
		if m.Binaries != nil {
			for _, b := range m.Binaries(sc) {
				if _, err := exec.LookPath(b); err != nil {
					st.Reason = b + " not on PATH; run make setup"
				}
			}
		}
		if st.Reason == "" {
			st.Available, st.Reason = m.Probe(ctx, ns)
		}
		out = append(out, st)
	}
	if !slices.Contains(proxymodes.Names(), "ipvs") {
		why := "not implemented in this build"
		if err := ns.Do(func() error { _, err := os.Stat("/proc/net/ip_vs"); return err }); err != nil {
			why = fmt.Sprintf("host kernel %s has no IP_VS (CONFIG_IP_VS not set); %s", kernelRelease(), why)
		}
		out = append(out, ModeStatus{"ipvs", false, why})
	}
	for _, name := range []string{"nftables", "userspace"} {
		if !slices.Contains(proxymodes.Names(), name) {
			out = append(out, ModeStatus{name, false, "not implemented in this build"})
		}
	}
	return out
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
