//go:build linux

package nftables

import (
	"context"
	"strings"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/scenarios"
)

// probeRules is a miniature of the layout: a verdict map keyed by
// address . protocol . port, numgen random vmap, ct state, DNAT, mark,
// masquerade fully-random and reject, in a throwaway table.
const probeRules = `add table ip pb-probe
add chain ip pb-probe nat-prerouting { type nat hook prerouting priority -100 ; }
add chain ip pb-probe nat-postrouting { type nat hook postrouting priority 100 ; }
add chain ip pb-probe filter-input { type filter hook input priority -110 ; }
add chain ip pb-probe svc
add chain ip pb-probe ep0
add chain ip pb-probe ep1
add chain ip pb-probe rej
add map ip pb-probe service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }
add rule ip pb-probe nat-prerouting ip daddr . meta l4proto . th dport vmap @service-ips
add rule ip pb-probe svc numgen random mod 2 vmap { 0 : goto ep0 , 1 : goto ep1 }
add rule ip pb-probe ep0 ip saddr 198.19.0.1 mark set mark or 0x4000
add rule ip pb-probe ep0 meta l4proto tcp dnat to 198.19.0.1:8080
add rule ip pb-probe ep1 meta l4proto tcp dnat to 198.19.0.2:8080
add rule ip pb-probe rej reject
add rule ip pb-probe filter-input ct state new ip daddr 198.18.0.9 goto rej
add rule ip pb-probe nat-postrouting mark and 0x4000 == 0 return
add rule ip pb-probe nat-postrouting masquerade fully-random
add element ip pb-probe service-ips { 198.18.0.1 . tcp . 80 : goto svc }
delete table ip pb-probe
`

func init() {
	proxymodes.Register(proxymodes.Mode{
		Name: "nftables",
		New: func(sc *scenarios.Scenario, node proxymodes.Node) (proxymodes.Proxier, error) {
			_, _, _, cluster := sc.Prefixes()
			cfg := Config{ClusterCIDR: cluster, NoConntrackCleanup: sc.NoConntrackCleanup}
			if sc.Services.SessionAffinity == "ClientIP" {
				cfg.AffinityTimeout = sc.Services.SessionAffinityTimeout.Duration
			}
			if err := cfg.Validate(); err != nil {
				return nil, err
			}
			return New(cfg, node), nil
		},
		Binaries: func(*scenarios.Scenario) []string { return []string{"nft"} },
		Modules: func(*scenarios.Scenario) []string {
			// Modules of Debian's UML kernel 6.1 (nat and reject_ipv4
			// expressions are part of nf_tables there).
			return []string{"nf_conntrack", "nf_nat", "nf_reject_ipv4", "nf_tables", "nft_numgen", "nft_ct", "nft_masq", "nft_reject"}
		},
		Probe: Probe,
	})
}

// Probe loads (and deletes, in the same transaction) a miniature of
// kube-proxy's nftables layout with nft in node (a throwaway namespace).
func Probe(ctx context.Context, node proxymodes.Node) (bool, string) {
	if _, err := node.Run(ctx, []byte(probeRules), "nft", "-f", "-"); err != nil {
		msg, _, _ := strings.Cut(err.Error(), "\n")
		return false, "nft rejects kube-proxy's nftables layout (" + msg + "); the kernel needs nf_tables with numgen, ct, nat, masq, reject"
	}
	return true, "nf_tables accepts verdict maps, numgen vmap, ct, DNAT, masquerade fully-random, reject"
}
