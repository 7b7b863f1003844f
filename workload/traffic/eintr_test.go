//go:build linux

package traffic

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/proxybench/proxybench/internal/testenv"
)

// TestAwaitConnect: the outcome of a connect that goes on after EINTR is
// read with poll and SO_ERROR: connected, refused, or timed out. A
// non-blocking connect stands in for the interrupted one (both leave the
// attempt running in the kernel), inside a throwaway namespace.
func TestAwaitConnect(t *testing.T) {
	testenv.RequireKernel(t)
	ns := testenv.NewNetns(t, "eintr")
	err := ns.Do(func() error {
		ln, err := loopbackListener(7001)
		if err != nil {
			return err
		}
		defer unix.Close(ln)
		for _, tc := range []struct {
			port int
			want error
		}{{7001, nil}, {7002, unix.ECONNREFUSED}} {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
			if err != nil {
				return err
			}
			if err := unix.Connect(fd, &unix.SockaddrInet4{Port: tc.port, Addr: [4]byte{127, 0, 0, 1}}); err != unix.EINPROGRESS && err != nil && err != tc.want {
				unix.Close(fd)
				return fmt.Errorf("connect %d: %v", tc.port, err)
			}
			if got := awaitConnect(fd, time.Now().Add(time.Second)); got != tc.want {
				t.Errorf("port %d: awaitConnect = %v, want %v", tc.port, got, tc.want)
			}
			unix.Close(fd)
		}
		// A deadline already past is a timeout (a listening socket is
		// never writable)...
		if got := awaitConnect(ln, time.Now().Add(-time.Second)); got != unix.ETIMEDOUT {
			t.Errorf("past deadline: %v, want ETIMEDOUT", got)
		}
		// ...but not for a connect that completed before the call: the
		// thread that waited for a CPU past its deadline finds it done
		// (it counted as a timeout before).
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Connect(fd, &unix.SockaddrInet4{Port: 7001, Addr: [4]byte{127, 0, 0, 1}}); err != unix.EINPROGRESS && err != nil {
			return fmt.Errorf("connect 7001: %v", err)
		}
		if err := awaitConnect(fd, time.Now().Add(time.Second)); err != nil {
			return fmt.Errorf("connect 7001 not done: %v", err)
		}
		if got := awaitConnect(fd, time.Now().Add(-time.Second)); got != nil {
			t.Errorf("connected, deadline past: awaitConnect = %v, want nil", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAfterConnect: a connection that completed its connect and then
// failed (no echo line within the timeout, the stream closed before it)
// is told apart from one whose connect failed (refused), with the same
// cause (ErrorKind) as before, inside a throwaway namespace.
func TestAfterConnect(t *testing.T) {
	testenv.RequireKernel(t)
	ns := testenv.NewNetns(t, "afterconn")
	err := ns.Do(func() error {
		// A listener that never accepts: the kernel completes the
		// handshake, nobody writes the echo line.
		ln, err := loopbackListener(7001)
		if err != nil {
			return err
		}
		defer unix.Close(ln)
		lo4 := netip.MustParseAddr("127.0.0.1")
		_, _, _, err = DialEcho(lo4, 7001, 50*time.Millisecond)
		if err == nil || ErrorKind(err) != "timeout" || !AfterConnect(err) {
			t.Errorf("silent listener: err %v, kind %q, after connect %v; want a timeout after the connect", err, ErrorKind(err), AfterConnect(err))
		}
		_, _, _, err = DialEcho(lo4, 7002, 50*time.Millisecond)
		if err == nil || ErrorKind(err) != "refused" || AfterConnect(err) {
			t.Errorf("no listener: err %v, kind %q, after connect %v; want refused in the connect", err, ErrorKind(err), AfterConnect(err))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// loopbackListener sets the current namespace's lo up and returns a TCP
// socket listening on 127.0.0.1:port (backlog 4) that never accepts: the
// kernel completes handshakes into its queue. The caller closes it.
func loopbackListener(port int) (int, error) {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return -1, err
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return -1, err
	}
	ln, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(ln, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(ln)
		return -1, err
	}
	if err := unix.Listen(ln, 4); err != nil {
		unix.Close(ln)
		return -1, err
	}
	return ln, nil
}
