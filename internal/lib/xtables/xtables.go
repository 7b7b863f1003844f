// Package xtables names the iptables tools and the arguments kube-proxy
// gives them, for every package that runs them (the iptables, ipvs and
// userspace modes, the traffic package's endpoint faults, the test
// environment): a leaf, it imports nothing of proxybench
// (docs/architecture.md, "Layers").
package xtables

import (
	"errors"
	"strings"
)

// Binary names an iptables tool of a back end: for backend "legacy",
// tool "restore" gives "iptables-legacy-restore" and tool ""
// "iptables-legacy". Callers run it by this name, looked up on PATH as
// kube-proxy does, never by a fixed folder, so the failure.syncErrors
// wrappers put first on PATH are what runs.
func Binary(backend, tool string) string {
	name := "iptables-" + backend
	if tool != "" {
		name += "-" + tool
	}
	return name
}

// Binary6 is Binary's IPv6 twin: "ip6tables-legacy-restore" for
// ("legacy", "restore"), the tools kube-proxy's IPv6 proxier runs.
func Binary6(backend, tool string) string { return "ip6" + Binary(backend, tool)[len("ip"):] }

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

// lockHeldText is what the iptables tools print when RestoreWait ran out
// with the lock held elsewhere (iptables/xshared.c).
const lockHeldText = "holding the xtables lock"

// LockHeld reports whether err (or an error it wraps) is an iptables
// tool's exit on the xtables lock held elsewhere past RestoreWait, as the
// tool's message carried in err's text says: the sync that got it may
// succeed when tried again, as kube-proxy's next sync does. False for nil.
func LockHeld(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if strings.Contains(err.Error(), lockHeldText) {
			return true
		}
	}
	return false
}

// RestoreArgs is RestoreWait followed by args, as a new slice.
func RestoreArgs(args ...string) []string {
	return append(append(make([]string, 0, len(RestoreWait)+len(args)), RestoreWait...), args...)
}

// KernelOptions are the kernel build options (Kconfig names) of
// kube-proxy's iptables rules with back end "legacy" or "nft": the
// iptables nat and filter tables, the xt matches and targets its rules use
// (statistic, comment, conntrack, addrtype, MASQUERADE, REJECT), and for
// "nft" nf_tables' ip family with nft_compat, through which iptables-nft
// runs xt matches (net/netfilter/Kconfig, net/ipv4/netfilter/Kconfig).
// A new slice each call.
func KernelOptions(backend string) []string {
	out := []string{"CONFIG_IP_NF_IPTABLES", "CONFIG_IP_NF_FILTER", "CONFIG_IP_NF_NAT", "CONFIG_NF_NAT",
		"CONFIG_NETFILTER_XT_MATCH_STATISTIC", "CONFIG_NETFILTER_XT_MATCH_COMMENT", "CONFIG_NETFILTER_XT_MATCH_CONNTRACK",
		"CONFIG_NETFILTER_XT_MATCH_ADDRTYPE", "CONFIG_NETFILTER_XT_TARGET_MASQUERADE", "CONFIG_IP_NF_TARGET_REJECT"}
	if backend == "nft" {
		out = append(out, "CONFIG_NF_TABLES", "CONFIG_NF_TABLES_IPV4", "CONFIG_NFT_COMPAT")
	}
	return out
}
