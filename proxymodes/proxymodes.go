// Package proxymodes defines what every Service proxy mode implements. Each
// mode lives in its own sub-package with a pure render step (services to a
// ruleset, no kernel) and an apply step (ruleset to the kernel of one node
// namespace).
package proxymodes

import (
	"context"
	"time"

	"github.com/proxybench/proxybench/workload"
)

// SyncStats describes one Sync.
type SyncStats struct {
	// Kind is "full" (programs every service from empty) or "incremental".
	Kind string `json:"kind"`
	// Wall is the wall time of the whole Sync (render + apply).
	Wall time.Duration `json:"wallNs"`
	// CPU is user+system CPU time of this process and its waited-for
	// children (getrusage RUSAGE_SELF + RUSAGE_CHILDREN) during the Sync.
	CPU time.Duration `json:"cpuNs"`
	// Objects is the number of kernel objects programmed (iptables rules,
	// nft elements, IPVS servers).
	Objects int `json:"objects"`
	// Bytes is the size of what was sent to the kernel or its tool
	// (iptables-restore input).
	Bytes int `json:"bytes"`
	// Phases splits Wall by step (for example "render", "restore").
	Phases map[string]time.Duration `json:"phasesNs,omitempty"`
	// ConntrackDeleted counts the stale UDP conntrack entries the sync
	// deleted after programming (kube-proxy's CleanStaleEntries, see
	// proxymodes/conntrack; phase "conntrack"); ConntrackError is that
	// step's failure, which kube-proxy logs without failing the sync.
	ConntrackDeleted int    `json:"conntrackDeleted,omitempty"`
	ConntrackError   string `json:"conntrackError,omitempty"`
}

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

// Usager is implemented by modes whose data path runs in this process
// (userspace): the process's CPU time since the last Sync, and its
// resident set size in bytes (/proc/self/status VmRSS).
type Usager interface {
	Usage() (cpu time.Duration, rssBytes uint64)
}
