package reports

import (
	"fmt"
	"strings"
)

// writeCostMarkdown appends what the traffic cost per mode (CPU per
// connection against mode none, proxy memory) and, when some connections
// failed (for example with dead endpoints), the failure rate per mode.
func writeCostMarkdown(b *strings.Builder, r *Result) {
	base := map[string]float64{} // same size and kernel
	for _, m := range r.Modes {
		if m.isBaseline() && m.TrafficConns > 0 {
			base[baseKey(m, "")] = float64(m.TrafficCPUNs) / float64(m.TrafficConns)
		}
	}
	b.WriteString("\n### cost of the traffic phase\n\n")
	b.WriteString("| mode | connections | failed | failure rate | CPU µs/conn (driver+echo+proxy) | vs none | proxy RSS |\n|---|--:|--:|--:|--:|--:|--:|\n")
	for _, m := range r.Modes {
		if m.TrafficConns == 0 {
			continue
		}
		failed := 0
		for _, p := range m.Lookup {
			failed += p.Errors + p.Misses
		}
		per := float64(m.TrafficCPUNs) / float64(m.TrafficConns)
		vs := "-"
		if bp := base[baseKey(m, "")]; bp > 0 {
			vs = vsBaseline(per, bp)
		}
		rss := "-"
		if m.ProxyRSSBytes > 0 {
			rss = fmt.Sprintf("%.1f MiB", float64(m.ProxyRSSBytes)/(1<<20))
		}
		fmt.Fprintf(b, "| %s | %d | %d | %.2f%% | %.1f | %s | %s |\n", r.label(m), m.TrafficConns, failed,
			100*float64(failed)/float64(m.TrafficConns), per/1e3, vs, rss)
	}
	b.WriteString("\n### time to first byte: connect + the echo line (µs)\n\n")
	b.WriteString("It includes the proxy's own connection to the endpoint in mode userspace, whose listener completes the client's handshake locally.\n\n")
	b.WriteString("| mode | position | n | connect p50 | TTFB p50 | TTFB p90 | TTFB p99 |\n|---|---|--:|--:|--:|--:|--:|\n")
	for _, m := range r.Modes {
		for _, p := range m.Lookup {
			if p.TTFB.Count == 0 {
				continue
			}
			fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s | %s |\n", r.label(m), p.Position, p.TTFB.Count, us(p.Latency.P50), us(p.TTFB.P50), us(p.TTFB.P90), us(p.TTFB.P99))
		}
	}
	if f := r.Scenario.Failure; f.DownEndpointsPerService > 0 {
		fmt.Fprintf(b, "\n%d endpoint(s) per service down (%s): a failed connection is one a mode sent to a dead endpoint without retrying elsewhere.\n", f.DownEndpointsPerService, f.Mode)
	}
}
