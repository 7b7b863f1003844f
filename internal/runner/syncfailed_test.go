//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
)

// failingProxier's failAt-th Sync (1-based) fails as kube-proxy's Proxier
// does when kube-proxy reports a failed sync (a *proxymodes.SyncFailed).
type failingProxier struct {
	*fakeProxier
	failAt int
}

const lockMsg = "kube-proxy's incremental sync failed after 5.01s by its own metric (its log: Another app is currently holding the xtables lock. Stopped waiting after 5s.)"

func (p *failingProxier) Sync(ctx context.Context, services []workload.Service) (proxymodes.SyncStats, error) {
	st, err := p.fakeProxier.Sync(ctx, services)
	if err == nil && p.syncs == p.failAt {
		st.Wall = 5 * time.Second
		return st, &proxymodes.SyncFailed{Stats: st, Msg: lockMsg}
	}
	return st, err
}

// TestRunModeSyncFailed: a row whose kube-proxy sync failed (first or
// incremental) is kept, not an error (the run goes on), marked Partial
// with the failure's cause; the incremental syncs measured before the
// failure are kept and the failed one is not among them; the row's later
// phases do not run and it is cleaned up.
func TestRunModeSyncFailed(t *testing.T) {
	// Syncs: 1 the first (full), then per repetition the incremental one
	// and the sync back: 2, 3; 4, 5; 6, 7.
	// With two nodes, sync 8 is the second node's first (startNodes).
	for _, tc := range []struct {
		failAt, incKept, nodes int
	}{{1, 0, 1}, {2, 0, 1}, {4, 1, 1}, {5, 2, 1}, {8, 3, 2}} {
		extra := ""
		if tc.nodes > 1 {
			extra = fmt.Sprintf("topology: {nodes: %d}\n", tc.nodes)
		}
		sc, svcs := phaseScenario(t, "", extra)
		p := &failingProxier{fakeProxier: newFakeProxier(), failAt: tc.failAt}
		m := proxymodes.Mode{Name: "fake", SingleFullSync: true, New: func(*scenarios.Scenario, proxymodes.Node) (proxymodes.Proxier, error) { return p, nil }}
		e := newFakeEnv(p.fakeProxier)
		tb := &topology.Testbed{Nodes: make([]*topology.Netns, tc.nodes), Clients: make([]*topology.Netns, 1), ClientNode: []int{0}}
		mr, err := runMode(context.Background(), sc, Options{Progress: &recProgress{}}, tb, &e.env, svcs, m)
		if err != nil {
			t.Fatalf("sync %d failed: runMode failed (%v); a failed kube-proxy sync must keep the row and let the run go on", tc.failAt, err)
		}
		if mr == nil || !strings.Contains(mr.Partial, "holding the xtables lock") {
			t.Fatalf("sync %d failed: row %+v, want it kept and marked with the failure's cause", tc.failAt, mr)
		}
		if tc.failAt == 1 && len(mr.SyncFull) != 0 {
			t.Errorf("sync.full %+v, want no figure from a failed first sync", mr.SyncFull)
		}
		if tc.failAt > 1 && len(mr.SyncFull) != 1 {
			t.Errorf("sync %d failed: sync.full %+v, want the first sync kept", tc.failAt, mr.SyncFull)
		}
		if len(mr.SyncIncremental) != tc.incKept || mr.SyncIncrementalSummary.Count != tc.incKept {
			t.Errorf("sync %d failed: %d incremental syncs kept (summary %d), want the %d before the failure", tc.failAt, len(mr.SyncIncremental), mr.SyncIncrementalSummary.Count, tc.incKept)
		}
		for _, s := range mr.SyncIncremental {
			if s.Wall == 5*time.Second {
				t.Errorf("sync %d failed: the failed sync is among the incremental figures %+v", tc.failAt, mr.SyncIncremental)
			}
		}
		if len(mr.Lookup) != 0 {
			t.Errorf("sync %d failed: the traffic phase ran after the failure", tc.failAt)
		}
		if p.cleanups != tc.nodes {
			t.Errorf("sync %d failed: %d cleanups, want the row cleaned up once per node (%d)", tc.failAt, p.cleanups, tc.nodes)
		}
	}
}

// TestSyncIncrementalPhaseKeepsEarlierSyncs: any error of a later
// repetition returns the repetitions measured before it.
func TestSyncIncrementalPhaseKeepsEarlierSyncs(t *testing.T) {
	_, svcs := phaseScenario(t, "", "")
	p := newFakeProxier()
	p.failAt = 6 // the third incremental sync
	if _, err := p.Sync(context.Background(), svcs); err != nil {
		t.Fatal(err)
	}
	stats, sum, err := syncIncrementalPhase(context.Background(), p, svcs, 3, nil)
	if err == nil || !strings.Contains(err.Error(), "incremental sync 3 of 3") {
		t.Fatalf("err %v, want the third incremental sync's failure", err)
	}
	var sf *proxymodes.SyncFailed
	if errors.As(err, &sf) {
		t.Errorf("a plain error reads as a SyncFailed: %v", err)
	}
	if len(stats) != 2 || sum.Count != 2 {
		t.Errorf("%d stats, %d summarized; want the 2 before the failure", len(stats), sum.Count)
	}
}
