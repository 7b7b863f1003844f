// Package proxymodes defines what every Service proxy mode is (Mode, one
// value per mode) and implements (Proxier). Each mode lives in its own
// sub-package with a pure render step (services to a ruleset, no kernel),
// an apply step (ruleset to the kernel of one node namespace) and its
// Mode; package proxymodes/modes lists them. See docs/architecture.md.
package proxymodes

import (
	"context"
	"time"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/workload"
)

// SyncStats describes one Sync (defined in the leaf package measure, so
// that reports reads it without importing proxymodes).
type SyncStats = measure.SyncStats

// Proxier is one proxy mode programming one node namespace.
//
// Sync contract (kube-proxy's): the first Sync after New or Cleanup is a
// full sync (SyncStats.Kind "full") that programs every service from
// empty. Later Syncs receive the whole desired service set and send the
// kernel only what changed since the last successful Sync (Kind
// "incremental"): iptables rewrites the chains of changed services, IPVS
// and nftables send differences, userspace opens and closes changed
// listeners. A failed Sync makes the next one full. A proxier that also
// implements FullSyncer can be told to make its next Sync full (the sync
// loop does so every syncPeriod).
type Proxier interface {
	// Mode is the mode's name as written in scenarios ("iptables").
	Mode() string
	// Sync programs the kernel so that services are reachable through
	// their ClusterIPs, replacing what an earlier Sync programmed.
	Sync(ctx context.Context, services []workload.Service) (SyncStats, error)
	// Cleanup removes everything the proxier programmed.
	Cleanup(ctx context.Context) error
	// Info describes the implementation for the result (back end, tool
	// versions), for example {"backend": "legacy"}.
	Info() map[string]string
}

// FullSyncer is implemented by proxiers whose next Sync can be forced to
// be full (kube-proxy forces one every syncPeriod and after a failure).
type FullSyncer interface {
	ForceFullSync()
}

// Resyncer is implemented by proxiers whose incremental Sync reads back
// from the kernel only the objects whose desired state changed (builtin
// IPVS), where kube-proxy's proxier reads them all on every sync. Resync
// makes the next Sync read every object of its kind back and repair what
// differs (an object changed or deleted out of band), without the rest of
// a full sync. The sync loop (internal/runner's) calls it for a sync when
// syncPeriod has passed since the last sync that read everything, so a
// proxier left alone repairs within one syncPeriod, as kube-proxy's IPVS
// mode does (its runner's maxInterval is syncPeriod).
type Resyncer interface {
	Resync()
}

// Restarter is implemented by proxiers that run as a program of their
// own over an API (kube-proxy). Halt stops the program; with cleanup it
// also removes everything the program installed (kube-proxy --cleanup), as
// on a node that has never run it. Resume starts a new program on the same
// node, which makes its first, full sync of what the API holds, and
// returns when that sync is done (SyncStats.Wall from the program's
// start). Proxiers without it are restarted by the runner as a fresh
// proxier of the same mode (Mode.New) syncing the same services.
type Restarter interface {
	Halt(ctx context.Context, cleanup bool) error
	Resume(ctx context.Context) (SyncStats, error)
}

// Usager is implemented by modes whose data path runs in this process
// (userspace): the process's CPU time since the last Sync, and its
// resident set size in bytes (/proc/self/status VmRSS).
type Usager interface {
	Usage() (cpu time.Duration, rssBytes uint64)
}

// ToolResolver is implemented by proxiers that look their rule program up
// on PATH once and keep the path (nftables: knftables.New resolves nft;
// iptables: go-iptables is opened on the path of iptables-<backend>).
// ResolveTools drops what they resolved, so their next Sync looks the
// program up on PATH again; the runner calls it when it puts the
// failure.syncErrors wrappers on PATH and when it takes them off.
type ToolResolver interface {
	ResolveTools()
}

// Renderer is implemented by proxiers that can render without a kernel:
// the Rendering of what their next full Sync programs, from their own
// configuration. Tests compare it with Mode.Render, what the sim engine
// models (proxymodes/modes: TestSimRendersWhatTheRunPrograms).
type Renderer interface {
	Rendering(services []workload.Service) (*Rendering, error)
}

// Unfinished is the error of a Proxier's first Sync when the program it
// drives (kube-proxy) had not finished its first sync when the row's
// bound passed. Stats holds what was measured by then (Wall is the data
// plane's time when every probed service answered, else 0); Msg says how
// far the program got. The runner keeps the row with it, marked
// unfinished, and runs none of the row's later phases; the run goes on.
type Unfinished struct {
	Stats SyncStats
	Msg   string
}

func (u *Unfinished) Error() string { return u.Msg }

// SyncFailed is the error of a Sync when the program it drives
// (kube-proxy) reported the sync as failed: the sync ended without
// programming the rules (kube-proxy counted it in its sync duration
// histogram but did not move its last-sync timestamp), as when its
// `iptables-restore -w 5` gave up on an xtables lock held elsewhere.
// Stats holds what was measured by then (Kind; Wall from the first API
// write, or the API objects for a first sync, to the failure seen;
// Phases["kube-proxy"] the failed sync's own duration); Msg says why
// (the program's log) and what the program did next. The runner keeps
// the row with the syncs measured before it, marked partial with Msg,
// runs none of the row's later phases, and the run goes on.
type SyncFailed struct {
	Stats SyncStats
	Msg   string
}

func (e *SyncFailed) Error() string { return e.Msg }

// Failed is the error of a Proxier whose program (kube-proxy) exited on
// its own (crashed, was killed, was OOM-killed) while its row ran, from
// Sync, Halt, Resume, Cleanup or Exiter.Exited. Stats holds what the Sync
// in progress had measured (a first Sync: its setup phases and CPU, the
// objects read back, and Wall when every probed service had answered;
// else zero); Msg says what exited, how and when. The runner keeps the
// row with what was measured before, marked failed with Msg, runs none
// of its later phases and goes on with the run's other rows; the run
// then ends with an error (exit status 1), its result complete.
type Failed struct {
	Stats SyncStats
	Msg   string
}

func (f *Failed) Error() string { return f.Msg }

// Exiter is implemented by proxiers that drive a program of their own
// (kube-proxy): Exited returns a *Failed once the program has exited on
// its own, nil while it runs (or after Halt or Cleanup stopped it). The
// runner asks at the end of each row, so an exit during a phase that
// never calls the proxier (traffic) still fails the row.
type Exiter interface {
	Exited() error
}
