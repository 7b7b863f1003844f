// Package measure holds the values a proxy mode fills and the reports
// read: the statistics of one sync (SyncStats) and what a mode's endpoint
// choice promises (Expectation). It is a leaf: it imports nothing of
// proxybench, so reports reads results without linking any mode (see
// docs/architecture.md, "Layers").
package measure

import "time"

// SyncStats describes one Sync.
type SyncStats struct {
	// Kind is "full" (programs every service from empty) or "incremental".
	Kind string `json:"kind"`
	// Wall is the wall time of the whole Sync (render + apply).
	Wall time.Duration `json:"wallNs"`
	// Start, when set, is when the sync's program started (a restarted
	// kube-proxy's process start, proxymodes.Restarter.Resume): Wall is
	// from it. Not recorded in results.
	Start time.Time `json:"-"`
	// CPU is the user+system CPU time the proxy itself spent on the Sync
	// (proxymodes.SyncCPU): the syncing thread plus the rule programs and
	// netlink calls it ran in its namespace; never the probes, echo server
	// or driver of the same process.
	CPU time.Duration `json:"cpuNs"`
	// Objects is the number of kernel objects programmed (iptables rules,
	// nft elements, IPVS servers). For a kube-proxy row it is what was
	// read back from the node namespace after the sync (ModeResult.Info
	// "ruleset" names the tool and when), also when kube-proxy's first
	// sync did not finish or kube-proxy exited: what it had programmed by
	// then, never the service count asked for; 0 when nothing was read
	// back (IPVS, or the read failed: Info "ruleset" says why), which the
	// reports show as "-".
	Objects int `json:"objects"`
	// Bytes is the size of what was sent to the kernel or its tool
	// (iptables-restore input); for a kube-proxy row, read back as
	// Objects (iptables only; 0, shown "-", otherwise).
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

// Units a scheduler balances, and so what the fairness figures count.
const (
	// UnitConnection: every new connection is one draw (rr, wrr, iptables'
	// statistic random, nftables' numgen, userspace round robin).
	UnitConnection = "connection"
	// UnitSource: a hash of the client address picks the endpoint (sh, mh,
	// and any scheduler under ClientIP affinity); each source address is one
	// draw, counted on the endpoint most of its connections reached.
	UnitSource = "source"
	// UnitDestination: a hash or locality table of the destination (the
	// ClusterIP) picks the endpoint (dh, lblc, lblcr): every connection of a
	// service should reach one endpoint; the figure is that stickiness.
	UnitDestination = "destination"
	// UnitActive: active (long-lived) connections per endpoint (lc, wlc,
	// sed, nq balance them).
	UnitActive = "active"
)

// Expectation is what a scheduler's kernel definition promises.
type Expectation struct {
	// Unit is one of the Unit* constants.
	Unit string `json:"unit"`
	// Weighted: expected shares are proportional to endpoint weights;
	// otherwise equal over endpoints of non-zero weight.
	Weighted bool `json:"weighted"`
	// Source names the definition (kernel file or kube-proxy behaviour).
	Source string `json:"source"`
}

// WithAffinity returns e under ClientIP session affinity (iptables'
// recent match, IPVS persistence, nftables' affinity sets, userspace
// sessions): every unit but destination becomes source, since a client
// address is pinned to its first pick.
func (e Expectation) WithAffinity(affinity bool) Expectation {
	if affinity && e.Unit != UnitDestination {
		e.Unit = UnitSource
		e.Source += "; ClientIP affinity pins each client address"
	}
	return e
}
