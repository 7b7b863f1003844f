//go:build linux

package runner

import (
	"errors"
	"testing"
	"time"

	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/workload"
)

// TestSyncWindow: probes started in the second before the sync are the
// baseline, those started during it count (failed, slow, max), later ones
// not at all.
func TestSyncWindow(t *testing.T) {
	from := time.Unix(100, 0)
	to := from.Add(2 * time.Second)
	recs := []probeRec{
		{start: from.Add(-2 * time.Second), lat: time.Millisecond},
		{start: from.Add(-500 * time.Millisecond), err: errors.New("x")},
		{start: from.Add(-100 * time.Millisecond), lat: time.Millisecond},
		{start: from, lat: 300 * time.Millisecond},
		{start: from.Add(time.Second), err: errors.New("timeout")},
		{start: from.Add(1500 * time.Millisecond), lat: 5 * time.Millisecond},
		{start: to, lat: time.Second},
	}
	var w reports.SyncWindow
	window(&w, recs, from, to, 100*time.Millisecond)
	if w.BeforeAttempts != 2 || w.BeforeFailed != 1 || w.Attempts != 3 || w.Failed != 1 || w.Slow != 1 || w.MaxNs != int64(300*time.Millisecond) {
		t.Errorf("window = %+v", w)
	}
	if got := probeTargets(make([]workload.Service, 10), 4); len(got) != 4 || got[1].Service != 2 || got[3].Service != 7 {
		t.Errorf("probeTargets(10, 4) = %v, want services 0 2 5 7", got)
	}
}
