//go:build linux

package iptables

import (
	"context"
	"strings"
	"testing"

	iptablestest "github.com/proxybench/proxybench/proxymodes/iptables/testing"
)

// The fake stands in for go-iptables.
var _ iptablesCmd = (*iptablestest.FakeCmd)(nil)

func newFakeProxier(backend string) (*Proxier, *iptablestest.FakeKernel, *[]string) {
	k := iptablestest.NewFakeKernel()
	var paths []string
	p := New(Config{Backend: backend, ClusterCIDR: testCfg.ClusterCIDR}, k)
	p.newCmd = func(path string) (iptablesCmd, error) {
		paths = append(paths, path)
		return &iptablestest.FakeCmd{K: k, Path: path}, nil
	}
	return p, k, &paths
}

func TestSyncFake(t *testing.T) {
	for _, backend := range []string{BackendLegacy, BackendNft} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			p, k, paths := newFakeProxier(backend)
			svcs := genServices(20, 3)
			st, err := p.Sync(ctx, svcs)
			if err != nil {
				t.Fatal(err)
			}
			if len(k.Runs) != 1 || k.Runs[0].Name != "iptables-"+backend+"-restore" || strings.Join(k.Runs[0].Args, " ") != "-w 5 --noflush" {
				t.Fatalf("runs = %+v, want one iptables-%s-restore -w 5 --noflush", k.Runs, backend)
			}
			if len(*paths) != 1 || (*paths)[0] != "iptables-"+backend {
				t.Errorf("go-iptables opened on %q, want iptables-%s (looked up on PATH)", *paths, backend)
			}
			if st.Kind != "full" || st.Objects != natRulesFormula(20, 3)+4 || st.Bytes != len(k.Runs[0].Stdin) || st.Wall <= 0 {
				t.Errorf("stats %+v", st)
			}
			for _, ph := range []string{"render", "ensure", "restore"} {
				if _, ok := st.Phases[ph]; !ok {
					t.Errorf("phase %q missing", ph)
				}
			}
			// Jump rules from the built-in chains are in place.
			if got := k.Tables["nat"]["PREROUTING"]; len(got) != 1 || !strings.Contains(got[0], "kubernetes service portals") {
				t.Errorf("nat PREROUTING = %q", got)
			}
			if got := k.Tables["filter"]["FORWARD"]; len(got) != 4 {
				t.Errorf("filter FORWARD = %q, want 4 jumps", got)
			}
			if n := len(k.Chains("nat", "KUBE-SVC-")) + len(k.Chains("nat", "KUBE-SEP-")); n != 20*4 {
				t.Errorf("%d KUBE-SVC/SEP chains, want 80", n)
			}
			// The same services again: still one restore per Sync, jumps not duplicated.
			if _, err := p.Sync(ctx, svcs); err != nil {
				t.Fatal(err)
			}
			if len(k.Runs) != 2 || len(k.Tables["nat"]["PREROUTING"]) != 1 {
				t.Errorf("second sync: %d runs, PREROUTING %q", len(k.Runs), k.Tables["nat"]["PREROUTING"])
			}
			// Fewer services: the stale chains are flushed and deleted.
			if _, err := p.Sync(ctx, svcs[:5]); err != nil {
				t.Fatal(err)
			}
			last := k.Runs[len(k.Runs)-1].Stdin
			if got := strings.Count(last, "\n-X KUBE-"); got != 15*4 {
				t.Errorf("third sync deletes %d chains, want 60", got)
			}
			if n := len(k.Chains("nat", "KUBE-SVC-")) + len(k.Chains("nat", "KUBE-SEP-")); n != 5*4 {
				t.Errorf("after shrinking: %d KUBE-SVC/SEP chains, want 20", n)
			}
			// Endpoints change: the old endpoint chain goes.
			svcs2 := genServices(5, 3)
			svcs2[0].Endpoints = svcs2[0].Endpoints[:1]
			if _, err := p.Sync(ctx, svcs2); err != nil {
				t.Fatal(err)
			}
			if n := len(k.Chains("nat", "KUBE-SEP-")); n != 13 {
				t.Errorf("after dropping 2 endpoints: %d KUBE-SEP chains, want 13", n)
			}
			info := p.Info()
			if info["backend"] != backend || !strings.Contains(info["iptables"], "v1.8.9") {
				t.Errorf("Info() = %v", info)
			}
			// Cleanup leaves the tables as they were.
			if err := p.Cleanup(ctx); err != nil {
				t.Fatal(err)
			}
			if got, want := k.Save(), iptablestest.NewFakeKernel().Save(); got != want {
				t.Errorf("after Cleanup:\n%s\nwant\n%s", got, want)
			}
		})
	}
}

func TestSyncFakeFailure(t *testing.T) {
	ctx := context.Background()
	p, k, _ := newFakeProxier(BackendLegacy)
	if _, err := p.Sync(ctx, genServices(10, 2)); err != nil {
		t.Fatal(err)
	}
	// A restore that fails (a user chain jumps to a KUBE-SEP chain, so it
	// cannot be deleted) must not lose track of the chains.
	sep := k.Chains("nat", "KUBE-SEP-")[0]
	k.Tables["nat"]["USER"] = []string{"-j " + sep}
	if _, err := p.Sync(ctx, nil); err == nil {
		t.Fatal("sync deleting a referenced chain: want an error")
	}
	delete(k.Tables["nat"], "USER")
	if _, err := p.Sync(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(k.Chains("nat", "KUBE-SEP-")) + len(k.Chains("nat", "KUBE-SVC-")); n != 0 {
		t.Errorf("%d service chains left after the retry", n)
	}
	if _, err := New(Config{Backend: "bpf"}, k).Sync(ctx, nil); err == nil {
		t.Errorf("backend bpf: want an error")
	}
}
