// Package nspool runs functions on workers that each hold, for the pool's
// life, an OS thread switched into a network namespace: sockets a worker
// creates belong to that namespace. The traffic driver's connections, the
// churn probes, the long-lived connections and the userspace mode's dials
// from the node namespace all run on it. Entering a namespace is the
// namespace's own Do (topology.Netns.Do locks a throwaway thread); the
// pool only keeps that thread busy with jobs until Close.
package nspool

import (
	"context"
	"errors"
	"runtime"
	"sync"
)

// Namespace is where a worker runs: Do runs fn on a thread inside the
// namespace and returns fn's error, or the error of entering it
// (satisfied by *topology.Netns and proxymodes.Node).
type Namespace interface {
	Do(fn func() error) error
}

// Here is the calling process's own network namespace: its Do runs fn
// on the calling goroutine's OS thread, locked for fn's time, without
// switching namespace. For a process that already runs where its
// sockets belong and may not switch (the cluster engine's agent, an
// unprivileged pod: docs/cluster.md).
var Here Namespace = here{}

type here struct{}

func (here) Do(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return fn()
}

// ErrClosed is returned by Any once the pool is closed.
var ErrClosed = errors.New("nspool: pool closed")

// Workers is a started pool.
type Workers struct {
	own    []chan func() // one per worker: Do and Each
	shared chan func()   // any free worker: Any
	closed chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
}

// Start starts n workers, worker w inside nsOf(w). It returns once every
// worker has entered its namespace; if one could not, it closes the pool
// and returns the first such error. n must be at least 1.
func Start(n int, nsOf func(w int) Namespace) (*Workers, error) {
	if n < 1 {
		return nil, errors.New("nspool: need at least one worker")
	}
	p := &Workers{own: make([]chan func(), n), shared: make(chan func()), closed: make(chan struct{})}
	entered := make(chan error, n)
	for w := range p.own {
		in := make(chan func())
		p.own[w] = in
		ns := nsOf(w)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			err := ns.Do(func() error {
				entered <- nil
				for {
					select {
					case fn := <-in:
						fn()
					case fn := <-p.shared:
						fn()
					case <-p.closed:
						return nil
					}
				}
			})
			if err != nil {
				entered <- err
			}
		}()
	}
	var first error
	for range p.own {
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
func (p *Workers) Len() int { return len(p.own) }

// Do runs fn on worker w and waits for it; after Close it runs nothing.
func (p *Workers) Do(w int, fn func()) {
	done := make(chan struct{})
	select {
	case p.own[w] <- func() { defer close(done); fn() }:
		<-done
	case <-p.closed:
	}
}

// Each runs fn(w) on every worker w at once and waits for all of them;
// after Close it runs nothing.
func (p *Workers) Each(fn func(w int)) {
	var wg sync.WaitGroup
	for w, in := range p.own {
		wg.Add(1)
		select {
		case in <- func() { defer wg.Done(); fn(w) }:
		case <-p.closed:
			wg.Done()
		}
	}
	wg.Wait()
}

// Any runs fn on the first free worker and waits for it. It returns
// ctx's error if ctx ends before a worker is free, and ErrClosed after
// Close; fn has not run then.
func (p *Workers) Any(ctx context.Context, fn func()) error {
	done := make(chan struct{})
	select {
	case p.shared <- func() { defer close(done); fn() }:
		<-done
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-p.closed:
		return ErrClosed
	}
}

// Close ends the pool once the running jobs return; the workers' threads
// exit. It may be called more than once and concurrently with Do, Each
// and Any.
func (p *Workers) Close() {
	p.once.Do(func() { close(p.closed) })
	p.wg.Wait()
}

// Run runs fn(w) for every w < n at once, worker w inside nsOf(w), and
// waits for all; it returns the error of a worker that could not enter
// its namespace, before any fn has run.
func Run(n int, nsOf func(w int) Namespace, fn func(w int)) error {
	p, err := Start(n, nsOf)
	if err != nil {
		return err
	}
	defer p.Close()
	p.Each(fn)
	return nil
}
