//go:build linux

package nftables

import (
	"context"
	"fmt"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/leftovers"
	"github.com/proxybench/proxybench/scenarios"
)

// CleanupLeftovers removes what kube-proxy v1.37's nftables
// CleanupLeftovers removes (pkg/proxy/nftables/cleanup.go): table
// kube-proxy of the ip and the ip6 family, each in one transaction (a
// table that is not there is no error). Nothing else: iptables rules,
// IPVS state and ipsets stay.
func CleanupLeftovers(ctx context.Context, node proxymodes.Node) error {
	var errs leftovers.Errors
	for _, fam := range []string{"ip", "ip6"} {
		errs.Add(leftovers.DeleteNFTTable(ctx, node, fam, "kube-proxy"))
	}
	if err := errs.Err(); err != nil {
		return fmt.Errorf("nftables: cleanup leftovers: %w", err)
	}
	return nil
}

func cleanupLeftovers(ctx context.Context, _ *scenarios.Scenario, node proxymodes.Node) error {
	return CleanupLeftovers(ctx, node)
}

// owns: the nftables mode writes its kube-proxy tables only.
func owns(kind, table, name string) bool {
	return kind == leftovers.KindNFT && (name == "ip kube-proxy" || name == "ip6 kube-proxy")
}
