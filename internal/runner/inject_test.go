//go:build linux

package runner

import (
	"context"
	"net/netip"
	"os/exec"
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
	restore, err := injectSyncErrors(scenarios.SyncErrorsSpec{Every: 3}, 1)
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
	restore()
	if len(failed) != 2 || failed[0] != 3 || failed[1] != 6 {
		t.Errorf("failed calls %v, want [3 6]", failed)
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
	restore, err := injectSyncErrors(scenarios.SyncErrorsSpec{Every: 2}, 1)
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
