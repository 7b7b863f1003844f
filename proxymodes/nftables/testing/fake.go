// Package testing holds what tests of the nftables mode share: NewFake, an
// in-memory table ip kube-proxy (knftables' Fake, which rejects what nft
// rejects: objects in a missing table or chain, a duplicate add, a delete
// of what is missing), and Snapshot, a canonical text of a table read
// through any knftables.Interface, so a fake and the kernel compare as
// strings. TestKernelReplayFake in proxymodes/nftables runs the same
// syncs on a fake and on a real namespace and compares their Snapshots.
// Any test may use it; it is not in the production binary. Import it as
//
//	nftablestest "github.com/proxybench/proxybench/proxymodes/nftables/testing"
package testing

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/knftables"
)

// The table the nftables mode programs (nftables.Family, nftables.Table;
// the nftables package's tests check they agree).
const (
	Family = knftables.IPv4Family
	Table  = "kube-proxy"
)

// NewFake returns an empty fake of table ip kube-proxy.
func NewFake() *knftables.Fake { return knftables.NewFake(Family, Table) }

// Snapshot reads the table through nft and returns it as sorted text: one
// line per set, map and chain ("chain NAME: N rules [comments]"), and one
// per set or map element ("map NAME: KEY => VALUE"). A missing table is
// an empty snapshot. Rule bodies are not compared: knftables reads back
// only their comments and handles.
func Snapshot(ctx context.Context, nft knftables.Interface) (string, error) {
	var lines []string
	for _, kind := range []string{"set", "map", "chain"} {
		names, err := nft.List(ctx, kind)
		if knftables.IsNotFound(err) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("list %ss: %w", kind, err)
		}
		for _, n := range names {
			if kind == "chain" {
				rules, err := nft.ListRules(ctx, n)
				if err != nil {
					return "", fmt.Errorf("list rules of %s: %w", n, err)
				}
				var comments []string
				for _, r := range rules {
					if r.Comment != nil {
						comments = append(comments, *r.Comment)
					}
				}
				lines = append(lines, fmt.Sprintf("chain %s: %d rules %q", n, len(rules), comments))
				continue
			}
			lines = append(lines, kind+" "+n)
			elems, err := nft.ListElements(ctx, kind, n)
			if err != nil {
				return "", fmt.Errorf("list elements of %s %s: %w", kind, n, err)
			}
			for _, e := range elems {
				l := fmt.Sprintf("%s %s: %s", kind, n, strings.Join(e.Key, " . "))
				if len(e.Value) > 0 {
					l += " => " + strings.Join(e.Value, " . ")
				}
				lines = append(lines, l)
			}
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n", nil
}
