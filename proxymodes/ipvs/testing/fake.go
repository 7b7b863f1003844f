//go:build linux

// Package testing holds kernel-faithful fakes of what the ipvs mode
// programs: FakeHandle (the IPVS table of net/netfilter/ipvs/ip_vs_ctl.c)
// and FakeAddresses (kube-ipvs0's addresses). Any test may use them; they
// are not in the production binary. They satisfy ipvs.Handle and
// ipvs.Addresses (checked in the ipvs package's tests, since this package
// cannot import ipvs: its tests import this one), and
// TestKernelReplayFakes in proxymodes/ipvs replays one operation sequence
// on them and on the kernel and compares the outcome. Import it as
//
//	ipvstest "github.com/proxybench/proxybench/proxymodes/ipvs/testing"
package testing

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/moby/ipvs"
	"golang.org/x/sys/unix"
)

// Kernel facts the fakes reproduce.
const (
	// DummyDevice is the link kube-proxy binds ClusterIPs to.
	DummyDevice = "kube-ipvs0"
	// AddrMsgLen is the size of one RTM_NEWADDR/RTM_DELADDR request for an
	// IPv4 /32 (nlmsghdr 16 + ifaddrmsg 8 + IFA_LOCAL 8 + IFA_ADDRESS 8),
	// what FakeAddresses reports as bytes sent per address.
	AddrMsgLen = 40
	// Service flags of include/uapi/linux/ip_vs.h.
	flagPersistent = 0x0001 // IP_VS_SVC_F_PERSISTENT
	flagHashed     = 0x0002 // IP_VS_SVC_F_HASHED: set by the kernel on every service it holds
)

// KernelSchedulers are the IPVS schedulers of Linux 6.1
// (net/netfilter/ipvs/ip_vs_<name>.c): NewService with another name fails
// with ENOENT, as the kernel's ip_vs_scheduler_get does when no module of
// that name exists.
var KernelSchedulers = []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "fo", "ovf", "mh", "twos"}

// FakeHandle is an in-memory IPVS table that behaves like the kernel's
// (net/netfilter/ipvs/ip_vs_ctl.c): adding a virtual or real server that
// exists fails with EEXIST, touching a missing virtual server with ESRCH, a
// missing real server with ENOENT, an unknown scheduler with ENOENT; real
// servers need their virtual server; deleting a virtual server deletes its
// real servers; services read back carry the kernel's hashed flag. It
// counts calls by method name. Safe for concurrent use.
type FakeHandle struct {
	mu     sync.Mutex
	svcs   map[string]*fakeService
	config ipvs.Config
	calls  map[string]int
	// failAt, when > 0, makes the failAt-th change from now fail with failErr.
	failAt  int
	failErr error
}

type fakeService struct {
	svc   ipvs.Service
	dests map[string]ipvs.Destination
}

// NewFakeHandle returns an empty fake IPVS table.
func NewFakeHandle() *FakeHandle {
	return &FakeHandle{svcs: map[string]*fakeService{}, calls: map[string]int{}}
}

// Calls returns how often each method was called since the last
// ResetCalls ("NewService": 3, ...).
func (f *FakeHandle) Calls() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.calls))
	for k, v := range f.calls {
		out[k] = v
	}
	return out
}

// ResetCalls zeroes the call counts.
func (f *FakeHandle) ResetCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = map[string]int{}
}

// FailAfter makes the n-th change (New/Update/Del call) from now fail with
// err without changing anything.
func (f *FakeHandle) FailAfter(n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failAt, f.failErr = n, err
}

// Config returns the timeouts set so far.
func (f *FakeHandle) Config() ipvs.Config {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.config
}

// change counts a call and reports an injected failure.
func (f *FakeHandle) change(method string) error {
	f.calls[method]++
	if f.failAt > 0 {
		f.failAt--
		if f.failAt == 0 {
			return f.failErr
		}
	}
	return nil
}

func (f *FakeHandle) lookup(s *ipvs.Service) (*fakeService, error) {
	fs, ok := f.svcs[serviceKey(s)]
	if !ok {
		return nil, fmt.Errorf("virtual server %s: %w", serviceKey(s), unix.ESRCH)
	}
	return fs, nil
}

func checkSched(s *ipvs.Service) error {
	if !slices.Contains(KernelSchedulers, s.SchedName) {
		return fmt.Errorf("scheduler module ip_vs_%s not found: %w", s.SchedName, unix.ENOENT)
	}
	return nil
}

// GetServices returns copies of every virtual server, sorted by key.
func (f *FakeHandle) GetServices() ([]*ipvs.Service, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["GetServices"]++
	keys := make([]string, 0, len(f.svcs))
	for k := range f.svcs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*ipvs.Service, len(keys))
	for i, k := range keys {
		s := f.svcs[k].svc
		s.Flags |= flagHashed
		out[i] = &s
	}
	return out, nil
}

// GetDestinations returns copies of s's real servers, sorted by address.
func (f *FakeHandle) GetDestinations(s *ipvs.Service) ([]*ipvs.Destination, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["GetDestinations"]++
	fs, err := f.lookup(s)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(fs.dests))
	for k := range fs.dests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*ipvs.Destination, len(keys))
	for i, k := range keys {
		d := fs.dests[k]
		out[i] = &d
	}
	return out, nil
}

// NewService adds s (EEXIST if its protocol, address and port exist).
func (f *FakeHandle) NewService(s *ipvs.Service) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.change("NewService"); err != nil {
		return err
	}
	if err := checkSched(s); err != nil {
		return err
	}
	k := serviceKey(s)
	if _, ok := f.svcs[k]; ok {
		return fmt.Errorf("virtual server %s: %w", k, unix.EEXIST)
	}
	c := *s
	c.Address = slices.Clone(s.Address)
	f.svcs[k] = &fakeService{svc: c, dests: map[string]ipvs.Destination{}}
	return nil
}

// UpdateService changes s's scheduler, flags and timeout (ESRCH if missing).
func (f *FakeHandle) UpdateService(s *ipvs.Service) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.change("UpdateService"); err != nil {
		return err
	}
	if err := checkSched(s); err != nil {
		return err
	}
	fs, err := f.lookup(s)
	if err != nil {
		return err
	}
	fs.svc.SchedName, fs.svc.Flags, fs.svc.Timeout, fs.svc.Netmask = s.SchedName, s.Flags, s.Timeout, s.Netmask
	return nil
}

// DelService removes s and its real servers (ESRCH if missing).
func (f *FakeHandle) DelService(s *ipvs.Service) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.change("DelService"); err != nil {
		return err
	}
	if _, err := f.lookup(s); err != nil {
		return err
	}
	delete(f.svcs, serviceKey(s))
	return nil
}

func fakeDestKey(d *ipvs.Destination) string { return destKey(addrOf(d.Address), d.Port) }

func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// serviceKey is "TCP/198.18.0.1:80".
func serviceKey(s *ipvs.Service) string {
	return protoName(s.Protocol) + "/" + destKey(addrOf(s.Address), s.Port)
}

func destKey(a netip.Addr, port uint16) string {
	return netip.AddrPortFrom(a, port).String()
}

func protoName(n uint16) string {
	switch n {
	case unix.IPPROTO_TCP:
		return "TCP"
	case unix.IPPROTO_UDP:
		return "UDP"
	case unix.IPPROTO_SCTP:
		return "SCTP"
	}
	return "proto-" + strconv.Itoa(int(n))
}

// NewDestination adds d to s (ESRCH without s, EEXIST if d exists, EINVAL
// for a negative weight).
func (f *FakeHandle) NewDestination(s *ipvs.Service, d *ipvs.Destination) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.change("NewDestination"); err != nil {
		return err
	}
	fs, err := f.lookup(s)
	if err != nil {
		return err
	}
	if d.Weight < 0 {
		return fmt.Errorf("real server weight %d: %w", d.Weight, unix.EINVAL)
	}
	k := fakeDestKey(d)
	if _, ok := fs.dests[k]; ok {
		return fmt.Errorf("real server %s of %s: %w", k, serviceKey(s), unix.EEXIST)
	}
	c := *d
	c.Address = slices.Clone(d.Address)
	fs.dests[k] = c
	return nil
}

// UpdateDestination changes d's weight and forwarding (ENOENT if missing).
func (f *FakeHandle) UpdateDestination(s *ipvs.Service, d *ipvs.Destination) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.change("UpdateDestination"); err != nil {
		return err
	}
	fs, err := f.lookup(s)
	if err != nil {
		return err
	}
	k := fakeDestKey(d)
	have, ok := fs.dests[k]
	if !ok {
		return fmt.Errorf("real server %s of %s: %w", k, serviceKey(s), unix.ENOENT)
	}
	have.Weight, have.ConnectionFlags = d.Weight, d.ConnectionFlags
	fs.dests[k] = have
	return nil
}

// DelDestination removes d from s (ESRCH without s, ENOENT without d).
func (f *FakeHandle) DelDestination(s *ipvs.Service, d *ipvs.Destination) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.change("DelDestination"); err != nil {
		return err
	}
	fs, err := f.lookup(s)
	if err != nil {
		return err
	}
	k := fakeDestKey(d)
	if _, ok := fs.dests[k]; !ok {
		return fmt.Errorf("real server %s of %s: %w", k, serviceKey(s), unix.ENOENT)
	}
	delete(fs.dests, k)
	return nil
}

// SetConfig sets the non-zero timeouts of c.
func (f *FakeHandle) SetConfig(c *ipvs.Config) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.change("SetConfig"); err != nil {
		return err
	}
	if c.TimeoutTCP != 0 {
		f.config.TimeoutTCP = c.TimeoutTCP
	}
	if c.TimeoutTCPFin != 0 {
		f.config.TimeoutTCPFin = c.TimeoutTCPFin
	}
	if c.TimeoutUDP != 0 {
		f.config.TimeoutUDP = c.TimeoutUDP
	}
	return nil
}

// Dump writes the table as canonical text (see DumpTable).
func (f *FakeHandle) Dump() string {
	d, _ := DumpTable(f)
	return d
}

// TableReader is the read side of an IPVS handle: *ipvs.Handle of
// github.com/moby/ipvs and FakeHandle have it.
type TableReader interface {
	GetServices() ([]*ipvs.Service, error)
	GetDestinations(s *ipvs.Service) ([]*ipvs.Destination, error)
}

// DumpTable writes h's table as canonical text, sorted: one line per
// virtual server ("TCP 198.18.0.1:80 rr" [+ " persistent <s>"]) followed
// by its real servers ("  -> 198.19.0.1:8080 Masq 1"), so a fake's and the
// kernel's tables compare as strings.
func DumpTable(h TableReader) (string, error) {
	svcs, err := h.GetServices()
	if err != nil {
		return "", err
	}
	sort.Slice(svcs, func(i, j int) bool { return serviceKey(svcs[i]) < serviceKey(svcs[j]) })
	var b strings.Builder
	for _, s := range svcs {
		fmt.Fprintf(&b, "%s %s:%d %s", protoName(s.Protocol), addrOf(s.Address), s.Port, s.SchedName)
		if f := s.Flags &^ (flagPersistent | flagHashed); f != 0 {
			fmt.Fprintf(&b, " flags 0x%x", f)
		}
		if s.Flags&flagPersistent != 0 {
			fmt.Fprintf(&b, " persistent %d", s.Timeout)
		}
		b.WriteByte('\n')
		ds, err := h.GetDestinations(s)
		if err != nil {
			return "", err
		}
		sort.Slice(ds, func(i, j int) bool { return fakeDestKey(ds[i]) < fakeDestKey(ds[j]) })
		for _, d := range ds {
			fwd := "Masq"
			if d.ConnectionFlags&ipvs.ConnectionFlagFwdMask != ipvs.ConnectionFlagMasq {
				fwd = fmt.Sprintf("fwd%d", d.ConnectionFlags&ipvs.ConnectionFlagFwdMask)
			}
			fmt.Fprintf(&b, "  -> %s:%d %s %d\n", addrOf(d.Address), d.Port, fwd, d.Weight)
		}
	}
	return b.String(), nil
}

// FakeAddresses is an in-memory kube-ipvs0 that behaves like the kernel:
// adding an address twice fails with EEXIST, deleting a missing one with
// EADDRNOTAVAIL, and both fail with ENODEV without the link. It counts
// addresses added and deleted.
type FakeAddresses struct {
	mu    sync.Mutex
	link  bool
	addrs map[netip.Addr]struct{}
	// Added and Deleted count the addresses changed since creation.
	Added, Deleted int
	// Node are the namespace's other addresses, which NodeIPs returns
	// (the node's own: its links' addresses).
	Node []netip.Addr
}

// NodeIPs returns Node.
func (a *FakeAddresses) NodeIPs() ([]netip.Addr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.Node), nil
}

// NewFakeAddresses returns a namespace without kube-ipvs0.
func NewFakeAddresses() *FakeAddresses { return &FakeAddresses{addrs: map[netip.Addr]struct{}{}} }

// EnsureLink creates the link if missing.
func (a *FakeAddresses) EnsureLink() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.link = true
	return nil
}

// List returns the link's addresses, sorted.
func (a *FakeAddresses) List() ([]netip.Addr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.link {
		return nil, fmt.Errorf("link %s: %w", DummyDevice, unix.ENODEV)
	}
	out := make([]netip.Addr, 0, len(a.addrs))
	for x := range a.addrs {
		out = append(out, x)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out, nil
}

// Add binds addrs (/32) to the link.
func (a *FakeAddresses) Add(addrs []netip.Addr) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.link {
		return 0, fmt.Errorf("link %s: %w", DummyDevice, unix.ENODEV)
	}
	for _, x := range addrs {
		if _, ok := a.addrs[x]; ok {
			return 0, fmt.Errorf("address %s: %w", x, unix.EEXIST)
		}
		a.addrs[x] = struct{}{}
		a.Added++
	}
	return len(addrs) * AddrMsgLen, nil
}

// Del unbinds addrs from the link.
func (a *FakeAddresses) Del(addrs []netip.Addr) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.link {
		return 0, fmt.Errorf("link %s: %w", DummyDevice, unix.ENODEV)
	}
	for _, x := range addrs {
		if _, ok := a.addrs[x]; !ok {
			return 0, fmt.Errorf("address %s: %w", x, unix.EADDRNOTAVAIL)
		}
		delete(a.addrs, x)
		a.Deleted++
	}
	return len(addrs) * AddrMsgLen, nil
}

// DeleteLink removes the link and its addresses.
func (a *FakeAddresses) DeleteLink() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.link = false
	a.addrs = map[netip.Addr]struct{}{}
	return nil
}

// Close does nothing.
func (a *FakeAddresses) Close() {}

// SetConnections sets the active and inactive connection counts the fake
// reports for the real server addr:port of the virtual server
// proto/vip:vport (ENOENT or ESRCH when missing), as the kernel's
// connection table would (for graceful termination tests).
func (f *FakeHandle) SetConnections(proto string, vip netip.Addr, vport uint16, addr netip.Addr, port uint16, active, inactive int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fs, ok := f.svcs[proto+"/"+destKey(vip, vport)]
	if !ok {
		return fmt.Errorf("virtual server %s/%s: %w", proto, destKey(vip, vport), unix.ESRCH)
	}
	k := destKey(addr, port)
	d, ok := fs.dests[k]
	if !ok {
		return fmt.Errorf("real server %s: %w", k, unix.ENOENT)
	}
	d.ActiveConnections, d.InactiveConnections = active, inactive
	fs.dests[k] = d
	return nil
}
