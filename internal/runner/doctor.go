//go:build linux

package runner

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/proxybench/proxybench/topology"
)

// ModeStatus says whether this machine can run one mode, and why not.
type ModeStatus struct {
	Mode      string
	Available bool
	Reason    string
}

// probeIPTables is a miniature of kube-proxy's nat layout: every match and
// target the iptables mode uses (comment, statistic, mark, addrtype, DNAT,
// MASQUERADE --random-fully).
const probeIPTables = `*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-PROBE - [0:0]
:KUBE-POSTROUTING - [0:0]
-A KUBE-SERVICES -m comment --comment "probe" -m tcp -p tcp -d 198.18.0.1 --dport 80 -j KUBE-SVC-PROBE
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j RETURN
-A KUBE-SVC-PROBE -m statistic --mode random --probability 0.5000000000 -m tcp -p tcp -j DNAT --to-destination 198.19.0.1:8080
-A KUBE-POSTROUTING -m mark --mark 0x4000/0x4000 -j MASQUERADE --random-fully
COMMIT
`

// Doctor probes, in a throwaway namespace pb-<runid>-doctor that it
// removes afterwards, which modes this machine can run.
func Doctor(ctx context.Context) []ModeStatus {
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
	out := []ModeStatus{{"none", true, "network namespaces and veth work"}}
	for _, be := range []string{"legacy", "nft"} {
		st := ModeStatus{Mode: "iptables (backend " + be + ")"}
		bin := "iptables-" + be + "-restore"
		if _, err := exec.LookPath(bin); err != nil {
			st.Reason = bin + " not on PATH; run make setup"
		} else if _, err := ns.Run(ctx, []byte(probeIPTables), bin, "--noflush"); err != nil {
			st.Reason = "kernel rejected kube-proxy's rules: " + firstLine(err.Error())
		} else {
			st.Available, st.Reason = true, "statistic, DNAT, MASQUERADE, addrtype, comment accepted"
		}
		out = append(out, st)
	}
	ipvs := ModeStatus{Mode: "ipvs", Reason: "not implemented in this build"}
	if err := ns.Do(func() error { _, err := os.Stat("/proc/net/ip_vs"); return err }); err != nil {
		ipvs.Reason = fmt.Sprintf("host kernel %s has no IP_VS (CONFIG_IP_VS not set); not implemented in this build", kernelRelease())
	}
	out = append(out, ipvs)
	nft := ModeStatus{Mode: "nftables", Reason: "not implemented in this build"}
	if _, err := exec.LookPath("nft"); err != nil {
		nft.Reason = "nft not on PATH; not implemented in this build"
	} else if _, err := ns.Run(ctx, []byte("table ip pbprobe { chain c { numgen random mod 2 vmap { 0 : accept, 1 : accept }; }; }\n"), "nft", "-f", "-"); err != nil {
		nft.Reason = "kernel rejected numgen vmap: " + firstLine(err.Error()) + "; not implemented in this build"
	} else {
		nft.Reason = "kernel has nf_tables with numgen; mode not implemented in this build"
	}
	out = append(out, nft, ModeStatus{"userspace", false, "not implemented in this build"})
	return out
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
