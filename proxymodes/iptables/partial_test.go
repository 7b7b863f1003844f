//go:build linux

package iptables

import (
	"context"
	"net/netip"
	"sort"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/workload"
)

// chainRules maps each chain of iptables-save output to its rules.
func chainRules(save []byte) map[string][]string {
	out := map[string][]string{}
	for _, l := range strings.Split(string(save), "\n") {
		switch {
		case strings.HasPrefix(l, ":"):
			name, _, _ := strings.Cut(l[1:], " ")
			out[name] = out[name][:0:0]
		case strings.HasPrefix(l, "-A "):
			name, _, _ := strings.Cut(l[3:], " ")
			out[name] = append(out[name], l)
		}
	}
	return out
}

// changedChains lists chains whose rules differ between two saves
// (added, removed or rewritten), sorted.
func changedChains(a, b map[string][]string) []string {
	var out []string
	for c, ra := range a {
		rb, ok := b[c]
		if !ok || strings.Join(ra, "\n") != strings.Join(rb, "\n") {
			out = append(out, c)
		}
	}
	for c := range b {
		if _, ok := a[c]; !ok {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

// moveEndpoint replaces endpoint k of service i by a fresh address.
func moveEndpoint(svcs []workload.Service, i, k int, to netip.Addr) []workload.Service {
	out := append([]workload.Service(nil), svcs...)
	eps := append([]workload.Endpoint(nil), out[i].Endpoints...)
	eps[k].IP = to
	out[i].Endpoints = eps
	return out
}

// TestPartialSyncWritesOnlyChangedChains: after a full sync, changing one
// endpoint of one service makes the next Sync incremental, and its restore
// input declares only that service's chains, as kube-proxy's partial sync
// writes them (its KUBE-SVC and every current KUBE-SEP), plus the removed
// KUBE-SEP to delete it, and the fixed chains; it is much smaller.
func TestPartialSyncWritesOnlyChangedChains(t *testing.T) {
	p, k, _ := newFakeProxier(BackendLegacy)
	ctx := context.Background()
	svcs := genServices(200, 3)
	full, err := p.Sync(ctx, svcs)
	if err != nil || full.Kind != "full" {
		t.Fatalf("first sync: %+v %v", full, err)
	}
	changed := moveEndpoint(svcs, 7, 1, netip.MustParseAddr("198.19.100.1"))
	inc, err := p.Sync(ctx, changed)
	if err != nil || inc.Kind != "incremental" {
		t.Fatalf("second sync: %+v %v", inc, err)
	}
	last := k.Runs[len(k.Runs)-1].Stdin
	var declared []string
	for _, l := range strings.Split(last, "\n") {
		if strings.HasPrefix(l, ":KUBE-SVC-") || strings.HasPrefix(l, ":KUBE-SEP-") {
			declared = append(declared, strings.Fields(l[1:])[0])
		}
	}
	pn := changed[7].PortName(changed[7].Ports[0])
	oldSEP := EndpointChainName(pn, "tcp", svcs[7].Endpoints[1].IP.String()+":8080")
	newSEP := EndpointChainName(pn, "tcp", "198.19.100.1:8080")
	want := []string{ServiceChainName(pn, "tcp"), newSEP, oldSEP}
	for _, k := range []int{0, 2} {
		want = append(want, EndpointChainName(pn, "tcp", svcs[7].Endpoints[k].IP.String()+":8080"))
	}
	sort.Strings(want)
	sort.Strings(declared)
	if strings.Join(declared, " ") != strings.Join(want, " ") {
		t.Errorf("incremental restore declares %v, want %v (the service's chains and its removed endpoint chain)", declared, want)
	}
	if !strings.Contains(last, "-X "+oldSEP+"\n") {
		t.Errorf("removed endpoint chain %s not deleted", oldSEP)
	}
	if inc.Bytes*3 > full.Bytes || inc.Objects >= full.Objects {
		t.Errorf("incremental sync not cheaper: %d B / %d rules vs full %d B / %d rules", inc.Bytes, inc.Objects, full.Bytes, full.Objects)
	}
	// The kernel state equals a full sync of the new set.
	q, k2, _ := newFakeProxier(BackendLegacy)
	if _, err := q.Sync(ctx, changed); err != nil {
		t.Fatal(err)
	}
	if a, b := k.Save(), k2.Save(); a != b {
		t.Errorf("partial sync left a different ruleset than a full sync:\n%s", diffLines(a, b))
	}
	// ForceFullSync makes the next one full again.
	p.ForceFullSync()
	if st, _ := p.Sync(ctx, changed); st.Kind != "full" {
		t.Errorf("after ForceFullSync: kind %s", st.Kind)
	}
}

func diffLines(a, b string) string {
	as, bs := map[string]bool{}, map[string]bool{}
	for _, l := range strings.Split(a, "\n") {
		as[l] = true
	}
	for _, l := range strings.Split(b, "\n") {
		bs[l] = true
	}
	var out []string
	for l := range as {
		if !bs[l] {
			out = append(out, "- "+l)
		}
	}
	for l := range bs {
		if !as[l] {
			out = append(out, "+ "+l)
		}
	}
	sort.Strings(out)
	if len(out) > 20 {
		out = out[:20]
	}
	return strings.Join(out, "\n")
}

// TestKernelPartialSync checks, with iptables-save before and after, that
// an incremental sync at 1k services changes only the touched chains:
// KUBE-SERVICES is rewritten by every sync (same content), the service's
// KUBE-SVC chain gets the new endpoint, one KUBE-SEP chain appears and one
// goes; every other chain is untouched.
func TestKernelPartialSync(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore", "iptables-legacy-save")
	ns := testenv.NewNetns(t, "iptpart")
	ctx := context.Background()
	p := New(Config{Backend: BackendLegacy, ClusterCIDR: testCfg.ClusterCIDR}, ns)
	svcs := genServices(1000, 3)
	if _, err := p.Sync(ctx, svcs); err != nil {
		t.Fatal(err)
	}
	before, err := ns.Run(ctx, nil, "iptables-legacy-save", "-t", "nat")
	if err != nil {
		t.Fatal(err)
	}
	changed := moveEndpoint(svcs, 500, 0, netip.MustParseAddr("198.19.120.7"))
	st, err := p.Sync(ctx, changed)
	if err != nil || st.Kind != "incremental" {
		t.Fatalf("%+v %v", st, err)
	}
	after, err := ns.Run(ctx, nil, "iptables-legacy-save", "-t", "nat")
	if err != nil {
		t.Fatal(err)
	}
	pn := changed[500].PortName(changed[500].Ports[0])
	want := []string{
		ServiceChainName(pn, "tcp"),
		EndpointChainName(pn, "tcp", svcs[500].Endpoints[0].IP.String()+":8080"),
		EndpointChainName(pn, "tcp", "198.19.120.7:8080"),
	}
	sort.Strings(want)
	got := changedChains(chainRules(before), chainRules(after))
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("chains changed by the incremental sync: %v, want %v", got, want)
	}
	t.Logf("incremental sync at 1k services: %v, %d rules, %d bytes", st.Wall, st.Objects, st.Bytes)
}
