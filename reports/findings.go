package reports

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/proxybench/proxybench/measure"
)

// FaultWarnings returns one warning per fault of every mode
// (ModeResult.Faults), after the mode's label: something failed
// during the run that may make that mode's figures invalid.
func FaultWarnings(r *Result) []string {
	var out []string
	if r.Partial != "" {
		out = append(out, PartialNote(r))
	}
	for _, m := range r.Modes {
		switch {
		case m.Failed != "":
			out = append(out, fmt.Sprintf("%s: FAILED, its figures are what was measured before (%s)", r.label(m), m.Failed))
		case m.Partial != "":
			out = append(out, fmt.Sprintf("%s: stopped early, only its phases shown were finished (%s)", r.label(m), m.Partial))
		}
		for _, f := range m.Faults {
			out = append(out, fmt.Sprintf("%s: %s", r.label(m), f))
		}
	}
	return out
}

// Findings returns one sentence per mode saying what the run found,
// computed from its figures at the largest size measured: how p50 connect
// latency changes from the first to the last service (with the cause for
// modes whose lookup is a linear walk), the overhead over mode none at
// the last service, the median full sync with its object count, and
// whether the spread over endpoints is consistent with even shares
// (SpreadVerdict: each fixed position's χ² test, pooled over the run's
// repetitions, judged with Holm's correction over every row and position
// of the run at SpreadAlpha).
func Findings(r *Result) []string {
	sizes := Sizes(r)
	if len(sizes) == 0 {
		return nil
	}
	top := sizes[len(sizes)-1]
	none := map[string]*ModeResult{} // per kernel: compare within one kernel only
	for i, m := range r.Modes {
		if m.isBaseline() && modeSize(r, m) == top {
			none[m.Kernel] = &r.Modes[i]
		}
	}
	gfs := GuestFactors(r)
	out := guestFindings(r, gfs)
	spread := SpreadFamily(r) // every row and position, Holm-corrected
	for _, m := range r.Modes {
		if modeSize(r, m) != top {
			continue
		}
		var parts []string
		first, last := posSummary(m, "first"), posSummary(m, "last")
		if positionsUnordered(m) {
			// kube-proxy writes KUBE-SERVICES in its service map's order
			// (random, and new at every sync), so the scenario's first and
			// last services sit at random places in the chain: a first/last
			// ratio says nothing about the walk (kube-proxy-10k: first 25.4,
			// middle 68.3, last 26.7 µs). A random service per connection
			// samples the walk; compare that with builtin's random.
			if rnd := posSummary(m, "random"); rnd.Count > 0 {
				parts = append(parts, fmt.Sprintf("first/last are at random places in kube-proxy's KUBE-SERVICES (written in map order), so they do not show the chain walk; p50 at a random service %s", FormatNs(float64(rnd.P50))))
			} else {
				parts = append(parts, "first/last are at random places in kube-proxy's KUBE-SERVICES (written in map order), so they do not show the chain walk")
			}
			first = Summary{} // skip the first/last claim below
		}
		if first.Count > 0 && last.Count > 0 && first.P50 > 0 {
			ratio := float64(last.P50) / float64(first.P50)
			switch {
			case ratio >= 1.2:
				why := ""
				if m.Traits.Walk != "" {
					why = "; linear " + m.Traits.Walk + " walk"
				}
				parts = append(parts, fmt.Sprintf("p50 connect latency rises %.2g× from the first to the last of %s services (%s → %s%s)", ratio, thousands(top), FormatNs(float64(first.P50)), FormatNs(float64(last.P50)), why))
			case ratio <= 1/1.2:
				parts = append(parts, fmt.Sprintf("p50 connect latency falls %.2g× from the first to the last of %s services (%s → %s)", 1/ratio, thousands(top), FormatNs(float64(first.P50)), FormatNs(float64(last.P50))))
			default:
				parts = append(parts, fmt.Sprintf("p50 connect latency is flat across %s services (first %s, last %s)", thousands(top), FormatNs(float64(first.P50)), FormatNs(float64(last.P50))))
			}
			if base := none[m.Kernel]; base != nil && !m.isBaseline() {
				b := posSummary(*base, "last")
				switch {
				case b.P50 <= 0:
				case suspectBaseline(float64(last.P50), float64(b.P50)):
					// A wrong baseline in a capacity plan is worse than none.
					parts = append(parts, fmt.Sprintf("no overhead over direct-to-pod given: mode none's p50 at the last service (%s) is slower than this row's (%s), which a ClusterIP path cannot be beyond noise, so that baseline is suspect; rerun", FormatNs(float64(b.P50)), FormatNs(float64(last.P50))))
				default:
					parts = append(parts, fmt.Sprintf("%+.0f%% over direct-to-pod at the last service", (float64(last.P50)/float64(b.P50)-1)*100))
				}
				// A proxy that terminates the connection (the userspace
				// listener) completes the handshake itself: its cost shows
				// in the time to first byte.
				if t, bt := ttfbP50(m, "last"), ttfbP50(*base, "last"); m.Traits.Terminates && t > 0 && bt > 0 && !suspectBaseline(float64(t), float64(bt)) {
					parts = append(parts, fmt.Sprintf("time to first byte %.2g× direct-to-pod (the proxy's own dial to the endpoint)", float64(t)/float64(bt)))
				}
			}
		}
		if len(m.SyncFull) > 0 {
			w := Summarize(syncWalls(m))
			med := medianSync(m)
			what := "objects"
			if m.Traits.Objects != "" {
				what = m.Traits.Objects
			}
			if _, _, known := syncObjects(m, med); !known {
				parts = append(parts, fmt.Sprintf("full sync %s", FormatNs(float64(w.P50))))
			} else if med.Objects > 0 {
				parts = append(parts, fmt.Sprintf("full sync %s for %s %s", FormatNs(float64(w.P50)), thousands(med.Objects), what))
			} else {
				parts = append(parts, fmt.Sprintf("full sync %s (nothing to program)", FormatNs(float64(w.P50))))
			}
		}
		if f := m.Fairness; f.Services > 0 {
			parts = append(parts, SpreadVerdict(spread, r.label(m), f))
		}
		// The churn tables' summaries: pooled over every node in the sim,
		// one per minSyncPeriod of a sweep.
		for _, c := range m.Churn {
			if c.Latency.Count == 0 {
				continue
			}
			what := "programming latency"
			if len(m.Churn) > 1 {
				what += fmt.Sprintf(" (minSyncPeriod %s)", time.Duration(c.MinSyncPeriodNs))
			}
			parts = append(parts, fmt.Sprintf("%s p50 %s, p99 %s", what, FormatNs(float64(c.Latency.P50)), FormatNs(float64(c.Latency.P99))))
		}
		if g := guestFactorOf(gfs, kernelOf(m)); g != nil && g.Measured() != "" {
			parts = append(parts, "a guest figure: in "+g.Kernel+" "+g.Measured())
		}
		label := r.modeLabel(m)
		if len(parts) == 0 && m.Soak != nil {
			continue // its soak finding follows
		}
		if len(parts) == 0 {
			parts = append(parts, "no figures were measured")
		}
		out = append(out, label+": "+strings.Join(parts, "; ")+".")
	}
	for _, m := range soakRows(r) {
		out = append(out, SoakFinding(r.modeLabel(m), m.Soak))
	}
	return append(out, switchFindings(r.ModeSwitch)...)
}

// switchFindings is one sentence per mode switch: its longest outage,
// the held connections it broke, what the old mode left and what the
// recovery cleanup left or why it failed.
func switchFindings(switches []ModeSwitch) []string {
	var out []string
	for _, m := range switches {
		if m.Error != "" && len(m.Services) == 0 {
			out = append(out, fmt.Sprintf("mode switch %s: not measured (%s).", m.Label(), m.Error))
			continue
		}
		var parts []string
		switch ns, never := m.MaxOutage(); {
		case never:
			parts = append(parts, "a probed service never answered through the new mode")
		case ns == 0:
			parts = append(parts, "no outage")
		default:
			parts = append(parts, fmt.Sprintf("outage up to %s", FormatNs(float64(ns))))
		}
		if m.Established > 0 {
			if broken := m.Established - m.Survived; broken > 0 {
				parts = append(parts, fmt.Sprintf("it broke %d of %d held connections", broken, m.Established))
			} else {
				parts = append(parts, fmt.Sprintf("all %d held connections survived", m.Established))
			}
		}
		if n := LeftoverCount(m.Leftovers); n > 0 {
			parts = append(parts, fmt.Sprintf("the old mode left %d objects", n))
		}
		switch {
		case m.CleanupError != "":
			parts = append(parts, fmt.Sprintf("its cleanup failed (%s), %d objects stay", m.CleanupError, LeftoverCount(m.AfterCleanup)))
		case m.Cleanup != "" && len(m.AfterCleanup) > 0:
			parts = append(parts, fmt.Sprintf("%d objects stay after the cleanup (%s)", LeftoverCount(m.AfterCleanup), LeftoverText(m.AfterCleanup)))
		}
		out = append(out, "mode switch "+m.Label()+": "+strings.Join(parts, "; ")+".")
	}
	return out
}

// guestFindings are the findings that lead a run with guest kernels:
// per guest with a bridge, what ran there and its factor against the host
// (GuestFactor.Sentence); for a run whose every row ran in a guest, that
// its figures are the guest's.
func guestFindings(r *Result, gfs []GuestFactor) []string {
	var out []string
	for _, g := range gfs {
		out = append(out, g.Sentence())
	}
	// A cluster run's rows are "cluster": its nodes' kernels, no guest.
	if r.Engine != EngineCluster && len(r.Modes) > 0 && !slices.ContainsFunc(r.Modes, func(m ModeResult) bool { return !isGuest(kernelOf(m)) }) {
		release := r.Machine.Kernel
		if len(r.Kernels) == 1 {
			release = r.Kernels[0].Release
		}
		out = append(out, fmt.Sprintf("every row ran in a user-mode-linux guest (%s, kernel %s): its figures are the guest's, several times the host kernel's (a guest's syscalls are far slower), and its ratios to none are compressed towards 1 (docs/kernels.md); --kernel auto runs the modes the host can run on the host and states the guest's factor against it.", strings.Join(r.KernelNames(), ", "), release))
	}
	return out
}

// ttfbP50 is the median time to first byte at a position (0 if unknown).
func ttfbP50(m ModeResult, pos string) int64 {
	for _, p := range m.Lookup {
		if p.Position == pos && len(p.TTFBSamplesNs) > 0 {
			return Summarize(p.TTFBSamplesNs).P50
		}
	}
	return 0
}

// posSummary is the recomputed latency summary at one position.
func posSummary(m ModeResult, pos string) Summary {
	for _, p := range m.Lookup {
		if p.Position == pos {
			return lookupSummary(p)
		}
	}
	return Summary{}
}

// syncObjects returns what a full sync programmed, as the sync.full
// table shows it: objects and bytes, "-" when not known. known is false
// for a kube-proxy row whose ruleset was not read back (IPVS, a failed
// read, or a result written before the read-back existed, whose objects
// were the service count).
func syncObjects(m ModeResult, med measure.SyncStats) (objs, bytes string, known bool) {
	if m.Implementation == "kube-proxy" || m.KubeProxy != nil {
		rs := m.Info["ruleset"]
		if rs == "" || strings.HasPrefix(rs, "not read") {
			return "-", "-", false
		}
		objs, bytes = "-", "-"
		if med.Objects > 0 {
			objs = fmt.Sprint(med.Objects)
		}
		if med.Bytes > 0 {
			bytes = fmt.Sprint(med.Bytes)
		}
		return objs, bytes, true
	}
	return fmt.Sprint(med.Objects), fmt.Sprint(med.Bytes), true
}

// backendOf is a row's "back end" column: Info["backend"], else for a
// kube-proxy row written before it was recorded its iptables back end,
// else "-".
func backendOf(m ModeResult) string {
	if b := m.Info["backend"]; b != "" {
		return b
	}
	if b := m.Info["iptablesBackend"]; b != "" && m.Traits.IPTablesBackend {
		return b
	}
	if m.Implementation == "kube-proxy" || m.KubeProxy != nil {
		return "-"
	}
	return ""
}

// positionsUnordered reports whether a row's first and last services sit
// at random places in its rules, so a first/last ratio says nothing about
// the rule walk (Traits.Unordered): a kube-proxy iptables row (kube-proxy
// writes KUBE-SERVICES in its service map's order, random and new at
// every sync; pkg/proxy/iptables writes the services in map iteration
// order).
func positionsUnordered(m ModeResult) bool { return m.Traits.Unordered }

// PartialNote says that r is a partial result (Result.Partial), why, and
// which modes it holds; "" for a complete result.
func PartialNote(r *Result) string {
	if r.Partial == "" {
		return ""
	}
	var done []string
	for _, m := range r.Modes {
		l := r.label(m)
		switch {
		case m.Failed != "":
			l += " (failed)"
		case m.Partial != "":
			l += " (partly)"
		}
		done = append(done, l)
	}
	if len(done) == 0 {
		done = []string{"nothing"}
	}
	return fmt.Sprintf("PARTIAL RESULT: the run stopped before its end (%s); finished: %s. Modes and phases not shown were never measured.", r.Partial, strings.Join(done, ", "))
}
