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
	"github.com/proxybench/proxybench/reports"
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
	st := proxymodes.SyncStats{Kind: "full", Wall: p.wall} // objects: none read back (IPVS)
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

// exitingProxier's program exits on its own: at its failAt-th Sync (1:
// the first, with the first Sync's stats), or, with failAt 0, unseen by
// any Sync (during traffic), so only Exited tells.
type exitingProxier struct {
	*fakeProxier
	failAt int
	wall   time.Duration // the first Sync's data plane time when failAt is 1
	exited bool
}

var errExit = &proxymodes.Failed{Msg: "kube-proxy exited on its own during a later sync: signal: killed"}

func (p *exitingProxier) Sync(ctx context.Context, services []workload.Service) (proxymodes.SyncStats, error) {
	if p.syncs+1 == p.failAt {
		p.syncs++
		p.exited = true
		if p.failAt == 1 {
			return proxymodes.SyncStats{}, &proxymodes.Failed{Stats: proxymodes.SyncStats{Kind: "full", Wall: p.wall}, Msg: "kube-proxy exited on its own during its first sync: signal: killed"}
		}
		return proxymodes.SyncStats{}, errExit
	}
	return p.fakeProxier.Sync(ctx, services)
}

func (p *exitingProxier) Exited() error {
	if p.failAt == 0 && p.syncs > 0 {
		p.exited = true // died after its syncs, in the traffic phase
	}
	if !p.exited {
		return nil
	}
	if p.failAt == 1 {
		return &proxymodes.Failed{Msg: "kube-proxy exited on its own during its first sync: signal: killed"}
	}
	return errExit
}

// TestRunModeProxyExited: a row whose proxy program (kube-proxy) exits
// on its own is kept with what was measured before, and runMode returns
// a *proxymodes.Failed (Run marks the row failed and goes on):
//   - in its first Sync: the data plane's sync.full when it answered,
//     none of the later phases, Partial set;
//   - in sync.incremental: sync.full kept, no traffic, Partial set;
//   - unseen by any Sync (during traffic): every phase kept, not
//     Partial (nothing was cut), the failure found by Exited at the end.
//
// The row is cleaned up once every time.
func TestRunModeProxyExited(t *testing.T) {
	for _, c := range []struct {
		name               string
		failAt             int
		wall               time.Duration
		full, inc, lookups int
		partial            bool
	}{
		{"first sync, data plane answered", 1, 2 * time.Second, 1, 0, 0, true},
		{"first sync, data plane silent", 1, 0, 0, 0, 0, true},
		{"incremental", 2, 0, 1, 0, 0, true},
		{"traffic", 0, 0, 1, 3, 3, false},
	} {
		sc, svcs := phaseScenario(t, "", "")
		p := &exitingProxier{fakeProxier: newFakeProxier(), failAt: c.failAt, wall: c.wall}
		m := proxymodes.Mode{Name: "fake", SingleFullSync: true, New: func(*scenarios.Scenario, proxymodes.Node) (proxymodes.Proxier, error) { return p, nil }}
		e := newFakeEnv(p.fakeProxier)
		tb := &topology.Testbed{Nodes: make([]*topology.Netns, 1), Clients: make([]*topology.Netns, 1), ClientNode: []int{0}}
		mr, err := runMode(context.Background(), sc, Options{Progress: &recProgress{}}, tb, &e.env, svcs, m)
		var fl *proxymodes.Failed
		if !errors.As(err, &fl) {
			t.Errorf("%s: runMode error %v, want a *proxymodes.Failed", c.name, err)
			continue
		}
		if mr == nil {
			t.Errorf("%s: row lost", c.name)
			continue
		}
		if len(mr.SyncFull) != c.full || len(mr.SyncIncremental) != c.inc || len(mr.Lookup) != c.lookups {
			t.Errorf("%s: sync.full %d, incremental %d, lookup %d; want %d, %d, %d", c.name, len(mr.SyncFull), len(mr.SyncIncremental), len(mr.Lookup), c.full, c.inc, c.lookups)
		}
		if c.wall > 0 && (len(mr.SyncFull) != 1 || mr.SyncFull[0].Wall != c.wall) {
			t.Errorf("%s: sync.full %+v, want the data plane's %v kept", c.name, mr.SyncFull, c.wall)
		}
		if (mr.Partial != "") != c.partial || c.partial && !strings.Contains(mr.Partial, "exited on its own") {
			t.Errorf("%s: partial %q, want partial %t, saying kube-proxy exited", c.name, mr.Partial, c.partial)
		}
		if p.cleanups != 1 {
			t.Errorf("%s: %d cleanups, want 1", c.name, p.cleanups)
		}
	}
}

// TestRowsFailed: the run's error after failed rows names each and
// still unwraps to their *proxymodes.Failed; a guest's result gives its
// failed rows back (failedRows), none for a result without.
func TestRowsFailed(t *testing.T) {
	err := error(&RowsFailed{Errs: []error{fmt.Errorf("mode a at 5 services: %w", errExit), errors.New("mode b at 5 services: x")}})
	var fl *proxymodes.Failed
	if !errors.As(err, &fl) || fl != errExit {
		t.Errorf("errors.As(%v) found %v, want the row's *proxymodes.Failed", err, fl)
	}
	if s := err.Error(); !strings.HasPrefix(s, "2 row(s) failed") || !strings.Contains(s, "mode a at 5 services: kube-proxy exited") || !strings.Contains(s, "mode b") {
		t.Errorf("message %q", s)
	}
	r := &reports.Result{Modes: []reports.ModeResult{{Mode: "none"}, {Mode: "iptables (kube-proxy)", Failed: "mode iptables (kube-proxy) at 5 services: kube-proxy exited"}}}
	if got := failedRows(r); len(got) != 1 || got[0].Error() != r.Modes[1].Failed {
		t.Errorf("failedRows: %v, want the one failed row", got)
	}
	if got := failedRows(&reports.Result{Modes: []reports.ModeResult{{Mode: "none"}}}); got != nil {
		t.Errorf("failedRows of a result without failures: %v", got)
	}
}
