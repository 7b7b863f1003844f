//go:build linux

package runner

import (
	"context"
	"sync"
	"time"
)

// readBack is the latest read-back of the proxy objects in the node's
// kernel: the count (leftovers.Read summed as rules), when the read
// started and ended, its error.
type readBack struct {
	objects    int
	start, end time.Time
	err        error
	// seq numbers the reads from 1 (0: none finished yet).
	seq int
}

// objectReader reads the proxy objects back off the soak's sampling
// path: at 10k services one read (iptables-save of 110k rules, nft list
// of the kube-proxy table) took from seconds to an hour on a loaded
// machine, and a sampler that waited for it fell behind its interval
// (session 8's invalid 1 h run). The reader runs on its own goroutine
// at its own pace: a read, then the next once pace has passed since the
// last one started (at once when the read took longer); the sampler
// takes the latest finished read with its age and never waits.
type objectReader struct {
	mu     sync.Mutex
	latest readBack
	done   chan struct{}
}

// startObjectReader starts reading with read (env.kernelObjects of node
// 0) every pace until ctx ends; stop it with stop.
func startObjectReader(ctx context.Context, read func(ctx context.Context, node int) (int, error), pace time.Duration) *objectReader {
	r := &objectReader{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for seq := 1; ctx.Err() == nil; seq++ {
			t0 := time.Now()
			n, err := read(ctx, 0)
			if ctx.Err() != nil {
				return // a read cut by the soak's end is no reading
			}
			r.mu.Lock()
			r.latest = readBack{objects: n, start: t0, end: time.Now(), err: err, seq: seq}
			r.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(t0.Add(pace))):
			}
		}
	}()
	return r
}

// last is the latest finished read (seq 0: none yet).
func (r *objectReader) last() readBack {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.latest
}

// wait returns once the reader has stopped (its ctx ended).
func (r *objectReader) wait() { <-r.done }
