package reports

import (
	"math"
	"strings"
	"time"

	"github.com/proxybench/proxybench/measure"
)

// syncErrorsTitle is ChurnSyncErrorsReport's section title.
const syncErrorsTitle = "failed syncs under churn (failure.syncErrors) and the recovery"

// ChurnSyncErrorsReport is the section of a row's churn phases that ran
// with failure.syncErrors (none without): builtin and kube-proxy rows
// side by side, one row per phase (keyed by minSyncPeriod). Per phase:
// the rule-program calls the wrappers counted and failed; the syncs and
// those that failed (builtin: its sync loop's; kube-proxy: its own by
// its log, "Sync failed"); the recovery of each failure, from the failed
// sync's start to the end of the next successful sync (p50, max; how
// many were not recovered before the phase ended, and how many were
// recovered by a full sync); what the churn probes saw while the stale
// rules served (connections and failed ones: 0 failed means the old
// rules kept answering); and for kube-proxy rows the growth of its
// failure counters (measure.KubeProxyFailureCounters, IPv4).
func ChurnSyncErrorsReport(label string, mr *ModeResult) []Section {
	has := false
	for _, c := range mr.Churn {
		has = has || c.Injected != nil
	}
	if !has {
		return nil
	}
	cols := []Column{{Name: "minSyncPeriod", Key: true},
		{Name: "rule-program calls", Unit: "count", Figure: "syncerrors.calls"}, {Name: "failed on purpose", Unit: "count", Figure: "syncerrors.injected"},
		{Name: "syncs", Unit: "count", Figure: "syncerrors.syncs"}, {Name: "failed syncs", Unit: "count", Figure: "syncerrors.failed"},
		{Name: "recovery p50", Unit: "s", Figure: "syncerrors.recovery.p50"}, {Name: "recovery max", Unit: "s", Figure: "syncerrors.recovery.max"},
		{Name: "not recovered", Unit: "count", Figure: "syncerrors.unrecovered"}, {Name: "recovered by a full sync", Unit: "count", Figure: "syncerrors.recovered.full"},
		{Name: "changes while stale", Unit: "count", Figure: "syncerrors.stale.changes"},
		{Name: "probes while stale", Unit: "count", Figure: "syncerrors.stale.probes"}, {Name: "failed probes while stale", Unit: "count", Figure: "syncerrors.stale.failed"}}
	for _, n := range measure.KubeProxyFailureCounters {
		short := strings.TrimSuffix(strings.TrimPrefix(n, "kubeproxy_sync_proxy_rules_"), "_total")
		cols = append(cols, Column{Name: "kube-proxy " + strings.ReplaceAll(short, "_", " "), Unit: "count", Figure: "kubeproxy." + short})
	}
	sec := Section{Phase: PhaseChurn, Title: syncErrorsTitle, Scope: "row",
		Intro:   "failure.syncErrors made rule-program calls fail during the churn phase: a builtin row's wrappers were first on proxybench's PATH, a kube-proxy row's first on kube-proxy's own PATH from its start (its IPv4 iptables-restore and nft -f calls; the wrappers count every call, so the calls column shows they are what kube-proxy ran). A failed sync's recovery is from its start to the end of the next successful sync (kube-proxy makes it full); until then the data plane kept the last good sync's rules, and the probes' connections meanwhile say whether lookups still worked on them. kube-proxy's counters are their growth over the phase (IPv4).",
		Columns: cols}
	for _, c := range mr.Churn {
		if c.Injected == nil {
			continue
		}
		var rec []int64
		unrec, full, changes, conns, bad := 0, 0, 0, 0, 0
		for _, f := range c.Failures {
			if f.RecoveredNs < 0 {
				unrec++
			} else {
				rec = append(rec, f.RecoveredNs)
				if f.RecoveryKind == "full" {
					full++
				}
			}
			changes += f.Changes
			conns += f.ProbeConns
			bad += f.ProbeErrors
		}
		p50, mx := Missing(), Missing()
		if len(rec) > 0 {
			s := Summarize(rec)
			p50, mx = Num(float64(s.P50)/1e9, "%.3f"), Num(float64(s.Max)/1e9, "%.3f")
		}
		cells := []Cell{Text(time.Duration(c.MinSyncPeriodNs).String()), Int(c.Injected.Calls), Int(c.Injected.Failed),
			Int(len(c.Syncs)), Int(c.FailedSyncs), p50, mx, Int(unrec), Int(full), Int(changes), Int(conns), Int(bad)}
		for _, n := range measure.KubeProxyFailureCounters {
			v, ok := math.NaN(), false
			if c.KubeProxy != nil {
				v, ok = c.KubeProxy.FailureCounters[n]
			}
			if ok {
				cells = append(cells, Num(v, "%.0f"))
			} else {
				cells = append(cells, Missing())
			}
		}
		_ = sec.AddRow(label, cells...)
		if c.KubeProxy != nil && c.KubeProxy.Unsettled != "" {
			sec.Notes = appendNote(sec.Notes, label+": "+c.KubeProxy.Unsettled)
		}
	}
	return []Section{sec}
}
