//go:build linux

package topology

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/vishvananda/netns"
)

// enter locks the calling goroutine to its OS thread and switches that
// thread into ns. The thread is never unlocked: it exits with the
// goroutine, so a namespace never leaks into other goroutines. This is the
// one place the testbed pins a thread to a namespace.
func enter(ns *Netns) error {
	runtime.LockOSThread()
	if err := netns.Set(ns.handle); err != nil {
		return fmt.Errorf("enter netns %q: %w", ns.Name, err)
	}
	return nil
}

// Workers is a pool of goroutines, each on its own OS thread pinned into a
// namespace for the pool's life (one thread per worker: sockets they open
// are created in that namespace). It is how the traffic driver, the probes
// and the long-lived connections run inside client pods. Close ends it.
type Workers struct {
	jobs []chan func()
	wg   sync.WaitGroup
}

// StartWorkers starts n workers, worker w pinned into nsOf(w). It returns
// once every worker has entered its namespace; if one could not, it ends
// the pool and returns the first such error (naming the namespace). n must
// be at least 1.
func StartWorkers(n int, nsOf func(w int) *Netns) (*Workers, error) {
	if n < 1 {
		return nil, errors.New("workers: need at least one worker")
	}
	p := &Workers{jobs: make([]chan func(), n)}
	entered := make(chan error, n)
	for w := range p.jobs {
		in := make(chan func())
		p.jobs[w] = in
		ns := nsOf(w)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			if err := enter(ns); err != nil {
				entered <- err
				for range in {
					// The pool is being closed: drain, run nothing here.
				}
				return
			}
			entered <- nil
			for fn := range in {
				fn()
			}
		}()
	}
	var first error
	for range p.jobs {
		if err := <-entered; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		p.Close()
		return nil, first
	}
	return p, nil
}

// Len is the number of workers.
func (p *Workers) Len() int { return len(p.jobs) }

// Do runs fn on worker w (inside its namespace) and waits for it.
func (p *Workers) Do(w int, fn func()) {
	done := make(chan struct{})
	p.jobs[w] <- func() { fn(); close(done) }
	<-done
}

// Each runs fn(w) on every worker w at once and waits for all of them.
func (p *Workers) Each(fn func(w int)) {
	var wg sync.WaitGroup
	for w, in := range p.jobs {
		wg.Add(1)
		in <- func() { defer wg.Done(); fn(w) }
	}
	wg.Wait()
}

// Close ends the workers (their threads exit) and waits for them. Do and
// Each must not be called after Close.
func (p *Workers) Close() {
	for _, in := range p.jobs {
		close(in)
	}
	p.wg.Wait()
}

// RunPinned runs fn(w) for every w < n at once, each on its own OS thread
// pinned into nsOf(w), and waits for all; it returns the error of a worker
// that could not enter its namespace, before any fn has run.
func RunPinned(n int, nsOf func(w int) *Netns, fn func(w int)) error {
	p, err := StartWorkers(n, nsOf)
	if err != nil {
		return err
	}
	defer p.Close()
	p.Each(fn)
	return nil
}
