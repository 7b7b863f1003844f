//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proxybench/proxybench/proxymodes/leftovers"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload/traffic"
)

// switchEnv is what the mode switch does to the testbed beyond env: read
// node0's proxy objects back, and hold connections across the switch.
// newSwitchEnv binds it to a testbed; unit tests substitute fakes.
type switchEnv struct {
	// read is leftovers.Read of node0; reset leftovers.Reset (every
	// proxy object removed, so a switch starts on a clean node; nil:
	// nothing is removed).
	read  func(ctx context.Context) (leftovers.Inventory, error)
	reset func(ctx context.Context) error
	// open makes one connection from the calling probe worker's client
	// namespace and keeps it open (traffic.OpenEcho); close closes it.
	open  func(dst netip.Addr, port uint16, timeout time.Duration) (fd int, err error)
	close func(fd int)
	// carries says whether a held connection still carries data: a byte
	// sent on it is acknowledged by the endpoint within timeout (nil), or
	// why not.
	carries func(fd int, timeout time.Duration) error
}

func newSwitchEnv(tb *topology.Testbed) switchEnv {
	return switchEnv{
		read:  func(ctx context.Context) (leftovers.Inventory, error) { return leftovers.Read(ctx, tb.Node) },
		reset: func(ctx context.Context) error { return leftovers.Reset(ctx, tb.Node) },
		open: func(dst netip.Addr, port uint16, timeout time.Duration) (int, error) {
			fd, _, _, _, err := traffic.OpenEcho(netip.Addr{}, dst, port, timeout)
			return fd, err
		},
		close:   func(fd int) { unix.Close(fd) },
		carries: carries,
	}
}

// carries writes one byte on fd and waits up to timeout for the peer to
// acknowledge it (TCP_INFO's unacked count back at 0): a connection the
// switch broke is reset (an error) or black-holed (no ack). The echo
// server reads and discards what it gets.
func carries(fd int, timeout time.Duration) error {
	if !traffic.Alive(fd) {
		return errors.New("closed or reset before the byte was sent")
	}
	if _, err := unix.Write(fd, []byte{'x'}); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	for end := time.Now().Add(timeout); ; {
		info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			return fmt.Errorf("TCP_INFO: %w", err)
		}
		if info.Unacked == 0 && traffic.Alive(fd) {
			return nil
		}
		if !traffic.Alive(fd) {
			return errors.New("reset after the byte was sent")
		}
		if time.Now().After(end) {
			return fmt.Errorf("the byte sent was not acknowledged within %v (%d segments unacked, %d retransmits)", timeout, info.Unacked, info.Retransmits)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
