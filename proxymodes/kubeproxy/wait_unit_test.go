package kubeproxy

import (
	"testing"
	"time"
)

// The guest case that made sync.incremental wrong at 10k IPVS services: a
// sync begins just after the write is sent, before the informer delivers
// the change, and ends without it; the change is programmed by the next
// sync. The timing rule takes the first sync; programmedWait waits for
// the second.
func TestProgrammedWaitSkipsSyncWithoutTheChange(t *testing.T) {
	t0 := time.Unix(1000, 0)
	sent := t0
	v0 := syncView{ts: t0.Add(-10 * time.Second), sync: Histogram{Count: 5, Sum: 450}, programmed: 7}
	w := newProgrammedWait(v0, 1)

	// Sync 6 began 0.1 s after the write and took 90 s: no programming
	// observation, so kube-proxy had not seen the change.
	v1 := syncView{ts: t0.Add(90100 * time.Millisecond), sync: Histogram{Count: 6, Sum: 540}, programmed: 7}
	if !timedSyncDone(v1, v0.sync, t0, sent, sent) {
		t.Fatal("the timing rule should (wrongly) take sync 6: the case this test is about")
	}
	if w.done(v1) {
		t.Fatal("done at a sync with no programming observation")
	}
	// Sync 7 observes the latency just before it ends; a scrape in
	// between sees the observation but not yet the sync's end.
	v2 := syncView{ts: v1.ts, sync: v1.sync, programmed: 8}
	if w.done(v2) {
		t.Fatal("done before the programming sync ended")
	}
	v3 := syncView{ts: t0.Add(180 * time.Second), sync: Histogram{Count: 7, Sum: 630}, programmed: 8}
	if !w.done(v3) {
		t.Fatal("not done after the programming sync ended")
	}
}

// Both the observation and the sync's end between two scrapes (a fast
// host sync): done at once. Two trigger writes need both observations.
func TestProgrammedWaitOneScrape(t *testing.T) {
	v0 := syncView{sync: Histogram{Count: 2}, programmed: 0}
	w := newProgrammedWait(v0, 2)
	if w.done(syncView{sync: Histogram{Count: 3}, programmed: 1}) {
		t.Fatal("done with one of two observations")
	}
	if !w.done(syncView{sync: Histogram{Count: 4}, programmed: 2}) {
		t.Fatal("not done with both observations and a sync ended after")
	}
	w = newProgrammedWait(v0, 1)
	if !w.done(syncView{sync: Histogram{Count: 3}, programmed: 1}) {
		t.Fatal("not done when observation and sync end fall between two scrapes")
	}
}
