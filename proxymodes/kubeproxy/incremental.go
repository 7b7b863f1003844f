//go:build linux

package kubeproxy

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/apiobjects"
)

// writeOp is one API write of an incremental Sync (a create, an
// EndpointSlice update or a delete).
type writeOp func(ctx context.Context) error

// plan returns the services the API will hold and the writes that get it
// there from p.last: a create per new service, an EndpointSlice update
// per changed one, a delete (Service and EndpointSlice) per removed one.
// triggers counts the writes whose EndpointSlice carries the
// last-change-trigger-time annotation and a change kube-proxy's
// EndpointSliceCache tracks (updates, and creates with endpoints): each
// adds one observation to kubeproxy_network_programming_duration_seconds
// in the sync that programs it (pkg/proxy/endpointschangetracker.go;
// deletes drop the trigger time). It sends nothing.
func (p *Proxier) plan(services []workload.Service) (cur map[string]workload.Service, ops []writeOp, triggers int) {
	cur = map[string]workload.Service{}
	c := p.cp.Client
	for _, s := range services {
		s := s
		cur[s.Name] = s
		old, ok := p.last[s.Name]
		switch {
		case !ok:
			if len(s.Endpoints) > 0 {
				triggers++
			}
			ops = append(ops, func(ctx context.Context) error {
				// Its namespace exists (the first Sync's objects): the
				// Service, then its EndpointSlice stamped now.
				return apiobjects.CreateService(ctx, c, s, p.spec.SessionAffinity, time.Now())
			})
		case !sameService(old, s):
			triggers++
			ops = append(ops, func(ctx context.Context) error {
				return apiobjects.UpdateSlice(ctx, c, s, time.Now())
			})
		}
	}
	for name, s := range p.last {
		if _, ok := cur[name]; !ok {
			s := s
			ops = append(ops, func(ctx context.Context) error {
				if err := c.CoreV1().Services(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
					return err
				}
				return c.DiscoveryV1().EndpointSlices(s.Namespace).Delete(ctx, apiobjects.SliceName(s), metav1.DeleteOptions{})
			})
		}
	}
	return cur, ops, triggers
}

// writeTimes are the instants of an incremental Sync's writes: start,
// when the first request was sent (the figure's start); sent, when the
// last one was sent (kube-proxy may see it, and start the sync it causes,
// before the call returns); written, when the last one returned.
type writeTimes struct {
	start, sent, written time.Time
}

// applyWrites sends ops, workers at a time (1: in order), and times
// them. Nothing but the writes runs between start and written. With no
// ops every time is zero. The first error is returned once every write
// in flight has returned; no write starts after it.
func applyWrites(ctx context.Context, ops []writeOp, workers int) (writeTimes, error) {
	var w writeTimes
	if len(ops) == 0 {
		return w, nil
	}
	if workers <= 1 {
		for _, op := range ops {
			w.sent = time.Now()
			if w.start.IsZero() {
				w.start = w.sent
			}
			if err := op(ctx); err != nil {
				return w, err
			}
		}
		w.written = time.Now()
		return w, nil
	}
	var mu sync.Mutex
	var firstErr error
	next := 0
	var wg sync.WaitGroup
	w.start = time.Now()
	for range min(workers, len(ops)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if firstErr != nil || next == len(ops) {
					mu.Unlock()
					return
				}
				op := ops[next]
				next++
				w.sent = time.Now()
				mu.Unlock()
				if err := op(ctx); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	w.written = time.Now()
	return w, firstErr
}

// incrementalStats is a kube-proxy row's sync.incremental: the wall from
// the first API write sent (start) to the scrape that saw kube-proxy's
// sync done (end), in three phases that sum to it:
//   - "api": the API round trip of the writes (start to written), part of
//     how a change reaches kube-proxy;
//   - "kube-proxy": kube-proxy's own sync time over the syncs it ran
//     (the growth of kubeproxy_sync_proxy_rules_duration_seconds' sum),
//     at most what is left of the wall (its sync may begin before the
//     write returns);
//   - "poll": the rest, the wait for kube-proxy to pick the change up
//     and for the next 50 ms scrape to see the sync done.
//
// cpu is kube-proxy's CPU (own + rule programs) over the same window.
func incrementalStats(start, written, end time.Time, kpSync, cpu time.Duration) proxymodes.SyncStats {
	wall := end.Sub(start)
	api := written.Sub(start)
	kp := kpSync
	if kp > wall-api {
		kp = wall - api
	}
	if kp < 0 {
		kp = 0
	}
	return proxymodes.SyncStats{Kind: "incremental", Wall: wall, CPU: cpu,
		Phases: map[string]time.Duration{"api": api, "kube-proxy": kp, "poll": wall - api - kp}}
}
