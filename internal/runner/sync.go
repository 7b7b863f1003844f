//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/proxybench/proxybench/internal/monitoring"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// faults collects what went wrong in a phase without stopping it but may
// make a figure invalid (a conntrack table that could not be flushed); the
// mode's result carries them (reports.ModeResult.Faults) and the report
// shows them.
type faults []string

func (f *faults) add(format string, a ...any) { *f = append(*f, fmt.Sprintf(format, a...)) }

// syncFullPhase is sync.full: sc.Repetitions full syncs of services, each
// into a kernel namespace that has never held this mode's state: the
// first ones by a fresh proxier of m in a scratch namespace each (a
// proxier's Cleanup leaves kernel state behind that slows a re-sync, e.g.
// IPVS keeps deleted real servers in its trash list for minutes), the
// last by p on the node, whose conntrack table is flushed first and which
// then carries the traffic. A failed flush is a fault (the traffic could
// inherit another mode's NAT decisions), a failed sync an error.
//
// Every sync is observed live in live (nil: not monitored).
func syncFullPhase(ctx context.Context, sc *scenarios.Scenario, e *env, m proxymodes.Mode, p proxymodes.Proxier,
	services []workload.Service, prog Progress, f *faults, live *monitoring.RowMetrics) ([]proxymodes.SyncStats, reports.Summary, error) {
	runs := sc.Repetitions
	if m.SingleFullSync {
		runs = 1 // measured once, on the node: the progress says so
	}
	prog.Start(fmt.Sprintf("%s: sync.full × %d (%d services)", m.Name, runs, len(services)), runs)
	defer prog.Done()
	var out []proxymodes.SyncStats
	var walls []int64
	for rep := 0; rep < sc.Repetitions; rep++ {
		if err := ctx.Err(); err != nil {
			return nil, reports.Summary{}, err
		}
		var st proxymodes.SyncStats
		var err error
		if m.SingleFullSync && rep < sc.Repetitions-1 {
			// Measured once, on the node (the last repetition).
			continue
		}
		if rep < sc.Repetitions-1 {
			st, err = e.scratchSync(ctx, sc, m, rep, services)
		} else {
			if ferr := e.flush(0); ferr != nil {
				f.add("conntrack flush of node0 before the last full sync failed (traffic may follow another mode's NAT entries): %v", ferr)
			}
			st, err = p.Sync(ctx, services)
		}
		observeSync(live, "full", st, err)
		var u *proxymodes.Unfinished
		var fl *proxymodes.Failed
		var kept proxymodes.SyncStats
		switch {
		case errors.As(err, &u):
			kept = u.Stats
		case errors.As(err, &fl):
			kept = fl.Stats
		}
		if u != nil || fl != nil {
			// Kept: the data plane's time when every probed service
			// answered (an unfinished first sync, or kube-proxy exiting
			// during or right after it); the caller ends the row there.
			if kept.Wall > 0 {
				out = append(out, kept)
				walls = append(walls, int64(kept.Wall))
			}
			return out, reports.Summarize(walls), err
		}
		var sf *proxymodes.SyncFailed
		if errors.As(err, &sf) {
			// A failed sync is no sync.full figure: the syncs before it
			// are kept, the caller ends the row with its message.
			return out, reports.Summarize(walls), err
		}
		if err != nil {
			return nil, reports.Summary{}, fmt.Errorf("sync: %w", err)
		}
		out = append(out, st)
		walls = append(walls, int64(st.Wall))
		prog.Add(1)
	}
	return out, reports.Summarize(walls), nil
}

// syncIncrementalPhase is sync.incremental: reps times, one endpoint
// moves to a fresh pod IP (moveOneEndpoint) and p syncs, then syncs back
// (the way back is not recorded). p must hold services. On an error the
// syncs measured before it are returned with it (a failed sync is no
// figure: it is not among them). Every sync, the way back too, is
// observed live in live (nil: not monitored).
func syncIncrementalPhase(ctx context.Context, p proxymodes.Proxier, services []workload.Service, reps int, live *monitoring.RowMetrics) ([]proxymodes.SyncStats, reports.Summary, error) {
	var out []proxymodes.SyncStats
	var incs []int64
	for rep := 0; rep < reps; rep++ {
		st, err := p.Sync(ctx, moveOneEndpoint(services, rep))
		observeSync(live, "incremental", st, err)
		if err != nil {
			return out, reports.Summarize(incs), fmt.Errorf("incremental sync %d of %d: %w", rep+1, reps, err)
		}
		out = append(out, st)
		incs = append(incs, int64(st.Wall))
		back, err := p.Sync(ctx, services)
		observeSync(live, "incremental", back, err)
		if err != nil {
			return out, reports.Summarize(incs), fmt.Errorf("sync back after incremental sync %d of %d: %w", rep+1, reps, err)
		}
	}
	return out, reports.Summarize(incs), nil
}

// moveOneEndpoint returns services with the first endpoint of one service
// (chosen by rep, spread over the list) moved to a pod IP no service uses.
func moveOneEndpoint(services []workload.Service, rep int) []workload.Service {
	out := append([]workload.Service(nil), services...)
	i := (rep*7919 + len(services)/2) % len(services)
	var maxIP netip.Addr
	for _, s := range services {
		for _, e := range s.Endpoints {
			if !maxIP.IsValid() || maxIP.Less(e.IP) {
				maxIP = e.IP
			}
		}
	}
	if len(out[i].Endpoints) == 0 || !maxIP.IsValid() {
		return out
	}
	eps := append([]workload.Endpoint(nil), out[i].Endpoints...)
	eps[0].IP = maxIP.Next()
	out[i].Endpoints = eps
	return out
}

// syncFullPhaseV is sync.full as a Phase (syncFullPhase). A first sync
// that kube-proxy did not finish, or reported failed, keeps what it
// measured (fate: Partial).
var syncFullPhaseV = Phase{
	PhaseRule: scenarios.PhaseRule{Name: "sync.full", Field: "repetitions", Scope: scenarios.ScopeRow},
	Core:      true,
	Run: func(ctx context.Context, r *Row) (err error) {
		if g, ok := r.Proxier.(grower); ok && r.sweep != nil && r.sweep.from > 0 {
			return growPhase(ctx, r, g) // a later size of a kube-proxy row's sweep
		}
		r.Result.SyncFull, r.Result.SyncFullSummary, err = syncFullPhase(ctx, r.Sc, r.Env, r.Mode, r.Proxier, r.Services, r.Progress(), r.Faults, r.Live)
		return err
	},
}

// syncIncrementalPhaseV is sync.incremental as a Phase.
var syncIncrementalPhaseV = Phase{
	PhaseRule: scenarios.PhaseRule{Name: "sync.incremental", Field: "repetitions", Scope: scenarios.ScopeRow, Rules: true},
	Core:      true,
	Run: func(ctx context.Context, r *Row) (err error) {
		r.Result.SyncIncremental, r.Result.SyncIncrementalSummary, err = syncIncrementalPhase(ctx, r.Proxier, r.Services, r.Sc.Repetitions, r.Live)
		return err
	},
}
