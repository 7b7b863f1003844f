package reports

import (
	"fmt"
	"strings"
	"time"
)

// Phase names of the fault phases.
const (
	PhaseOutOfBand  = "outOfBand"
	PhaseSliceChurn = "sliceChurn"
)

// OutOfBandChange is one out-of-band change of a row (the outOfBand
// phase, scenario block faults.outOfBand) and how the proxy answered it.
// Times are nanoseconds from the moment the change was made (the tool
// that made it returned).
type OutOfBandChange struct {
	// Change is its name (scenarios.OOBChanges), What what it does,
	// Service the service it was made on (namespace/name), Object the
	// kernel object it touched as the tools name it.
	Change  string `json:"change"`
	What    string `json:"what"`
	Service string `json:"service,omitempty"`
	Object  string `json:"object,omitempty"`
	// Repaired: a poll saw the proxy undo the change (the deleted object
	// back; the added virtual server gone; for excludedVirtualServer the
	// witness gone, a sync having run) within TimeoutNs, at RepairNs.
	Repaired bool  `json:"repaired"`
	RepairNs int64 `json:"repairNs,omitempty"`
	// Polls are the reads of the kernel object made.
	Polls int `json:"polls"`
	// LeftAlone (excludedVirtualServer only) says whether the virtual
	// server inside ipvs.excludeCIDRs was still there when the witness
	// had been removed (or at the timeout).
	LeftAlone *bool `json:"leftAlone,omitempty"`
	// Probes are the connections made to the service during the wait,
	// Failed those that failed (a deletion's outage), ProbeNs when the
	// data plane showed the repair: the first probe after the last failed
	// one that succeeded, or for realServer the first that landed on the
	// deleted real server again (0: not seen).
	Probes  int   `json:"probes,omitempty"`
	Failed  int   `json:"failed,omitempty"`
	ProbeNs int64 `json:"probeNs,omitempty"`
	// TimeoutNs is the wait's bound (faults.outOfBand.timeout).
	TimeoutNs int64 `json:"timeoutNs"`
	// PutBack: not repaired in time, the phase put the object back as the
	// proxy had written it (an added one removed); PutBackErr when that
	// failed.
	PutBack    bool   `json:"putBack,omitempty"`
	PutBackErr string `json:"putBackErr,omitempty"`
	// Err: the change could not be made (nothing to wait for).
	Err string `json:"err,omitempty"`
}

// OutOfBandResult is a row's out-of-band phase: its changes, the
// resync configuration they ran under and the syncs the proxy ran.
type OutOfBandResult struct {
	// MinSyncPeriodNs and SyncPeriodNs are the proxy's; Config says in
	// words what makes this implementation and mode resync (its loop, its
	// canary monitor, FullSyncPeriod).
	MinSyncPeriodNs int64  `json:"minSyncPeriodNs"`
	SyncPeriodNs    int64  `json:"syncPeriodNs"`
	Config          string `json:"config"`
	// Syncs counts a builtin row's syncs during the phase (full: Full),
	// -1 for a kube-proxy row (kube-proxy's syncs: its metrics).
	Syncs int `json:"syncs"`
	Full  int `json:"full"`
	// Resyncs counts a builtin row's partial syncs that read every
	// object back (builtin IPVS, once per syncPeriod).
	Resyncs int `json:"resyncs,omitempty"`
	// KubeProxySyncs counts kube-proxy's syncs during the phase from its
	// sync-duration histogram (kube-proxy rows).
	KubeProxySyncs int               `json:"kubeProxySyncs,omitempty"`
	Changes        []OutOfBandChange `json:"changes"`
}

// OutOfBandReport is the outOfBand phase's section of one row: one row
// per change (the shape of internal/runner's Phase.Report); none when mr
// has no such phase.
func OutOfBandReport(label string, mr *ModeResult) []Section {
	ob := mr.OutOfBand
	if ob == nil {
		return nil
	}
	s := Section{Phase: PhaseOutOfBand, Title: "out-of-band changes: seconds until the proxy repairs them", Scope: "row",
		Intro: "Each change is made once behind the proxy's back, on a service of its own, after the proxy is in sync; the kernel object is read back every poll and the service probed (a new TCP connection each poll) until the proxy has undone it or the timeout has passed. " +
			"repair: from the change to the first read that shows it undone (for excludedVirtualServer: its witness inside the service CIDR removed, a sync having run); data plane: the first probe after the last failed one that answered (realServer: the first landing on the deleted real server again); " +
			"left alone: the virtual server inside ipvs.excludeCIDRs still there after that sync. A change not repaired within the timeout is put back by the phase.",
		Columns: []Column{{Name: "change", Key: true}, {Name: "object"}, {Name: "repaired", Unit: "bool", Figure: "repaired"},
			{Name: "repair", Unit: "s", Figure: "repair"}, {Name: "data plane", Unit: "s", Figure: "repair.probe"},
			{Name: "probes", Unit: "count"}, {Name: "failed", Unit: "count", Figure: "probes.failed"},
			{Name: "left alone", Unit: "bool", Figure: "excluded.leftAlone"}, {Name: "timeout", Unit: "s"}, {Name: "note"}},
	}
	s.Notes = append(s.Notes, fmt.Sprintf("%s: %s", label, ob.Config))
	if ob.Syncs >= 0 {
		resync := ""
		if ob.Resyncs > 0 {
			resync = fmt.Sprintf(", %d reading every real server back", ob.Resyncs)
		}
		s.Notes = append(s.Notes, fmt.Sprintf("%s: the builtin sync loop ran %d syncs (%d full%s) during the phase.", label, ob.Syncs, ob.Full, resync))
	} else {
		s.Notes = append(s.Notes, fmt.Sprintf("%s: kube-proxy ran %d syncs during the phase (its sync-duration histogram).", label, ob.KubeProxySyncs))
	}
	for _, c := range ob.Changes {
		secs := func(ns int64, have bool) Cell {
			if !have {
				return Missing()
			}
			return Num(float64(ns)/1e9, "%.2f")
		}
		left := Missing()
		if c.LeftAlone != nil {
			left = Bool(*c.LeftAlone)
		}
		var note []string
		switch {
		case c.Err != "":
			note = append(note, "not made: "+c.Err)
		case !c.Repaired:
			note = append(note, fmt.Sprintf("not repaired within %s", shortDuration(time.Duration(c.TimeoutNs))))
		}
		if c.PutBack {
			note = append(note, "put back by the phase")
		}
		if c.PutBackErr != "" {
			note = append(note, "put back failed: "+c.PutBackErr)
		}
		_ = s.AddRow(label, Text(c.Change), Text(c.Object), Bool(c.Repaired), secs(c.RepairNs, c.Repaired), secs(c.ProbeNs, c.ProbeNs > 0),
			Int(c.Probes), Int(c.Failed), left, Num(float64(c.TimeoutNs)/1e9, "%.0f"), Text(strings.Join(note, "; ")))
		if c.LeftAlone != nil && !*c.LeftAlone {
			s.Rows[len(s.Rows)-1].Fail = "the proxy removed a virtual server inside ipvs.excludeCIDRs"
		}
	}
	return []Section{s}
}

// OutOfBandFinding is one sentence on a row's out-of-band changes.
func OutOfBandFinding(label string, ob *OutOfBandResult) string {
	var parts []string
	for _, c := range ob.Changes {
		switch {
		case c.Err != "":
			parts = append(parts, c.Change+" not made")
		case c.Change == "excludedVirtualServer" && c.LeftAlone != nil:
			parts = append(parts, fmt.Sprintf("excluded virtual server left alone: %s", yesNo(*c.LeftAlone)))
		case c.Repaired:
			parts = append(parts, fmt.Sprintf("%s repaired in %.1f s", c.Change, float64(c.RepairNs)/1e9))
		default:
			parts = append(parts, fmt.Sprintf("%s not repaired within %s", c.Change, shortDuration(time.Duration(c.TimeoutNs))))
		}
	}
	return fmt.Sprintf("%s out of band (syncPeriod %s): %s.", label, shortDuration(time.Duration(ob.SyncPeriodNs)), strings.Join(parts, "; "))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// SliceChurnReport is the sliceChurn phase's sections of one row: the
// soak's verdict and series sections over its samples (SoakVerdictSection,
// SoakSeriesSection), under the phase's own name and titles.
func SliceChurnReport(label string, mr *ModeResult) []Section {
	sr := mr.SliceChurn
	if sr == nil {
		return nil
	}
	v, series := SoakVerdictSection(label, sr), SoakSeriesSection(label, sr)
	for _, s := range []*Section{&v, &series} {
		s.Phase = PhaseSliceChurn
		s.Title = strings.Replace(s.Title, "soak:", "slice churn:", 1)
		s.Intro = "EndpointSlices deleted and re-created under new names (the endpoints unchanged: a new slice first, then the old one deleted) at the stated rate, as a soak: " + s.Intro
	}
	return []Section{v, series}
}
