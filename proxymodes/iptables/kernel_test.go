//go:build linux

package iptables

import (
	"context"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/internal/testenv"
)

func countLines(out []byte, prefix string) int {
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// TestKernelSync programs 1k services in a throwaway namespace with each
// back end, shrinks to 100, and cleans up.
func TestKernelSync(t *testing.T) {
	for _, backend := range []string{BackendLegacy, BackendNft} {
		t.Run(backend, func(t *testing.T) {
			save := "iptables-" + backend + "-save"
			testenv.RequireKernel(t, "iptables-"+backend+"-restore", save, "iptables-"+backend)
			ns := testenv.NewNetns(t, "ipt"+backend)
			ctx := context.Background()
			p := New(Config{Backend: backend, ClusterCIDR: testCfg.ClusterCIDR}, ns)
			before, err := ns.Run(ctx, nil, save)
			if err != nil {
				t.Fatal(err)
			}

			st, err := p.Sync(ctx, genServices(1000, 3))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("sync 1k services: %+v", st)
			nat, err := ns.Run(ctx, nil, save, "-t", "nat")
			if err != nil {
				t.Fatal(err)
			}
			// Rendered rules plus the 3 jumps from built-in nat chains.
			if got, want := countLines(nat, "-A "), natRulesFormula(1000, 3)+3; got != want {
				t.Errorf("iptables-save -t nat: %d rules, want %d", got, want)
			}
			if got := countLines(nat, ":KUBE-SEP-"); got != 3000 {
				t.Errorf("%d KUBE-SEP chains, want 3000", got)
			}
			filter, err := ns.Run(ctx, nil, save, "-t", "filter")
			if err != nil {
				t.Fatal(err)
			}
			if got, want := countLines(filter, "-A "), 4+len(jumpRules)-3; got != want {
				t.Errorf("iptables-save -t filter: %d rules, want %d", got, want)
			}

			// Fewer services: stale chains go away.
			if _, err := p.Sync(ctx, genServices(100, 3)); err != nil {
				t.Fatal(err)
			}
			nat, err = ns.Run(ctx, nil, save, "-t", "nat")
			if err != nil {
				t.Fatal(err)
			}
			if got := countLines(nat, ":KUBE-SVC-") + countLines(nat, ":KUBE-SEP-"); got != 400 {
				t.Errorf("after shrinking to 100 services: %d KUBE-SVC/SEP chains, want 400", got)
			}
			if got, want := countLines(nat, "-A "), natRulesFormula(100, 3)+3; got != want {
				t.Errorf("after shrinking: %d nat rules, want %d", got, want)
			}

			if err := p.Cleanup(ctx); err != nil {
				t.Fatal(err)
			}
			after, err := ns.Run(ctx, nil, save)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(after), "KUBE-") {
				t.Errorf("KUBE- chains left after Cleanup:\n%s", after)
			}
			if got, want := countLines(after, "-A "), countLines(before, "-A "); got != want {
				t.Errorf("after Cleanup %d rules, before Sync %d", got, want)
			}
			// Cleanup twice is fine.
			if err := p.Cleanup(ctx); err != nil {
				t.Errorf("second Cleanup: %v", err)
			}
		})
	}
}
