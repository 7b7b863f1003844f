//go:build linux

package runner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
)

// unfinishedProxier's first Sync ends at its bound, as kube-proxy's
// Proxier does when its first sync outlasts kubeProxy.firstSyncTimeout.
type unfinishedProxier struct {
	*fakeProxier
	wall time.Duration // the data plane's time (0: never answered)
}

func (p *unfinishedProxier) Sync(ctx context.Context, services []workload.Service) (proxymodes.SyncStats, error) {
	st := proxymodes.SyncStats{Kind: "full", Wall: p.wall, Objects: len(services)}
	return st, &proxymodes.Unfinished{Stats: st, Msg: "kube-proxy's first sync not finished after 40m0s: 10 of 11 virtual servers"}
}

// TestRunModeUnfinishedFirstSync: a row whose first sync outlasted its
// bound is kept (not an error, so the run goes on) with the data plane's
// sync.full when it answered and none when it did not, marked Partial
// with how far it got; its later phases do not run and it is cleaned up.
func TestRunModeUnfinishedFirstSync(t *testing.T) {
	for _, wall := range []time.Duration{3 * time.Second, 0} {
		sc, svcs := phaseScenario(t, "", "")
		p := &unfinishedProxier{fakeProxier: newFakeProxier(), wall: wall}
		m := proxymodes.Mode{Name: "fake", SingleFullSync: true, New: func(*scenarios.Scenario, proxymodes.Node) (proxymodes.Proxier, error) { return p, nil }}
		e := newFakeEnv(p.fakeProxier)
		tb := &topology.Testbed{Nodes: make([]*topology.Netns, 1), Clients: make([]*topology.Netns, 1), ClientNode: []int{0}}
		mr, err := runMode(context.Background(), sc, Options{Progress: &recProgress{}}, tb, &e.env, svcs, m)
		if err != nil {
			t.Fatalf("data plane %v: runMode failed (%v); an unfinished first sync must keep the row and let the run go on", wall, err)
		}
		if mr == nil || !strings.Contains(mr.Partial, "not finished after 40m0s") {
			t.Fatalf("data plane %v: row %+v, want it kept and marked with the unfinished sync", wall, mr)
		}
		if wall > 0 && (len(mr.SyncFull) != 1 || mr.SyncFull[0].Wall != wall || mr.SyncFullSummary.Count != 1) {
			t.Errorf("sync.full %+v (summary %+v), want the data plane's %v kept", mr.SyncFull, mr.SyncFullSummary, wall)
		}
		if wall == 0 && (len(mr.SyncFull) != 0 || mr.SyncFullSummary.Count != 0) {
			t.Errorf("sync.full %+v, want none when the data plane never answered", mr.SyncFull)
		}
		if len(mr.SyncIncremental) != 0 || len(mr.Lookup) != 0 {
			t.Errorf("later phases ran after an unfinished first sync: incremental %d, lookup %d", len(mr.SyncIncremental), len(mr.Lookup))
		}
		if p.cleanups != 1 {
			t.Errorf("%d cleanups, want the row cleaned up once", p.cleanups)
		}
	}
}
