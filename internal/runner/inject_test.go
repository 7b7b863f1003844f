//go:build linux

package runner

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/proxymodes/nftables"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// TestInjectSyncErrors: with every: 3, calls 3 and 6 of the wrapped
// programs (counted together) exit 1 without running the tool; the others
// run the real one; restore puts PATH back.
func TestInjectSyncErrors(t *testing.T) {
	testenv.RequireTool(t, "iptables-legacy-restore", "flock")
	w, restore, err := injectSyncErrors(scenarios.SyncErrorsSpec{Every: 3}, 1)
	if err != nil {
		t.Fatal(err)
	}
	wrapped, _ := exec.LookPath("iptables-legacy-restore")
	var failed []int
	for n := 1; n <= 6; n++ {
		out, err := exec.Command("iptables-legacy-restore", "--version").CombinedOutput()
		switch {
		case err != nil && strings.Contains(string(out), "rule-program call") && strings.Contains(string(out), "fails"):
			failed = append(failed, n)
		case err != nil || !strings.Contains(string(out), "iptables-restore v"):
			t.Fatalf("call %d: %v: %s", n, err, out)
		}
	}
	inj := w.injected()
	restore()
	if len(failed) != 2 || failed[0] != 3 || failed[1] != 6 {
		t.Errorf("failed calls %v, want [3 6]", failed)
	}
	if inj.Calls != 6 || inj.Failed != 2 || !slices.Contains(inj.Programs, "iptables-legacy-restore") {
		t.Errorf("wrappers' account %+v, want 6 calls, 2 failed, iptables-legacy-restore wrapped", inj)
	}
	if p, _ := exec.LookPath("iptables-legacy-restore"); p == wrapped || !strings.Contains(wrapped, "proxybench-syncerrors-") {
		t.Errorf("wrapper %s, after restore %s", wrapped, p)
	}
}

// TestSyncFailures: a failed sync is described with the next successful
// sync's end as its recovery, the changes made meanwhile and the probes'
// view of that window.
func TestSyncFailures(t *testing.T) {
	s := time.Second.Nanoseconds()
	syncs := []reports.SyncRecord{
		{AtNs: 0},
		{AtNs: 2 * s, Err: "exit status 1"},
		{AtNs: 3 * s, Err: "exit status 1"},
		{AtNs: 4 * s},
		{AtNs: 9 * s, Err: "exit status 4"},
	}
	syncs[1].Kind, syncs[3].Kind, syncs[3].Wall = "incremental", "full", 500*time.Millisecond
	var seen probeBins
	seen.add(1500*time.Millisecond, true)
	seen.add(2500*time.Millisecond, false)
	seen.add(4200*time.Millisecond, true)
	seen.add(5*time.Second, true)
	samples := []reports.ChurnSample{{AtNs: s}, {AtNs: 2 * s}, {AtNs: 3500 * time.Millisecond.Nanoseconds()}, {AtNs: 6 * s}}
	got := syncFailures(syncs, &seen, samples)
	if len(got) != 3 {
		t.Fatalf("%d failures, want 3: %+v", len(got), got)
	}
	f := got[0]
	if f.Index != 1 || f.RecoveredNs != 2500*time.Millisecond.Nanoseconds() || f.RecoveryKind != "full" || f.Changes != 2 || f.ProbeConns != 2 || f.ProbeErrors != 1 {
		t.Errorf("first failure %+v", f)
	}
	if got[2].RecoveredNs != -1 || got[2].Err != "exit status 4" {
		t.Errorf("unrecovered failure %+v", got[2])
	}
}

// TestSyncErrorsReachNftables: after ResolveTools, the nftables proxier's
// knftables handle runs the failure.syncErrors wrapper: with every: 2,
// every second rule-programming call ("nft -f") fails with the wrapper's
// message and non-zero exit, the others program the table (knftables'
// version and check calls are not counted); after restore and another
// ResolveTools it syncs with the real nft again.
func TestSyncErrorsReachNftables(t *testing.T) {
	testenv.RequireKernel(t, "nft", "flock")
	ns := testenv.NewNetns(t, "se")
	p := nftables.New(nftables.Config{}, ns)
	svcs := []workload.Service{{Name: "svc-1", Namespace: "pb", ClusterIP: netip.MustParseAddr("198.18.0.1"),
		Ports:     []workload.ServicePort{{Name: "p80", Protocol: "TCP", Port: 80, TargetPort: 8080}},
		Endpoints: []workload.Endpoint{workload.NewEndpoint(netip.MustParseAddr("198.19.0.1"))}}}
	ctx := context.Background()
	if _, err := p.Sync(ctx, svcs); err != nil {
		t.Fatal(err) // resolves the real nft
	}
	_, restore, err := injectSyncErrors(scenarios.SyncErrorsSpec{Every: 2}, 1)
	if err != nil {
		t.Fatal(err)
	}
	p.ResolveTools()
	var failed int
	for i := 0; i < 4; i++ {
		p.ForceFullSync()
		_, err := p.Sync(ctx, svcs)
		switch {
		case err != nil && strings.Contains(err.Error(), "proxybench failure.syncErrors"):
			failed++
		case err != nil:
			t.Fatalf("sync %d: %v", i+1, err)
		}
	}
	restore()
	p.ResolveTools()
	// A full sync sends two nft -f transactions ("chains", "elements"):
	// with every second call failing, each of the 4 syncs fails on one.
	if failed == 0 {
		t.Fatalf("no sync failed: the wrapper did not reach nftables")
	}
	if _, err := p.Sync(ctx, svcs); err != nil {
		t.Fatalf("sync after restore: %v", err)
	}
	if out, err := ns.Run(ctx, nil, "nft", "list", "table", "ip", "kube-proxy"); err != nil || !strings.Contains(string(out), "198.18.0.1") {
		t.Fatalf("table after restore: %v\n%s", err, out)
	}
	t.Logf("%d of 4 full syncs failed", failed)
}

// TestSyncErrorWrappersKubeProxy: a kube-proxy row's wrappers (IPv4
// only), first on a PATH before fake iptables-restore and nft programs:
// unarmed, every call runs the next program of its name on PATH (not the
// wrapper again) and is counted; armed with every: 2, every second
// counted call fails without running it and is listed; nft's check and
// list calls and an ip6 transaction run the real nft uncounted; disarmed,
// every call runs again.
func TestSyncErrorWrappersKubeProxy(t *testing.T) {
	testenv.RequireTool(t, "flock")
	bin := t.TempDir()
	log := filepath.Join(bin, "ran")
	for _, prog := range []string{"iptables-restore", "nft"} {
		fake := "#!/bin/sh\ncat >/dev/null\necho " + prog + " >> " + log + "\n"
		if err := os.WriteFile(filepath.Join(bin, prog), []byte(fake), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	dir := filepath.Join(t.TempDir(), "syncerrors")
	w, err := writeSyncErrorWrappers(dir, kubeProxyWrapped, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	ran := func() int {
		b, _ := os.ReadFile(log)
		return strings.Count(string(b), "\n")
	}
	call := func(stdin string, prog string, args ...string) error {
		cmd := exec.Command(prog, args...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil && !strings.Contains(string(out), "proxybench failure.syncErrors") {
			t.Fatalf("%s %v: %v: %s", prog, args, err, out)
		}
		return err
	}
	v4 := "add table ip kube-proxy { comment \"rules for kube-proxy\" ; }\n"
	v6 := "add table ip6 kube-proxy { comment \"rules for kube-proxy\" ; }\n"
	if call("*nat\nCOMMIT\n", "iptables-restore", "-w", "5", "--noflush") != nil || call(v4, "nft", "-f", "-") != nil {
		t.Fatal("an unarmed call failed")
	}
	if calls, failed := w.counts(); calls != 2 || failed != 0 || ran() != 2 {
		t.Fatalf("unarmed: %d calls counted, %d failed, %d run; want 2, 0, 2", calls, failed, ran())
	}
	if err := w.arm(scenarios.SyncErrorsSpec{Every: 2}, 1); err != nil {
		t.Fatal(err)
	}
	var errs []bool
	for i := 0; i < 4; i++ {
		errs = append(errs, call(v4, "nft", "-f", "-") != nil)
	}
	// Uncounted: a check, a list and an IPv6 transaction.
	if call(v4, "nft", "--check", "-f", "-") != nil || call("", "nft", "--json", "list", "table", "ip", "kube-proxy") != nil || call(v6, "nft", "-f", "-") != nil {
		t.Fatal("an uncounted nft call failed")
	}
	errs = append(errs, call("*nat\nCOMMIT\n", "iptables-restore") != nil, call("*nat\nCOMMIT\n", "iptables-restore") != nil)
	if want := []bool{false, true, false, true, false, true}; !slices.Equal(errs, want) {
		t.Errorf("armed calls failed %v, want %v", errs, want)
	}
	if calls, failed := w.counts(); calls != 6 || failed != 3 || ran() != 2+3+3 {
		t.Errorf("armed: %d calls counted, %d failed, %d run in all; want 6, 3, 8", calls, failed, ran())
	}
	if err := w.disarm(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if call(v4, "nft", "-f", "-") != nil {
			t.Fatal("a call failed after disarm")
		}
	}
	if inj := w.injected(); inj.Calls != 8 || inj.Failed != 3 || !slices.Equal(inj.Programs, []string{"iptables-restore", "nft"}) {
		t.Errorf("account %+v, want 8 calls, 3 failed, iptables-restore and nft", inj)
	}
}
