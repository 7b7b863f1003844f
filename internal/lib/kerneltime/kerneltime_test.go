//go:build linux

package kerneltime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// TestDecode: a record as the exit program writes it (host-order times,
// network-order addresses and ports) reads back as the packet's sample.
func TestDecode(t *testing.T) {
	b := make([]byte, recordSize)
	binary.LittleEndian.PutUint64(b[recStart:], 123456789)
	binary.LittleEndian.PutUint32(b[recNs:], 1987)
	copy(b[recDaddr:], []byte{198, 18, 0, 7})
	copy(b[recRouted:], []byte{198, 19, 1, 2})
	copy(b[recSaddr:], []byte{198, 19, 200, 2})
	binary.BigEndian.PutUint16(b[recDport:], 80)
	binary.BigEndian.PutUint16(b[recSport:], 50156)
	b[recFlags] = FlagSYN
	s, ok := decode(b)
	want := Sample{StartNs: 123456789, Ns: 1987, Dst: netip.MustParseAddrPort("198.18.0.7:80"),
		Src: netip.MustParseAddrPort("198.19.200.2:50156"), Routed: netip.MustParseAddr("198.19.1.2"), Flags: FlagSYN}
	if !ok || s != want {
		t.Errorf("decode = %+v, %v; want %+v", s, ok, want)
	}
	if _, ok := decode(b[:recordSize-1]); ok {
		t.Error("a short record decoded")
	}
}

// TestSYN: only a SYN without ACK opens a connection.
func TestSYN(t *testing.T) {
	for _, c := range []struct {
		flags uint8
		want  bool
	}{{FlagSYN, true}, {FlagSYN | FlagACK, false}, {FlagACK, false}, {FlagRST | FlagACK, false}, {FlagFIN | FlagACK, false}, {FlagSYN | 0x40 /* ECE */ | 0x80 /* CWR */, true}} {
		if got := (Sample{Flags: c.flags}).SYN(); got != c.want {
			t.Errorf("flags %#x: SYN() = %v, want %v", c.flags, got, c.want)
		}
	}
}

// TestUnavailableReasons: each way the kernel or the process refuses
// says so in words.
func TestUnavailableReasons(t *testing.T) {
	defer func(f func() int) { geteuid = f }(geteuid)
	cases := []struct {
		uid  int
		err  error
		want string
	}{
		{65534, fmt.Errorf("map create: %w", unix.EPERM), "not root: BPF programs need CAP_BPF and CAP_PERFMON (uid 65534"},
		{0, fmt.Errorf("load program: %w", unix.EPERM), "the kernel refused BPF_PROG_LOAD as root (operation not permitted): lockdown"},
		{0, fmt.Errorf("create map: %w", unix.ENOSYS), "the kernel has no BPF"},
		{0, fmt.Errorf("%w: open /sys/kernel/btf/vmlinux: no such file or directory", errNoBTF), "no kernel BTF"},
		{0, errors.New("something else"), "BPF_PROG_LOAD failed: something else"},
	}
	for _, c := range cases {
		geteuid = func() int { return c.uid }
		err := unavailable(c.err, "BPF_PROG_LOAD")
		if r := Reason(err); !strings.HasPrefix(r, c.want) {
			t.Errorf("uid %d, %v: reason %q, want it to start %q", c.uid, c.err, r, c.want)
		}
		if !errors.Is(err, c.err) {
			t.Errorf("%v: the cause is not wrapped", c.err)
		}
	}
}

// TestStartLoaderRefused: a program load the kernel refuses (here the
// seam returns EPERM as lockdown does for fentry programs) makes Start
// fail with the reason, having freed what it made.
func TestStartLoaderRefused(t *testing.T) {
	if _, err := ReadOffsets(); err != nil {
		t.Skipf("no kernel BTF here: %v", err)
	}
	if unix.Geteuid() != 0 {
		t.Skip("needs root to create the maps before the load")
	}
	defer func(f func(*ebpf.ProgramSpec) (*ebpf.Program, error)) { newProgram = f }(newProgram)
	newProgram = func(*ebpf.ProgramSpec) (*ebpf.Program, error) {
		return nil, fmt.Errorf("load program: %w", unix.EPERM)
	}
	tm, err := Start(Config{Netns: []uint64{1}})
	if tm != nil || err == nil {
		t.Fatalf("Start = %v, %v; want an error", tm, err)
	}
	var u *UnavailableError
	if !errors.As(err, &u) || !strings.Contains(u.Reason, "the kernel refused BPF_PROG_LOAD (raw_tp netif_receive_skb) as root") {
		t.Errorf("err %v; want an UnavailableError saying the load was refused", err)
	}
}
