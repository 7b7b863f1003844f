//go:build linux

package runner

import (
	"time"

	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/workload/observe"
)

// programmedStream matches a kube-proxy row's changes to kube-proxy's
// "Network programming" lines interval by interval (the soak phase),
// where the churn phase matches them all at its end (matchProgrammed
// over apiApplier.changes): an hour's soak at 10 changes/s kept 36k
// changes and their observations for that match, and proxybench's own
// RSS grew with them (166 → 272 MiB in docs/reports.md "The hour at
// 10k"). It keeps only what can still change a figure: the changes not
// yet matched that a later line may still match, the matched ones whose
// observation is not yet done (seenBeforeSync needs its time), the
// lines no change took that a later change may still take, and the
// last sync read. Its figures are matchProgrammed's over the whole
// phase given kube-proxy logs a service's trigger times in order (one
// sync logs those it took, the next later ones), which holds as the
// soak's generator changes a service again only once its last change
// was seen: TestProgrammedStreamMatchesBatch.
//
// Not safe for concurrent use but add's: add is called by the churn,
// the rest by the sampler.
type programmedStream struct {
	tol     time.Duration
	pending []*streamChange // in change order
	// lines are the lines read that no change took, kept while a change
	// may still take one (lineKeep).
	lines []kubeproxy.Programmed
	// lastSync is the last sync read (a line of the next read may lie in
	// its span, seenBeforeSync's End + 1 ms).
	lastSync *kubeproxy.LoggedSync

	// logged counts the lines read, matched the changes paired with one,
	// seenBeforeSync those of them the data plane showed before the sync
	// that programmed them began.
	logged, matched, seenBeforeSync int
}

// lineKeep is how long a line no change took is kept for a change made
// after it was read (a change stamped before the read and added after
// it: the churn's goroutine between time.Now and apply): lines no change
// takes are kube-proxy's trigger times of changes the soak did not make,
// rare.
const lineKeep = 10 * time.Minute

// streamChange is one change in the stream: its service and time (the
// trigger time it was written with), its observation, and once matched
// the start of the sync that programmed it (hasSync false: no sync read
// holds its line).
type streamChange struct {
	service string
	at      time.Time
	obs     *observe.Observation
	// done: obs came out of the tracker done (observe.Tracker.TakeDone),
	// so its At and Latency are final and safe to read.
	done      bool
	matched   bool
	hasSync   bool
	syncStart time.Time
}

func newProgrammedStream(tol time.Duration) *programmedStream {
	return &programmedStream{tol: tol}
}

// pass reads one batch of kube-proxy's log (lines and syncs, in order:
// kubeproxy.Proxier.ReadChurnLog, or EndChurn's rest), the observations
// that came out of the tracker done since the last pass (done), and now,
// the pass's time. It matches the pending changes in order to the lines
// (the nearest trigger time of the change's service within tol, each
// line once, as matchProgrammed), counts a matched change seen before
// its sync once its observation is done, and drops what no later line
// can change: a matched change whose observation is done, an unmatched
// one whose service has a line read with a trigger time past the
// change's by more than tol (the change's own line would have come
// before it), a line older than lineKeep that no change took.
func (p *programmedStream) pass(added []*streamChange, lines []kubeproxy.Programmed, syncs []kubeproxy.LoggedSync,
	done []*observe.Observation, now time.Time) {
	p.pending = append(p.pending, added...)
	p.logged += len(lines)
	if len(done) > 0 {
		isDone := make(map[*observe.Observation]bool, len(done))
		for _, o := range done {
			isDone[o] = true
		}
		for _, c := range p.pending {
			if isDone[c.obs] {
				c.done = true
			}
		}
	}
	spans := syncs
	if p.lastSync != nil {
		spans = append([]kubeproxy.LoggedSync{*p.lastSync}, syncs...)
	}
	if len(syncs) > 0 {
		last := syncs[len(syncs)-1]
		p.lastSync = &last
	}
	// latest is each service's latest trigger time among the new lines.
	latest := map[string]time.Time{}
	for _, l := range lines {
		if t := l.At.Add(-l.Elapsed); t.After(latest[l.Service]) {
			latest[l.Service] = t
		}
	}
	avail := append(p.lines, lines...)
	byService := map[string][]int{}
	for i, l := range avail {
		byService[l.Service] = append(byService[l.Service], i)
	}
	used := make([]bool, len(avail))
	for _, c := range p.pending {
		if c.matched {
			continue
		}
		best := nearestLine(avail, byService[c.service], used, c.at, p.tol)
		if best < 0 {
			continue
		}
		used[best] = true
		c.matched = true
		p.matched++
		l := avail[best]
		for _, s := range spans {
			if !l.At.Before(s.Start) && !l.At.After(s.End.Add(time.Millisecond)) {
				c.hasSync, c.syncStart = true, s.Start
				break
			}
		}
	}
	kept := p.pending[:0]
	for _, c := range p.pending {
		switch {
		case c.matched && c.done:
			if c.hasSync && c.obs.At.Add(c.obs.Latency).Before(c.syncStart) {
				p.seenBeforeSync++
			}
		case c.matched:
			kept = append(kept, c)
		case !c.matched:
			if t, ok := latest[c.service]; ok && t.Sub(c.at) > p.tol {
				continue // too old: no line of its service can come for it any more
			}
			kept = append(kept, c)
		}
	}
	clear(p.pending[len(kept):])
	p.pending = kept
	var left []kubeproxy.Programmed
	for i, l := range avail {
		if !used[i] && !l.At.Add(-l.Elapsed).Add(p.tol+lineKeep).Before(now) {
			left = append(left, l)
		}
	}
	p.lines = left
}

// nearestLine is the index (into lines, among idx, not used) of the line
// whose trigger time (its time minus its latency) is nearest to at and
// within tol (-1: none); of two as near, the first.
func nearestLine(lines []kubeproxy.Programmed, idx []int, used []bool, at time.Time, tol time.Duration) int {
	best, bestOff := -1, time.Duration(0)
	for _, j := range idx {
		if used[j] {
			continue
		}
		off := lines[j].At.Add(-lines[j].Elapsed).Sub(at)
		if off < 0 {
			off = -off
		}
		if off <= tol && (best < 0 || off < bestOff) {
			best, bestOff = j, off
		}
	}
	return best
}
