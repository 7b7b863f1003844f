package sim

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/proxybench/proxybench/proxymodes/syncloop"
	"github.com/proxybench/proxybench/reports"
)

func zeroCost(bool, int) (time.Duration, time.Duration) { return 0, 0 }

// referenceSyncs drives syncloop.State directly, arrival by arrival: before
// each arrival, every sync the State says is due runs (at zero cost); then
// the change is recorded. After the last arrival, syncs run until end.
func referenceSyncs(minSync, period time.Duration, arrivals []time.Duration, end time.Duration) []time.Duration {
	st := syncloop.New(minSync, period)
	st.Start(epoch)
	st.Done(nil)
	var out []time.Duration
	now := time.Duration(0)
	runUntil := func(limit time.Duration, inclusive bool) {
		for {
			next := st.NextRun(epoch.Add(now)).Sub(epoch)
			if next > limit || (!inclusive && next == limit) {
				return
			}
			now = next
			st.Start(epoch.Add(now))
			st.Done(nil)
			out = append(out, now)
		}
	}
	for _, a := range arrivals {
		runUntil(a, false) // a change at the instant a sync is due is covered by it
		now = max(now, a)
		st.Change(epoch.Add(now))
	}
	runUntil(end, true)
	return out
}

func desSyncs(minSync, period time.Duration, arrivals []time.Duration, end time.Duration) ([]time.Duration, []time.Duration) {
	var syncs []time.Duration
	done := make([]time.Duration, len(arrivals))
	SimulateNode(syncloop.New(minSync, period), 0, arrivals, end, zeroCost,
		func(k int, at time.Duration) { done[k] = at },
		func(s NodeSync) { syncs = append(syncs, s.At) })
	return syncs, done
}

// TestDESBatching: a hand-worked case of kube-proxy's batching
// (minSyncPeriod 1s, burst 2, one token spent by the sync at 0).
func TestDESBatching(t *testing.T) {
	ms := time.Millisecond
	arr := []time.Duration{100 * ms, 200 * ms, 300 * ms, 1500 * ms}
	syncs, done := desSyncs(time.Second, 30*time.Second, arr, 5*time.Second)
	if got := fmt.Sprint(syncs); got != "[100ms 1s 2s]" {
		t.Fatalf("syncs at %s, want [100ms 1s 2s]", got)
	}
	if got := fmt.Sprint(done); got != "[100ms 1s 1s 2s]" {
		t.Fatalf("changes programmed at %s", got)
	}
}

// TestDESMatchesSyncloop: with one node and zero cost the DES makes the
// same syncs at the same times as syncloop.State driven directly, over
// random arrivals and several KubeProxyConfigurations.
func TestDESMatchesSyncloop(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for _, cfg := range []struct{ min, period time.Duration }{
		{0, 30 * time.Second}, {time.Second, 30 * time.Second}, {10 * time.Second, 30 * time.Second}, {time.Second, 5 * time.Second},
	} {
		for trial := 0; trial < 20; trial++ {
			var arr []time.Duration
			at := time.Duration(0)
			for i := 0; i < 200; i++ {
				at += time.Duration(rng.ExpFloat64() * float64(300*time.Millisecond))
				if rng.Intn(10) == 0 && len(arr) > 0 {
					// Land exactly on whole seconds (token refills) now and then.
					at = max(arr[len(arr)-1], at.Truncate(time.Second))
				}
				arr = append(arr, at)
			}
			end := at + time.Minute
			want := referenceSyncs(cfg.min, cfg.period, arr, end)
			got, done := desSyncs(cfg.min, cfg.period, arr, end)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("min %s period %s: DES syncs\n%v\nsyncloop\n%v", cfg.min, cfg.period, got, want)
			}
			// Every change is programmed by the first sync at or after it.
			for k, a := range arr {
				first := time.Duration(-1)
				for _, s := range want {
					if s >= a {
						first = s
						break
					}
				}
				if done[k] != first {
					t.Fatalf("change %d at %s programmed at %s, want %s", k, a, done[k], first)
				}
			}
		}
	}
}

// TestClusterNodesShareChanges: every node programs every change; with
// no phase, delay or noise all nodes behave as node 0.
func TestClusterNodesShareChanges(t *testing.T) {
	arr := []time.Duration{0, time.Second, 1500 * time.Millisecond, 10 * time.Second}
	cost := func(full bool, changed int, _ *rand.Rand) (time.Duration, time.Duration) {
		return 50 * time.Millisecond, 40 * time.Millisecond
	}
	r := SimulateCluster(ClusterSpec{Nodes: 7, MinSyncPeriod: time.Second, SyncPeriod: 30 * time.Second, Arrivals: arr, End: time.Minute, Cost: cost, Seed: 1})
	if r.Latency.Count != 7*len(arr) || r.Unprogrammed != 0 {
		t.Fatalf("pooled %d latencies, %d unprogrammed; want %d, 0", r.Latency.Count, r.Unprogrammed, 7*len(arr))
	}
	if r.Node0[0] != int64(50*time.Millisecond) {
		t.Fatalf("first change latency %v, want the sync's 50ms", time.Duration(r.Node0[0]))
	}
	if r.SyncCPUPerNode.StdDev != 0 {
		t.Fatalf("identical nodes differ in CPU: %+v", r.SyncCPUPerNode)
	}
}

// TestBuckets: the pooled buckets are cumulative and agree with
// reports.BucketCounts over the same samples.
func TestBuckets(t *testing.T) {
	samples := []int64{1e8, 3e8, 7e8, 2e9, 2e9, 400e9}
	counts := make([]int, len(programmingBounds)+1)
	for _, s := range samples {
		count(counts, programmingBounds, s)
	}
	got := toBuckets(counts, programmingBounds, len(samples))
	want := reportsBuckets(samples)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("buckets\n%v\nwant\n%v", got, want)
	}
}

func reportsBuckets(s []int64) any { return reports.BucketCounts(s, programmingBounds) }
