package reports

import (
	"fmt"
	"github.com/proxybench/proxybench/measure"
	"io"
	"math"
	"sort"
	"strings"
	"time"
)

// us formats nanoseconds as microseconds with one decimal ("-" for none).
func us(ns int64) string {
	if ns <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(ns)/1e3)
}

// dur formats a duration in seconds with 3 decimals.
func dur(d time.Duration) string { return fmt.Sprintf("%.3f s", d.Seconds()) }

// WriteMarkdown writes the run's summary tables: sync.full per mode,
// lookup.latency per mode and position (with the ratio of each p50 to mode
// none at the same position), fairness per mode, the phases' tables, and
// every section of r.AllSections not left to a bespoke writer
// (bespokeMarkdown).
func WriteMarkdown(w io.Writer, r *Result) error {
	var b strings.Builder
	sc := r.Scenario
	fmt.Fprintf(&b, "## proxybench: %s\n\n", sc.Name)
	fmt.Fprintf(&b, "run %s · %s · kernel %s (%s) · %d CPUs · %d services × %s · %d repetitions · %s\n\n",
		r.RunID, r.Engine, r.Machine.Kernel, r.Machine.KernelWhere, r.Machine.CPUs, sc.ServiceTotal(),
		sc.Services.PortsLabel(), sc.Repetitions, r.Started.UTC().Format(time.RFC3339))
	if note := PartialNote(r); note != "" {
		fmt.Fprintf(&b, "**%s**\n\n", note)
	}
	if n := len(r.MoreRuns); n > 0 {
		fmt.Fprintf(&b, "This result holds %d runs of the whole measurement (run --count); the tables show run 1. `proxybench compare` judges each figure across all of them.\n\n", n+1)
	}
	if r.MultiKernel() {
		fmt.Fprintf(&b, "The modes ran on %d kernels: %s. Each kernel's section has its own `none` baseline and ratios against it; compare absolute figures within one kernel only (a user-mode-linux guest runs syscalls ~25× slower than the host). %s\n\n",
			len(r.KernelNames()), strings.Join(r.KernelNames(), ", "), r.Machine.KernelWhy)
		gfs := GuestFactors(r)
		for _, k := range r.KernelNames() {
			sub := r.ForKernel(k)
			kr := r.KernelRunOf(k)
			fmt.Fprintf(&b, "## kernel %s (%s)\n\n", k, sub.Machine.Kernel)
			if kr.Source != "" {
				fmt.Fprintf(&b, "%s", kr.Source)
				if kr.InitNs > 0 {
					fmt.Fprintf(&b, " · boot: init after %.2f s, program after %.2f s, halt after %.1f s", float64(kr.InitNs)/1e9, float64(kr.BootNs)/1e9, float64(kr.GuestNs)/1e9)
				}
				b.WriteString("\n\n")
			}
			if g := guestFactorOf(gfs, k); g != nil {
				fmt.Fprintf(&b, "**%s**\n\n", guestNote(g))
			}
			writeMarkdownBody(&b, sub, r)
			b.WriteString("\n")
		}
		writeKernelsMarkdown(&b, r)
	} else if r.soakStreamsOnly() {
		// Rendered from soak streams alone: no core table has a figure.
		for _, w := range FaultWarnings(r) {
			b.WriteString("- **warning**: " + w + "\n")
		}
	} else {
		writeMarkdownBody(&b, r, r)
	}
	// Once for the whole result: a row-scoped section's rows name their
	// kernel in their label, and a run-scoped one may span kernels.
	writeSectionsMarkdown(&b, r)
	if len(r.Skipped) > 0 {
		b.WriteString("\n### skipped\n\n")
		for _, s := range r.Skipped {
			fmt.Fprintf(&b, "- %s\n", s)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// bespokeMarkdown are the phases whose Markdown has its own, richer
// writer over the typed ModeResult fields (writeMarkdownBody calls it),
// each with whether a row holds that writer's data. writeSectionsMarkdown
// leaves a section of these phases to its writer when some row of the
// result has the data, and renders it generically otherwise (a result
// whose phase kept only its Section). Every other format, and every other
// phase, renders sections generically: a new phase needs no entry here.
var bespokeMarkdown = map[string]func(m ModeResult) bool{
	PhaseLookupKernel:   func(m ModeResult) bool { return LookupKernelReport("", &m) != nil },
	PhaseTransitions:    func(m ModeResult) bool { return len(m.Transitions) > 0 },
	PhaseSyncDisruption: func(m ModeResult) bool { return len(m.SyncDisruption) > 0 },
	PhaseLifecycle:      func(m ModeResult) bool { return len(m.Lifecycle) > 0 },
	PhaseConnReuse:      func(m ModeResult) bool { return len(m.ConnReuse) > 0 },
}

// bespokeMarkdownShows reports whether phase's bespoke Markdown writer
// shows r's data of it (bespokeMarkdown).
func bespokeMarkdownShows(r *Result, phase string) bool {
	has := bespokeMarkdown[phase]
	if has == nil {
		return false
	}
	for _, m := range r.Modes {
		if has(m) {
			return true
		}
	}
	return false
}

// writeMarkdownBody writes the tables of one kernel's modes: r, a part
// of whole (Result.ForKernel) or whole itself. The fairness table's Holm
// correction is over whole's family (SpreadFamily), as the findings' is:
// one correction, stated once, for the run.
func writeMarkdownBody(b *strings.Builder, r, whole *Result) {
	if w := r.Machine.Warmup; w != nil {
		fmt.Fprintf(b, "%s\n\n", WarmupNote(w))
	}
	b.WriteString("### sync.full: program every service from empty\n\n")
	b.WriteString("| mode | back end | n | wall p50 | wall min | wall max | CPU p50 (proxy: thread + rule programs) | objects | bytes | phases (p50 run) |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, m := range r.Modes {
		s := m.SyncFullSummary
		c := syncFullCPU(m)
		objs, bytes, phases := "0", "0", ""
		if len(m.SyncFull) > 0 {
			med := medianSync(m)
			objs, bytes, _ = syncObjects(m, med)
			phases = phaseText(med.Phases)
		}
		fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", r.label(m), backendOf(m), s.Count,
			dur(time.Duration(s.P50)), dur(time.Duration(s.Min)), dur(time.Duration(s.Max)), dur(time.Duration(c.P50)), objs, bytes, phases)
	}

	b.WriteString("\n### lookup.latency: TCP connect time through the ClusterIP (µs)\n\n")
	fmt.Fprintf(b, "Percentiles: %s. `vs none` is p50 over mode none's p50 at the same position.\n\n", Precision)
	b.WriteString("| mode | position | index | n | p50 | p90 | p99 | p99.9 | vs none | conn/s | errors |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	base := map[string]int64{} // "size/position" -> none's p50
	for _, m := range r.Modes {
		if m.isBaseline() {
			for _, p := range m.Lookup {
				base[baseKey(m, p.Position)] = p.Latency.P50
			}
		}
	}
	for _, m := range r.Modes {
		for _, p := range m.Lookup {
			l := p.Latency
			vs := "-"
			if bp := base[baseKey(m, p.Position)]; bp > 0 && l.P50 > 0 {
				vs = vsBaseline(float64(l.P50), float64(bp))
			}
			idx := fmt.Sprint(p.Index)
			if p.Index < 0 {
				idx = "any"
			}
			fmt.Fprintf(b, "| %s | %s | %s | %d | %s | %s | %s | %s | %s | %.0f | %d |\n", r.label(m), p.Position, idx, l.Count,
				us(l.P50), us(l.P90), us(l.P99), us(l.P999), vs, p.CPS, p.Errors+p.Misses)
		}
	}
	b.WriteString("\n")
	writeLookupKernelMarkdown(b, r)
	writePortsMarkdown(b, r)
	writeErrorKinds(b, r)
	for _, w := range append(FaultWarnings(r), baselineWarnings(r, base)...) {
		b.WriteString("- **warning**: " + w + "\n")
	}
	for _, m := range r.Modes {
		if f, l, ok := firstLast(m); ok && positionsUnordered(m) {
			// No ratio: its first and last services are not the chain's.
			fmt.Fprintf(b, "- %s: p50 first %s µs, last %s µs; these services sit at random places in kube-proxy's KUBE-SERVICES (written in map order), so no first-to-last ratio is given: read the random position\n", r.label(m), us(f), us(l))
		} else if ok {
			fmt.Fprintf(b, "- %s: p50 at the last service is %.2f× the first (%s → %s µs", r.label(m), float64(l)/float64(f), us(f), us(l))
			var fs, ls []int64
			for _, p := range m.Lookup {
				switch p.Position {
				case "first":
					fs = p.SamplesNs
				case "last":
					ls = p.SamplesNs
				}
			}
			if d, lo, hi := MedianDiffCI(fs, ls, 0.95, 1000, 1); !math.IsNaN(d) {
				fmt.Fprintf(b, "; difference %+.1f µs, 95%% bootstrap CI %+.1f..%+.1f µs", d/1e3, lo/1e3, hi/1e3)
			}
			b.WriteString(")\n")
		}
	}

	b.WriteString("\n### fairness: connections per endpoint at the fixed positions\n\n")
	fam := SpreadFamily(whole)
	if len(fam) > 0 {
		pooled := ""
		if fam[0].Runs > 1 {
			pooled = " pooled over the run's repetitions (run --count)"
		}
		fmt.Fprintf(b, "`p-value` pools the row's positions (run 1); `min p (Holm)` is the row's smallest per-position χ² p-value%s after Holm's step-down correction (Holm 1979) over the run's %s: below %g a position is uneven, with at most a %g chance that any row is called uneven by chance.\n\n",
			pooled, spreadFamilyText(fam), SpreadAlpha, SpreadAlpha)
	}
	b.WriteString("| mode | positions | samples | min Jain | max max/min | starved | χ² | dof | p-value | min p (Holm) |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, m := range r.Modes {
		f := m.Fairness
		holm := "-"
		if cs := spreadOf(fam, whole.label(m)); len(cs) > 0 {
			low := cs[0].Adjusted
			for _, c := range cs {
				low = min(low, c.Adjusted)
			}
			holm = fmt.Sprintf("%.3g", low)
		}
		fmt.Fprintf(b, "| %s | %d | %d | %.4f | %.3f | %d | %.2f | %d | %.3g | %s |\n", r.label(m), f.Services, f.Samples, f.MinJain, f.MaxMaxMin, f.Starved, f.ChiSquare, f.DoF, f.PValue, holm)
	}
	writeFairnessMarkdown(b, r)
	writeCostMarkdown(b, r)
	writeChurnMarkdown(b, r)
	writeTransitionsMarkdown(b, r)
	writeSyncDisruptionMarkdown(b, r)
	writeLifecycleMarkdown(b, r)
	writeConnReuseMarkdown(b, r)
	writeImplementationsMarkdown(b, r)
}

// writeKernelsMarkdown puts the kernels side by side: per mode, its
// sync.full p50 and its lookup p50 per position as a ratio to its own
// kernel's none (the figure that carries across kernels).
func writeKernelsMarkdown(b *strings.Builder, r *Result) {
	ks := r.KernelNames()
	b.WriteString("## across kernels\n\n")
	b.WriteString("sync.full p50 per mode, and lookup.latency p50 over the same kernel's `none` at the same position (× none; absolute µs in brackets).\n\n")
	b.WriteString("| mode | figure |")
	for _, k := range ks {
		b.WriteString(" " + k + " |")
	}
	b.WriteString("\n|---|---|" + strings.Repeat("--:|", len(ks)) + "\n")
	type key struct{ mode, label string }
	var rows []key
	cells := map[key]map[string]string{}
	put := func(k key, kernel, v string) {
		if cells[k] == nil {
			cells[k] = map[string]string{}
			rows = append(rows, k)
		}
		cells[k][kernel] = v
	}
	base := map[string]int64{}
	for _, m := range r.Modes {
		if m.isBaseline() {
			for _, p := range m.Lookup {
				base[baseKey(m, p.Position)] = p.Latency.P50
			}
		}
	}
	for _, m := range r.Modes {
		name := m.Mode
		if r.Scenario != nil && len(r.Scenario.Sweep.Services) > 0 {
			name = fmt.Sprintf("%s @%d", m.Mode, m.Services)
		}
		if s := m.Info["scheduler"]; s != "" && r.Scenario != nil && len(r.Scenario.Sweep.Schedulers) > 0 {
			name += "/" + s
		}
		if m.SyncFullSummary.Count > 0 {
			put(key{name, "sync.full p50"}, kernelOf(m), dur(time.Duration(m.SyncFullSummary.P50)))
		}
		if m.SyncIncrementalSummary.Count > 0 {
			put(key{name, "sync.incremental p50"}, kernelOf(m), dur(time.Duration(m.SyncIncrementalSummary.P50)))
		}
		for _, p := range m.Lookup {
			v := "- (" + us(p.Latency.P50) + " µs)"
			if bp := base[baseKey(m, p.Position)]; bp > 0 && p.Latency.P50 > 0 {
				v = fmt.Sprintf("%s (%s µs)", vsBaseline(float64(p.Latency.P50), float64(bp)), us(p.Latency.P50))
			}
			put(key{name, "lookup p50 " + p.Position}, kernelOf(m), v)
		}
	}
	for _, k := range rows {
		fmt.Fprintf(b, "| %s | %s |", k.mode, k.label)
		for _, kn := range ks {
			v := cells[k][kn]
			if v == "" {
				v = "-"
			}
			b.WriteString(" " + v + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	for _, g := range GuestFactors(r) {
		fmt.Fprintf(b, "- guest factor of %s against the host, measured on %s (it ran on both kernels, at %s services): %s\n", g.Kernel, g.Bridge, thousands(g.Services), guestFactorCells(g))
	}
}

// guestFactorCells lists a guest factor's figures: "sync.full p50 4.6×,
// rule walk (p50 last − first) 2.7×, none's connect p50 4.0×", "-" where
// not measured.
func guestFactorCells(g GuestFactor) string {
	f := func(v float64, why string) string {
		if v > 0 {
			return factor(v)
		}
		return "- (" + why + ")"
	}
	return fmt.Sprintf("sync.full p50 %s, rule walk (p50 at the last service − the first) %s, %s connect p50 at the last service %s",
		f(g.Sync, "not measured on both"), f(g.Walk, orDash(g.WalkWhy)), possessive(orDash(g.Baseline)), f(g.Connect, connectWhy(g)))
}

// connectWhy is why a guest factor has no connect factor.
func connectWhy(g GuestFactor) string {
	if g.ConnectWhy != "" {
		return g.ConnectWhy
	}
	return "no baseline on both"
}

// label names a ModeResult in tables: the mode, with its size in a sweep.
func (r *Result) label(m ModeResult) string {
	if r.Scenario != nil && len(r.Scenario.Sweep.Services) > 0 {
		return fmt.Sprintf("%s @%d", r.modeLabel(m), m.Services)
	}
	return r.modeLabel(m)
}

// WarmupNote says what a kernel's warm-up pass did: "Warm-up before the
// first mode, not recorded: 24,000 connections direct to the pods in
// 72.8 s, p50 302.1 µs in its first quarter and 85.3 µs in its last."
func WarmupNote(w *Warmup) string {
	s := fmt.Sprintf("Warm-up before the first mode, not recorded: %s connections direct to the pods in %.1f s, p50 %s µs in its first quarter and %s µs in its last",
		thousands(w.Connections), float64(w.Ns)/1e9, us(w.FirstP50Ns), us(w.LastP50Ns))
	if w.Errors > 0 {
		s += fmt.Sprintf(" (%d failed)", w.Errors)
	}
	return s + ", so mode none, the baseline, is not measured on a cold kernel."
}

// baselineSlack is how much slower than a row with rules mode none (no
// rules, direct to the pod) may be before it is a suspect baseline: a
// ClusterIP path cannot be faster than direct-to-pod beyond noise, so a
// none slower than that was measured on a machine or guest that was not
// in the same state (a guest's cold start: 302 µs against iptables' 82
// µs in uml:6.12, 2026-12-04), and a ratio against it says nothing of the
// row.
const baselineSlack = 1.1

// suspectBaseline reports whether base, mode none's figure, is slower
// than row's beyond baselineSlack (row/base below 1/1.1).
func suspectBaseline(row, base float64) bool { return row > 0 && base > baselineSlack*row }

// vsBaseline is a "vs none" cell: row over base ("1.23×"), or with a
// suspect baseline the ratio marked as not a figure of the row ("0.37×:
// none slower, suspect"), which baselineWarnings explains.
func vsBaseline(row, base float64) string {
	v := fmt.Sprintf("%.2f×", row/base)
	if suspectBaseline(row, base) {
		v += ": none slower, suspect"
	}
	return v
}

// baselineWarnings flags positions where mode none, which has no rules
// to walk, was slower than a mode with rules in the same kernel beyond
// baselineSlack: the baseline is suspect (a busy machine, a guest
// warming up), the ratios against it are marked and its lookup
// differences should not be read.
func baselineWarnings(r *Result, base map[string]int64) []string {
	var out []string
	for _, m := range r.Modes {
		if m.isBaseline() {
			continue
		}
		for _, p := range m.Lookup {
			if b := base[baseKey(m, p.Position)]; b > 0 && suspectBaseline(float64(p.Latency.P50), float64(b)) {
				out = append(out, fmt.Sprintf("%s at %s: p50 %s µs is below mode none's %s µs in the same kernel, which a ClusterIP path cannot be beyond noise: none's baseline is suspect (the machine or guest was not in the same state when it ran), so the ratios against it are marked and no overhead over direct-to-pod is given; rerun on a quieter machine", r.label(m), p.Position, us(p.Latency.P50), us(b)))
			}
		}
	}
	return out
}

// modeLabel names a mode within one size: the mode, its IPVS scheduler in
// a scheduler sweep, and its kernel in brackets when the run used several.
func (r *Result) modeLabel(m ModeResult) string {
	l := m.Mode
	if s := m.Info["scheduler"]; s != "" && r.Scenario != nil && len(r.Scenario.Sweep.Schedulers) > 0 {
		l += "/" + s
	}
	if r.MultiKernel() {
		l += " (" + kernelOf(m) + ")"
	}
	return l
}

// baseKey keys mode none's figures: same size, same kernel, same position.
func baseKey(m ModeResult, position string) string {
	return fmt.Sprint(m.Services, "/", m.Kernel, "/", position)
}

// medianSync returns the sync.full sample with the median wall time.
// syncFullCPU summarizes the CPU of a mode's sync.full runs: its P50 is
// the median CPU over the runs (not the CPU of the median-wall run), the
// one definition of sync.full CPU in every table and figure.
func syncFullCPU(m ModeResult) Summary {
	var cpu []int64
	for _, s := range m.SyncFull {
		cpu = append(cpu, int64(s.CPU))
	}
	return Summarize(cpu)
}

func medianSync(m ModeResult) (med syncSample) {
	best := int64(-1)
	target := m.SyncFullSummary.P50
	for _, s := range m.SyncFull {
		d := int64(s.Wall) - target
		if d < 0 {
			d = -d
		}
		if best < 0 || d < best {
			best, med = d, s
		}
	}
	return med
}

func phaseText(ph map[string]time.Duration) string {
	var parts []string
	for _, k := range []string{"render", "ensure", "restore", "apply"} {
		if d, ok := ph[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %.3f s", k, d.Seconds()))
		}
	}
	var extra []string
	for k := range ph {
		switch k {
		case "render", "ensure", "restore", "apply":
		default:
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	for _, k := range extra {
		parts = append(parts, fmt.Sprintf("%s %.3f s", k, ph[k].Seconds()))
	}
	return strings.Join(parts, ", ")
}

// firstLast returns the p50 at positions first and last.
func firstLast(m ModeResult) (first, last int64, ok bool) {
	var fp, lp string
	for _, p := range m.Lookup {
		switch p.Position {
		case "first":
			first, fp = p.Latency.P50, p.Protocol
		case "last":
			last, lp = p.Latency.P50, p.Protocol
		}
	}
	// A TCP connect and a UDP round trip are not the same figure.
	return first, last, first > 0 && last > 0 && fp == lp
}

type syncSample = measure.SyncStats

// writeErrorKinds writes, when any connection failed, the failed
// connections per mode, position and cause with their time to error, and
// names the ICMP rate limit when refusals wait for SYN retransmissions.
func writeErrorKinds(b *strings.Builder, r *Result) {
	any := false
	for _, m := range r.Modes {
		for _, p := range m.Lookup {
			any = any || len(p.ErrorKinds) > 0
		}
	}
	if !any {
		return
	}
	b.WriteString("#### failed connections by cause: time from connect to error (ms)\n\n")
	b.WriteString("| mode | position | cause | n | p50 | p90 | p99 | max |\n|---|---|---|--:|--:|--:|--:|--:|\n")
	var notes []string
	for _, m := range r.Modes {
		for _, p := range m.Lookup {
			kinds := make([]string, 0, len(p.ErrorKinds))
			for k := range p.ErrorKinds {
				kinds = append(kinds, k)
			}
			sort.Strings(kinds)
			for _, k := range kinds {
				e := p.ErrorKinds[k]
				t := e.TimeToError
				fmt.Fprintf(b, "| %s | %s | %s | %d | %s | %s | %s | %s |\n", r.label(m), p.Position, k, e.Count, ms(t.P50), ms(t.P90), ms(t.P99), ms(t.Max))
				if note := refusalNote(r, m, p.Position, k, e); note != "" {
					notes = append(notes, note)
				}
			}
		}
	}
	b.WriteString("\n")
	for _, n := range notes {
		b.WriteString("- " + n + "\n")
	}
}

// refusalNote explains refusals that took a SYN retransmission (>= 900 ms,
// the kernel's first retransmit at 1 s): the node answers a connection to
// a service without endpoints with ICMP port unreachable (the mode's
// REJECT), and one of the node namespace's two ICMP rate limits
// (net/ipv4/icmp.c) may withhold the answer, so the client only learns of
// the refusal from a later SYN's. The per-destination limit is
// net.ipv4.icmp_ratelimit ms per message with a burst of 6 (for the types
// in net.ipv4.icmp_ratemask), the namespace-wide one
// net.ipv4.icmp_msgs_per_sec with a burst of net.ipv4.icmp_msgs_burst. The
// mode's ICMP counters (Icmp.OutRateLimitHost, OutRateLimitGlobal) say
// which one did; results without them name both.
func refusalNote(r *Result, m ModeResult, position, kind string, e ErrorKind) string {
	if kind != "refused" || len(e.SamplesNs) == 0 {
		return ""
	}
	slow := 0
	for _, t := range e.SamplesNs {
		if t >= 900e6 {
			slow++
		}
	}
	if slow == 0 {
		return ""
	}
	sysctl := func(k string) string {
		if v, ok := r.NodeSysctls[k]; ok {
			return v
		}
		return map[string]string{"net.ipv4.icmp_ratelimit": "1000", "net.ipv4.icmp_ratemask": "6168",
			"net.ipv4.icmp_msgs_per_sec": "1000", "net.ipv4.icmp_msgs_burst": "50"}[k] + " (the default)"
	}
	host := fmt.Sprintf("the per-destination limit net.ipv4.icmp_ratelimit = %s ms (burst 6; types in net.ipv4.icmp_ratemask = %s)",
		sysctl("net.ipv4.icmp_ratelimit"), sysctl("net.ipv4.icmp_ratemask"))
	global := fmt.Sprintf("the namespace-wide limit net.ipv4.icmp_msgs_per_sec = %s (net.ipv4.icmp_msgs_burst = %s)",
		sysctl("net.ipv4.icmp_msgs_per_sec"), sysctl("net.ipv4.icmp_msgs_burst"))
	head := fmt.Sprintf("%s %s: %d of %d refusals took a SYN retransmission (≥ 0.9 s; the others %s ms p50)",
		r.label(m), position, slow, len(e.SamplesNs), ms(fastP50(e.SamplesNs)))
	c := m.ICMP
	if c == nil {
		return head + ": the node namespace's ICMP rate limits withheld port-unreachable answers (" + host + ", or " + global + "; set node.sysctls to change them)"
	}
	var causes []string
	if c.RateLimitedHost > 0 {
		causes = append(causes, fmt.Sprintf("%d by %s", c.RateLimitedHost, host))
	}
	if c.RateLimitedGlobal > 0 {
		causes = append(causes, fmt.Sprintf("%d by %s", c.RateLimitedGlobal, global))
	}
	if len(causes) == 0 {
		return fmt.Sprintf("%s: the node sent %d port-unreachable answers and its ICMP rate limits withheld none (Icmp.OutRateLimitHost and OutRateLimitGlobal 0), so neither icmp_ratelimit nor icmp_msgs_per_sec caused them; the clients saw %d answers while the socket was locked (TcpExt.LockDroppedIcmps) and retransmitted %d SYNs",
			head, c.DestUnreachSent, c.LockDropped, c.SynRetrans)
	}
	return fmt.Sprintf("%s: the node sent %d port-unreachable answers and withheld %s (kernel counters over the traffic phase); set node.sysctls to change them",
		head, c.DestUnreachSent, strings.Join(causes, " and "))
}

// fastP50 is the median of the samples below 900 ms (0 when none).
func fastP50(ns []int64) int64 {
	var fast []int64
	for _, t := range ns {
		if t < 900e6 {
			fast = append(fast, t)
		}
	}
	return Summarize(fast).P50
}

// writePortsMarkdown writes the per-ServicePort table of the traffic
// phase (ModeResult.Ports), when any mode has one.
func writePortsMarkdown(b *strings.Builder, r *Result) {
	any := false
	for _, m := range r.Modes {
		any = any || len(m.Ports) > 0
	}
	if !any {
		return
	}
	b.WriteString("#### lookup.latency per ServicePort (µs)\n\n")
	b.WriteString("Every position pooled per port of the service spec: a TCP connect, or a UDP exchange's round trip (one datagram each way). Fairness pools the fixed positions that are this port.\n\n")
	b.WriteString("| mode | ServicePort | protocol | UDP source ports | n | p50 | p90 | p99 | errors | error causes | fixed positions | Jain min | χ² p |\n")
	b.WriteString("|---|---|---|---|--:|--:|--:|--:|--:|---|---|--:|--:|\n")
	for _, m := range r.Modes {
		for _, p := range m.Ports {
			name := p.Name
			if name == "" {
				name = "(unnamed)"
			}
			src := p.SourcePorts
			if src == "" {
				src = "-"
			}
			var causes []string
			for _, k := range sortedKeys(p.ErrorKinds) {
				causes = append(causes, fmt.Sprintf("%s %d", k, p.ErrorKinds[k]))
			}
			jain, pv, pos := "-", "-", "-"
			if f := p.Fairness; f != nil && f.Samples > 0 {
				jain, pv = fmt.Sprintf("%.4f", f.MinJain), fmt.Sprintf("%.3g", f.PValue)
			}
			if len(p.Positions) > 0 {
				pos = strings.Join(p.Positions, ", ")
			}
			l := p.Latency
			fmt.Fprintf(b, "| %s | %s %d | %s | %s | %d | %s | %s | %s | %d | %s | %s | %s | %s |\n", r.label(m), name, p.Port, p.Protocol, src, l.Count,
				us(l.P50), us(l.P90), us(l.P99), p.Errors+p.Misses, strings.Join(causes, ", "), pos, jain, pv)
		}
	}
	b.WriteString("\n")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// writeLookupKernelMarkdown writes lookup.kernel's table of r's rows
// (LookupKernelReport) beside lookup.latency's.
func writeLookupKernelMarkdown(b *strings.Builder, r *Result) {
	for _, s := range lookupKernelSections(r) {
		writeSectionMarkdown(b, s)
		b.WriteString("\n")
	}
}
