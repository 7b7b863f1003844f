//go:build linux

package ipvs

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/moby/ipvs"
	"golang.org/x/sys/unix"

	"github.com/proxybench/proxybench/internal/testenv"
	ipvstest "github.com/proxybench/proxybench/proxymodes/ipvs/testing"
)

// errnoOf names the errno an operation failed with ("ok" for none, "other"
// for an error that carries no errno), the part of an error a fake must
// reproduce.
func errnoOf(err error) string {
	if err == nil {
		return "ok"
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return unix.ErrnoName(e)
	}
	return "other: " + err.Error()
}

// replayHandleOps is an operation sequence over the IPVS table: what the
// proxier does (add, update scheduler and persistence, weights, deletes)
// and what the kernel rejects (duplicates, missing objects, an unknown
// scheduler, a real server without its virtual server).
func replayHandleOps() []struct {
	name string
	do   func(h Handle) error
} {
	svc := func(port uint16, sched string) *ipvs.Service {
		return &ipvs.Service{Address: net.ParseIP("198.18.0.1").To4(), Protocol: unix.IPPROTO_TCP, Port: port, SchedName: sched, AddressFamily: unix.AF_INET, Netmask: 0xffffffff}
	}
	udp := &ipvs.Service{Address: net.ParseIP("198.18.0.2").To4(), Protocol: unix.IPPROTO_UDP, Port: 53, SchedName: "rr", AddressFamily: unix.AF_INET, Netmask: 0xffffffff}
	dest := func(last byte, w int) *ipvs.Destination {
		return &ipvs.Destination{Address: net.IPv4(198, 19, 0, last).To4(), Port: 8080, Weight: w, ConnectionFlags: ipvs.ConnectionFlagMasq, AddressFamily: unix.AF_INET}
	}
	persistent := svc(80, "sh")
	persistent.Flags, persistent.Timeout = flagPersistent, 60
	return []struct {
		name string
		do   func(h Handle) error
	}{
		{"dest without service", func(h Handle) error { return h.NewDestination(svc(80, "rr"), dest(1, 1)) }},
		{"delete missing service", func(h Handle) error { return h.DelService(svc(80, "rr")) }},
		{"update missing service", func(h Handle) error { return h.UpdateService(svc(80, "rr")) }},
		{"unknown scheduler", func(h Handle) error { return h.NewService(svc(81, "nope")) }},
		{"add service", func(h Handle) error { return h.NewService(svc(80, "rr")) }},
		{"add service twice", func(h Handle) error { return h.NewService(svc(80, "rr")) }},
		{"add UDP service", func(h Handle) error { return h.NewService(udp) }},
		{"delete missing dest", func(h Handle) error { return h.DelDestination(svc(80, "rr"), dest(1, 1)) }},
		{"update missing dest", func(h Handle) error { return h.UpdateDestination(svc(80, "rr"), dest(1, 1)) }},
		{"add dest", func(h Handle) error { return h.NewDestination(svc(80, "rr"), dest(1, 1)) }},
		{"add dest twice", func(h Handle) error { return h.NewDestination(svc(80, "rr"), dest(1, 1)) }},
		{"add second dest", func(h Handle) error { return h.NewDestination(svc(80, "rr"), dest(2, 3)) }},
		{"add UDP dest", func(h Handle) error { return h.NewDestination(udp, dest(3, 1)) }},
		{"change weight", func(h Handle) error { return h.UpdateDestination(svc(80, "rr"), dest(2, 5)) }},
		{"weight 0 (graceful)", func(h Handle) error { return h.UpdateDestination(svc(80, "rr"), dest(1, 0)) }},
		{"change scheduler and persistence", func(h Handle) error { return h.UpdateService(persistent) }},
		{"update to unknown scheduler", func(h Handle) error { return h.UpdateService(svc(80, "nope")) }},
		{"delete dest", func(h Handle) error { return h.DelDestination(svc(80, "sh"), dest(2, 5)) }},
		{"delete UDP service", func(h Handle) error { return h.DelService(udp) }},
		{"UDP dest gone with its service", func(h Handle) error { return h.DelDestination(udp, dest(3, 1)) }},
	}
}

// TestKernelReplayFakes replays one operation sequence on the fakes of
// proxymodes/ipvs/testing and on the kernel (a real namespace, in the
// user-mode-linux guest when the host lacks IP_VS), and compares after
// every step the errno the step returned and the whole table (DumpTable:
// virtual servers with scheduler and persistence, real servers with
// forwarding and weight), then the same for kube-ipvs0's addresses
// (errno and List). A fake that drifts from the kernel fails here.
func TestKernelReplayFakes(t *testing.T) {
	if requireIPVS(t) {
		return
	}
	ns := testenv.NewNetns(t, "replay")
	real, err := newMobyHandle(ns.Handle())
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	fake := ipvstest.NewFakeHandle()
	for i, op := range replayHandleOps() {
		kerr, ferr := op.do(real), op.do(fake)
		kd, err := ipvstest.DumpTable(real)
		if err != nil {
			t.Fatalf("step %d %s: dump kernel table: %v", i, op.name, err)
		}
		fd, _ := ipvstest.DumpTable(fake)
		if errnoOf(kerr) != errnoOf(ferr) {
			t.Errorf("step %d %s: kernel %s (%v), fake %s (%v)", i, op.name, errnoOf(kerr), kerr, errnoOf(ferr), ferr)
		}
		if kd != fd {
			t.Errorf("step %d %s: tables differ\nkernel:\n%s\nfake:\n%s", i, op.name, kd, fd)
		}
		t.Logf("step %d %s: %s", i, op.name, errnoOf(kerr))
	}
	if d, _ := ipvstest.DumpTable(real); !strings.Contains(d, "TCP 198.18.0.1:80 sh persistent 60\n  -> 198.19.0.1:8080 Masq 0\n") {
		t.Errorf("the sequence did not end where it should:\n%s", d)
	}

	ka, err := OpenNetlinkAddresses(ns.Handle(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer ka.Close()
	fa := ipvstest.NewFakeAddresses()
	a1, a2 := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	for i, op := range []struct {
		name string
		do   func(a Addresses) error
	}{
		{"ensure link", func(a Addresses) error { return a.EnsureLink() }},
		{"ensure link again", func(a Addresses) error { return a.EnsureLink() }},
		{"add", func(a Addresses) error { _, err := a.Add([]netip.Addr{a1, a2}); return err }},
		{"add twice", func(a Addresses) error { _, err := a.Add([]netip.Addr{a1}); return err }},
		{"delete", func(a Addresses) error { _, err := a.Del([]netip.Addr{a2}); return err }},
		{"delete missing", func(a Addresses) error { _, err := a.Del([]netip.Addr{a2}); return err }},
		{"delete link", func(a Addresses) error { return a.DeleteLink() }},
		{"delete link again", func(a Addresses) error { return a.DeleteLink() }},
		{"link back, empty", func(a Addresses) error { return a.EnsureLink() }},
	} {
		kerr, ferr := op.do(ka), op.do(fa)
		if errnoOf(kerr) != errnoOf(ferr) {
			t.Errorf("addresses step %d %s: kernel %s (%v), fake %s (%v)", i, op.name, errnoOf(kerr), kerr, errnoOf(ferr), ferr)
		}
		kl, kerr := ka.List()
		fl, ferr := fa.List()
		if fmt.Sprint(kl, errnoOf(kerr)) != fmt.Sprint(fl, errnoOf(ferr)) {
			t.Errorf("addresses step %d %s: kernel lists %v (%v), fake %v (%v)", i, op.name, kl, kerr, fl, ferr)
		}
	}
}
