package reports

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/proxybench/proxybench/measure"
)

// ModeSwitch is one switch of the modeSwitch phase (run-scoped: it spans
// the from row and the to row): on one node, with probes running, the
// old proxier stops (its rules stay), a new one starts in the other mode,
// then the recovery step (`kube-proxy --cleanup`, or for builtin every
// mode's kube-proxy v1.37 CleanupLeftovers) runs with the new one
// stopped, and the new one starts again. Times are from Start, the
// moment the old proxier was told to stop, in ns.
type ModeSwitch struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Implementation is "builtin" or "kube-proxy"; Version kube-proxy's.
	Implementation string    `json:"implementation"`
	Version        string    `json:"version,omitempty"`
	Kernel         string    `json:"kernel,omitempty"`
	Start          time.Time `json:"start"`
	// Services are the probed services, each with its outage.
	Services []SwitchService `json:"services"`
	// Window counts the probes from Start until the new mode answered on
	// every probed service (or Settle passed): attempts, failed, slow.
	Window SyncWindow `json:"window"`
	// StoppedNs is when the old proxier had stopped; NewStartNs when the
	// new one started (kube-proxy: its process was forked); FirstSyncNs
	// how long the new one's first full sync took from its start (builtin:
	// its start-up cleanup and first Sync; kube-proxy: process start to
	// its first IPv4 sync done, by its metrics), -1 when it never finished.
	StoppedNs   int64 `json:"stoppedNs"`
	NewStartNs  int64 `json:"newStartNs"`
	FirstSyncNs int64 `json:"firstSyncNs"`
	// ProxyMetricNs is kube-proxy's own duration of that sync
	// (kubeproxy_sync_proxy_rules_duration_seconds), 0 for builtin.
	ProxyMetricNs int64 `json:"proxyMetricNs,omitempty"`
	// StartupCleanup says what the new proxier removed at start (builtin:
	// the modes whose CleanupLeftovers ran, as kube-proxy v1.37's
	// platformCleanup), with its time.
	StartupCleanup   string `json:"startupCleanup,omitempty"`
	StartupCleanupNs int64  `json:"startupCleanupNs,omitempty"`
	// Established connections opened through the old rules before the
	// switch; Survived of them still carried data after it (a byte sent
	// was acknowledged by the endpoint).
	Established int      `json:"established"`
	Survived    int      `json:"survived"`
	BrokenHow   []string `json:"brokenHow,omitempty"`
	// Before is what the old mode had in the kernel before the switch
	// (object counts by group); Leftovers what of it was still there
	// after the switch and not the new mode's own; AfterCleanup every
	// proxy object left after the recovery step's cleanup (any mode).
	Before       []Leftover `json:"before,omitempty"`
	Leftovers    []Leftover `json:"leftovers"`
	AfterCleanup []Leftover `json:"afterCleanup"`
	// Cleanup names the recovery step ("kube-proxy --cleanup" or
	// "builtin: CleanupLeftovers of iptables, ipvs, nftables"), its time,
	// and its error when it failed (kube-proxy exits 1 after IPVS mode).
	Cleanup      string `json:"cleanup,omitempty"`
	CleanupNs    int64  `json:"cleanupNs,omitempty"`
	CleanupError string `json:"cleanupError,omitempty"`
	// Recovery counts the probes from the recovery step's start (the new
	// proxier stopped, the cleanup, the new proxier started again) until
	// every probed service answered again; RecoveryOutageNs the longest
	// outage of a probed service in it (as Services' OutageNs, -1: one
	// never answered again) and RecoveryFirstSyncNs the restarted
	// proxier's first sync.
	Recovery            *SyncWindow `json:"recovery,omitempty"`
	RecoveryOutageNs    int64       `json:"recoveryOutageNs,omitempty"`
	RecoveryFirstSyncNs int64       `json:"recoveryFirstSyncNs,omitempty"`
	// KubeProxy records a kube-proxy switch's processes (the from mode's,
	// the to mode's, the one restarted after the cleanup: Earlier), their
	// logs, configs and sync metrics.
	KubeProxy *measure.KubeProxy `json:"kubeProxy,omitempty"`
	// Error says why the switch stopped before its end (figures after it
	// are missing); Notes are what went wrong without spoiling it.
	Error string   `json:"error,omitempty"`
	Notes []string `json:"notes,omitempty"`
}

// Label names the switch in reports: "iptables → nftables (kube-proxy
// v1.37.2)", "userspace → iptables (builtin)".
func (m ModeSwitch) Label() string {
	who := m.Implementation
	if m.Version != "" {
		who += " " + m.Version
	}
	return fmt.Sprintf("%s → %s (%s)", m.From, m.To, who)
}

// SwitchService is one probed service of a switch: its outage is its
// longest run of failed connections after Start, from the answer of the
// successful connection before it (through the old rules) to the answer
// of the first successful one after it (through the new), in ns; 0 when
// no connection to it failed; -1 when it never answered again.
type SwitchService struct {
	Service   string `json:"service"`
	ClusterIP string `json:"clusterIP"`
	Attempts  int    `json:"attempts"`
	Failed    int    `json:"failed"`
	OutageNs  int64  `json:"outageNs"`
	// LastOldNs and FirstNewNs bound the outage, from Start: LastOldNs is
	// negative when the last answer through the old rules came before
	// Start, nil when unknown (no failure, or no answer before it; results
	// before schema 2026-12-02 wrote -1); FirstNewNs is -1 when unknown.
	LastOldNs  *int64 `json:"lastOldNs,omitempty"`
	FirstNewNs int64  `json:"firstNewNs"`
}

// Leftover is a group of proxy objects read back from the node's kernel:
// Kind ("iptables chain", "iptables jump", "ipvs virtual server",
// "kube-ipvs0 address", "ipset", "nft table"), Where (the tool and table:
// "iptables-legacy ip nat"), Name (a chain, set or table, or a pattern
// "KUBE-SVC-*" for hashed names), Count objects of that name, and Rules
// (or entries) they hold.
type Leftover struct {
	Kind  string `json:"kind"`
	Where string `json:"where,omitempty"`
	Name  string `json:"name"`
	Count int    `json:"count"`
	Rules int    `json:"rules,omitempty"`
}

// String is "iptables-legacy ip nat KUBE-SVC-* ×1000 (3000 rules)" (rules; ipset entries; nft table chains; virtual server real servers).
func (l Leftover) String() string {
	var b strings.Builder
	if l.Where != "" {
		b.WriteString(l.Where + " ")
	}
	b.WriteString(l.Name)
	if l.Count != 1 {
		fmt.Fprintf(&b, " ×%d", l.Count)
	}
	if l.Rules > 0 {
		unit := "rule"
		switch l.Kind {
		case "ipset":
			unit = "entr"
		case "nft table":
			unit = "chain"
		case "ipvs virtual server":
			unit = "real server"
		}
		switch {
		case l.Rules == 1 && unit == "entr":
			unit = "entry"
		case unit == "entr":
			unit = "entries"
		case l.Rules != 1:
			unit += "s"
		}
		fmt.Fprintf(&b, " (%d %s)", l.Rules, unit)
	}
	return b.String()
}

// LeftoverCount is the number of objects in ls.
func LeftoverCount(ls []Leftover) int {
	n := 0
	for _, l := range ls {
		n += l.Count
	}
	return n
}

// LeftoverText names every group of ls, "; "-separated ("none" when
// empty).
func LeftoverText(ls []Leftover) string {
	if len(ls) == 0 {
		return "none"
	}
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.String()
	}
	return strings.Join(out, "; ")
}

// MaxOutage is the longest outage of the probed services (ns), and
// whether a service never answered again.
func (m ModeSwitch) MaxOutage() (ns int64, never bool) {
	for _, s := range m.Services {
		if s.OutageNs < 0 {
			never = true
			continue
		}
		ns = max(ns, s.OutageNs)
	}
	return ns, never
}

// ModeSwitchSections are the report sections of switches: one row per
// switch (outage, failures, established connections, first sync,
// leftovers after the switch and after the cleanup, each named) and one
// row per probed service of each switch (its outage window).
func ModeSwitchSections(switches []ModeSwitch) []Section {
	sum := Section{Phase: "modeSwitch", Title: "mode switch under traffic", Scope: "run",
		Intro: "One node switches proxy mode as a DaemonSet rollout does: the old proxier stops and leaves its rules, a new one starts in the other mode " +
			"(cleaning up at start what kube-proxy v1.37 cleans up: nftables removes the iptables and ipvs modes' rules, iptables and ipvs remove the nftables table), " +
			"while probes connect to the probed services. Outage: per service, its longest run of failed connections, from the answer before it to the first answer after it; " +
			"the longest over the probed services (a run of failures, not the span of sporadic timeouts). Leftovers: the old mode's objects still in the kernel after the switch that the new mode does not own; " +
			"after the cleanup (kube-proxy --cleanup, or builtin's CleanupLeftovers of every mode, with the new proxier stopped) every proxy object left.",
		Columns: []Column{{Name: "kernel"}, {Name: "outage max", Unit: "s", Figure: "outage.max"}, {Name: "services out", Unit: "count", Figure: "services.out"},
			{Name: "attempts", Unit: "count", Figure: "attempts"}, {Name: "failed", Unit: "count", Figure: "failed"}, {Name: "slow", Unit: "count", Figure: "slow"},
			{Name: "established", Unit: "count", Figure: "established"}, {Name: "survived", Unit: "count", Figure: "established.survived"}, {Name: "broken how"},
			{Name: "new first sync", Unit: "s", Figure: "firstsync"}, {Name: "its sync by kube-proxy's metric", Unit: "s", Figure: "firstsync.metric"},
			{Name: "startup cleanup"}, {Name: "startup cleanup took", Unit: "s", Figure: "startupcleanup"},
			{Name: "leftovers", Unit: "count", Figure: "leftovers"}, {Name: "leftovers named"},
			{Name: "cleanup"}, {Name: "cleanup took", Unit: "s", Figure: "cleanup"},
			{Name: "after cleanup", Unit: "count", Figure: "leftovers.aftercleanup"}, {Name: "after cleanup named"},
			{Name: "recovery attempts", Unit: "count", Figure: "recovery.attempts"}, {Name: "recovery failed", Unit: "count", Figure: "recovery.failed"},
			{Name: "recovery outage", Unit: "s", Figure: "recovery.outage"}, {Name: "recovery first sync", Unit: "s", Figure: "recovery.firstsync"}}}
	per := Section{Phase: "modeSwitch", Title: "mode switch: outage per probed service", Scope: "run",
		Intro: "Per probed service of each switch: connections made from the switch's start, those that failed, and the outage window (from the switch's start: the last answer through the old rules, negative when it came before the start, and the first through the new).",
		Columns: []Column{{Name: "service", Key: true}, {Name: "cluster IP"}, {Name: "attempts", Unit: "count", Figure: "service.attempts"}, {Name: "failed", Unit: "count", Figure: "service.failed"},
			{Name: "outage", Unit: "s", Figure: "service.outage"}, {Name: "last old", Unit: "s", Figure: "service.lastold"}, {Name: "first new", Unit: "s", Figure: "service.firstnew"}}}
	secs := func(ns int64) Cell {
		if ns < 0 {
			return Text("never")
		}
		return Num(float64(ns)/1e9, "%.3f")
	}
	for _, m := range switches {
		label := m.Label()
		out, never := m.MaxOutage()
		outCell := secs(out)
		if never {
			outCell = Text("never answered again")
		}
		nOut := 0
		for _, s := range m.Services {
			if s.OutageNs != 0 {
				nOut++
			}
		}
		cleanup := m.Cleanup
		if m.CleanupError != "" {
			cleanup += " (failed: " + m.CleanupError + ")"
		}
		rec, recSync, recAtt, recFailed := Missing(), Missing(), Missing(), Missing()
		if m.Recovery != nil {
			rec = secs(m.RecoveryOutageNs)
			recSync = secs(m.RecoveryFirstSyncNs)
			recAtt, recFailed = Int(m.Recovery.Attempts), Int(m.Recovery.Failed)
		}
		metric := Missing() // builtin: no metric of its own
		if m.ProxyMetricNs > 0 {
			metric = secs(m.ProxyMetricNs)
		}
		took := func(ns int64, what string) Cell {
			if ns <= 0 || what == "" {
				return Missing()
			}
			return secs(ns)
		}
		first := secs(m.FirstSyncNs)
		if len(m.Services) == 0 && m.Error != "" {
			outCell, first = Missing(), Missing()
		}
		row := SectionRow{Row: label, Cells: []Cell{Text(m.Kernel), outCell, Int(nOut), Int(m.Window.Attempts), Int(m.Window.Failed), Int(m.Window.Slow),
			Int(m.Established), Int(m.Survived), Text(orDash(strings.Join(m.BrokenHow, "; "))), first, metric,
			Text(orDash(m.StartupCleanup)), took(m.StartupCleanupNs, m.StartupCleanup),
			Int(LeftoverCount(m.Leftovers)), Text(LeftoverText(m.Leftovers)),
			Text(orDash(cleanup)), took(m.CleanupNs, m.Cleanup), Int(LeftoverCount(m.AfterCleanup)), Text(LeftoverText(m.AfterCleanup)),
			recAtt, recFailed, rec, recSync}}
		switch {
		case m.Error != "":
			row.Fail = m.Error
		case never:
			row.Fail = "a probed service never answered through the new mode"
		}
		sum.Rows = append(sum.Rows, row)
		for _, n := range m.Notes {
			if !slices.Contains(sum.Notes, label+": "+n) {
				sum.Notes = append(sum.Notes, label+": "+n)
			}
		}
		for _, s := range m.Services {
			lastOld := Missing() // no failure, or no answer before it
			if s.LastOldNs != nil && *s.LastOldNs != -1 {
				lastOld = Num(float64(*s.LastOldNs)/1e9, "%.3f")
			}
			firstNew := Missing() // no failure, or no answer after it
			if s.FirstNewNs >= 0 {
				firstNew = secs(s.FirstNewNs)
			}
			per.Rows = append(per.Rows, SectionRow{Row: label, Cells: []Cell{Text(s.Service), Text(s.ClusterIP), Int(s.Attempts), Int(s.Failed),
				secs(s.OutageNs), lastOld, firstNew}})
		}
	}
	return []Section{sum, per}
}
