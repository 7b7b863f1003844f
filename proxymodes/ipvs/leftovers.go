//go:build linux

package ipvs

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/leftovers"
	"github.com/proxybench/proxybench/scenarios"
)

// What kube-proxy v1.37's IPVS mode writes beside its virtual servers
// (pkg/proxy/ipvs/proxier.go: iptablesJumpChain, iptablesCleanupChains,
// ipsetInfo): the jumps, the chains per table and the ipsets its
// CleanupLeftovers removes.
var (
	kpJumps = []struct{ table, from, to, comment string }{
		{"nat", "OUTPUT", chainServices, "kubernetes service portals"},
		{"nat", "PREROUTING", chainServices, "kubernetes service portals"},
		{"nat", "POSTROUTING", chainPostrouting, "kubernetes postrouting rules"},
		{"filter", "FORWARD", "KUBE-FORWARD", "kubernetes forwarding rules"},
		{"filter", "INPUT", "KUBE-NODE-PORT", "kubernetes health check rules"},
		{"filter", "INPUT", "KUBE-PROXY-FIREWALL", "kube-proxy firewall rules"},
		{"filter", "FORWARD", "KUBE-PROXY-FIREWALL", "kube-proxy firewall rules"},
		{"filter", "INPUT", "KUBE-IPVS-FILTER", "kubernetes ipvs access filter"},
		{"filter", "OUTPUT", "KUBE-IPVS-OUT-FILTER", "kubernetes ipvs access filter"},
	}
	kpChains = map[string][]string{
		"nat":    {chainServices, chainPostrouting, "KUBE-NODE-PORT", "KUBE-LOAD-BALANCER", chainMarkMasq},
		"filter": {"KUBE-FORWARD", "KUBE-NODE-PORT", "KUBE-PROXY-FIREWALL", "KUBE-SOURCE-RANGES-FIREWALL", "KUBE-IPVS-FILTER", "KUBE-IPVS-OUT-FILTER"},
	}
	kpSets = []string{"KUBE-LOOP-BACK", ClusterIPSet, "KUBE-EXTERNAL-IP", "KUBE-EXTERNAL-IP-LOCAL", "KUBE-LOAD-BALANCER",
		"KUBE-LOAD-BALANCER-FW", "KUBE-LOAD-BALANCER-LOCAL", "KUBE-LOAD-BALANCER-SOURCE-IP", "KUBE-LOAD-BALANCER-SOURCE-CIDR",
		"KUBE-NODE-PORT-TCP", "KUBE-NODE-PORT-LOCAL-TCP", "KUBE-NODE-PORT-UDP", "KUBE-NODE-PORT-LOCAL-UDP",
		"KUBE-NODE-PORT-SCTP-HASH", "KUBE-NODE-PORT-LOCAL-SCTP-HASH", "KUBE-HEALTH-CHECK-NODE-PORT", "KUBE-IPVS-IPS"}
)

// CleanupLeftovers removes what kube-proxy v1.37's IPVS CleanupLeftovers
// removes (pkg/proxy/ipvs/cleanup.go), whoever wrote it, with iptables
// back end backend; nothing when the kernel has no IP_VS (kube-proxy
// returns at once when `modprobe -va ip_vs` fails; here: no
// /proc/net/ip_vs in the namespace). In order: every IPVS virtual server
// (ipvs.Flush: the whole table, `ipvsadm -C`), the kube-ipvs0 device
// with its addresses; for IPv4 and IPv6, the jump rules of
// iptablesJumpChain, then each chain of iptablesCleanupChains flushed,
// then each deleted (one iptables call each; a chain still referenced
// stays); then the ipsets of ipsetInfo (their IPv4 names only: the IPv6
// proxier's KUBE-6-* sets stay). Best effort: every step runs; the error
// joins the failed ones.
func CleanupLeftovers(ctx context.Context, node proxymodes.Node, backend string) error {
	has := false
	_ = node.Do(func() error {
		_, err := os.Stat("/proc/net/ip_vs")
		has = err == nil
		return nil
	})
	if !has {
		return nil
	}
	var errs leftovers.Errors
	if _, err := node.Run(ctx, nil, "ipvsadm", "-C"); err != nil {
		errs.Add(fmt.Errorf("flush IPVS: %w", err))
	}
	if _, err := node.Run(ctx, nil, "ip", "link", "del", DummyDevice); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
		errs.Add(fmt.Errorf("delete %s: %w", DummyDevice, err))
	}
	for _, t := range leftovers.Families(node, backend) {
		if !t.Usable(ctx) {
			continue
		}
		for _, j := range kpJumps {
			errs.Add(t.DeleteRule(ctx, j.table, j.from, "-m", "comment", "--comment", j.comment, "-j", j.to))
		}
		for _, table := range []string{"nat", "filter"} {
			for _, c := range kpChains[table] {
				errs.Add(t.FlushChain(ctx, table, c))
			}
		}
		for _, table := range []string{"nat", "filter"} {
			for _, c := range kpChains[table] {
				errs.Add(t.DeleteChain(ctx, table, c))
			}
		}
	}
	if _, err := node.Run(ctx, nil, binIPSet, "version"); err == nil {
		for _, s := range kpSets {
			errs.Add(leftovers.DestroySet(ctx, node, s))
		}
	}
	if err := errs.Err(); err != nil {
		return fmt.Errorf("ipvs: cleanup leftovers: %w", err)
	}
	return nil
}

// cleanupLeftovers is Mode.CleanupLeftovers: with sc's back end (the
// node's iptables alternative, which kube-proxy's cleanup uses).
func cleanupLeftovers(ctx context.Context, sc *scenarios.Scenario, node proxymodes.Node) error {
	return CleanupLeftovers(ctx, node, sc.IPTables.Backend)
}

// owns are what kube-proxy's IPVS mode writes: its chains, every KUBE-*
// ipset (KUBE-6-* included), the virtual servers, kube-ipvs0 and its
// addresses.
func owns(kind, table, name string) bool {
	switch kind {
	case leftovers.KindIPSet:
		return strings.HasPrefix(name, "KUBE-")
	case leftovers.KindVirtual, leftovers.KindAddress:
		return true
	case leftovers.KindDevice:
		return name == DummyDevice
	}
	return leftovers.Chains(kpChains)(kind, table, name)
}

// Stop ends the proxier as a process that exits would: its graceful
// termination check stops and its netlink sockets close; every virtual
// server, address, set and rule stays in the kernel (a DaemonSet rollout
// does not flush). A later Sync reopens the sockets and is full.
func (p *Proxier) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopGraceLoop()
	p.close()
	p.full = true
}
