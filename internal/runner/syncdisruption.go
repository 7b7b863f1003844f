//go:build linux

package runner

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
)

// probeRec is one probe connection.
type probeRec struct {
	start time.Time
	lat   time.Duration
	err   error
}

// probeTargets spreads n ServicePorts evenly over the service list (first
// port of each).
func probeTargets(services []workload.Service, n int) []workload.Target {
	var out []workload.Target
	if len(services) == 0 {
		return nil
	}
	n = min(n, len(services))
	for i := 0; i < n; i++ {
		out = append(out, workload.Target{Service: i * len(services) / n})
	}
	return out
}

// window counts the probes started in [from, to) into w.
func window(w *reports.SyncWindow, recs []probeRec, from, to time.Time, slow time.Duration) {
	for _, r := range recs {
		switch {
		case r.start.Before(from.Add(-time.Second)) || !r.start.Before(to):
		case r.start.Before(from):
			w.BeforeAttempts++
			if r.err != nil {
				w.BeforeFailed++
			}
		default:
			w.Attempts++
			if r.err != nil {
				w.Failed++
				if len(w.FailedSamples) < 3 {
					w.FailedSamples = append(w.FailedSamples, r.err.Error())
				}
				continue
			}
			if r.lat > slow {
				w.Slow++
			}
			w.MaxNs = max(w.MaxNs, int64(r.lat))
		}
	}
}

// syncDisruptionPhase probes the data plane while (1) a new proxier of m
// makes its first, full sync over the rules p programmed (kube-proxy after
// a restart) and (2) p makes an incremental sync with one endpoint moved.
// The probes run for one second before each sync as a baseline. p is
// left programming services (forced full sync at the end).
func syncDisruptionPhase(ctx context.Context, sc *scenarios.Scenario, e *env, tb *topology.Testbed, m proxymodes.Mode, p proxymodes.Proxier,
	services []workload.Service, prog Progress) (out []reports.SyncWindow, err error) {
	sd := sc.SyncDisruption
	targets := probeTargets(services, sd.Services)
	pool, err := e.probes(sd.Probes)
	if err != nil {
		return nil, fmt.Errorf("sync-disruption probes: %w", err)
	}
	defer pool.Close()
	var (
		mu   sync.Mutex
		recs []probeRec
		stop atomic.Bool
		next atomic.Int64
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		pool.Each(func(int) {
			for !stop.Load() {
				t := targets[int(next.Add(1))%len(targets)]
				s := services[t.Service]
				_, start, err := e.dial(s.ClusterIP, s.Ports[0].Port, sd.Timeout.Duration)
				r := probeRec{start: start, lat: time.Since(start), err: err}
				mu.Lock()
				recs = append(recs, r)
				mu.Unlock()
			}
		})
	}()
	defer func() {
		stop.Store(true)
		<-done
	}()
	snapshot := func() []probeRec {
		mu.Lock()
		defer mu.Unlock()
		return append([]probeRec(nil), recs...)
	}
	// measure takes the one-second baseline, then starts the window: ready
	// (a restart: stop the old proxy, make the new one) and the sync both
	// fall inside it, so a restart's outage counts against the sync.
	measure := func(kind string, ready func() (proxymodes.Proxier, error), svcs []workload.Service) error {
		prog.Start(fmt.Sprintf("%s: %s sync under probes (%d services probed)", m.Name, kind, len(targets)), 1)
		defer prog.Done()
		time.Sleep(time.Second) // baseline
		from := time.Now()
		q, err := ready()
		if err != nil {
			return err
		}
		st, err := q.Sync(ctx, svcs)
		to := time.Now()
		if err != nil {
			return fmt.Errorf("%s sync: %w", kind, err)
		}
		time.Sleep(sd.Timeout.Duration) // let connections started in the window finish
		w := reports.SyncWindow{Kind: kind, SyncNs: int64(st.Wall), Objects: st.Objects, SlowAbove: sd.Slow.Duration}
		window(&w, snapshot(), from, to, sd.Slow.Duration)
		out = append(out, w)
		return nil
	}
	// A proxy whose data path is in this process (userspace) cannot run
	// twice: its restart stops the old one first, as a process restart.
	_, inProcess := p.(proxymodes.Usager)
	var fresh proxymodes.Proxier
	restart := func() (proxymodes.Proxier, error) {
		if inProcess {
			if err := p.Cleanup(ctx); err != nil {
				return nil, err
			}
		}
		var err error
		fresh, err = m.New(sc, tb.Node)
		return fresh, err
	}
	if err := measure("full (restart)", restart, services); err != nil {
		return out, err
	}
	if inProcess {
		if err := fresh.Cleanup(ctx); err != nil {
			return out, err
		}
	}
	if fs, ok := p.(proxymodes.FullSyncer); ok {
		fs.ForceFullSync()
	}
	if _, err := p.Sync(ctx, services); err != nil {
		return out, fmt.Errorf("sync back to the mode's proxier: %w", err)
	}
	if err := measure("incremental", func() (proxymodes.Proxier, error) { return p, nil }, moveOneEndpoint(services, 1)); err != nil {
		return out, err
	}
	if _, err := p.Sync(ctx, services); err != nil {
		return out, fmt.Errorf("sync after sync-disruption: %w", err)
	}
	return out, nil
}
