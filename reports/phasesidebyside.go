package reports

import "fmt"

// PhaseImplementations names the run-scoped sections that put a
// kube-proxy row's per-change figures beside builtin's of the same mode,
// size and kernel (PhaseSideBySide).
const PhaseImplementations = "implementations"

// PhaseSideBySide returns, for a result with kube-proxy rows beside
// builtin ones, one run-scoped section per phase that has per-change
// figures on both (transitions, lifecycle): a row per kube-proxy row and
// change (by name; builtin's transition with its cleanup on), builtin's
// figures beside kube-proxy's. Built from the typed fields each time
// (AllSections appends them), never stored. None when no kube-proxy row
// has a builtin row beside it.
func PhaseSideBySide(r *Result) []Section {
	tr := Section{Phase: PhaseImplementations, Title: "UDP endpoint transitions: builtin beside kube-proxy", Scope: "run",
		Intro: "Per transition, builtin (proxybench's copy of kube-proxy's conntrack cleanup) and the real kube-proxy of the same mode: seconds from the end of the sync that made the change until the client's datagrams reach a live endpoint, datagrams answered by a removed endpoint's address (stale) or not at all (lost) after it, and the conntrack entries that sync deleted (kube-proxy: its own counter).",
		Columns: []Column{{Name: "transition", Key: true},
			{Name: "builtin live after", Unit: "s", Figure: "builtin.recovery"}, {Name: "kube-proxy live after", Unit: "s", Figure: "kubeproxy.recovery"},
			{Name: "builtin stale", Unit: "count", Figure: "builtin.stale"}, {Name: "kube-proxy stale", Unit: "count", Figure: "kubeproxy.stale"},
			{Name: "builtin lost", Unit: "count", Figure: "builtin.lost"}, {Name: "kube-proxy lost", Unit: "count", Figure: "kubeproxy.lost"},
			{Name: "builtin deleted", Unit: "count", Figure: "builtin.deleted"}, {Name: "kube-proxy deleted", Unit: "count", Figure: "kubeproxy.deleted"},
			{Name: "builtin flows after"}, {Name: "kube-proxy flows after"}}}
	lc := Section{Phase: PhaseImplementations, Title: "endpoint lifecycle: builtin beside kube-proxy", Scope: "run",
		Intro: "Per lifecycle change, builtin and the real kube-proxy of the same mode (kube-proxy's changes as EndpointSlice writes with the endpoints' ready/serving/terminating conditions): held connections broken, new connections that failed or still reached the removed or terminating endpoint, and the first success after the sync.",
		Columns: []Column{{Name: "change", Key: true},
			{Name: "builtin broken", Unit: "count", Figure: "builtin.broken"}, {Name: "kube-proxy broken", Unit: "count", Figure: "kubeproxy.broken"},
			{Name: "builtin new failed", Unit: "count", Figure: "builtin.new.failed"}, {Name: "kube-proxy new failed", Unit: "count", Figure: "kubeproxy.new.failed"},
			{Name: "builtin to old", Unit: "count", Figure: "builtin.new.toold"}, {Name: "kube-proxy to old", Unit: "count", Figure: "kubeproxy.new.toold"},
			{Name: "builtin first success", Unit: "s", Figure: "builtin.new.firstsuccess"}, {Name: "kube-proxy first success", Unit: "s", Figure: "kubeproxy.new.firstsuccess"}}}
	secs := func(ns int64) Cell {
		if ns < 0 {
			return Missing()
		}
		return Num(float64(ns)/1e9, "%.3f")
	}
	for _, m := range r.Modes {
		if m.Implementation == "" {
			continue
		}
		var b *ModeResult
		for _, o := range r.sameBase(m) {
			if o.Implementation == "" {
				o := o
				b = &o
				break
			}
		}
		if b == nil {
			continue
		}
		label := r.label(m)
		for _, t := range m.Transitions {
			for _, bt := range b.Transitions {
				if bt.Name == t.Name && bt.Cleanup {
					_ = tr.AddRow(label, Text(t.Name), secs(bt.RecoveryNs), secs(t.RecoveryNs), Int(bt.Stale), Int(t.Stale), Int(bt.Lost), Int(t.Lost),
						Int(bt.ConntrackDeleted), Int(t.ConntrackDeleted), Text(flowsText(bt.FlowsAfter)), Text(flowsText(t.FlowsAfter)))
					if d := bt.Stale - t.Stale; d != 0 {
						tr.Notes = appendNote(tr.Notes, fmt.Sprintf("%s %s: kube-proxy %d stale answers, builtin %d", label, t.Name, t.Stale, bt.Stale))
					}
					break
				}
			}
		}
		for _, c := range m.Lifecycle {
			for _, bc := range b.Lifecycle {
				if bc.Name == c.Name {
					_ = lc.AddRow(label, Text(c.Name), Int(bc.Broken), Int(c.Broken), Int(bc.NewFailed), Int(c.NewFailed), Int(bc.NewToOld), Int(c.NewToOld),
						secs(bc.FirstSuccessNs), secs(c.FirstSuccessNs))
					break
				}
			}
		}
	}
	var out []Section
	for _, s := range []Section{tr, lc} {
		if len(s.Rows) > 0 {
			out = append(out, s)
		}
	}
	return out
}
