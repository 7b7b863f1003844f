//go:build linux

package iptables

import (
	"context"
	"fmt"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/leftovers"
	"github.com/proxybench/proxybench/scenarios"
)

// Chains kube-proxy v1.37's iptables CleanupLeftovers removes by name
// (pkg/proxy/iptables/cleanup.go, cleanupLeftoversForFamily): in nat,
// and in filter; every nat chain of a hashed name (isServiceChainName)
// goes too; mangle loses only its canary chain.
var (
	cleanupNAT    = []string{chainServices, chainNodePorts, chainPostrouting, chainMarkMasq, chainCanary}
	cleanupFilter = []string{chainServices, chainExternalServices, chainForward, chainNodePorts, chainProxyFirewall, chainCanary}
)

// chainCanary is the empty chain kube-proxy's iptables monitor keeps in
// mangle, nat and filter (kubeProxyCanaryChain).
const chainCanary = "KUBE-PROXY-CANARY"

// CleanupLeftovers removes what kube-proxy v1.37's iptables
// CleanupLeftovers removes (pkg/proxy/iptables/cleanup.go), for IPv4 and
// IPv6 of back end backend, whoever wrote it: the jump rules of
// iptablesJumpChains (not those to KUBE-FIREWALL, which kube-proxy
// creates for the kubelet and never deletes); in nat the chains
// KUBE-SERVICES, KUBE-NODEPORTS, KUBE-POSTROUTING, KUBE-MARK-MASQ,
// KUBE-PROXY-CANARY and every KUBE-SVC-/SVL-/SEP-/FW-/EXT- chain, in one
// restore; in filter KUBE-SERVICES, KUBE-EXTERNAL-SERVICES, KUBE-FORWARD,
// KUBE-NODEPORTS, KUBE-PROXY-FIREWALL and KUBE-PROXY-CANARY, in one
// restore; mangle's KUBE-PROXY-CANARY (errors ignored). It leaves
// KUBE-FIREWALL, the userspace mode's portal chains and the chains only
// the IPVS mode writes (KUBE-NODE-PORT, KUBE-LOAD-BALANCER,
// KUBE-IPVS-FILTER, ...). A restore that fails (a chain still referenced
// by a rule it does not delete, such as the IPVS mode's jump to
// KUBE-PROXY-FIREWALL) removes nothing of its table. Best effort: every
// step runs; the error joins the failed ones. A family whose tools do
// not run in the namespace is skipped (utiliptables.NewBestEffort).
func CleanupLeftovers(ctx context.Context, node proxymodes.Node, backend string) error {
	var errs leftovers.Errors
	hashed := func(c string) bool {
		for _, p := range leftovers.HashedPrefixes() {
			if len(c) > len(p) && c[:len(p)] == p {
				return true
			}
		}
		return false
	}
	for _, t := range leftovers.Families(node, backend) {
		if !t.Usable(ctx) {
			continue
		}
		for _, j := range jumpRules {
			if j.dst == chainFirewall {
				continue // iptablesKubeletJumpChains: created, never deleted
			}
			errs.Add(t.DeleteRule(ctx, j.table, j.src, j.args...))
		}
		errs.Add(t.DropChains(ctx, "nat", cleanupNAT, hashed))
		errs.Add(t.DropChains(ctx, "filter", cleanupFilter, nil))
		_ = t.DeleteChain(ctx, "mangle", chainCanary)
	}
	if err := errs.Err(); err != nil {
		return fmt.Errorf("iptables: cleanup leftovers: %w", err)
	}
	return nil
}

// owns are the chains kube-proxy's iptables mode writes (its
// iptablesJumpChains' targets, the kubelet firewall chain and the canary,
// and the hashed service chains).
var owns = leftovers.Chains(map[string][]string{
	"nat":    {chainServices, chainNodePorts, chainPostrouting, chainMarkMasq, chainCanary},
	"filter": {chainServices, chainExternalServices, chainForward, chainNodePorts, chainProxyFirewall, chainFirewall, chainCanary},
	"mangle": {chainCanary},
}, leftovers.HashedPrefixes()...)

// cleanupLeftovers is Mode.CleanupLeftovers: with sc's back end.
func cleanupLeftovers(ctx context.Context, sc *scenarios.Scenario, node proxymodes.Node) error {
	return CleanupLeftovers(ctx, node, sc.IPTables.Backend)
}
