//go:build linux

package traffic

import (
	"fmt"
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
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		ln, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		if err != nil {
			return err
		}
		defer unix.Close(ln)
		if err := unix.Bind(ln, &unix.SockaddrInet4{Port: 7001, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			return err
		}
		if err := unix.Listen(ln, 4); err != nil {
			return err
		}
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
		// A deadline already past is a timeout.
		if got := awaitConnect(ln, time.Now().Add(-time.Second)); got != unix.ETIMEDOUT {
			t.Errorf("past deadline: %v, want ETIMEDOUT", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
