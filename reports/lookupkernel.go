package reports

import (
	"fmt"
	"math"
)

// PhaseLookupKernel names lookup.kernel's section (the traffic phase's
// in-kernel figure, PositionResult.Kernel).
const PhaseLookupKernel = "lookup.kernel"

// kernelSummary is a position's lookup.kernel recomputed from its raw
// samples, else the stored summary.
func kernelSummary(p PositionResult) Summary {
	if len(p.KernelSamplesNs) > 0 {
		return Summarize(p.KernelSamplesNs)
	}
	return p.Kernel
}

// kernelOtherSummary is a position's lookup.kernel.other, as kernelSummary.
func kernelOtherSummary(p PositionResult) Summary {
	if len(p.KernelOtherSamplesNs) > 0 {
		return Summarize(p.KernelOtherSamplesNs)
	}
	return p.KernelOther
}

// KernelAbsent is why mr has no lookup.kernel ("" when it has one, or
// when the row recorded nothing about it: results before the figure).
func KernelAbsent(mr *ModeResult) string {
	if mr.KernelTime == nil {
		return ""
	}
	return mr.KernelTime.Absent
}

// LookupKernelReport is lookup.kernel's section of one row: per
// position, the SYN's in-kernel time (n, p50, p90, p99 in µs) beside the
// connect time lookup.latency (p50) and the share of it the kernel's
// PREROUTING took, and the position's other packets apart (n, p50, p99);
// a row without the figure has one row whose note says why. None for a
// row that recorded nothing about it (KernelTime nil and no samples).
func LookupKernelReport(label string, mr *ModeResult) []Section {
	has := false
	for _, p := range mr.Lookup {
		has = has || kernelSummary(p).Count > 0
	}
	if mr.KernelTime == nil && !has {
		return nil
	}
	s := Section{Phase: PhaseLookupKernel, Scope: "row",
		Title: "lookup.kernel: the node kernel's time per new connection's SYN in PREROUTING (µs), beside lookup.latency",
		Intro: "Measured in the node's kernel by BPF, per packet: from netif_receive_skb on the node's end of the client's veth " +
			"to the packet's input route lookup (fib_table_lookup), which ip_rcv_finish reaches once PREROUTING let it through: " +
			"ip_rcv, conntrack creating the entry and the nat table's rule walk (KUBE-SERVICES → KUBE-SVC → KUBE-SEP for iptables, " +
			"the verdict maps for nftables). Not in it: the client's and the echo's system calls, scheduling, the veth's queue, " +
			"forwarding and POSTROUTING. `other` are the same connections' later packets (ACK, data, FIN, RST: conntrack hits, no rule walk). " +
			"Percentiles: " + Precision + ".",
		Columns: []Column{
			{Name: "position", Key: true},
			{Name: "n", Unit: "count", Figure: "kernel.n"},
			{Name: "p50", Unit: "µs", Figure: "kernel.p50"},
			{Name: "p90", Unit: "µs", Figure: "kernel.p90"},
			{Name: "p99", Unit: "µs", Figure: "kernel.p99"},
			{Name: "connect p50", Unit: "µs", Figure: "latency.p50"},
			{Name: "share of connect", Unit: "%", Figure: "kernel.share"},
			{Name: "other n", Unit: "count", Figure: "kernel.other.n"},
			{Name: "other p50", Unit: "µs", Figure: "kernel.other.p50"},
			{Name: "other p99", Unit: "µs", Figure: "kernel.other.p99"},
			{Name: "note"},
		}}
	usc := func(ns int64) Cell { return Num(float64(ns)/1e3, "%.2f") }
	if why := KernelAbsent(mr); why != "" {
		cells := []Cell{Text("-")}
		for range s.Columns[1 : len(s.Columns)-1] {
			cells = append(cells, Missing())
		}
		_ = s.AddRow(label, append(cells, Text("not measured: "+why))...)
		return []Section{s}
	}
	for _, p := range mr.Lookup {
		k, o, l := kernelSummary(p), kernelOtherSummary(p), lookupSummary(p)
		cells := []Cell{Text(p.Position)}
		if k.Count > 0 {
			cells = append(cells, Int(k.Count), usc(k.P50), usc(k.P90), usc(k.P99))
		} else {
			cells = append(cells, Int(0), Missing(), Missing(), Missing())
		}
		if l.Count > 0 {
			cells = append(cells, usc(l.P50))
		} else {
			cells = append(cells, Missing())
		}
		if k.Count > 0 && l.P50 > 0 {
			cells = append(cells, Num(100*float64(k.P50)/float64(l.P50), "%.1f"))
		} else {
			cells = append(cells, Missing())
		}
		if o.Count > 0 {
			cells = append(cells, Int(o.Count), usc(o.P50), usc(o.P99))
		} else {
			cells = append(cells, Int(0), Missing(), Missing())
		}
		note := ""
		switch {
		case k.Count == 0 && p.Protocol == "UDP":
			note = "UDP: lookup.kernel times TCP SYNs only"
		case k.Count == 0:
			note = "no SYN of this position was timed"
		}
		_ = s.AddRow(label, append(cells, Text(note))...)
	}
	if kt := mr.KernelTime; kt != nil && (kt.Lost > 0 || kt.Unmatched > 0) {
		s.Notes = append(s.Notes, fmt.Sprintf("%s: %d packets lost by the ring buffer, %d timed packets of no position's connections (the backend's answers, packets outside a recorded window) left out", label, kt.Lost, kt.Unmatched))
	}
	if d, ok := KernelWalkShare(mr); ok {
		s.Notes = append(s.Notes, fmt.Sprintf("%s: last − first p50: lookup.kernel %+.2f µs of lookup.latency's %+.2f µs (%s)", label,
			d.Kernel/1e3, d.Latency/1e3, d.shareText()))
	}
	return []Section{s}
}

// WalkShare is how much of a row's last-minus-first lookup.latency p50
// the kernel's PREROUTING accounts for (lookup.kernel's last-minus-first
// p50), in ns.
type WalkShare struct {
	Kernel, Latency float64
}

// shareText words d's share.
func (d WalkShare) shareText() string {
	if d.Latency <= 0 || math.Abs(d.Latency) < 1 {
		return "the connect time did not grow from first to last"
	}
	return fmt.Sprintf("%.0f%% of the delta is the rule walk", 100*d.Kernel/d.Latency)
}

// KernelWalkShare is mr's WalkShare when both figures were measured at
// the first and last positions of a mode whose lookup walks a list in
// the scenario's order (Traits.Walk set, not Unordered): the share of a
// rule walk means nothing for a lookup of fixed cost (nftables' maps) or
// a row whose first and last services sit anywhere in the list (a
// kube-proxy iptables row).
func KernelWalkShare(mr *ModeResult) (WalkShare, bool) {
	if mr.Traits.Walk == "" || mr.Traits.Unordered {
		return WalkShare{}, false
	}
	var first, last *PositionResult
	for i := range mr.Lookup {
		switch mr.Lookup[i].Position {
		case "first":
			first = &mr.Lookup[i]
		case "last":
			last = &mr.Lookup[i]
		}
	}
	if first == nil || last == nil {
		return WalkShare{}, false
	}
	kf, kl := kernelSummary(*first), kernelSummary(*last)
	lf, ll := lookupSummary(*first), lookupSummary(*last)
	if kf.Count == 0 || kl.Count == 0 || lf.Count == 0 || ll.Count == 0 {
		return WalkShare{}, false
	}
	return WalkShare{Kernel: float64(kl.P50 - kf.P50), Latency: float64(ll.P50 - lf.P50)}, true
}

// lookupKernelSections is lookup.kernel's section over r's rows (one
// table; none when no row recorded the figure).
func lookupKernelSections(r *Result) []Section {
	var secs []Section
	for i := range r.Modes {
		for _, s := range LookupKernelReport(r.label(r.Modes[i]), &r.Modes[i]) {
			secs = mergeSection(secs, s)
		}
	}
	return secs
}
