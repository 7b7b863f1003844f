//go:build linux

// Package kerneltime times, in the kernel, how long a namespace takes
// with each IPv4 TCP packet it receives before routing it: from the
// netif_receive_skb tracepoint (__netif_receive_skb_core, net/core/dev.c:
// the packet handed to the stack by the device, here the node's end of a
// client pod's veth) to the packet's input route lookup, the
// fib_table_lookup tracepoint (net/ipv4/fib_trie.c) that ip_rcv_finish
// reaches once the PREROUTING hooks have let the packet through, on the
// same CPU and for the same device. The interval is ip_rcv's checks, the
// PREROUTING hooks (conntrack; the nat table's walk, KUBE-SERVICES →
// KUBE-SVC-* → KUBE-SEP-* for iptables, the verdict maps for nftables,
// IPVS's ip_vs_in for a ClusterIP on kube-ipvs0 is at LOCAL_IN and not
// in it) and the start of the route lookup; it excludes the device's
// transmit, the backlog queue before netif_receive_skb, forwarding,
// POSTROUTING and the conntrack confirm.
//
// Two programs, written with cilium/ebpf's asm package (no compiler at
// run time), read the packet's fields at offsets from the running
// kernel's BTF, filter the namespaces by their nsfs inode (struct net's
// ns.inum) and pass one 32-byte record per packet to user space through a
// ring buffer without waking it (Drain reads it). They are BTF-typed raw
// tracepoint programs (tp_btf: BPF_PROG_TYPE_TRACING with
// BPF_TRACE_RAW_TP, plain loads the JIT guards) where the kernel takes
// them, else raw tracepoint programs (BPF_PROG_TYPE_RAW_TRACEPOINT, every
// field through bpf_probe_read_kernel). fentry/fexit would need
// trampolines, which lockdown refuses on this project's 6.18 host. It
// needs root (CAP_BPF and CAP_PERFMON), kernel BTF and a kernel that loads
// either program type; where any is missing Start returns an
// *UnavailableError whose Reason says which, in words.
package kerneltime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// Tracepoints are the tracepoints the interval runs between.
const (
	EntryTracepoint = "netif_receive_skb"
	ExitTracepoint  = "fib_table_lookup"
)

// Bracket names the interval in words, for results and reports.
const Bracket = "netif_receive_skb → fib_table_lookup (ip_rcv, the PREROUTING hooks: conntrack and the nat rule walk)"

// TCP flags of Sample.Flags (RFC 9293, byte 13 of the TCP header).
const (
	FlagFIN = 0x01
	FlagSYN = 0x02
	FlagRST = 0x04
	FlagACK = 0x10
)

// The program types (Config.Kind).
const (
	KindBTF = "tp_btf"
	KindRaw = "raw_tp"
)

// Sample is one packet's time in the namespace before routing.
type Sample struct {
	// StartNs is when the packet reached netif_receive_skb, CLOCK_MONOTONIC
	// ns (bpf_ktime_get_ns; compare with MonotonicNs).
	StartNs int64
	// Ns is the time from netif_receive_skb to the packet's input route
	// lookup, ns.
	Ns int64
	// Src and Dst are the packet's addresses and ports as it arrived (Dst
	// the ClusterIP and ServicePort, before any DNAT).
	Src, Dst netip.AddrPort
	// Routed is the destination the route lookup was for: after DNAT the
	// endpoint, else Dst's address.
	Routed netip.Addr
	// Flags are the TCP flags (FlagSYN, ...).
	Flags uint8
}

// SYN says whether the packet opens a connection: SYN without ACK.
func (s Sample) SYN() bool { return s.Flags&(FlagSYN|FlagACK) == FlagSYN }

// Config says which namespaces a Timer times.
type Config struct {
	// Netns are the nsfs inode numbers of the network namespaces whose
	// received packets are timed (NetnsInode).
	Netns []uint64
	// RingBytes is the ring buffer's size, a power of two and a multiple
	// of the page size; 0: 4 MiB (131072 records).
	RingBytes int
	// Kind is the program type: KindBTF (tp_btf: BTF-typed raw
	// tracepoint programs, plain loads), KindRaw (raw tracepoint programs
	// reading every field with bpf_probe_read_kernel), or "" for KindBTF
	// falling back to KindRaw when the kernel refuses it.
	Kind string
	// SelfTime makes the programs time themselves (two more
	// bpf_ktime_get_ns a run), for SelfTime: what the timer costs the
	// packets it times, load-independent. Benchmarks only.
	SelfTime bool
}

// SelfTime is the programs' own run time over every run since Start
// (Config.SelfTime), summed over CPUs: each program from its state lookup
// to its end, which leaves out the tracepoint's call into it.
type SelfTime struct {
	EntryNs, EntryRuns uint64 // netif_receive_skb's program
	ExitNs, ExitRuns   uint64 // fib_table_lookup's program
}

// UnavailableError says why packets cannot be timed here.
type UnavailableError struct {
	// Reason is a sentence for people: "not root: BPF programs need
	// CAP_BPF and CAP_PERFMON (uid 65534)".
	Reason string
	Err    error
}

func (e *UnavailableError) Error() string { return "kernel time not measured: " + e.Reason }
func (e *UnavailableError) Unwrap() error { return e.Err }

// Reason returns the reason of an *UnavailableError in err's chain, else
// err's text.
func Reason(err error) string {
	var u *UnavailableError
	if errors.As(err, &u) {
		return u.Reason
	}
	return err.Error()
}

// Timer is the loaded and attached programs and their ring buffer.
type Timer struct {
	mu     sync.Mutex
	state  *ebpf.Map
	netns  *ebpf.Map
	ring   *ebpf.Map
	progs  []*ebpf.Program
	links  []link.Link
	reader *ringbuf.Reader
	rec    ringbuf.Record
	kind   string
}

// Kind is the program type the timer runs (KindBTF or KindRaw).
func (t *Timer) Kind() string { return t.kind }

// seams for tests: the program loader and the raw tracepoint attach.
var (
	newProgram    = ebpf.NewProgram
	attachRaw     = link.AttachRawTracepoint
	attachTracing = link.AttachTracing
	geteuid       = os.Geteuid
)

// Start loads the programs, fills the namespace filter with c.Netns and
// attaches them. The error is an *UnavailableError (Reason) when the
// kernel or the process cannot run them.
func Start(c Config) (t *Timer, err error) {
	if len(c.Netns) == 0 {
		return nil, errors.New("kerneltime: no namespace to time")
	}
	off, err := ReadOffsets()
	if err != nil {
		return nil, unavailable(err, "")
	}
	// Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK; later ones
	// to the cgroup, and this is a no-op (the process's own limit).
	_ = rlimit.RemoveMemlock()
	size := c.RingBytes
	if size == 0 {
		size = 4 << 20
	}
	t = &Timer{}
	defer func() {
		if err != nil {
			t.Close()
			t = nil
		}
	}()
	if t.state, err = ebpf.NewMap(&ebpf.MapSpec{Name: "pb_kt_state", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: stateSize, MaxEntries: 1}); err != nil {
		return t, unavailable(err, "BPF_MAP_CREATE")
	}
	if t.netns, err = ebpf.NewMap(&ebpf.MapSpec{Name: "pb_kt_netns", Type: ebpf.Hash, KeySize: 4, ValueSize: 1, MaxEntries: uint32(len(c.Netns))}); err != nil {
		return t, unavailable(err, "BPF_MAP_CREATE")
	}
	for _, ino := range c.Netns {
		if err = t.netns.Put(uint32(ino), uint8(1)); err != nil {
			return t, fmt.Errorf("kerneltime: netns filter: %w", err)
		}
	}
	if t.ring, err = ebpf.NewMap(&ebpf.MapSpec{Name: "pb_kt_ring", Type: ebpf.RingBuf, MaxEntries: uint32(size)}); err != nil {
		return t, unavailable(err, "BPF_MAP_CREATE ringbuf")
	}
	var inums []uint32
	for _, ino := range c.Netns {
		inums = append(inums, uint32(ino))
	}
	switch c.Kind {
	case KindRaw:
		err = t.attach(KindRaw, off, inums, c.SelfTime)
	case KindBTF:
		err = t.attach(KindBTF, off, inums, c.SelfTime)
	case "":
		if err = t.attach(KindBTF, off, inums, c.SelfTime); err != nil {
			t.detach()
			if rerr := t.attach(KindRaw, off, inums, c.SelfTime); rerr != nil {
				err = errors.Join(rerr, err) // the raw reason first
			} else {
				err = nil
			}
		}
	default:
		return t, fmt.Errorf("kerneltime: unknown program kind %q", c.Kind)
	}
	if err != nil {
		return t, err
	}
	if t.reader, err = ringbuf.NewReader(t.ring); err != nil {
		return t, fmt.Errorf("kerneltime: ring buffer: %w", err)
	}
	return t, nil
}

// attach loads and attaches the entry and exit programs of kind.
func (t *Timer) attach(kind string, off Offsets, inums []uint32, self bool) error {
	entry, exit := entryProgram(off, t.state, t.netns), exitProgram(off, t.state, t.ring)
	typ := ebpf.RawTracepoint
	if kind == KindBTF {
		entry, exit = entryProgramBTF(off, t.state, t.netns, inums), exitProgramBTF(off, t.state, t.ring)
		typ = ebpf.Tracing
	}
	for _, p := range []struct {
		name, tp string
		ins      asm.Instructions
	}{
		{"pb_kt_entry", EntryTracepoint, entry},
		{"pb_kt_exit", ExitTracepoint, exit},
	} {
		if self {
			ns, n := int16(stEntryNs), int16(stEntryN)
			if p.tp == ExitTracepoint {
				ns, n = stExitNs, stExitN
			}
			p.ins = withSelfTime(p.ins, stateMark(p.ins), ns, n)
		}
		spec := &ebpf.ProgramSpec{Name: p.name, Type: typ, License: "GPL", Instructions: p.ins}
		if kind == KindBTF {
			spec.AttachType, spec.AttachTo = ebpf.AttachTraceRawTp, p.tp
		}
		prog, err := newProgram(spec)
		if err != nil {
			return unavailable(err, "BPF_PROG_LOAD ("+kind+" "+p.tp+")")
		}
		t.progs = append(t.progs, prog)
		var l link.Link
		if kind == KindBTF {
			l, err = attachTracing(link.TracingOptions{Program: prog, AttachType: ebpf.AttachTraceRawTp})
		} else {
			l, err = attachRaw(link.RawTracepointOptions{Name: p.tp, Program: prog})
		}
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				return &UnavailableError{Reason: fmt.Sprintf("no tracepoint %s in this kernel", p.tp), Err: err}
			}
			return unavailable(err, "attach "+kind+" "+p.tp)
		}
		t.links = append(t.links, l)
	}
	t.kind = kind
	return nil
}

// detach closes the programs and links attach made.
func (t *Timer) detach() {
	for _, l := range t.links {
		_ = l.Close()
	}
	for _, p := range t.progs {
		_ = p.Close()
	}
	t.links, t.progs, t.kind = nil, nil, ""
}

// unavailable words why a step failed.
func unavailable(err error, step string) error {
	uid := geteuid()
	switch {
	case errors.Is(err, errNoBTF):
		return &UnavailableError{Reason: "no kernel BTF (/sys/kernel/btf/vmlinux; CONFIG_DEBUG_INFO_BTF): the field offsets are unknown", Err: err}
	case errors.Is(err, unix.ENOSYS), errors.Is(err, ebpf.ErrNotSupported):
		return &UnavailableError{Reason: "the kernel has no BPF (bpf(2): " + step + " not supported; CONFIG_BPF_SYSCALL)", Err: err}
	case (errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES)) && uid != 0:
		return &UnavailableError{Reason: fmt.Sprintf("not root: BPF programs need CAP_BPF and CAP_PERFMON (uid %d; %s: %v)", uid, step, errno(err)), Err: err}
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
		return &UnavailableError{Reason: fmt.Sprintf("the kernel refused %s as root (%v): lockdown or a security module forbids tracepoint programs, or the process lacks CAP_BPF and CAP_PERFMON (a container)", step, errno(err)), Err: err}
	}
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		return &UnavailableError{Reason: fmt.Sprintf("the kernel's verifier rejected the program (%s): %v", step, ve.Cause), Err: err}
	}
	return &UnavailableError{Reason: fmt.Sprintf("%s failed: %v", step, err), Err: err}
}

// errno is err's errno when it has one, else err.
func errno(err error) error {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return err
}

// Drain reads every record the ring buffer holds now. It does not block.
func (t *Timer) Drain() ([]Sample, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reader == nil {
		return nil, errors.New("kerneltime: timer closed")
	}
	t.reader.SetDeadline(time.Unix(1, 0))
	var out []Sample
	for {
		err := t.reader.ReadInto(&t.rec)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("kerneltime: ring buffer: %w", err)
		}
		if s, ok := decode(t.rec.RawSample); ok {
			out = append(out, s)
		}
	}
}

// decode reads one ring buffer record.
func decode(b []byte) (Sample, bool) {
	if len(b) < recordSize {
		return Sample{}, false
	}
	le := binary.LittleEndian
	addr := func(off int) netip.Addr { return netip.AddrFrom4([4]byte(b[off : off+4])) }
	port := func(off int) uint16 { return binary.BigEndian.Uint16(b[off : off+2]) }
	return Sample{
		StartNs: int64(le.Uint64(b[recStart:])),
		Ns:      int64(le.Uint32(b[recNs:])),
		Dst:     netip.AddrPortFrom(addr(recDaddr), port(recDport)),
		Src:     netip.AddrPortFrom(addr(recSaddr), port(recSport)),
		Routed:  addr(recRouted),
		Flags:   b[recFlags],
	}, true
}

// Lost is how many records the ring buffer had no room for since Start
// (summed over CPUs).
func (t *Timer) Lost() (uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state == nil {
		return 0, errors.New("kerneltime: timer closed")
	}
	var per [][]byte
	if err := t.state.Lookup(uint32(0), &per); err != nil {
		return 0, err
	}
	var n uint64
	for _, v := range per {
		if len(v) >= stLost+8 {
			n += binary.LittleEndian.Uint64(v[stLost:])
		}
	}
	return n, nil
}

// SelfTime reads the programs' own run time (Config.SelfTime; zero
// without it).
func (t *Timer) SelfTime() (SelfTime, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state == nil {
		return SelfTime{}, errors.New("kerneltime: timer closed")
	}
	var per [][]byte
	if err := t.state.Lookup(uint32(0), &per); err != nil {
		return SelfTime{}, err
	}
	var st SelfTime
	le := binary.LittleEndian
	for _, v := range per {
		if len(v) >= stateSize {
			st.EntryNs += le.Uint64(v[stEntryNs:])
			st.EntryRuns += le.Uint64(v[stEntryN:])
			st.ExitNs += le.Uint64(v[stExitNs:])
			st.ExitRuns += le.Uint64(v[stExitN:])
		}
	}
	return st, nil
}

// Close detaches and unloads the programs and frees the maps.
func (t *Timer) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	for _, l := range t.links {
		errs = append(errs, l.Close())
	}
	t.links = nil
	if t.reader != nil {
		errs = append(errs, t.reader.Close())
		t.reader = nil
	}
	for _, p := range t.progs {
		errs = append(errs, p.Close())
	}
	t.progs = nil
	for _, m := range []**ebpf.Map{&t.state, &t.netns, &t.ring} {
		if *m != nil {
			errs = append(errs, (*m).Close())
			*m = nil
		}
	}
	return errors.Join(errs...)
}

// NetnsInode is the nsfs inode number of the namespace behind fd (an
// open /run/netns/NAME or /proc/PID/ns/net): the inum the programs match.
func NetnsInode(fd int) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, fmt.Errorf("kerneltime: fstat netns: %w", err)
	}
	return st.Ino, nil
}

// MonotonicNs is CLOCK_MONOTONIC now in ns, the clock of Sample.StartNs.
func MonotonicNs() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}
