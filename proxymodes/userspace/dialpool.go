//go:build linux

package userspace

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/proxybench/proxybench/internal/lib/nspool"
	"github.com/proxybench/proxybench/proxymodes"
)

// dialPool dials endpoints from the node namespace. A socket belongs to
// the namespace of the thread that creates it, and Go creates a dialled
// socket on the dialling goroutine's thread; so each dial runs on a
// worker of an nspool.Workers: a goroutine locked, for the pool's life,
// onto a thread switched into the node namespace. Accepted connections
// and the copies need no such thread: their sockets already live in the
// node namespace.
type dialPool struct {
	workers *nspool.Workers
}

var errPoolClosed = errors.New("userspace: dial pool closed")

// newDialPool starts n workers in node; it fails when a worker cannot
// enter the namespace.
func newDialPool(node proxymodes.Node, n int) (*dialPool, error) {
	w, err := nspool.Start(n, func(int) nspool.Namespace { return node })
	if err != nil {
		return nil, err
	}
	return &dialPool{workers: w}, nil
}

// Dial is a DialFunc: a TCP connection to ep from the node namespace,
// bounded by timeout, on the first free worker.
func (p *dialPool) Dial(ctx context.Context, ep netip.AddrPort, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	var derr error
	err := p.workers.Any(ctx, func() {
		d := net.Dialer{Timeout: timeout}
		c, derr = d.DialContext(ctx, "tcp4", ep.String())
	})
	if errors.Is(err, nspool.ErrClosed) {
		return nil, errPoolClosed
	}
	if err != nil {
		return nil, err
	}
	return c, derr
}

// DialUDP is a DialFunc for UDP ServicePorts: a UDP socket in the node
// namespace connected to ep (which fails only on a local error, as UDP
// sends nothing to connect).
func (p *dialPool) DialUDP(ctx context.Context, ep netip.AddrPort, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	var derr error
	err := p.workers.Any(ctx, func() {
		d := net.Dialer{Timeout: timeout}
		c, derr = d.DialContext(ctx, "udp4", ep.String())
	})
	if errors.Is(err, nspool.ErrClosed) {
		return nil, errPoolClosed
	}
	if err != nil {
		return nil, err
	}
	return c, derr
}

// Close stops the workers once their dials end; their threads exit.
func (p *dialPool) Close() { p.workers.Close() }
