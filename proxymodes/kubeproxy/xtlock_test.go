//go:build linux

package kubeproxy_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/topology/controlplane"
	"github.com/proxybench/proxybench/workload"
)

// holdLock takes the xtables lock file path (flock, as iptables-legacy
// does), once kube-proxy's log at logPath holds after (from its start;
// "" at once; with old set, only in a log file other than old, a new
// process's), and releases it once the log shows an IPv4 "Sync failed"
// line past byte offset from, or after max; it returns a channel closed
// at the release, and when the lock was taken and released.
func holdLock(t *testing.T, path, logPath, after string, old os.FileInfo, from int, max time.Duration) (<-chan struct{}, *time.Time, *time.Time) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	lock := func() {
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			t.Error(err)
		}
	}
	taken, released := new(time.Time), new(time.Time)
	if after == "" {
		lock()
		*taken = time.Now()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer f.Close()
		end := time.Now().Add(max)
		for ; after != "" && time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			if fi, err := os.Stat(logPath); err != nil || (old != nil && os.SameFile(old, fi)) {
				continue
			}
			if b, _ := os.ReadFile(logPath); strings.Contains(string(b), after) {
				lock()
				*taken = time.Now()
				break
			}
		}
		for ; time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			b, _ := os.ReadFile(logPath)
			if len(b) > from && strings.Contains(string(b[from:]), `"Sync failed" ipFamily="IPv4"`) {
				break
			}
		}
		*released = time.Now()
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	}()
	t.Cleanup(func() { <-done })
	return done, taken, released
}

// TestKernelProxierXtablesLock: kube-proxy v1.37 (iptables mode, legacy
// back end, whose tools take the xtables lock) against an xtables lock
// held elsewhere. The lock is a private file (ProxierSpec.XtablesLock,
// XTABLES_LOCKFILE), so the machine's /run/xtables.lock, which every
// other iptables user shares, is never held. syncPeriod is 5 s (30 s,
// kube-proxy's default, with PROXYBENCH_SLOW=1).
//
//   - incremental: the lock is held from before one endpoint moves until
//     kube-proxy logs "Sync failed": its partial sync's
//     `iptables-restore -w 5` gives up after 5 s, the Sync returns a
//     *proxymodes.SyncFailed naming the lock, with kube-proxy's own
//     duration of the failed sync (>= 5 s), and kube-proxy's retry (a
//     full sync, after syncPeriod) is seen.
//   - first and restart (PROXYBENCH_SLOW=1): the lock is held while kube-proxy starts;
//     its first sync fails in `iptables -w 5 -N`, the first Sync returns
//     a *proxymodes.SyncFailed at once instead of reading the failed sync
//     as done and waiting for the data plane (Resume after a Halt
//     likewise), and no successful sync
//     follows within syncPeriod + 10 s (kube-proxy runs its first sync
//     outside its retrying runner).
func TestKernelProxierXtablesLock(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy", "iptables-legacy-restore", "ip6tables-legacy-restore")
	bins := testenv.RequireKube(t)
	period := 5 * time.Second
	if testenv.Slow() {
		period = 30 * time.Second
	}
	start := func(t *testing.T) (*kubeproxy.Proxier, string, string, []workload.Service) {
		ctx := context.Background()
		runID := topology.NewRunID()
		tb := echoTestbed(ctx, t, runID)
		dir := t.TempDir()
		lock := filepath.Join(dir, "xtables.lock")
		p, err := kubeproxy.NewProxier(kubeproxy.ProxierSpec{Mode: "iptables", Node: tb.Node, NodeIP: tb.NodeBackendAddr,
			ClusterCIDR: clusterCIDR, ServiceCIDR: serviceCIDR, Avoid: []netip.Prefix{serviceCIDR, podCIDR, nodeCIDR},
			KubeProxy: bins.KubeProxy, Bin: controlplane.Binaries{Etcd: bins.Etcd, APIServer: bins.APIServer}, Dir: dir,
			IPTablesBackend: "legacy", XtablesLock: lock,
			Pass: map[string]any{"iptables": map[string]any{"syncPeriod": period.String(), "minSyncPeriod": "1s"}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cleanupProxier(t, p, runID) })
		return p, lock, filepath.Join(dir, kubeproxy.NodeName(0)+".kube-proxy.log"), services(10)
	}
	counter := func(t *testing.T, p *kubeproxy.Proxier, name string) float64 {
		m, err := p.Scrape(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var v float64
		for _, s := range m[name].GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "ip_family" && l.GetValue() == "IPv4" {
					v += s.GetCounter().GetValue()
				}
			}
		}
		return v
	}

	t.Run("incremental", func(t *testing.T) {
		ctx := context.Background()
		p, lock, logPath, svcs := start(t)
		if _, err := p.Sync(ctx, svcs); err != nil {
			t.Fatal(err)
		}
		moved := append([]workload.Service(nil), svcs...)
		eps := append([]workload.Endpoint(nil), moved[4].Endpoints...)
		eps[0].IP = netip.MustParseAddr("198.19.100.1")
		moved[4].Endpoints = eps
		fi, err := os.Stat(logPath)
		if err != nil {
			t.Fatal(err)
		}
		released, _, at := holdLock(t, lock, logPath, "", nil, int(fi.Size()), 30*time.Second)
		t0 := time.Now()
		st, err := p.Sync(ctx, moved)
		ret := time.Since(t0)
		<-released
		var sf *proxymodes.SyncFailed
		if !errors.As(err, &sf) {
			t.Fatalf("Sync with the xtables lock held: %+v, %v; want a *proxymodes.SyncFailed", st, err)
		}
		if !strings.Contains(sf.Msg, "holding the xtables lock") || !strings.Contains(sf.Msg, "incremental sync failed") {
			t.Errorf("message %q, want the incremental sync's failure and its cause (the held lock)", sf.Msg)
		}
		if own := sf.Stats.Phases["kube-proxy"]; own < 4500*time.Millisecond {
			t.Errorf("kube-proxy's own duration of the failed sync %v, want >= its 5 s lock wait", own)
		}
		if !strings.Contains(sf.Msg, "next successful sync ended") {
			t.Errorf("message %q: kube-proxy's retry (after syncPeriod %v) not seen", sf.Msg, period)
		}
		restore := counter(t, p, "kubeproxy_sync_proxy_rules_iptables_restore_failures_total")
		partial := counter(t, p, "kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total")
		if restore != 1 || partial != 1 {
			t.Errorf("kube-proxy's restore failures %v, partial restore failures %v; want 1 and 1", restore, partial)
		}
		t.Logf("Sync returned after %v (lock released %v after the writes began); failed sync %v by kube-proxy's metric, seen %v after the first write; %s",
			ret.Round(time.Millisecond), at.Sub(t0).Round(time.Millisecond), sf.Stats.Phases["kube-proxy"].Round(time.Millisecond), sf.Stats.Wall.Round(time.Millisecond), sf.Msg)
		// After the retry, the data plane holds the change: a later Sync
		// back is an ordinary incremental one.
		if st, err := p.Sync(ctx, svcs); err != nil || st.Kind != "incremental" {
			t.Errorf("sync back after the recovery: %+v, %v", st, err)
		}
		if r := p.KubeProxyRecord(ctx); r == nil || len(r.FailedSyncs) != 1 {
			t.Errorf("record %+v, want the failed sync in FailedSyncs", r)
		}
	})

	t.Run("first", func(t *testing.T) {
		testenv.RequireSlow(t, "a failed first sync is watched for syncPeriod + 10 s after it")
		ctx := context.Background()
		p, lock, logPath, svcs := start(t)
		// Taken once both proxiers exist: held at kube-proxy's start, the
		// lock fails its iptables check (server_linux.go: Present() for
		// each family, `iptables -w 5`) and kube-proxy exits, "iptables
		// is not available on this host". Its first sync begins when its
		// informers have synced, after that line.
		t0 := time.Now()
		released, taken, at := holdLock(t, lock, logPath, `sync params" ipFamily="IPv6"`, nil, 0, 2*time.Minute)
		st, err := p.Sync(ctx, svcs)
		ret := time.Since(t0)
		<-released
		var sf *proxymodes.SyncFailed
		if err == nil {
			t.Fatalf("first Sync succeeded (%+v): kube-proxy's first sync began before the test took the lock %v after the Sync began", st, taken.Sub(t0))
		}
		if !errors.As(err, &sf) {
			t.Fatalf("first Sync with the xtables lock held: %+v, %v; want a *proxymodes.SyncFailed", st, err)
		}
		if !strings.Contains(sf.Msg, "first sync failed") || !strings.Contains(sf.Msg, "holding the xtables lock") {
			t.Errorf("message %q, want the first sync's failure and its cause", sf.Msg)
		}
		if !strings.Contains(sf.Msg, "no successful sync followed") {
			t.Errorf("message %q: kube-proxy v1.37 synced again after a failed first sync within syncPeriod + 10 s; docs/modes.md says it does not", sf.Msg)
		}
		t.Logf("first Sync returned after %v (lock taken %v and released %v after it began); %s", ret.Round(time.Millisecond),
			taken.Sub(t0).Round(time.Millisecond), at.Sub(t0).Round(time.Millisecond), sf.Msg)
	})

	// restart (PROXYBENCH_SLOW=1): the first sync of a kube-proxy
	// restarted over its own rules (Halt, Resume: the sync-disruption
	// phase's restart) fails the same way, and Resume says so.
	t.Run("restart", func(t *testing.T) {
		testenv.RequireSlow(t, "a failed first sync is watched for syncPeriod + 10 s after it")
		ctx := context.Background()
		p, lock, logPath, svcs := start(t)
		if _, err := p.Sync(ctx, svcs); err != nil {
			t.Fatal(err)
		}
		if err := p.Halt(ctx, false); err != nil {
			t.Fatal(err)
		}
		old, err := os.Stat(logPath)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		released, taken, _ := holdLock(t, lock, logPath, `sync params" ipFamily="IPv6"`, old, 0, 2*time.Minute)
		st, err := p.Resume(ctx)
		<-released
		if err == nil {
			t.Fatalf("Resume succeeded (%+v): kube-proxy's first sync began before the test took the lock %v after Resume began", st, taken.Sub(t0))
		}
		var sf *proxymodes.SyncFailed
		if !errors.As(err, &sf) || !strings.Contains(sf.Msg, "first sync after the restart failed") || !strings.Contains(sf.Msg, "holding the xtables lock") {
			t.Fatalf("Resume with the xtables lock held: %+v, %v; want a *proxymodes.SyncFailed naming the restart's first sync and the lock", st, err)
		}
		t.Logf("Resume: %s", sf.Msg)
	})
}
