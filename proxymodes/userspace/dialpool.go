//go:build linux

package userspace

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/proxybench/proxybench/proxymodes"
)

// dialPool dials endpoints from the node namespace. A socket belongs to
// the namespace of the thread that creates it, and Go creates a dialled
// socket on the dialling goroutine's thread; so each worker is a goroutine
// locked, for the pool's life, onto a thread switched into the node
// namespace (a Node.Do that does not return until Close). Accepted
// connections and the copies need no such thread: their sockets already
// live in the node namespace.
type dialPool struct {
	reqs   chan dialReq
	closed chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
}

type dialReq struct {
	ctx     context.Context
	ep      netip.AddrPort
	timeout time.Duration
	out     chan dialRes
}

type dialRes struct {
	c   net.Conn
	err error
}

var errPoolClosed = errors.New("userspace: dial pool closed")

// newDialPool starts n workers in node; it fails when a worker cannot
// enter the namespace.
func newDialPool(node proxymodes.Node, n int) (*dialPool, error) {
	p := &dialPool{reqs: make(chan dialReq), closed: make(chan struct{})}
	ready := make(chan error, n)
	for i := 0; i < n; i++ {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			err := node.Do(func() error {
				ready <- nil
				for {
					select {
					case r := <-p.reqs:
						d := net.Dialer{Timeout: r.timeout}
						c, err := d.DialContext(r.ctx, "tcp4", r.ep.String())
						r.out <- dialRes{c, err}
					case <-p.closed:
						return nil
					}
				}
			})
			if err != nil {
				ready <- err
			}
		}()
	}
	var first error
	for i := 0; i < n; i++ {
		if err := <-ready; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		p.Close()
		return nil, first
	}
	return p, nil
}

// Dial is a DialFunc: a TCP connection to ep from the node namespace,
// bounded by timeout.
func (p *dialPool) Dial(ctx context.Context, ep netip.AddrPort, timeout time.Duration) (net.Conn, error) {
	out := make(chan dialRes, 1)
	select {
	case p.reqs <- dialReq{ctx: ctx, ep: ep, timeout: timeout, out: out}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.closed:
		return nil, errPoolClosed
	}
	r := <-out
	return r.c, r.err
}

// Close stops the workers once their dials end; their threads exit.
func (p *dialPool) Close() {
	p.once.Do(func() { close(p.closed) })
	p.wg.Wait()
}
