package reports

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/scenarios"
)

// Figure is one measured number of a result, named as gates name it
// (scenarios.GateFigures). Every Figure is recomputed from the raw samples
// of a saved result (SamplesNs, SyncFull) where they exist, so reports,
// gates and comparisons of a saved run agree with the run itself.
type Figure struct {
	// Name is a scenarios.GateFigures key, such as "lookup.latency.p99".
	Name string `json:"figure"`
	Mode string `json:"mode"`
	// Services is the size the figure was measured at.
	Services int `json:"services"`
	// Kernel is "uml" for a mode run in the user-mode-linux guest, empty
	// on the host.
	Kernel string `json:"kernel,omitempty"`
	// Position is the service position of lookup.* and throughput.cps
	// figures; empty for the others.
	Position string `json:"position,omitempty"`
	// MinSyncPeriod is the minSyncPeriod of a churn figure's phase
	// ("1s"; a row runs one churn phase per sweep.minSyncPeriod value);
	// empty for the others.
	MinSyncPeriod string `json:"minSyncPeriod,omitempty"`
	// Value is in Unit: ns for durations.
	Value float64 `json:"value"`
	// Unit is "ns", "ratio", "count", "conn/s", "bytes", "index" or "p".
	Unit string `json:"unit"`
	// N is the number of raw samples behind Value.
	N int `json:"n"`
	// variant is the IPVS scheduler of a scheduler sweep (compare keeps
	// the schedulers apart).
	variant string
}

// Key identifies a figure within a result: "name{mode=…,position=…,services=…}".
func (f Figure) Key() string {
	sel := []string{"mode=" + f.Mode}
	if f.Kernel != "" {
		sel = append(sel, "kernel="+f.Kernel)
	}
	if f.Position != "" {
		sel = append(sel, "position="+f.Position)
	}
	if f.MinSyncPeriod != "" {
		sel = append(sel, "minSyncPeriod="+f.MinSyncPeriod)
	}
	sel = append(sel, fmt.Sprintf("services=%d", f.Services))
	return f.Name + "{" + strings.Join(sel, ",") + "}"
}

// Where is the figure's place within its row for the tables and CSV:
// its service position, or "minSyncPeriod=1s" for a churn figure.
func (f Figure) Where() string {
	if f.MinSyncPeriod != "" {
		return "minSyncPeriod=" + f.MinSyncPeriod
	}
	return f.Position
}

// Text formats Value with its unit: durations in µs, ms or s, ratios
// with ×, counts whole.
func (f Figure) Text() string { return FormatValue(f.Name, f.Value) }

// FormatValue formats v (in the unit of figure name) for people.
func FormatValue(name string, v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	if scenarios.GateFigures[name].Duration {
		return FormatNs(v)
	}
	switch unitOf(name) {
	case "ratio":
		return fmt.Sprintf("%.3g×", v)
	case "count":
		return fmt.Sprintf("%.0f", v)
	case "conn/s":
		return fmt.Sprintf("%.0f conn/s", v)
	case "bytes":
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	}
	return fmt.Sprintf("%.4g", v)
}

// FormatNs formats nanoseconds as µs below 1 ms, ms below 1 s, else s.
func FormatNs(ns float64) string {
	switch a := math.Abs(ns); {
	case a < 1e6:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	case a < 1e9:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	}
	return fmt.Sprintf("%.3f s", ns/1e9)
}

func unitOf(name string) string {
	switch {
	case scenarios.GateFigures[name].Duration:
		return "ns"
	case strings.HasPrefix(name, "lookup.vsnone."), name == "cpu.vsnone", name == "sync.full.vsraw":
		return "ratio"
	case name == "lookup.errors", strings.HasSuffix(name, ".count"):
		return "count"
	case name == "throughput.cps":
		return "conn/s"
	case name == "fairness.pvalue":
		return "p"
	case name == "kubeproxy.rss", name == "kubeproxy.churn.rss":
		return "bytes"
	}
	return "index"
}

// errorTimes summarises an error cause's times to error from its raw
// samples, falling back to the stored summary.
func errorTimes(e ErrorKind) Summary {
	if len(e.SamplesNs) > 0 {
		return Summarize(e.SamplesNs)
	}
	return e.TimeToError
}

// lookupSummary recomputes a position's latency summary from its raw
// samples, falling back to the stored summary when they were not kept.
func lookupSummary(p PositionResult) Summary {
	if len(p.SamplesNs) > 0 {
		return Summarize(p.SamplesNs)
	}
	return p.Latency
}

// syncIncrementalSummary recomputes a mode's sync.incremental summary
// from its raw samples, falling back to the stored summary.
func syncIncrementalSummary(m ModeResult) Summary {
	if len(m.SyncIncremental) == 0 {
		return m.SyncIncrementalSummary
	}
	ns := make([]int64, len(m.SyncIncremental))
	for i, s := range m.SyncIncremental {
		ns[i] = int64(s.Wall)
	}
	return Summarize(ns)
}

// syncWalls returns the wall times (ns) of a mode's full syncs.
func syncWalls(m ModeResult) []int64 {
	out := make([]int64, len(m.SyncFull))
	for i, s := range m.SyncFull {
		out[i] = int64(s.Wall)
	}
	return out
}

// Figures lists every figure of r, in mode order: sync.full, sync.full.max,
// sync.full.cpu, sync.full.vsraw (when the syncs record a tool phase),
// sync.incremental (when measured), for a kube-proxy row the
// scenarios.KubeProxyFigures it has (kubeproxy.sync.full, .sync.partial,
// .programming: kube-proxy's histogram mean over the row, IPv4, N its
// observations; kubeproxy.cpu, .programs.cpu, .rss), per churn phase
// churnFigures (keyed by its minSyncPeriod), cpu.perconn and cpu.vsnone (when the traffic CPU was measured), then
// per position lookup.latency.{p50,p90,p99,p999,max}, lookup.vsnone.{p50,p99} (when mode none ran at that size and position),
// lookup.kernel.{p50,p90,p99} and lookup.kernel.other.{p50,p99} (when measured), lookup.errors and throughput.cps, then fairness.{jain,maxmin,pvalue}.
func Figures(r *Result) []Figure {
	var out []Figure
	base := map[string]Summary{} // "size/position" -> none's latency
	baseCPU := map[string]float64{}
	for _, m := range r.Modes {
		if m.isBaseline() {
			for _, p := range m.Lookup {
				base[baseKey(m, p.Position)] = lookupSummary(p)
			}
			if c, ok := cpuPerConn(m); ok {
				baseCPU[baseKey(m, "")] = c
			}
		}
	}
	for _, m := range r.Modes {
		size := modeSize(r, m)
		kernel := ""
		if isGuest(kernelOf(m)) {
			kernel = m.Kernel
		}
		variant := ""
		if s := m.Info["scheduler"]; s != "" && r.Scenario != nil && len(r.Scenario.Sweep.Schedulers) > 0 {
			variant = s
		}
		add := func(name, pos string, v float64, n int) {
			out = append(out, Figure{Name: name, Mode: m.Mode, Services: size, Kernel: kernel, Position: pos, Value: v, Unit: unitOf(name), N: n, variant: variant})
		}
		if len(m.SyncFull) > 0 {
			w := Summarize(syncWalls(m))
			c := syncFullCPU(m)
			add("sync.full", "", float64(w.P50), w.Count)
			add("sync.full.max", "", float64(w.Max), w.Count)
			add("sync.full.cpu", "", float64(c.P50), c.Count)
			if v, n := syncVsRaw(m); n > 0 {
				add("sync.full.vsraw", "", v, n)
			}
		}
		if inc := syncIncrementalSummary(m); inc.Count > 0 {
			add("sync.incremental", "", float64(inc.P50), inc.Count)
		}
		if kp := m.KubeProxy; kp != nil {
			metric := func(name string, from, to []measure.Metric, figure string) {
				if c, s := measure.MetricDelta(from, to, name, "IPv4"); c > 0 {
					add(figure, "", s/float64(c)*1e9, int(c))
				}
			}
			metric(kpSyncFull, nil, kp.AfterFullSync, "kubeproxy.sync.full")
			if len(kp.AfterFullSync) > 0 {
				metric(kpSyncPartial, kp.AfterFullSync, kp.AtEnd, "kubeproxy.sync.partial")
			}
			metric(kpProgramming, nil, kp.AtEnd, "kubeproxy.programming")
			if kp.CPUNs > 0 {
				// Measured (a live process always has CPU ticks); the rule
				// programs' time may be 0 below one 10 ms tick.
				add("kubeproxy.cpu", "", float64(kp.CPUNs), 1)
				add("kubeproxy.programs.cpu", "", float64(kp.ChildCPUNs), 1)
			}
			if kp.PeakRSSBytes > 0 {
				add("kubeproxy.rss", "", float64(kp.PeakRSSBytes), 1)
			}
		}
		for _, c := range m.Churn {
			for _, f := range churnFigures(c) {
				f.Mode, f.Services, f.Kernel, f.variant = m.Mode, size, kernel, variant
				out = append(out, f)
			}
		}
		if c, ok := cpuPerConn(m); ok {
			add("cpu.perconn", "", c, m.TrafficConns)
			if b := baseCPU[baseKey(m, "")]; b > 0 {
				add("cpu.vsnone", "", c/b, m.TrafficConns)
			}
		}
		for _, p := range m.Lookup {
			l := lookupSummary(p)
			if l.Count > 0 {
				add("lookup.latency.p50", p.Position, float64(l.P50), l.Count)
				add("lookup.latency.p90", p.Position, float64(l.P90), l.Count)
				add("lookup.latency.p99", p.Position, float64(l.P99), l.Count)
				add("lookup.latency.p999", p.Position, float64(l.P999), l.Count)
				add("lookup.latency.max", p.Position, float64(l.Max), l.Count)
				if b, ok := base[baseKey(m, p.Position)]; ok && b.P50 > 0 && b.P99 > 0 {
					add("lookup.vsnone.p50", p.Position, float64(l.P50)/float64(b.P50), l.Count)
					add("lookup.vsnone.p99", p.Position, float64(l.P99)/float64(b.P99), l.Count)
				}
			}
			if k := kernelSummary(p); k.Count > 0 {
				add("lookup.kernel.p50", p.Position, float64(k.P50), k.Count)
				add("lookup.kernel.p90", p.Position, float64(k.P90), k.Count)
				add("lookup.kernel.p99", p.Position, float64(k.P99), k.Count)
			}
			if o := kernelOtherSummary(p); o.Count > 0 {
				add("lookup.kernel.other.p50", p.Position, float64(o.P50), o.Count)
				add("lookup.kernel.other.p99", p.Position, float64(o.P99), o.Count)
			}
			add("lookup.errors", p.Position, float64(p.Errors+p.Misses), l.Count+p.Errors+p.Misses)
			add("throughput.cps", p.Position, p.CPS, l.Count)
			for _, k := range sortedKeys(p.ErrorKinds) {
				e := p.ErrorKinds[k]
				add("lookup."+k+".count", p.Position, float64(e.Count), e.Count)
				if t := errorTimes(e); t.Count > 0 {
					add("lookup."+k+".timetoerror.p50", p.Position, float64(t.P50), t.Count)
					add("lookup."+k+".timetoerror.p90", p.Position, float64(t.P90), t.Count)
					add("lookup."+k+".timetoerror.p99", p.Position, float64(t.P99), t.Count)
					add("lookup."+k+".timetoerror.max", p.Position, float64(t.Max), t.Count)
				}
			}
		}
		if f := m.Fairness; f.Services > 0 {
			add("fairness.jain", "", f.MinJain, f.Samples)
			add("fairness.maxmin", "", f.MaxMaxMin, f.Samples)
			add("fairness.pvalue", "", f.PValue, f.Samples)
		}
	}
	return out
}

// cpuPerConn is a mode's traffic CPU time per connection (ns), when the
// result has it.
func cpuPerConn(m ModeResult) (float64, bool) {
	if m.TrafficConns <= 0 || m.TrafficCPUNs <= 0 {
		return 0, false
	}
	return float64(m.TrafficCPUNs) / float64(m.TrafficConns), true
}

// RawToolNs is the time a full sync spent in the kernel's own tool on the
// bytes the proxier rendered: the "restore" phase (iptables-restore, as
// the iptables and userspace proxiers record it) or the "chains" plus
// "elements" phases (nft transactions, nftables). ok is false for syncs
// without such phases (none, ipvs: netlink calls, no tool).
func RawToolNs(s measure.SyncStats) (ns int64, ok bool) {
	if d, has := s.Phases["restore"]; has {
		return int64(d), d > 0
	}
	c, hasC := s.Phases["chains"]
	e, hasE := s.Phases["elements"]
	if hasC || hasE {
		return int64(c + e), c+e > 0
	}
	return 0, false
}

// syncVsRaw is the median over a mode's full syncs of wall time over
// RawToolNs, and how many syncs had a tool phase.
func syncVsRaw(m ModeResult) (float64, int) {
	var rs []float64
	for _, s := range m.SyncFull {
		if raw, ok := RawToolNs(s); ok {
			rs = append(rs, float64(s.Wall)/float64(raw))
		}
	}
	if len(rs) == 0 {
		return 0, 0
	}
	slices.Sort(rs)
	return stat.Quantile(0.5, stat.Empirical, rs, nil), len(rs)
}

// modeSize is the size a ModeResult was measured at (results written
// before ModeResult.Services existed carry only services.count).
func modeSize(r *Result, m ModeResult) int {
	if m.Services > 0 || r.Scenario == nil {
		return m.Services
	}
	return r.Scenario.ServiceTotal() // services.count and every group's
}

// churnFigures are one churn phase's figures (Mode, Services, Kernel left
// to the caller; MinSyncPeriod set): churn.programming.p50 and .p99 of
// the changes the data plane showed (N observed) and
// churn.unobserved.count; for a kube-proxy row (ChurnResult.KubeProxy)
// kubeproxy.churn.programming.p50, .p99 (interpolated in kube-proxy's
// buckets, KubeProxyHistogram.Quantile) and .mean of its
// network_programming_duration_seconds over the phase (N its
// observations), kubeproxy.churn.syncs.count, kubeproxy.churn.cpu (own +
// rule programs) and kubeproxy.churn.rss (peak VmRSS over the phase).
func churnFigures(c ChurnResult) []Figure {
	ms := time.Duration(c.MinSyncPeriodNs).String()
	var out []Figure
	add := func(name string, v float64, n int) {
		if math.IsNaN(v) {
			return
		}
		out = append(out, Figure{Name: name, MinSyncPeriod: ms, Value: v, Unit: unitOf(name), N: n})
	}
	if c.Latency.Count > 0 {
		add("churn.programming.p50", float64(c.Latency.P50), c.Latency.Count)
		add("churn.programming.p99", float64(c.Latency.P99), c.Latency.Count)
	}
	add("churn.unobserved.count", float64(c.Unobserved), c.Changes)
	kp := c.KubeProxy
	if kp == nil {
		return out
	}
	if n := int(kp.Programming.Count); n > 0 {
		add("kubeproxy.churn.programming.p50", kp.Programming.Quantile(0.5)*1e9, n)
		add("kubeproxy.churn.programming.p99", kp.Programming.Quantile(0.99)*1e9, n)
		add("kubeproxy.churn.programming.mean", kp.Programming.Mean()*1e9, n)
	}
	add("kubeproxy.churn.syncs.count", float64(kp.Syncs.Count), 1)
	if kp.CPUNs > 0 {
		add("kubeproxy.churn.cpu", float64(kp.CPUNs+kp.ChildCPUNs), 1)
	}
	if kp.PeakRSSBytes > 0 {
		add("kubeproxy.churn.rss", float64(kp.PeakRSSBytes), 1)
	}
	return out
}
