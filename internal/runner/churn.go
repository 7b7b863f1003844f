//go:build linux

package runner

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"net/netip"
	"runtime"
	"sync"
	"time"

	"github.com/vishvananda/netns"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/syncloop"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/traffic"
)

// observation follows one change in the data plane.
type observation struct {
	ch      workload.Change
	at      time.Time
	appear  bool
	need    int // consecutive misses that confirm a disappearance
	lastHit time.Time
	miss    time.Time // start of the first miss after the last hit
	misses  int
	done    bool
	latency time.Duration
}

// confirmMisses is how many consecutive connections must avoid a removed
// endpoint (one of n) before it counts as gone: ((n-1)/n)^k < 0.001 for a
// uniform random choice, and at least n for round-robin schedulers.
func confirmMisses(n int) int {
	if n <= 1 {
		return 3
	}
	k := int(math.Ceil(math.Log(0.001) / math.Log(float64(n-1)/float64(n))))
	return min(max(k, n+1, 3), 500)
}

// see records one probe connection started at start: landed is where it
// landed (invalid on failure). It reports whether the observation is done.
func (o *observation) see(start time.Time, landed netip.Addr, ok bool) bool {
	if start.Before(o.at) {
		return false
	}
	var hit bool
	switch o.ch.Kind {
	case workload.ServiceCreate, workload.ServiceDelete:
		hit = ok
	default:
		hit = ok && landed == o.ch.Endpoint
	}
	if o.appear {
		if hit {
			o.done, o.latency = true, start.Sub(o.at)
		}
		return o.done
	}
	// Disappearance: an endpoint change only counts connections that
	// reached some endpoint; a service deletion counts failures.
	if !ok && o.ch.Kind != workload.ServiceDelete {
		return false
	}
	if hit {
		o.lastHit, o.misses, o.miss = start, 0, time.Time{}
		return false
	}
	if o.misses == 0 {
		o.miss = start
	}
	o.misses++
	if o.misses >= o.need {
		o.done, o.latency = true, o.miss.Sub(o.at)
	}
	return o.done
}

// runChurn changes the cluster at the scenario's churn rate while the
// mode's sync loop (kube-proxy's semantics, minSync and period) keeps p in
// step, and probes the data plane from the client namespaces to time each
// change's programming latency: from the change to the first connection
// through the VIP that lands on a new endpoint, or, for a removal, to the
// first connection after the last one that still lands on it. p must be
// in sync with services when it is called.
func runChurn(ctx context.Context, sc *scenarios.Scenario, tb *topology.Testbed, p proxymodes.Proxier,
	services []workload.Service, minSync, period time.Duration, prog Progress) (*reports.ChurnResult, error) {
	c := sc.Churn
	rng := rand.New(rand.NewSource(sc.Seed))
	arrivals := workload.Arrivals(c.Rate, c.Duration.Duration, c.Arrival, rng)
	cluster := workload.NewCluster(sc, services)
	res := &reports.ChurnResult{MinSyncPeriodNs: int64(minSync), SyncPeriodNs: int64(period), Rate: c.Rate,
		DurationNs: int64(c.Duration.Duration), Arrival: c.Arrival, ByKind: map[string]int{}}

	var mu sync.Mutex // guards cluster, obs, res.Syncs
	var obs []*observation
	start := time.Now()
	cpu0 := proxymodes.CPUTime()

	st := syncloop.New(minSync, period)
	st.Start(start) // p already holds services: that was the loop's first (full) sync
	st.Done(nil)
	var syncErr error
	loop := syncloop.NewRunner(st, func(ctx context.Context, full bool) error {
		if fs, ok := p.(proxymodes.FullSyncer); ok && full {
			fs.ForceFullSync()
		}
		mu.Lock()
		snap := cluster.Snapshot()
		mu.Unlock()
		at := time.Since(start)
		s, err := p.Sync(context.WithoutCancel(ctx), snap)
		rec := reports.SyncRecord{AtNs: int64(at), SyncStats: s}
		if err != nil {
			rec.Err = err.Error()
		}
		mu.Lock()
		res.Syncs = append(res.Syncs, rec)
		if err != nil && syncErr == nil {
			syncErr = err
		}
		mu.Unlock()
		return err
	})
	loopCtx, stopLoop := context.WithCancel(ctx)
	loopDone := make(chan struct{})
	go func() { loop.Run(loopCtx); close(loopDone) }()

	// Probes: workers locked into the client namespaces, cycling over the
	// changes not yet observed.
	probeCtx, stopProbes := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var next int
	for w := 0; w < c.Probes; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
			if err := netns.Set(tb.Clients[w%len(tb.Clients)].Handle()); err != nil {
				return
			}
			for probeCtx.Err() == nil {
				mu.Lock()
				var o *observation
				for i := 0; i < len(obs); i++ {
					cand := obs[(next+i)%len(obs)]
					if !cand.done {
						o = cand
						next = (next + i + 1) % len(obs)
						break
					}
				}
				mu.Unlock()
				if o == nil {
					time.Sleep(200 * time.Microsecond)
					continue
				}
				landed, t0, _, err := traffic.DialEcho(o.ch.VIP, o.ch.Port, time.Second)
				mu.Lock()
				if !o.done && o.see(t0, landed.Addr(), err == nil) {
					cluster.Release(o.ch.Service)
				}
				mu.Unlock()
			}
		}(w)
	}

	prog.Start(fmt.Sprintf("%s: churn %.3g changes/s for %s, minSyncPeriod %s", p.Mode(), c.Rate, c.Duration.Duration, minSync), len(arrivals))
	for _, off := range arrivals {
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(start.Add(off))):
		}
		if ctx.Err() != nil {
			break
		}
		mu.Lock()
		ch, ok := cluster.Next(rng, c.Mix)
		if ok {
			o := &observation{ch: ch, at: time.Now(), appear: workload.Appears(ch.Kind), need: confirmMisses(ch.Ready)}
			if ch.Kind == workload.ServiceDelete {
				o.need = 3
			}
			obs = append(obs, o)
			res.ByKind[ch.Kind]++
		} else {
			res.Skipped++
		}
		mu.Unlock()
		if ok {
			loop.Changed()
		}
		prog.Add(1)
	}
	prog.Done()
	// Let the last changes reach the data plane, up to the grace period.
	deadline := time.Now().Add(c.Grace.Duration)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		mu.Lock()
		pending := 0
		for _, o := range obs {
			if !o.done {
				pending++
			}
		}
		mu.Unlock()
		if pending == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopProbes()
	wg.Wait()
	stopLoop()
	<-loopDone
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res.CPUNs = int64(proxymodes.CPUTime() - cpu0)

	var lat []int64
	for _, o := range obs {
		s := reports.ChurnSample{Kind: o.ch.Kind, AtNs: int64(o.at.Sub(start)), LatencyNs: -1}
		if o.done {
			s.LatencyNs = int64(o.latency)
			lat = append(lat, int64(o.latency))
			res.Observed++
		} else {
			res.Unobserved++
		}
		res.Samples = append(res.Samples, s)
	}
	res.Changes = len(obs)
	res.Latency = reports.Summarize(lat)
	res.LatencyBuckets = reports.BucketCounts(lat, reports.ProgrammingBuckets())
	byKind := map[string][]int64{}
	for _, s := range res.Syncs {
		byKind[s.Kind] = append(byKind[s.Kind], int64(s.Wall))
		res.SyncCPUNs += int64(s.CPU)
	}
	res.SyncSummary, res.SyncBuckets = map[string]reports.Summary{}, map[string][]reports.Bucket{}
	for k, v := range byKind {
		res.SyncSummary[k] = reports.Summarize(v)
		res.SyncBuckets[k] = reports.BucketCounts(v, reports.SyncBucketBounds())
	}
	if syncErr != nil {
		return res, fmt.Errorf("churn: a sync failed: %w", syncErr)
	}
	return res, nil
}
