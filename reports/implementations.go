package reports

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/proxybench/proxybench/measure"
)

// kube-proxy's histograms (pkg/proxy/metrics in k8s.io/kubernetes), as
// proxymodes/kubeproxy scrapes them.
const (
	kpSync        = "kubeproxy_sync_proxy_rules_duration_seconds"
	kpSyncFull    = "kubeproxy_sync_full_proxy_rules_duration_seconds"
	kpSyncPartial = "kubeproxy_sync_partial_proxy_rules_duration_seconds"
	kpProgramming = "kubeproxy_network_programming_duration_seconds"
)

// baseOf is the mode a row runs: BaseMode for another implementation's
// row, else Mode.
func baseOf(m ModeResult) string {
	if m.BaseMode != "" {
		return m.BaseMode
	}
	return m.Mode
}

// hasImplementations reports whether r has a row of another
// implementation than builtin.
func (r *Result) hasImplementations() bool {
	for _, m := range r.Modes {
		if m.Implementation != "" {
			return true
		}
	}
	return false
}

// meanMetric formats count observations summing to sum seconds as their
// mean ("0.412 s (n=3)"), "-" without any.
func meanMetric(count uint64, sum float64) string {
	if count == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f s (n=%d)", sum/float64(count), count)
}

// mib formats bytes in MiB ("-" for 0).
func mib(b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// writeImplementationsMarkdown puts, per mode, builtin and each
// kube-proxy row side by side (the same figures, plus kube-proxy's own
// metrics), then says per kube-proxy row where its time went.
func writeImplementationsMarkdown(b *strings.Builder, r *Result) {
	if !r.hasImplementations() {
		return
	}
	fmt.Fprintf(b, "\n### %s\n\n", sideBySideTitle(r))
	b.WriteString(sideBySideIntro)
	writeMarkdownTable(b, sideBySideTable(r), "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	writeKubeProxyDetails(b, r)
}

// writeMarkdownTable writes rows (the first the header) as a Markdown
// table with the alignment line sep.
func writeMarkdownTable(b *strings.Builder, rows [][]string, sep string) {
	for i, row := range rows {
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
		if i == 0 {
			b.WriteString(sep + "\n")
		}
	}
}

// sideBySideIntro says what each column of the side-by-side table means.
const sideBySideIntro = "sync.full: builtin from the Sync call to its rules in the kernel (p50); kube-proxy from the API objects created to every probed service answering through its rules (the data plane), kube-proxy's own `sync_full_proxy_rules_duration_seconds` next to it (IPv4). sync.incremental: one endpoint moved (builtin: the Sync; kube-proxy: from the EndpointSlice update request sent, its API round trip included as part of how a change reaches kube-proxy, until kube-proxy finished the sync that programmed it: its `network_programming_duration_seconds` observation for the write, then the end of that sync), with kube-proxy's partial-sync metric over the same syncs. Programming latency is kube-proxy's `network_programming_duration_seconds` (trigger-time annotation to rules written). CPU: builtin's sync.full CPU p50, the median over its runs as in the sync.full table (its thread + rule programs); kube-proxy's over the whole row (own + rule programs). Setup (control plane, API objects) is not in any figure: see the next table.\n\n"

// sideBySideTitle names the side-by-side table by what it holds:
// "builtin vs kube-proxy, side by side" when a builtin row is beside a
// kube-proxy one, "kube-proxy versions, side by side" when only
// kube-proxy rows (of several versions) are.
func sideBySideTitle(r *Result) string {
	builtin := false
	versions := map[string]bool{}
	for _, m := range r.Modes {
		if m.KubeProxy != nil {
			versions[m.KubeProxy.Version] = true
		} else if m.Implementation == "" && !m.isBaseline() && len(r.sameBase(m)) > 1 {
			builtin = true
		}
	}
	switch {
	case builtin:
		return "builtin vs kube-proxy, side by side"
	case len(versions) > 1:
		return "kube-proxy versions, side by side"
	}
	return "kube-proxy rows"
}

// sameBase is every row of m's base mode, size and kernel.
func (r *Result) sameBase(m ModeResult) []ModeResult {
	var out []ModeResult
	for _, o := range r.Modes {
		if baseOf(o) == baseOf(m) && o.Services == m.Services && kernelOf(o) == kernelOf(m) {
			out = append(out, o)
		}
	}
	return out
}

// sideBySideTable is the side-by-side table (header first), one row
// per row of a base mode with another implementation beside it; the
// Markdown and HTML reports both render it.
func sideBySideTable(r *Result) [][]string {
	rows := [][]string{{"mode", "implementation", "sync.full", "kube-proxy full sync (metric)", "sync.incremental p50", "kube-proxy partial syncs (metric)", "programming latency (metric)", "lookup p50 first", "lookup p50 last", "CPU", "peak RSS"}}
	var order []string
	groups := map[string][]ModeResult{}
	for _, m := range r.Modes {
		k := fmt.Sprint(baseOf(m), "|", m.Services, "|", kernelOf(m))
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], m)
	}
	for _, k := range order {
		g := groups[k]
		if len(g) < 2 && g[0].Implementation == "" {
			continue // a builtin mode with no other implementation beside it
		}
		for _, m := range g {
			impl := "builtin"
			full, inc := "-", "-"
			if m.SyncFullSummary.Count > 0 {
				full = dur(time.Duration(m.SyncFullSummary.P50))
			}
			if m.SyncIncrementalSummary.Count > 0 {
				inc = dur(time.Duration(m.SyncIncrementalSummary.P50))
			}
			kpFull, kpPartial, kpProg, cpu, rss := "-", "-", "-", "-", "-"
			if len(m.SyncFull) > 0 {
				cpu = dur(time.Duration(syncFullCPU(m).P50)) // as the sync.full table's CPU p50
			}
			if m.ProxyRSSBytes > 0 {
				rss = mib(int64(m.ProxyRSSBytes))
			}
			if kp := m.KubeProxy; kp != nil {
				impl = "kube-proxy " + kp.Version
				kpFull = meanMetric(measure.MetricDelta(nil, kp.AfterFullSync, kpSyncFull, "IPv4"))
				if n, _ := measure.MetricDelta(nil, kp.AfterFullSync, kpSyncFull, "IPv4"); n == 0 {
					// IPVS mode observes only sync_proxy_rules_duration_seconds.
					if c, sum := measure.MetricDelta(nil, kp.AfterFullSync, kpSync, "IPv4"); c > 0 {
						kpFull = meanMetric(c, sum) + " (sync_proxy_rules)"
					}
				}
				if u := kp.Unfinished; u != nil {
					kpFull = fmt.Sprintf("not finished after %s: %s", dur(time.Duration(u.BoundNs)), u.Summary)
				}
				if e := kp.Exit; e != nil && kp.FirstSyncNs == 0 && kp.Unfinished == nil {
					kpFull = "kube-proxy exited before it: " + e.Status
				}
				kpPartial = meanMetric(measure.MetricDelta(kp.AfterFullSync, kp.AtEnd, kpSyncPartial, "IPv4"))
				kpProg = meanMetric(measure.MetricDelta(nil, kp.AtEnd, kpProgramming, "IPv4"))
				cpu = fmt.Sprintf("%s + %s", dur(time.Duration(kp.CPUNs)), dur(time.Duration(kp.ChildCPUNs)))
				rss = fmt.Sprintf("%s + %s", mib(kp.PeakRSSBytes), mib(kp.ChildPeakRSSBytes))
			}
			if sw := m.KubeProxySweep; sw != nil {
				// One kube-proxy over the sweep: its record is the
				// process's; this size's own figures are the point's.
				if sw.From > 0 {
					kpFull = fmt.Sprintf("none at this size: grown from %d, last of %d syncs %s", sw.From, sw.KubeProxySyncs, dur(time.Duration(sw.LastSyncNs)))
				}
				cpu = fmt.Sprintf("%s + %s (this size)", dur(time.Duration(sw.CPUNs)), dur(time.Duration(sw.ChildCPUNs)))
				rss = fmt.Sprintf("%s at its end", mib(sw.RSSBytes))
			}
			first, last := "-", "-"
			for _, p := range m.Lookup {
				switch p.Position {
				case "first":
					first = us(p.Latency.P50) + " µs"
				case "last":
					last = us(p.Latency.P50) + " µs"
				}
			}
			rows = append(rows, []string{r.label(m), impl, full, kpFull, inc, kpPartial, kpProg, first, last, cpu, rss})
		}
	}
	return rows
}

// writeKubeProxyDetails writes per kube-proxy row its setup, where its
// time went (own CPU, the rule programs by command, its sync metrics per
// IP family and its log's sync lines) and its files.
func writeKubeProxyDetails(b *strings.Builder, r *Result) {
	b.WriteString("\n### kube-proxy rows: setup and where the time went\n\n")
	writeMarkdownTable(b, kubeProxySetupTable(r), "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
	rows := kubeProxyRows(r)
	for _, m := range rows {
		if e := m.KubeProxy.Exit; e != nil {
			fmt.Fprintf(b, "\n%s\n", exitWords(r.label(m), e))
			if len(e.LogTail) > 0 {
				b.WriteString("\n```\n" + strings.Join(e.LogTail[max(0, len(e.LogTail)-8):], "\n") + "\n```\n")
			}
		}
	}
	for _, m := range rows {
		if ps := m.KubeProxy.Progress; len(ps) > 0 {
			fmt.Fprintf(b, "\nFirst sync's progress, %s (read in the node namespace; time from the API objects created):\n\n", r.label(m))
			for _, p := range ps {
				fmt.Fprintf(b, "- +%s: %s\n", dur(time.Duration(p.AtNs)), p.Words())
			}
		}
	}
	b.WriteString("\nRule programs each kube-proxy ran (sampled every 20 ms: a lower bound; CPU in 10 ms ticks):\n\n")
	for _, m := range rows {
		kp := m.KubeProxy
		progs := append([]measure.ProgramUse(nil), kp.Programs...)
		sort.SliceStable(progs, func(i, j int) bool { return progs[i].WallNs > progs[j].WallNs })
		var parts []string
		for _, p := range progs {
			parts = append(parts, fmt.Sprintf("`%s` ×%d: wall %s, CPU %s, peak %s", p.Command, p.Runs, dur(time.Duration(p.WallNs)), dur(time.Duration(p.CPUNs)), mib(p.PeakRSSBytes)))
		}
		if len(parts) == 0 {
			parts = []string{"none seen"}
		}
		fmt.Fprintf(b, "- %s: %s\n", r.label(m), strings.Join(parts, "; "))
	}
	b.WriteString("\n")
	for _, m := range rows {
		kp := m.KubeProxy
		owned := make([]string, 0, len(kp.Owned))
		for k := range kp.Owned {
			owned = append(owned, k)
		}
		sort.Strings(owned)
		fmt.Fprintf(b, "- %s: %s %s; config %s; log %s; set by the testbed: %s\n", r.label(m), kp.Binary, strings.Join(kp.Flags, " "), kp.Config, kp.Log, strings.Join(owned, ", "))
	}
}

// exitWords says in a sentence how a row's kube-proxy exited (e): "The
// kube-proxy of nftables (kube-proxy) exited on its own during a later
// sync: signal: killed (SIGKILL: another process, or the kernel's OOM
// killer), 8.123 s after its start; its last metrics scrape that
// answered was 7.950 s after it. Its log ends:".
func exitWords(label string, e *measure.KubeProxyExit) string {
	how := e.Status
	if e.Signal == "SIGKILL" {
		how += " (SIGKILL: another process, or the kernel's OOM killer)"
	}
	s := fmt.Sprintf("The kube-proxy of %s exited on its own during %s: %s, %s after its start", label, e.During, how, dur(time.Duration(e.RanNs)))
	if e.LastScrapeNs > 0 {
		s += fmt.Sprintf("; its last metrics scrape that answered (the figures kept) was %s after it", dur(time.Duration(e.LastScrapeNs)))
	} else {
		s += "; no metrics scrape had answered"
	}
	s += "."
	if len(e.LogTail) > 0 {
		s += " Its log ends:"
	}
	return s
}

// kubeProxyExitNotes says, per kube-proxy row whose kube-proxy exited,
// how (exitWords) and its log's last line.
func kubeProxyExitNotes(r *Result) []string {
	var out []string
	for _, m := range kubeProxyRows(r) {
		if e := m.KubeProxy.Exit; e != nil {
			n := exitWords(r.label(m), e)
			if len(e.LogTail) > 0 {
				n += " " + strings.TrimSpace(e.LogTail[len(e.LogTail)-1])
			}
			out = append(out, n)
		}
	}
	return out
}

// kubeProxyRows is the result's kube-proxy rows.
func kubeProxyRows(r *Result) []ModeResult {
	var rows []ModeResult
	for _, m := range r.Modes {
		if m.KubeProxy != nil {
			rows = append(rows, m)
		}
	}
	return rows
}

// kubeProxySetupTable is the setup and where-the-time-went table
// (header first), one line per kube-proxy row with its version; the
// Markdown and HTML reports both render it.
func kubeProxySetupTable(r *Result) [][]string {
	out := [][]string{{"row", "version", "control plane up", "API objects", "first sync (metric) after objects", "syncs IPv4 (full / partial)", "syncs IPv6 (full / partial)", "own CPU", "rule programs CPU", "peak RSS (kube-proxy / largest program)"}}
	for _, m := range kubeProxyRows(r) {
		kp := m.KubeProxy
		fam := func(f string) string {
			return meanMetric(measure.MetricDelta(nil, kp.AtEnd, kpSyncFull, f)) + " / " + meanMetric(measure.MetricDelta(nil, kp.AtEnd, kpSyncPartial, f))
		}
		first := dur(time.Duration(kp.FirstSyncNs))
		switch {
		case kp.Unfinished != nil:
			first = "not finished after " + dur(time.Duration(kp.Unfinished.BoundNs))
		case kp.Exit != nil && kp.FirstSyncNs == 0:
			first = "kube-proxy exited before it (" + kp.Exit.Status + ")"
		}
		out = append(out, []string{r.label(m), kp.Version,
			dur(time.Duration(kp.ControlPlaneNs)), fmt.Sprintf("%d in %s", kp.APIObjects, dur(time.Duration(kp.APIObjectsNs))), first,
			fam("IPv4"), fam("IPv6"), dur(time.Duration(kp.CPUNs)), dur(time.Duration(kp.ChildCPUNs)), mib(kp.PeakRSSBytes) + " / " + mib(kp.ChildPeakRSSBytes)})
	}
	return out
}
