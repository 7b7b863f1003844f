//go:build linux

package iptables

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/internal/lib/xtables"
	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/proxymodes"
	iptablestest "github.com/proxybench/proxybench/proxymodes/iptables/testing"
)

// replayRestores is an iptables-restore --noflush sequence on the nat
// table: what the proxier writes (chains, jumps, DNAT, flushes and
// deletes of stale chains) and what the kernel rejects (a rule in or a
// jump to a missing chain, deleting a chain that is missing, referenced or
// not empty), with changes before a rejected line that must not apply.
var replayRestores = []struct{ name, data string }{
	{"chains and rules", "*nat\n:KUBE-RA - [0:0]\n:KUBE-RB - [0:0]\n-A KUBE-RA -j KUBE-RB\n-A KUBE-RB -s 198.19.0.1/32 -j MARK --set-xmark 0x4000/0x4000\n-A KUBE-RB -p tcp -m tcp -j DNAT --to-destination 198.19.0.1:8080\nCOMMIT\n"},
	{"rule in a missing chain (nothing applies)", "*nat\n:KUBE-RC - [0:0]\n-A KUBE-RMISSING -j RETURN\nCOMMIT\n"},
	{"jump to a missing chain", "*nat\n-A KUBE-RA -j KUBE-RNOPE\nCOMMIT\n"},
	{"delete a referenced, non-empty chain", "*nat\n-X KUBE-RB\nCOMMIT\n"},
	{"flush the referenced chain, delete it while referenced", "*nat\n:KUBE-RB - [0:0]\n-X KUBE-RB\nCOMMIT\n"},
	{"flush both, delete the target", "*nat\n:KUBE-RA - [0:0]\n:KUBE-RB - [0:0]\n-X KUBE-RB\nCOMMIT\n"},
	{"delete a missing chain", "*nat\n-X KUBE-RB\nCOMMIT\n"},
	{"a comment and a return", "*nat\n-A KUBE-RA -m comment --comment \"ns1/svc1:http\" -j RETURN\nCOMMIT\n"},
	{"unknown table", "*natty\nCOMMIT\n"},
}

// natKube returns the KUBE-R* chains of iptables-save output's nat table
// and their rules, one line each (":CHAIN" or "-A CHAIN ..."), sorted.
func natKube(save string) []string {
	var out []string
	table := ""
	for _, l := range strings.Split(save, "\n") {
		switch {
		case strings.HasPrefix(l, "*"):
			table = l[1:]
		case table != "nat":
		case strings.HasPrefix(l, ":KUBE-R"):
			c, _, _ := strings.Cut(l, " ")
			out = append(out, c)
		case strings.HasPrefix(l, "-A KUBE-R"):
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// TestKernelReplayFake replays one iptables-restore sequence on the
// FakeKernel of proxymodes/iptables/testing and on a real namespace
// (iptables-legacy), through the same Run call the proxier makes, and
// compares after every step whether the restore failed and the nat
// table's KUBE-R* chains and rules (iptables-save). A fake that accepts
// what the kernel rejects, or applies part of a failed restore, fails here.
func TestKernelReplayFake(t *testing.T) {
	restore, save := xtables.Binary(BackendLegacy, "restore"), xtables.Binary(BackendLegacy, "save")
	testenv.RequireKernel(t, restore, save)
	ctx := context.Background()
	ns := testenv.NewNetns(t, "iptreplay")
	fake := iptablestest.NewFakeKernel()
	for i, step := range replayRestores {
		var got [2][]string
		var failed [2]bool
		for j, node := range []proxymodes.Node{ns, fake} {
			_, err := node.Run(ctx, []byte(step.data), restore, xtables.RestoreArgs("--noflush")...)
			failed[j] = err != nil
			out, err := node.Run(ctx, nil, save)
			if err != nil {
				t.Fatalf("step %d %s: save: %v", i, step.name, err)
			}
			got[j] = natKube(string(out))
		}
		if failed[0] != failed[1] {
			t.Errorf("step %d %s: kernel failed %v, fake failed %v", i, step.name, failed[0], failed[1])
		}
		if !slices.Equal(got[0], got[1]) {
			t.Errorf("step %d %s: nat tables differ\nkernel: %q\nfake:   %q", i, step.name, got[0], got[1])
		}
		t.Logf("step %d %s: failed %v, %d lines", i, step.name, failed[0], len(got[0]))
	}
	if want := []string{`-A KUBE-RA -m comment --comment "ns1/svc1:http" -j RETURN`, ":KUBE-RA"}; !slices.Equal(natKube(fake.Save()), want) {
		t.Errorf("the sequence ended at %q, want %q", natKube(fake.Save()), want)
	}
}
