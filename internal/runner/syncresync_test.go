package runner

import (
	"context"
	"testing"
	"time"

	"github.com/proxybench/proxybench/workload"
)

// modeNamed is a fakeProxier that calls itself a real mode, so the sync
// loop takes that mode's resync (proxymodes.Mode.MaxSyncInterval), and can be told to make its next sync full.
type modeNamed struct {
	*fakeProxier
	name string
}

func (p modeNamed) Mode() string { return p.name }

func (p modeNamed) ForceFullSync() {
	p.mu.Lock()
	p.fresh = true
	p.mu.Unlock()
}

// TestSyncLoopResyncsAsKubeProxy: with nothing changed the builtin sync
// loop runs no iptables or nftables sync within syncPeriod (kube-proxy's
// runner waits FullSyncPeriod, 1 h), so a rule deleted behind its back
// stays deleted as under kube-proxy; IPVS resyncs every syncPeriod.
func TestSyncLoopResyncsAsKubeProxy(t *testing.T) {
	const period = 30 * time.Millisecond
	run := func(name string) (syncs, full int) {
		p := modeNamed{fakeProxier: newFakeProxier(), name: name}
		l := startSyncLoop(context.Background(), p, 0, period, time.Now(), nil, func() []workload.Service { return nil })
		time.Sleep(10 * period)
		recs, _ := l.stop()
		for _, r := range recs {
			if r.Kind == "full" {
				full++
			}
		}
		return len(recs), full
	}
	for _, m := range []string{"iptables", "nftables"} {
		if n, _ := run(m); n != 0 {
			t.Errorf("%s: %d syncs in %s with nothing changed, want none (maxInterval 1 h)", m, n, 10*period)
		}
	}
	if n, _ := run("ipvs"); n < 4 {
		t.Errorf("ipvs: %d syncs in %s, want one each %s (maxInterval syncPeriod)", n, 10*period, period)
	}
}

// resyncing is a modeNamed that counts Resync calls (proxymodes.Resyncer,
// as builtin IPVS).
type resyncing struct {
	modeNamed
	calls *int
}

func (p resyncing) Resync() {
	p.mu.Lock()
	*p.calls++
	p.mu.Unlock()
}

// TestSyncLoopReadsBackEverySyncPeriod: a Resyncer's loop left idle reads
// everything back on each of its periodic syncs (each comes a syncPeriod
// after the last), as kube-proxy's IPVS proxier re-lists every real server
// on every sync; a proxier without Resync is never asked.
func TestSyncLoopReadsBackEverySyncPeriod(t *testing.T) {
	const period = 30 * time.Millisecond
	calls := 0
	p := resyncing{modeNamed: modeNamed{fakeProxier: newFakeProxier(), name: "ipvs"}, calls: &calls}
	l := startSyncLoop(context.Background(), p, 0, period, time.Now(), nil, func() []workload.Service { return nil })
	time.Sleep(10 * period)
	recs, _ := l.stop()
	p.mu.Lock()
	got := calls
	p.mu.Unlock()
	if len(recs) < 4 || got != len(recs) || l.resyncCount() != got {
		t.Errorf("%d periodic syncs, %d Resync calls, %d counted; want one per sync", len(recs), got, l.resyncCount())
	}
	plain := startSyncLoop(context.Background(), modeNamed{fakeProxier: newFakeProxier(), name: "ipvs"}, 0, period, time.Now(), nil, func() []workload.Service { return nil })
	time.Sleep(5 * period)
	plain.stop()
	if n := plain.resyncCount(); n != 0 {
		t.Errorf("a proxier without Resync counted %d resyncs", n)
	}
}
