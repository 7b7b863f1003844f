//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/iptables"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/traffic"
)

// recordingProxier is a fake proxier with a kube-proxy record, as a
// kube-proxy row has.
type recordingProxier struct{ *fakeProxier }

func (recordingProxier) KubeProxyRecord(context.Context) *measure.KubeProxy {
	return &measure.KubeProxy{Version: "v0.0.0-fake"}
}

// fakeRowSetup is TestRunModeOnFake's row: every phase that runs on the
// fakes wanted (sync.full, sync.incremental, traffic, fairness, churn).
func fakeRowSetup(t *testing.T) (*scenarios.Scenario, []workload.Service, proxymodes.Mode, *fakeEnv, *topology.Testbed) {
	sc, svcs := phaseScenario(t, ", perService: 4", "churn: {rate: 20, duration: 300ms, grace: 3s, probes: 2}\niptables: {minSyncPeriod: 20ms}\n")
	p := newFakeProxier()
	m := proxymodes.Mode{Name: "fake", New: func(*scenarios.Scenario, proxymodes.Node) (proxymodes.Proxier, error) {
		return recordingProxier{p}, nil
	},
		SyncPeriods: iptables.Mode.SyncPeriods}
	e := newFakeEnv(p)
	e.firstPicks = func(_ context.Context, clients []*topology.Netns, _ []netip.Addr, _ []workload.Service, _ time.Duration) ([][]netip.Addr, error) {
		return make([][]netip.Addr, len(clients)), nil
	}
	e.driveFairness = func(context.Context, traffic.FairnessSpec) (*traffic.FairnessResult, error) {
		return &traffic.FairnessResult{}, nil
	}
	tb := &topology.Testbed{Nodes: make([]*topology.Netns, 1), Clients: make([]*topology.Netns, 1), ClientNode: []int{0},
		ClientSources: [][]netip.Addr{{netip.MustParseAddr("198.19.0.1")}}}
	return sc, svcs, m, e, tb
}

// measured says which phases' figures a row holds (the phases that run
// on the fakes).
func measured(mr *reports.ModeResult) []string {
	var out []string
	for name, ok := range map[string]bool{
		"sync.full": len(mr.SyncFull) > 0, "sync.incremental": len(mr.SyncIncremental) > 0, "traffic": len(mr.Lookup) > 0,
		"fairness": mr.FairnessRun != nil, "churn": len(mr.Churn) > 0,
	} {
		if ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// TestPhaseErrorKeepsRow: an error injected in each phase of Phases in
// turn keeps the row with every phase finished before it, the faults
// recorded so far, the failing phase's own partial figures and the
// kube-proxy record, marks it partial with the cause, and runs no later
// phase (the bug of 3b83320: connReuse, lifecycle and transitions errors
// dropped the row).
func TestPhaseErrorKeepsRow(t *testing.T) {
	sc, svcs, m, e, tb := fakeRowSetup(t)
	full, _, err := runRow(context.Background(), Phases, sc, Options{Progress: &recProgress{}}, tb, &e.env, svcs, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	all := measured(full)
	if len(all) != 5 {
		t.Fatalf("the fake row measured %v, want the five phases that run on fakes", all)
	}
	for i, ph := range Phases {
		if ph.Scope != scenarios.ScopeRow {
			continue
		}
		t.Run(ph.Name, func(t *testing.T) {
			sc, svcs, m, e, tb := fakeRowSetup(t)
			list := slices.Clone(Phases)
			injected := errors.New("injected failure")
			list[i].Wants = nil // wanted, so it runs
			list[i].Run = func(_ context.Context, r *Row) error {
				r.Faults.add("fault of %s", ph.Name)
				return injected
			}
			mr, _, err := runRow(context.Background(), list, sc, Options{Progress: &recProgress{}}, tb, &e.env, svcs, m, nil)
			if !errors.Is(err, injected) || fate(context.Background(), err) != Stop {
				t.Fatalf("error %v (fate %v), want the injected one (stop)", err, fate(context.Background(), err))
			}
			if mr == nil {
				t.Fatal("the row was dropped")
			}
			var before []string
			for _, p := range Phases[:i] {
				if slices.Contains(all, p.Name) {
					before = append(before, p.Name)
				}
			}
			slices.Sort(before)
			if got := measured(mr); !slices.Equal(got, before) {
				t.Errorf("row holds %v, want exactly the phases before %s: %v", got, ph.Name, before)
			}
			if !slices.Contains(mr.Faults, "fault of "+ph.Name) {
				t.Errorf("faults %q lost the failing phase's fault", mr.Faults)
			}
			if mr.KubeProxy == nil || mr.KubeProxy.Version != "v0.0.0-fake" {
				t.Errorf("kube-proxy record %+v lost", mr.KubeProxy)
			}
		})
	}
}

// TestFate: the one map from a row's error to its fate.
func TestFate(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(live)
	cancel()
	for _, tc := range []struct {
		ctx  context.Context
		err  error
		want Fate
	}{
		{live, nil, Keep},
		{live, &proxymodes.Unfinished{Msg: "first sync not done"}, Partial},
		{live, fmt.Errorf("sync: %w", &proxymodes.SyncFailed{Msg: "xtables lock"}), Partial},
		{live, fmt.Errorf("traffic: %w", &proxymodes.Failed{Msg: "kube-proxy exited"}), Failed},
		{live, errors.New("netlink: EPERM"), Stop},
		{done, &proxymodes.SyncFailed{Msg: "xtables lock"}, Stop},
		{done, &proxymodes.Failed{Msg: "killed"}, Stop},
	} {
		if got := fate(tc.ctx, tc.err); got != tc.want {
			t.Errorf("fate(%v, ctx err %v) = %v, want %v", tc.err, tc.ctx.Err(), got, tc.want)
		}
	}
	if got := partialText(fmt.Errorf("wrapped: %w", &proxymodes.Unfinished{Msg: "own words"})); got != "own words" {
		t.Errorf("partial text %q, want the unfinished sync's own message", got)
	}
}

// TestPhaseList: every phase has a name, a field and a scope, names are
// unique, a row phase has Run and a run phase RunAll, and a phase that is
// not Core returns its report sections (Report) or adds them in Run.
func TestPhaseList(t *testing.T) {
	seen := map[string]bool{}
	for _, ph := range Phases {
		if ph.Name == "" || ph.Field == "" || seen[ph.Name] {
			t.Errorf("phase %+v: empty or duplicate name or field", ph.PhaseRule)
		}
		seen[ph.Name] = true
		switch ph.Scope {
		case scenarios.ScopeRow:
			if ph.Run == nil {
				t.Errorf("row phase %s has no Run", ph.Name)
			}
		case scenarios.ScopeRun:
			if ph.RunAll == nil {
				t.Errorf("run phase %s has no RunAll", ph.Name)
			}
		default:
			t.Errorf("phase %s: scope %q", ph.Name, ph.Scope)
		}
	}
	if c := Catalog(); len(c.Phases) != len(Phases) || !strings.Contains(strings.Join(scenarios.PhaseNames(c.Phases), ","), "churn") {
		t.Errorf("catalog phases %v", scenarios.PhaseNames(c.Phases))
	}
}
