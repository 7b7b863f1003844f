package reports

import (
	"fmt"
	"strings"
)

// Phase names of the process faults (scenario block faults) in
// Section.Phase.
const (
	PhaseAPIOutage = "apiOutage"
	PhaseRestart   = "restart"
	PhaseCrash     = "crash"
)

// Convergence is how the data plane of a set of changed services caught
// up with a change made at the fault's start: each changed service had
// one endpoint replaced by a new address (the removed one stays
// reachable in the testbed, so a probe that lands on it is a stale
// endpoint served, where a real cluster's client would meet a dead pod).
// Times are ns from the change (the fault's start); -1: not within the
// phase's settle bound.
type Convergence struct {
	// Changed is the number of services changed.
	Changed int `json:"changed"`
	// Samples are the rules read back from the node's kernel over time
	// (every sample interval), with the probes of each interval.
	Samples []ConvergenceSample `json:"samples,omitempty"`
	// MaxStale and MaxMissing are the most removed endpoints still in
	// the rules, and new endpoints not yet in them, of any read-back.
	MaxStale   int `json:"maxStale"`
	MaxMissing int `json:"maxMissing"`
	// RulesNs is when the rules first held every new endpoint and no
	// removed one, and kept so to the end.
	RulesNs int64 `json:"rulesNs"`
	// ProbesNs is when the probes converged: every changed service had
	// answered from its new endpoint, and no probe landed on a removed
	// endpoint or failed after (the end of the last that did).
	ProbesNs int64 `json:"probesNs"`
	// Probes, Stale and Failed count the probe connections made from the
	// change on: all, landed on a removed endpoint, failed (error or
	// timeout); LastStaleNs is when the last stale one started (-1:
	// none).
	Probes      int   `json:"probes"`
	Stale       int   `json:"stale"`
	Failed      int   `json:"failed"`
	LastStaleNs int64 `json:"lastStaleNs"`
}

// ConvergenceSample is one read-back of the rules (AtNs from the change):
// Stale removed endpoints still in them, Missing new endpoints not yet
// in them (-1 each: the read failed), and the probes started since the
// previous sample that landed on a new endpoint (New), on a removed one
// (Old), on another of the service's endpoints (Other) or failed.
type ConvergenceSample struct {
	AtNs    int64 `json:"atNs"`
	Stale   int   `json:"stale"`
	Missing int   `json:"missing"`
	New     int   `json:"new"`
	Old     int   `json:"old"`
	Other   int   `json:"other"`
	Failed  int   `json:"failed"`
}

// APIOutageCase is one API outage (faults.apiOutage): Component
// (kube-apiserver or etcd) stopped for DownNs while the endpoints
// changed; the EndpointSlice writes retried as the EndpointSlice
// controller retries (1 s, doubled per failure) until the API took them.
type APIOutageCase struct {
	Component string `json:"component"`
	// DownNs is from the stop to the start of the component again;
	// ReadyNs from that start to the API server's /readyz ok.
	DownNs  int64 `json:"downNs"`
	ReadyNs int64 `json:"readyNs"`
	// Writes are the EndpointSlice writes attempted (every retry),
	// WriteErrors those refused or timed out; WrittenNs is when the last
	// change was accepted, from the change (-1: not all were).
	Writes      int   `json:"writes"`
	WriteErrors int   `json:"writeErrors"`
	WrittenNs   int64 `json:"writtenNs"`
	// AnswersLost are the failed attempts the API server had committed
	// anyway (its answer lost to the attempt's deadline), found by reading
	// the slice back: such a change counts as accepted at that read.
	// WriteError is the first failed attempt's error ("" : none).
	AnswersLost int    `json:"answersLost,omitempty"`
	WriteError  string `json:"writeError,omitempty"`
	// Conv is the data plane against the API from the change on.
	Conv Convergence `json:"conv"`
}

// RestartFlow is one flow service's UDP client (fixed source port) and
// held TCP connection across a restart.
type RestartFlow struct {
	Service string `json:"service"`
	// Before and After are the endpoints that answered the UDP client's
	// last datagram before the stop and its last one of the observation
	// ("" : none); Moved says they differ.
	Before string `json:"before"`
	After  string `json:"after"`
	Moved  bool   `json:"moved"`
	// Sent and Lost are the datagrams sent from the stop on and those
	// without an answer; BlackholedNs the longest run without an answer
	// (from the first unanswered datagram's send to the next answer's).
	Sent         int   `json:"sent"`
	Lost         int   `json:"lost"`
	BlackholedNs int64 `json:"blackholedNs"`
	// ToRemoved counts the answers from a removed endpoint after the
	// restarted proxy's first sync (case changes).
	ToRemoved int `json:"toRemoved"`
	// EntryDeleted says the flow's conntrack entry of before the stop was
	// gone after (a new one, by its start time, took its place).
	EntryDeleted bool `json:"entryDeleted"`
	// HeldBroken says its held TCP connection was reset or closed.
	HeldBroken bool `json:"heldBroken"`
}

// RestartCase is one restart under flows (faults.restart): the proxy
// stopped, down for GapNs, started again with the same configuration.
type RestartCase struct {
	// Case is "plain" (nothing changed while it was down) or "changes"
	// (each flow's endpoint replaced while it was down).
	Case  string `json:"case"`
	GapNs int64  `json:"gapNs"`
	// SyncNs is from the new proxy's start to its first sync done;
	// KubeProxySyncNs that sync's duration by kube-proxy's own metric
	// (0: builtin).
	SyncNs          int64 `json:"syncNs"`
	KubeProxySyncNs int64 `json:"kubeProxySyncNs,omitempty"`
	// ConntrackBefore and ConntrackAfter are the node's conntrack table
	// sizes (nf_conntrack_count) before the stop and at the end.
	ConntrackBefore int `json:"conntrackBefore"`
	ConntrackAfter  int `json:"conntrackAfter"`
	// EntryStamps says conntrack entries carried their start time
	// (nf_conntrack_timestamp in the node), which EntryDeleted needs.
	EntryStamps bool          `json:"entryStamps"`
	Flows       []RestartFlow `json:"flows"`
}

// Totals sums the flows: moved, entries deleted, held connections
// broken, datagrams sent and lost, answers from removed endpoints, and
// the longest black-hole of any flow.
func (c RestartCase) Totals() (moved, deleted, broken, sent, lost, toRemoved int, maxHoleNs int64) {
	for _, f := range c.Flows {
		if f.Moved {
			moved++
		}
		if f.EntryDeleted {
			deleted++
		}
		if f.HeldBroken {
			broken++
		}
		sent += f.Sent
		lost += f.Lost
		toRemoved += f.ToRemoved
		maxHoleNs = max(maxHoleNs, f.BlackholedNs)
	}
	return
}

// CrashCase is one crash (faults.crash): the proxy killed with SIGKILL,
// one endpoint of each probed service replaced right after, the proxy
// started again after BackoffNs (kubelet's CrashLoopBackOff).
type CrashCase struct {
	Crash     int   `json:"crash"`
	BackoffNs int64 `json:"backoffNs"`
	// StartNs is when the new proxy started, from the kill; SyncNs from
	// that start to its first sync seen done (kube-proxy: its metrics
	// said so); KubeProxySyncNs that sync's duration by kube-proxy's
	// metric and KubeProxySyncEndNs its end by kube-proxy's own
	// timestamp, from the start (0: builtin).
	StartNs            int64 `json:"startNs"`
	SyncNs             int64 `json:"syncNs"`
	KubeProxySyncNs    int64 `json:"kubeProxySyncNs,omitempty"`
	KubeProxySyncEndNs int64 `json:"kubeProxySyncEndNs,omitempty"`
	// Conv is the data plane from the kill (the change) on: OutageNs of
	// the figure is Conv.ProbesNs.
	Conv Convergence `json:"conv"`
}

func secCell(ns int64) Cell {
	if ns < 0 {
		return Text("never")
	}
	return Num(float64(ns)/1e9, "%.3f")
}

// convColumns are the convergence columns of the API outage and crash
// sections.
var convColumns = []Column{
	{Name: "changed", Unit: "count", Figure: "changed"},
	{Name: "rules converged", Unit: "s", Figure: "rules.converged"},
	{Name: "probes converged", Unit: "s", Figure: "probes.converged"},
	{Name: "max stale in rules", Unit: "count", Figure: "rules.stale.max"},
	{Name: "max missing in rules", Unit: "count", Figure: "rules.missing.max"},
	{Name: "probes", Unit: "count", Figure: "probes"},
	{Name: "stale served", Unit: "count", Figure: "probes.stale"},
	{Name: "failed", Unit: "count", Figure: "probes.failed"},
	{Name: "last stale", Unit: "s", Figure: "probes.stale.last"},
}

func convCells(c Convergence) []Cell {
	last := Missing()
	if c.LastStaleNs >= 0 && c.Stale > 0 {
		last = secCell(c.LastStaleNs)
	}
	return []Cell{Int(c.Changed), secCell(c.RulesNs), secCell(c.ProbesNs), Int(c.MaxStale), Int(c.MaxMissing),
		Int(c.Probes), Int(c.Stale), Int(c.Failed), last}
}

// Timeline is a one-line account of c's read-backs: each change of the
// rules' stale/missing counts, at its time from the change.
func (c Convergence) Timeline() string {
	var parts []string
	prev := [2]int{-2, -2}
	for _, s := range c.Samples {
		cur := [2]int{s.Stale, s.Missing}
		if cur == prev {
			continue
		}
		prev = cur
		if s.Stale < 0 {
			parts = append(parts, fmt.Sprintf("%.1f s read failed", float64(s.AtNs)/1e9))
			continue
		}
		parts = append(parts, fmt.Sprintf("%.1f s %d stale/%d missing", float64(s.AtNs)/1e9, s.Stale, s.Missing))
	}
	if len(parts) > 12 {
		parts = append(parts[:6], append([]string{"…"}, parts[len(parts)-5:]...)...)
	}
	return strings.Join(parts, ", ")
}

// APIOutageReport is the API outage phase's section of one row: one row
// per component stopped, its down time, the writes, and the data plane's
// convergence from the change (s).
func APIOutageReport(label string, mr *ModeResult) []Section {
	if len(mr.APIOutage) == 0 {
		return nil
	}
	s := Section{Phase: PhaseAPIOutage, Title: "API server outage: rules against the EndpointSlices", Scope: "row",
		Intro: "One component of the control plane stopped while one endpoint of each changed service was replaced " +
			"(at 0 s); the EndpointSlice writes retried as the EndpointSlice controller retries (1 s, doubled per failure) " +
			"until the API took them. Down: stop to start again; ready: start to /readyz; written: when the last change " +
			"was accepted. Rules converged: the rules read back from the node first held every new endpoint and no removed " +
			"one (and kept so); probes converged: every changed service answered from its new endpoint and no probe " +
			"landed on a removed one or failed after; stale served: probes that landed on a removed endpoint. All from the change.",
		Columns: append([]Column{{Name: "component", Key: true},
			{Name: "down", Unit: "s", Figure: "down"},
			{Name: "ready", Unit: "s", Figure: "ready"},
			{Name: "writes", Unit: "count", Figure: "writes"},
			{Name: "write errors", Unit: "count", Figure: "writes.errors"},
			{Name: "written", Unit: "s", Figure: "written"}}, convColumns...)}
	for _, c := range mr.APIOutage {
		cells := append([]Cell{Text(c.Component), secCell(c.DownNs), secCell(c.ReadyNs), Int(c.Writes), Int(c.WriteErrors), secCell(c.WrittenNs)},
			convCells(c.Conv)...)
		row := SectionRow{Row: label, Cells: cells}
		if c.Conv.RulesNs < 0 {
			row.Fail = fmt.Sprintf("the rules did not converge to the API after the %s outage", c.Component)
		}
		s.Rows = append(s.Rows, row)
		if tl := c.Conv.Timeline(); tl != "" {
			s.Notes = append(s.Notes, fmt.Sprintf("%s, %s: rules over time: %s", label, c.Component, tl))
		}
		if c.AnswersLost > 0 {
			s.Notes = append(s.Notes, fmt.Sprintf("%s, %s: %d of %d changes were committed by an attempt counted as an error (its answer lost to the attempt's deadline) and found by reading the slice back: written is that read, an upper bound; first error: %s",
				label, c.Component, c.AnswersLost, c.Conv.Changed, c.WriteError))
		}
	}
	return []Section{s}
}

// RestartReport is the restart phase's section of one row: one row per
// case, the flows' totals.
func RestartReport(label string, mr *ModeResult) []Section {
	if len(mr.Restart) == 0 {
		return nil
	}
	s := Section{Phase: PhaseRestart, Title: "restart under flows (UDP from fixed source ports, held TCP)", Scope: "row",
		Intro: "The proxy stopped, down for the gap, started again with the same configuration (as a DaemonSet rolls), " +
			"while each flow service had a UDP client sending from a fixed source port and a held TCP connection; " +
			"changes: the endpoint each UDP flow used was replaced while the proxy was down. First sync: from the new " +
			"proxy's start. Moved: flows answered at the end by another endpoint than before the stop; entries deleted: " +
			"flows whose conntrack entry of before the stop was gone; black-holed: the longest run of one flow without an " +
			"answer; to removed: answers from a removed endpoint after the first sync; conntrack: the node's table before and after.",
		Columns: []Column{{Name: "case", Key: true},
			{Name: "gap", Unit: "s", Figure: "gap"},
			{Name: "first sync", Unit: "s", Figure: "sync"},
			{Name: "kube-proxy's own sync", Unit: "s", Figure: "kubeproxy.sync"},
			{Name: "flows", Unit: "count", Figure: "flows"},
			{Name: "moved", Unit: "count", Figure: "moved"},
			{Name: "entries deleted", Unit: "count", Figure: "conntrack.deleted"},
			{Name: "datagrams", Unit: "count", Figure: "datagrams"},
			{Name: "lost", Unit: "count", Figure: "datagrams.lost"},
			{Name: "black-holed max", Unit: "s", Figure: "blackholed.max"},
			{Name: "to removed", Unit: "count", Figure: "toremoved"},
			{Name: "held broken", Unit: "count", Figure: "held.broken"},
			{Name: "conntrack before", Unit: "count", Figure: "conntrack.before"},
			{Name: "conntrack after", Unit: "count", Figure: "conntrack.after"}}}
	for _, c := range mr.Restart {
		moved, deleted, broken, sent, lost, toRemoved, hole := c.Totals()
		kp := Missing()
		if c.KubeProxySyncNs > 0 {
			kp = secCell(c.KubeProxySyncNs)
		}
		del := Int(deleted)
		if !c.EntryStamps {
			del = Missing()
		}
		s.Rows = append(s.Rows, SectionRow{Row: label, Cells: []Cell{Text(c.Case), secCell(c.GapNs), secCell(c.SyncNs), kp,
			Int(len(c.Flows)), Int(moved), del, Int(sent), Int(lost), secCell(hole), Int(toRemoved), Int(broken),
			Int(c.ConntrackBefore), Int(c.ConntrackAfter)}})
		if !c.EntryStamps {
			s.Notes = append(s.Notes, fmt.Sprintf("%s, %s: the node's conntrack entries had no start time (nf_conntrack_timestamp could not be set there): entries deleted not measured", label, c.Case))
		}
	}
	return []Section{s}
}

// CrashReport is the crash phase's section of one row: one row per
// crash, its back-off, the restarted proxy's first sync, and the
// outage: from the kill until the probes converged on the change made
// after it.
func CrashReport(label string, mr *ModeResult) []Section {
	if len(mr.Crash) == 0 {
		return nil
	}
	s := Section{Phase: PhaseCrash, Title: "crash (SIGKILL) and restart after CrashLoopBackOff", Scope: "row",
		Intro: "The proxy killed with SIGKILL, one endpoint of each changed service replaced right after (at 0 s), the " +
			"proxy started again after the kubelet's back-off (10 s doubled per crash, at most 5 min, by default). Start: " +
			"from the kill; first sync: from the start to the sync seen done (kube-proxy: by its metrics); kube-proxy's " +
			"own: that sync's duration by its metric and its end by its timestamp, from the start. Outage: from the kill " +
			"until the probes converged (every changed service answered from its new endpoint, none after from a removed one).",
		Columns: append([]Column{{Name: "crash", Key: true},
			{Name: "back-off", Unit: "s", Figure: "backoff"},
			{Name: "start", Unit: "s", Figure: "start"},
			{Name: "first sync", Unit: "s", Figure: "sync"},
			{Name: "kube-proxy's own sync", Unit: "s", Figure: "kubeproxy.sync"},
			{Name: "kube-proxy's own sync end", Unit: "s", Figure: "kubeproxy.sync.end"},
			{Name: "outage", Unit: "s", Figure: "outage"}}, convColumns...)}
	for _, c := range mr.Crash {
		kp, kpEnd := Missing(), Missing()
		if c.KubeProxySyncNs > 0 {
			kp = secCell(c.KubeProxySyncNs)
		}
		if c.KubeProxySyncEndNs > 0 {
			kpEnd = secCell(c.KubeProxySyncEndNs)
		}
		cells := append([]Cell{Text(fmt.Sprint(c.Crash)), secCell(c.BackoffNs), secCell(c.StartNs), secCell(c.SyncNs), kp, kpEnd, secCell(c.Conv.ProbesNs)},
			convCells(c.Conv)...)
		row := SectionRow{Row: label, Cells: cells}
		if c.Conv.ProbesNs < 0 {
			row.Fail = fmt.Sprintf("crash %d: the probes did not reach every new endpoint within the settle bound", c.Crash)
		}
		s.Rows = append(s.Rows, row)
	}
	return []Section{s}
}
