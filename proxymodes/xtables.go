package proxymodes

import (
	"slices"

	"github.com/proxybench/proxybench/scenarios"
)

// RestoreWait are the arguments kube-proxy gives iptables-restore (and
// iptables) so that the xtables lock (/run/xtables.lock, shared by every
// network namespace of the machine, or $XTABLES_LOCKFILE) is waited for at
// most 5 s instead of forever: a lock held elsewhere longer than that
// makes the tool exit 4 ("Another app is currently holding the xtables
// lock. Stopped waiting after 5s."), which the sync records as a failed
// sync. Only the legacy back end takes the lock: iptables-nft takes none
// and ignores -w. Source: k8s.io/kubernetes v1.37 pkg/util/iptables
// (WaitString "-w", WaitSecondsValue "5"); the wait interval `-W 100000`
// kube-proxy passed before (kubernetes#85771) was removed in 2025
// (kubernetes#131961: iptables 1.8 ignores it, iptables-nft-restore
// warning "Ignoring deprecated --wait-interval option.").
var RestoreWait = []string{"-w", "5"}

// RestoreArgs is RestoreWait followed by args, as a new slice.
func RestoreArgs(args ...string) []string {
	return append(append(make([]string, 0, len(RestoreWait)+len(args)), RestoreWait...), args...)
}

// IPTablesKernelOptions are the kernel build options (Kconfig names) of
// kube-proxy's iptables rules with back end "legacy" or "nft": the
// iptables nat and filter tables, the xt matches and targets its rules use
// (statistic, comment, conntrack, addrtype, MASQUERADE, REJECT), and for
// "nft" nf_tables' ip family with nft_compat, through which iptables-nft
// runs xt matches (net/netfilter/Kconfig, net/ipv4/netfilter/Kconfig).
// A new slice each call.
func IPTablesKernelOptions(backend string) []string {
	out := []string{"CONFIG_IP_NF_IPTABLES", "CONFIG_IP_NF_FILTER", "CONFIG_IP_NF_NAT", "CONFIG_NF_NAT",
		"CONFIG_NETFILTER_XT_MATCH_STATISTIC", "CONFIG_NETFILTER_XT_MATCH_COMMENT", "CONFIG_NETFILTER_XT_MATCH_CONNTRACK",
		"CONFIG_NETFILTER_XT_MATCH_ADDRTYPE", "CONFIG_NETFILTER_XT_TARGET_MASQUERADE", "CONFIG_IP_NF_TARGET_REJECT"}
	if backend == "nft" {
		out = append(out, "CONFIG_NF_TABLES", "CONFIG_NF_TABLES_IPV4", "CONFIG_NFT_COMPAT")
	}
	return out
}

// iptablesBackends returns sc's iptables back end, or both when sc is nil
// (any setting).
func iptablesBackends(sc *scenarios.Scenario) []string {
	if sc == nil {
		return []string{"legacy", "nft"}
	}
	return []string{sc.IPTables.Backend}
}

// IPTablesKernelOptionsFor is IPTablesKernelOptions of sc's back end, or
// of both back ends when sc is nil, without repeats: a Mode.KernelOptions
// for the modes that program iptables.
func IPTablesKernelOptionsFor(sc *scenarios.Scenario) []string {
	var out []string
	for _, b := range iptablesBackends(sc) {
		for _, o := range IPTablesKernelOptions(b) {
			if !slices.Contains(out, o) {
				out = append(out, o)
			}
		}
	}
	return out
}
