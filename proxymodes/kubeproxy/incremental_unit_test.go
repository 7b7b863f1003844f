//go:build linux

package kubeproxy

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestApplyWritesWindow: the figure's window starts when the first write
// is sent, not before (the old Sync started it before two metrics
// scrapes and the planning loop), and ends when the last write returns.
func TestApplyWritesWindow(t *testing.T) {
	var calls []time.Time
	op := func(ctx context.Context) error {
		calls = append(calls, time.Now())
		time.Sleep(5 * time.Millisecond)
		return nil
	}
	before := time.Now()
	time.Sleep(20 * time.Millisecond) // preparation the figure must not hold
	w, err := applyWrites(context.Background(), []writeOp{op, op}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2 {
		t.Fatalf("%d writes sent, want 2", len(calls))
	}
	if w.start.Before(before.Add(20*time.Millisecond)) || w.start.After(calls[0]) {
		t.Errorf("window starts %v after the preparation began, want at the first write (%v)", w.start.Sub(before), calls[0].Sub(before))
	}
	if w.sent.After(calls[1]) || w.sent.Before(calls[0]) {
		t.Errorf("last write sent at %v, want just before the second call %v", w.sent.Sub(before), calls[1].Sub(before))
	}
	if w.written.Before(calls[1].Add(5 * time.Millisecond)) {
		t.Errorf("written %v before the last write returned", w.written.Sub(calls[1]))
	}
	boom := errors.New("boom")
	if _, err := applyWrites(context.Background(), []writeOp{func(context.Context) error { return boom }}, 1); !errors.Is(err, boom) {
		t.Errorf("error %v, want the write's", err)
	}
	if w, _ := applyWrites(context.Background(), nil, 1); !w.start.IsZero() || !w.written.IsZero() {
		t.Errorf("no writes gave times %+v, want zero", w)
	}
	// In parallel: every write is sent once, the window holds them all,
	// and an error stops the writes not yet started.
	var mu sync.Mutex
	n := 0
	count := func(context.Context) error { mu.Lock(); n++; mu.Unlock(); time.Sleep(2 * time.Millisecond); return nil }
	ops := make([]writeOp, 40)
	for i := range ops {
		ops[i] = count
	}
	w, err = applyWrites(context.Background(), ops, 8)
	if err != nil || n != 40 || w.start.IsZero() || w.written.Before(w.sent) || w.sent.Before(w.start) {
		t.Errorf("parallel: %d of 40 writes, %v, times %+v", n, err, w)
	}
	n = 0
	ops[3] = func(context.Context) error { return boom }
	if _, err := applyWrites(context.Background(), append([]writeOp{ops[3]}, ops...), 1); !errors.Is(err, boom) || n != 0 {
		t.Errorf("in order: %v after %d writes, want boom first", err, n)
	}
	if _, err := applyWrites(context.Background(), ops, 2); !errors.Is(err, boom) || n >= 40 {
		t.Errorf("parallel: %v after %d writes, want boom and the rest not sent", err, n)
	}
}

// TestIncrementalStatsPhases: the phases sum to the wall, which runs from
// the first write to the end; kube-proxy's sync sum is capped by what is
// left after the API round trip.
func TestIncrementalStatsPhases(t *testing.T) {
	start := time.Unix(1000, 0)
	for _, c := range []struct {
		api, wall, kp time.Duration
		wantKP        time.Duration
	}{
		{api: 10 * time.Millisecond, wall: 100 * time.Millisecond, kp: 40 * time.Millisecond, wantKP: 40 * time.Millisecond},
		{api: 10 * time.Millisecond, wall: 30 * time.Millisecond, kp: 40 * time.Millisecond, wantKP: 20 * time.Millisecond},
		{api: 0, wall: 5 * time.Millisecond, kp: 0, wantKP: 0},
	} {
		st := incrementalStats(start, start.Add(c.api), start.Add(c.wall), c.kp, time.Millisecond)
		if st.Wall != c.wall || st.Kind != "incremental" {
			t.Errorf("%+v: wall %v kind %q, want %v incremental", c, st.Wall, st.Kind, c.wall)
		}
		var sum time.Duration
		for name, d := range st.Phases {
			if d < 0 {
				t.Errorf("%+v: phase %s negative: %v", c, name, d)
			}
			sum += d
		}
		if sum != st.Wall {
			t.Errorf("%+v: phases %v sum to %v, want the wall %v", c, st.Phases, sum, st.Wall)
		}
		if st.Phases["api"] != c.api || st.Phases["kube-proxy"] != c.wantKP {
			t.Errorf("%+v: phases %v, want api %v kube-proxy %v", c, st.Phases, c.api, c.wantKP)
		}
	}
}
