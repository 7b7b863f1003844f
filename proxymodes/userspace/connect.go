package userspace

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// DefaultDialTimeouts are the legacy proxier's endpointDialTimeout
// (pkg/proxy/userspace/proxysocket.go): up to 4 tries per client
// connection, the n-th bounded by 250 ms, 500 ms, 1 s and 2 s, so a
// connection gives up after at most 3.75 s of dialling.
var DefaultDialTimeouts = []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}

// DialFunc opens a connection to an endpoint within timeout. The Proxier's
// dials leave from the node namespace (see dialPool).
type DialFunc func(ctx context.Context, ep netip.AddrPort, timeout time.Duration) (net.Conn, error)

// ConnectResult describes one tryConnect.
type ConnectResult struct {
	Conn     net.Conn       // nil on failure
	Endpoint netip.AddrPort // the endpoint Conn is connected to
	Tries    int            // dials made (1 when the first endpoint answered)
}

// ErrAllTriesFailed is returned by TryConnect when every try's dial failed.
var ErrAllTriesFailed = errors.New("userspace: failed to connect to an endpoint")

// TryConnect reproduces the legacy tryConnect: for each timeout in
// timeouts it asks b for an endpoint (Next with reset=true after a failed
// dial, so ClientIP affinity does not pin a client to a dead endpoint) and
// dials it with that timeout; the first success wins. It fails at once
// with ErrNoEndpoints when b has none, with ctx's error when ctx ends, and
// with an error wrapping ErrAllTriesFailed and the last dial error when
// every try failed.
func TryConnect(ctx context.Context, b *Balancer, client netip.Addr, timeouts []time.Duration, dial DialFunc) (ConnectResult, error) {
	var res ConnectResult
	reset := false
	var last error
	for _, to := range timeouts {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		ep, err := b.Next(client, reset)
		if err != nil {
			return res, err
		}
		res.Tries++
		c, err := dial(ctx, ep, to)
		if err != nil {
			last = err
			reset = true
			continue
		}
		res.Conn, res.Endpoint = c, ep
		return res, nil
	}
	return res, fmt.Errorf("%w after %d tries: %v", ErrAllTriesFailed, res.Tries, last)
}
