//go:build linux

package iptables

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
)

// TestKernelLockHeldFailsSync: with the xtables lock held elsewhere, a Sync
// fails after kube-proxy's 5 s wait (-w 5) instead of waiting forever, and
// the next Sync, once the lock is free, is full and succeeds. The lock is
// a private file ($XTABLES_LOCKFILE), so other runs on the machine are not
// held up.
func TestKernelLockHeldFailsSync(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 5 s for the lock")
	}
	testenv.RequireKernel(t, "iptables-legacy-restore", "iptables-legacy")
	lock := filepath.Join(t.TempDir(), "xtables.lock")
	t.Setenv("XTABLES_LOCKFILE", lock)
	ns := testenv.NewNetns(t, "iptlock")
	ctx := context.Background()
	p := New(Config{Backend: BackendLegacy, ClusterCIDR: testCfg.ClusterCIDR}, ns)
	if _, err := p.Sync(ctx, genServices(50, 2)); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(lock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	st, err := p.Sync(ctx, genServices(60, 2))
	took := time.Since(start)
	// iptables-restore says how long it waited: -w 5 was given.
	if err == nil || !strings.Contains(err.Error(), "xtables lock") || !strings.Contains(err.Error(), "after 5s") {
		t.Fatalf("Sync with the lock held: %v (after %s), want the xtables lock error after 5s", err, took)
	}
	t.Logf("sync with the lock held failed after %s (wall %s): %v", took, st.Wall, err)
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	st, err = p.Sync(ctx, genServices(60, 2))
	if err != nil || st.Kind != "full" {
		t.Fatalf("Sync after the lock was freed: kind %q, %v; want a full sync", st.Kind, err)
	}
	if err := p.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
}
