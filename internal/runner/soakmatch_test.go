//go:build linux

package runner

import (
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/workload/observe"
)

// matchSim is a soak against a simulated kube-proxy, as its log shows
// it: the changes (a service changed again only once its last change was
// seen, as workload.Cluster holds it), kube-proxy's syncs (each programs
// the trigger times written before it started; some fail and drop them),
// its "Network programming" lines (one per trigger time programmed, at
// the sync's end, services in random order, a service's times in order)
// with a few of changes the soak did not make, and each change's
// observation (after its sync; some by chance before it, as a removal
// avoided by the probes; some never).
type matchSim struct {
	changes []simChange
	syncs   []kubeproxy.LoggedSync
	lines   []kubeproxy.Programmed // in log order
	// lineSync is the sync each line was logged in (its index in syncs).
	lineSync []int
	end      time.Time
}

type simChange struct {
	service string
	obs     *observe.Observation
	doneAt  time.Time // zero: never seen
}

func simulateMatch(seed int64, services, changes int) matchSim {
	rng := rand.New(rand.NewSource(seed))
	t0 := time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)
	ms := func(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }
	// kube-proxy's syncs, every 100-1100 ms, taking 2-600 ms, 5% failed.
	type simSync struct {
		start, end time.Time
		failed     bool
	}
	var syncs []simSync
	for at := t0.Add(ms(50)); len(syncs) < changes; {
		d := ms(2 + rng.Float64()*598)
		syncs = append(syncs, simSync{start: at, end: at.Add(d), failed: rng.Float64() < 0.05})
		at = at.Add(d + ms(100+rng.Float64()*1000))
	}
	// syncOf is the first sync that starts after at + the watch's delay.
	syncOf := func(at time.Time) int {
		return sort.Search(len(syncs), func(i int) bool { return syncs[i].start.After(at.Add(ms(1))) })
	}
	var sim matchSim
	heldUntil := map[string]time.Time{} // a service's last change seen at (zero time: never)
	held := map[string]bool{}
	type trig struct {
		service string
		at      time.Time
	}
	programs := make([][]trig, len(syncs))
	at := t0
	for len(sim.changes) < changes && len(held) < services/2 {
		at = at.Add(ms(rng.ExpFloat64() * 40))
		svc := fmt.Sprintf("ns/svc-%d", rng.Intn(services))
		if held[svc] || at.Before(heldUntil[svc]) {
			continue
		}
		k := syncOf(at)
		if k >= len(syncs) {
			break
		}
		c := simChange{service: svc, obs: &observe.Observation{At: at}}
		switch r := rng.Float64(); {
		case r < 0.01: // never seen: its service stays held
			held[svc] = true
		case r < 0.13: // a removal seen by chance before its sync
			c.doneAt = at.Add(ms(rng.Float64() * 20))
		default:
			// Seen once the rules are in: the first sync of it that did
			// not fail (a failed sync's next sync is full and programs it).
			j := k
			for j < len(syncs) && syncs[j].failed {
				j++
			}
			if j == len(syncs) {
				held[svc] = true
				break
			}
			c.doneAt = syncs[j].end.Add(-ms(rng.Float64())).Add(ms(rng.Float64() * 30))
		}
		if !c.doneAt.IsZero() {
			heldUntil[svc] = c.doneAt
			c.obs.Done, c.obs.Latency = true, c.doneAt.Sub(at)
		}
		sim.changes = append(sim.changes, c)
		programs[k] = append(programs[k], trig{svc, at})
	}
	for k, s := range syncs {
		// A stray trigger time now and then (a change the soak did not
		// make).
		if rng.Float64() < 0.1 {
			programs[k] = append(programs[k], trig{fmt.Sprintf("ns/svc-%d", rng.Intn(services)), s.start.Add(-ms(rng.Float64() * 2000))})
		}
		if !s.failed {
			// Services in random order, a service's trigger times in order.
			ts := programs[k]
			sort.SliceStable(ts, func(i, j int) bool { return ts[i].at.Before(ts[j].at) })
			order := rng.Perm(len(ts))
			byService := map[string][]trig{}
			var names []string
			for _, i := range order {
				if _, ok := byService[ts[i].service]; !ok {
					names = append(names, ts[i].service)
				}
				byService[ts[i].service] = nil
			}
			for _, tr := range ts {
				byService[tr.service] = append(byService[tr.service], tr)
			}
			n := 0
			for _, name := range names {
				for _, tr := range byService[name] {
					lat := s.end.Add(time.Duration(n) * time.Microsecond)
					sim.lines = append(sim.lines, kubeproxy.Programmed{Service: tr.service, At: lat, Elapsed: lat.Sub(tr.at) - time.Duration(rng.Intn(50))*time.Microsecond})
					sim.lineSync = append(sim.lineSync, k)
					n++
				}
			}
		} // a failed sync's trigger times are gone with its change tracker
		end := s.end.Add(time.Millisecond)
		sim.syncs = append(sim.syncs, kubeproxy.LoggedSync{Start: s.start, End: end, Elapsed: end.Sub(s.start), Kind: "partial", Failed: s.failed})
	}
	sim.end = syncs[len(syncs)-1].end.Add(time.Second)
	return sim
}

// batch is the churn phase's match over the whole phase: matched, seen
// before their sync.
func (s matchSim) batch() (matched, seenBefore int) {
	changes := make([]appliedChange, len(s.changes))
	for i, c := range s.changes {
		changes[i] = appliedChange{service: c.service, at: c.obs.At}
	}
	for i, j := range matchProgrammed(changes, s.lines, matchTolerance) {
		if j < 0 {
			continue
		}
		matched++
		o := s.changes[i].obs
		if o.Done && seenBeforeSync(o.At.Add(o.Latency), s.lines[j].At, s.syncs) {
			seenBefore++
		}
	}
	return matched, seenBefore
}

// stream runs the stream over the simulation in passes every 3-17 s
// (the soak's interval, stretched by load): each pass reads the lines
// and syncs of the syncs ended by then, the changes made by then, the
// observations seen by then; the last reads the rest. It returns the
// stream and the most changes it kept after a pass.
func (s matchSim) stream(rng *rand.Rand) (*programmedStream, int) {
	p := newProgrammedStream(matchTolerance)
	nextChange, nextSync, nextLine := 0, 0, 0
	given := map[*observe.Observation]bool{}
	most := 0
	start := s.changes[0].obs.At
	for now := start; ; now = now.Add(time.Duration(3000+rng.Intn(14000)) * time.Millisecond) {
		last := now.After(s.end)
		var added []*streamChange
		for ; nextChange < len(s.changes) && (last || !s.changes[nextChange].obs.At.After(now)); nextChange++ {
			c := s.changes[nextChange]
			added = append(added, &streamChange{service: c.service, at: c.obs.At, obs: c.obs})
		}
		from := nextSync
		for ; nextSync < len(s.syncs) && (last || !s.syncs[nextSync].End.After(now)); nextSync++ {
		}
		lineFrom := nextLine
		for ; nextLine < len(s.lines) && s.lineSync[nextLine] < nextSync; nextLine++ {
		}
		var done []*observe.Observation
		for _, c := range s.changes[:nextChange] {
			if c.obs.Done && !given[c.obs] && (last || !c.doneAt.After(now)) {
				given[c.obs] = true
				done = append(done, c.obs)
			}
		}
		p.pass(added, s.lines[lineFrom:nextLine], s.syncs[from:nextSync], done, now)
		if last {
			return p, most
		}
		most = max(most, len(p.pending))
	}
}

// TestProgrammedStreamMatchesBatch: matching kube-proxy's log to the
// soak's changes interval by interval gives the figures of the churn
// phase's match over the whole phase (matchProgrammed, seenBeforeSync):
// the lines logged, the changes matched, those seen before their sync;
// over simulated soaks with failed syncs (their trigger times never
// logged), changes never seen, removals seen by chance before their
// sync, and lines of changes the soak did not make. Meanwhile it keeps
// a small part of the changes, not all of them.
func TestProgrammedStreamMatchesBatch(t *testing.T) {
	for seed := int64(1); seed <= 12; seed++ {
		sim := simulateMatch(seed, 200, 3000)
		matched, before := sim.batch()
		if matched == 0 || before == 0 || matched == len(sim.changes) {
			t.Fatalf("seed %d: the simulation matched %d of %d changes, %d seen before their sync: it tests nothing", seed, matched, len(sim.changes), before)
		}
		p, most := sim.stream(rand.New(rand.NewSource(seed)))
		t.Logf("seed %d: %d changes, %d lines, %d matched, %d seen before their sync, at most %d kept", seed, len(sim.changes), len(sim.lines), matched, before, most)
		if p.logged != len(sim.lines) || p.matched != matched || p.seenBeforeSync != before {
			t.Errorf("seed %d: streamed %d lines, %d matched, %d seen before their sync; the whole phase's match: %d, %d, %d",
				seed, p.logged, p.matched, p.seenBeforeSync, len(sim.lines), matched, before)
		}
		if most > len(sim.changes)/10 {
			t.Errorf("seed %d: the stream kept up to %d of %d changes between passes", seed, most, len(sim.changes))
		}
	}
}

// TestProgrammedStreamDrops: what a pass keeps, case by case: a matched
// change until its observation is done (then counted, seen before its
// sync or not), an unmatched one until a later line of its service is
// read (its own line would have come first), a line no change took for
// lineKeep; a line read before its change was announced (a change
// stamped before the read, announced after) is still matched.
func TestProgrammedStreamDrops(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	line := func(svc string, trigger, at int) kubeproxy.Programmed {
		return kubeproxy.Programmed{Service: svc, At: ms(at), Elapsed: ms(at).Sub(ms(trigger))}
	}
	sync := func(start, end int) kubeproxy.LoggedSync {
		return kubeproxy.LoggedSync{Start: ms(start), End: ms(end), Kind: "partial"}
	}
	ch := func(svc string, at int) *streamChange {
		return &streamChange{service: svc, at: ms(at), obs: &observe.Observation{At: ms(at)}}
	}
	see := func(c *streamChange, at int) *observe.Observation {
		c.obs.Done, c.obs.Latency = true, ms(at).Sub(c.obs.At)
		return c.obs
	}
	p := newProgrammedStream(matchTolerance)
	a, b, c := ch("ns/a", 0), ch("ns/b", 10), ch("ns/c", 20)
	// Pass 1: a's line (its sync 100-200 ms), b's sync failed; a not yet
	// seen; c seen by chance at 30 ms.
	p.pass([]*streamChange{a, b, c}, []kubeproxy.Programmed{line("ns/a", 0, 200)}, []kubeproxy.LoggedSync{sync(100, 200)},
		[]*observe.Observation{see(c, 30)}, ms(1000))
	if p.matched != 1 || len(p.pending) != 3 || p.seenBeforeSync != 0 {
		t.Fatalf("pass 1: %d matched, %d kept, %d seen before: want a matched, all three kept", p.matched, len(p.pending), p.seenBeforeSync)
	}
	// Pass 2: a seen (after its sync); b's service changed again (d at
	// 5 s, line 5.3 s), c's line (sync 2-2.5 s, c seen before it); e's
	// line read before e is announced.
	d, e := ch("ns/b", 5000), ch("ns/e", 5100)
	p.pass([]*streamChange{d}, []kubeproxy.Programmed{line("ns/c", 20, 2500), line("ns/b", 5000, 5300), line("ns/e", 5100, 5350)},
		[]kubeproxy.LoggedSync{sync(2000, 2500), sync(5200, 5360)}, []*observe.Observation{see(a, 210)}, ms(6000))
	if p.matched != 3 || p.seenBeforeSync != 1 {
		t.Errorf("pass 2: %d matched, %d seen before their sync: want a, c, d matched, c seen before", p.matched, p.seenBeforeSync)
	}
	if len(p.pending) != 1 || p.pending[0] != d || len(p.lines) != 1 || p.lines[0].Service != "ns/e" {
		t.Errorf("pass 2: kept %d changes, %d lines: want d (matched, not seen), e's line; a counted, b too old, c counted", len(p.pending), len(p.lines))
	}
	p.pass([]*streamChange{e}, nil, nil, []*observe.Observation{see(d, 5340), see(e, 5345)}, ms(7000))
	if p.matched != 4 || len(p.pending) != 0 || len(p.lines) != 0 || p.logged != 4 {
		t.Errorf("pass 3: %d matched, %d changes kept, %d lines kept, %d logged: want e matched to its line read before, nothing kept, 4 logged",
			p.matched, len(p.pending), len(p.lines), p.logged)
	}
	// A line no change takes is kept for lineKeep.
	p.pass(nil, []kubeproxy.Programmed{line("ns/z", 8000, 8100)}, []kubeproxy.LoggedSync{sync(8050, 8110)}, nil, ms(9000))
	if len(p.lines) != 1 {
		t.Errorf("a stray line was not kept")
	}
	p.pass(nil, nil, nil, nil, ms(8000).Add(lineKeep+matchTolerance+time.Second))
	if len(p.lines) != 0 {
		t.Errorf("a stray line older than lineKeep was kept")
	}
}

// TestSoakWorkersHoldTheRate: the open loop's workers hold its rate
// when every connection keeps its worker as long as it can, its connect
// and then its echo read each waiting the whole timeout: workers ÷
// (2 × timeout) ≥ rate, for the soak scenario's 20/s at 2 s and the
// range a scenario may ask (up to the 160-worker cap).
func TestSoakWorkersHoldTheRate(t *testing.T) {
	for _, tc := range []struct {
		rate    float64
		timeout time.Duration
	}{{20, 2 * time.Second}, {1, 2 * time.Second}, {5, 500 * time.Millisecond}, {400, 200 * time.Millisecond}, {0.5, time.Second}, {39, 2 * time.Second}} {
		w := soakWorkers(tc.rate, tc.timeout)
		if held := float64(w) / (2 * tc.timeout.Seconds()); held < tc.rate {
			t.Errorf("rate %g/s, timeout %v: %d workers hold %.3g connections/s when each connection waits two timeouts", tc.rate, tc.timeout, w, held)
		}
	}
}
