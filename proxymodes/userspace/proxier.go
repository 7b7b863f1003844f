//go:build linux

// Package userspace is the legacy kube-proxy userspace mode rebuilt
// (pkg/proxy/userspace in Kubernetes <= 1.25: proxier.go, roundrobin.go,
// proxysocket.go): a proxy inside this process with one TCP listener per
// ServicePort, opened in the node namespace on 0.0.0.0:<kernel-chosen
// port>, reached through iptables REDIRECT "portals" from ClusterIP:port
// in the nat chains KUBE-PORTALS-CONTAINER (PREROUTING: pod traffic) and
// KUBE-PORTALS-HOST (OUTPUT: the node's own traffic). For each accepted
// connection it picks an endpoint round robin (or by ClientIP session
// affinity), dials it from the node namespace and, when the dial fails,
// tries the next endpoint with growing timeouts (tryConnect), then copies
// bytes both ways.
//
// A UDP ServicePort gets a UDP socket instead of a listener
// (udpProxySocket): each new client address gets its own socket to an
// endpoint picked the same way, and the endpoint's answers go back to the
// client until it has been idle for DefaultUDPIdleTimeout (the legacy
// --udp-timeout, 250 ms). SCTP is an error, as it was.
//
// Render (portal rules as iptables-restore input) is pure; Sync applies
// them with one iptables-<backend>-restore --noflush per sync.
package userspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/proxybench/proxybench/internal/lib/xtables"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/workload"
)

// Back ends of iptables (the restore binary used).
const (
	BackendLegacy = "legacy"
	BackendNft    = "nft"
)

// DefaultDialWorkers is the default size of the pool of threads that dial
// endpoints from the node namespace: the most dials in flight at once.
const DefaultDialWorkers = 32

// Config configures a Proxier.
type Config struct {
	// Backend is BackendLegacy or BackendNft: iptables-<Backend>-restore
	// applies the portals (scenario iptables.backend).
	Backend string
	// Affinity applies to every ServicePort (scenario
	// services.sessionAffinity and sessionAffinityTimeout).
	Affinity Affinity
	// DialTimeouts bounds each try of tryConnect; nil means
	// DefaultDialTimeouts (4 tries: 250 ms, 500 ms, 1 s, 2 s).
	DialTimeouts []time.Duration
	// DialWorkers is the dial pool size; 0 means DefaultDialWorkers.
	DialWorkers int
	// PortRange is where listener ports are allocated, as kube-proxy's
	// --proxy-port-range; the zero value means DefaultPortRange. With
	// KernelPorts the kernel picks each port (bind to port 0), as the
	// legacy proxier did without --proxy-port-range: bind(0) searches the
	// ephemeral range and slows down sharply past ~7k listeners (3.5 s for
	// 10k here, against 0.2 s from a range).
	PortRange   PortRange
	KernelPorts bool
}

// PortRange is a range of listener ports: First .. First+Size-1.
type PortRange struct {
	First uint16
	Size  int
}

// DefaultPortRange is 1024-32767: below Linux's default ephemeral range
// (32768-60999), so listeners never compete with the dials' source ports.
var DefaultPortRange = PortRange{First: 1024, Size: 32767 - 1024 + 1}

func (c Config) portRange() PortRange {
	if c.PortRange.Size == 0 {
		return DefaultPortRange
	}
	return c.PortRange
}

// Validate reports an unknown back end or a non-positive dial timeout.
func (c Config) Validate() error {
	if c.Backend != BackendLegacy && c.Backend != BackendNft {
		return fmt.Errorf("userspace: backend %q: want %q or %q", c.Backend, BackendLegacy, BackendNft)
	}
	for _, d := range c.DialTimeouts {
		if d <= 0 {
			return fmt.Errorf("userspace: dial timeout %v: want > 0", d)
		}
	}
	if r := c.PortRange; r.Size < 0 || int(r.First)+r.Size > 65536 || (r.Size > 0 && r.First == 0) {
		return fmt.Errorf("userspace: portRange %d+%d: want ports within 1-65535", r.First, r.Size)
	}
	if c.DialWorkers < 0 {
		return fmt.Errorf("userspace: dialWorkers %d: want >= 0", c.DialWorkers)
	}
	return nil
}

func (c Config) timeouts() []time.Duration {
	if len(c.DialTimeouts) == 0 {
		return DefaultDialTimeouts
	}
	return c.DialTimeouts
}

// Counters are the proxy's connection counts since New (monotonic).
type Counters struct {
	// Accepted client connections.
	Accepted uint64 `json:"accepted"`
	// Proxied connections: an endpoint answered.
	Proxied uint64 `json:"proxied"`
	// Retried connections: the first endpoint tried failed and another
	// try followed.
	Retried uint64 `json:"retried"`
	// DialFailures counts failed endpoint dials (every try).
	DialFailures uint64 `json:"dialFailures"`
	// Failed connections: every try failed, or there was no endpoint; the
	// client's connection was closed.
	Failed uint64 `json:"failed"`
}

// servicePort is one proxied ServicePort: its listener (a TCP listener,
// or a UDP socket and its clients) and balancer.
type servicePort struct {
	key       string // portName + "/" + protocol
	portal    Portal
	ln        *net.TCPListener
	udp       *net.UDPConn
	bal       *Balancer
	endpoints int

	clientMu sync.Mutex
	clients  map[netip.AddrPort]*net.UDPConn // UDP: client address -> its socket to the endpoint
}

// close closes the listener (TCP) or socket (UDP).
func (sp *servicePort) close() {
	if sp.ln != nil {
		sp.ln.Close()
	}
	if sp.udp != nil {
		sp.udp.Close()
	}
}

// port is the listener's port.
func (sp *servicePort) port() uint16 {
	if sp.udp != nil {
		return uint16(sp.udp.LocalAddr().(*net.UDPAddr).Port)
	}
	return uint16(sp.ln.Addr().(*net.TCPAddr).Port)
}

// Proxier is the userspace proxy of one node namespace. Sync and Cleanup
// are serialised; the proxy serves connections between them.
type Proxier struct {
	cfg  Config
	node proxymodes.Node

	mu       sync.Mutex
	ports    map[string]*servicePort
	used     map[uint16]bool // listener ports in use
	nextPort int             // offset into the port range of the next try
	dialer   *dialPool
	ensured  bool   // jump rules known to be in place
	needFull bool   // next Sync is full
	lastData []byte // restore input of the last successful Sync
	cpuMark  time.Duration

	// ctx ends when Cleanup starts: it stops dials in flight.
	ctx    context.Context
	cancel context.CancelFunc

	connMu sync.Mutex
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup // accept loops and connection copies

	accepted, proxied, retried, dialFailures, failed atomic.Uint64

	// ensureLimit raises RLIMIT_NOFILE (EnsureFileLimit; tests replace it).
	ensureLimit func(listeners int) (uint64, error)
}

var (
	_ proxymodes.Proxier    = (*Proxier)(nil)
	_ proxymodes.FullSyncer = (*Proxier)(nil)
)

// New returns a Proxier for cfg that programs node. Nothing runs until
// Sync; an invalid cfg makes Sync fail.
func New(cfg Config, node proxymodes.Node) *Proxier {
	p := &Proxier{cfg: cfg, node: node, ensureLimit: EnsureFileLimit}
	p.reset()
	return p
}

// reset forgets every listener and connection (after Cleanup closed them).
func (p *Proxier) reset() {
	p.ports = map[string]*servicePort{}
	p.used = map[uint16]bool{}
	p.nextPort = 0
	p.conns = map[net.Conn]struct{}{}
	p.needFull = true
	p.lastData = nil
	p.ctx, p.cancel = context.WithCancel(context.Background())
}

// Mode returns "userspace".
func (p *Proxier) Mode() string { return "userspace" }

// binary names the back end's iptables tool (xtables.Binary).
func (p *Proxier) binary(tool string) string { return xtables.Binary(p.cfg.Backend, tool) }

// Info returns {"backend", "iptables" (version), "dialTimeouts",
// "sessionAffinity", "copy": "io.Copy (splice(2))"}.
func (p *Proxier) Info() map[string]string {
	ts := make([]string, 0, 4)
	for _, d := range p.cfg.timeouts() {
		ts = append(ts, d.String())
	}
	aff := "None"
	if p.cfg.Affinity.ClientIP {
		aff = "ClientIP/" + p.cfg.Affinity.EffectiveTimeout().String()
	}
	info := map[string]string{
		"backend":         p.cfg.Backend,
		"dialTimeouts":    strings.Join(ts, ","),
		"sessionAffinity": aff,
		"copy":            "io.Copy between *net.TCPConn (splice(2)); UDP: a socket per client, idle timeout " + DefaultUDPIdleTimeout.String(),
	}
	out, err := p.node.Run(context.Background(), nil, p.binary(""), "--version")
	if err != nil {
		info["iptables"] = "unknown: " + err.Error()
	} else {
		info["iptables"] = strings.TrimSpace(string(out))
	}
	return info
}

// ForceFullSync makes the next Sync full: every listener and balancer is
// reconciled, the jump rules re-ensured and the portal chains rewritten.
func (p *Proxier) ForceFullSync() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.needFull = true
}

// wanted is one ServicePort as Sync wants it.
type wanted struct {
	key    string
	portal Portal
	eps    []netip.AddrPort
}

func desired(services []workload.Service) ([]wanted, error) {
	n := 0
	for i := range services {
		n += len(services[i].Ports)
	}
	out := make([]wanted, 0, n)
	seen := make(map[string]bool, n)
	for i := range services {
		s := &services[i]
		if !s.ClusterIP.Is4() {
			return nil, fmt.Errorf("userspace: service %s/%s: clusterIP %q: want IPv4", s.Namespace, s.Name, s.ClusterIP)
		}
		for _, sp := range s.Ports {
			name := s.PortName(sp)
			if sp.Protocol != "TCP" && sp.Protocol != "UDP" {
				return nil, fmt.Errorf("userspace: service port %q: protocol %q: want TCP or UDP (the legacy proxy had no SCTP)", name, sp.Protocol)
			}
			key := name + "/" + sp.Protocol
			if seen[key] {
				return nil, fmt.Errorf("userspace: service port %q listed twice", name)
			}
			seen[key] = true
			w := wanted{key: key, portal: Portal{Name: name, ClusterIP: s.ClusterIP, Port: sp.Port, Protocol: sp.Protocol}}
			for _, e := range s.Endpoints {
				if e.Ready {
					w.eps = append(w.eps, netip.AddrPortFrom(e.IP, sp.TargetPort))
				}
			}
			out = append(out, w)
		}
	}
	return out, nil
}

// Sync makes the proxy serve services. The first Sync after New or
// Cleanup (or a failure, or ForceFullSync) is full: it raises
// RLIMIT_NOFILE for the listeners (EnsureFileLimit), starts the dial
// pool, opens one listener per ServicePort inside the node namespace
// (Phase "listeners"), renders the portals ("render"), applies them with
// one iptables-<backend>-restore --noflush ("restore") and prepends the
// jumps from nat PREROUTING and OUTPUT when missing ("ensure").
// SyncStats.Objects is then listeners + rules (3 per ServicePort).
//
// Later Syncs are incremental, as the legacy proxier's OnServiceUpdate and
// OnEndpointsUpdate: they open listeners for new ServicePorts, close those
// of removed ones (connections in flight are left to finish, as the legacy
// tcpProxySocket.Close did), update balancers whose endpoint set changed
// (reshuffled, index reset, stale sessions dropped) and run the restore
// only when the portal rules changed: an endpoint change costs no kernel
// work in this mode. Objects is then listeners opened + closed + rules
// written (0 when the restore is skipped). Every Sync drops expired
// affinity sessions (CleanupStaleStickySessions).
func (p *Proxier) Sync(ctx context.Context, services []workload.Service) (st proxymodes.SyncStats, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	start, cpu := time.Now(), proxymodes.StartSyncCPU(p.node)
	defer cpu.Stop() // the proxy's own CPU only: this thread and its programs
	full := p.needFull
	st = proxymodes.SyncStats{Kind: "incremental", Phases: map[string]time.Duration{}}
	if full {
		st.Kind = "full"
	}
	defer func() {
		st.Wall = time.Since(start)
		st.CPU = cpu.Elapsed()
		p.cpuMark = proxymodes.CPUTime()
	}()
	if err := p.cfg.Validate(); err != nil {
		return st, err
	}
	want, err := desired(services)
	if err != nil {
		return st, err
	}
	fail := func(err error) (proxymodes.SyncStats, error) {
		p.needFull = true
		return st, err
	}
	if _, err := p.ensureLimit(len(want)); err != nil {
		return fail(err)
	}
	if p.dialer == nil {
		workers := p.cfg.DialWorkers
		if workers == 0 {
			workers = DefaultDialWorkers
		}
		d, err := newDialPool(p.node, workers)
		if err != nil {
			return fail(fmt.Errorf("userspace: dial pool: %w", err))
		}
		p.dialer = d
	}

	t := time.Now()
	changed, err := p.syncListeners(want)
	st.Phases["listeners"] = time.Since(t)
	if err != nil {
		return fail(err)
	}

	t = time.Now()
	portals := make([]Portal, len(want))
	for i, w := range want {
		portals[i] = p.ports[w.key].portal
	}
	rs, err := Render(portals)
	st.Phases["render"] = time.Since(t)
	if err != nil {
		return fail(err)
	}
	if full {
		st.Objects = len(p.ports) + rs.Rules
	} else {
		st.Objects = changed
	}
	if !full && p.ensured && bytes.Equal(rs.Data, p.lastData) {
		p.needFull = false
		return st, nil
	}
	if !full {
		st.Objects += rs.Rules
	}
	st.Bytes = len(rs.Data)

	t = time.Now()
	_, err = p.node.Run(ctx, rs.Data, p.binary("restore"), xtables.RestoreArgs("--noflush")...)
	st.Phases["restore"] = time.Since(t)
	if err != nil {
		p.lastData = nil
		return fail(fmt.Errorf("userspace: sync %d service ports: %w", len(want), err))
	}
	p.lastData = rs.Data

	if full || !p.ensured {
		t = time.Now()
		err := p.ensureJumps(ctx)
		st.Phases["ensure"] = time.Since(t)
		if err != nil {
			p.ensured = false
			return fail(err)
		}
		p.ensured = true
	}
	p.needFull = false
	return st, nil
}

// syncListeners closes the listeners of ServicePorts not in want, opens
// those of new ones (all in one Node.Do) and updates every balancer. It
// returns the number of listeners opened plus closed.
func (p *Proxier) syncListeners(want []wanted) (int, error) {
	keep := make(map[string]bool, len(want))
	var open []*servicePort
	for _, w := range want {
		keep[w.key] = true
		if _, ok := p.ports[w.key]; !ok {
			open = append(open, &servicePort{key: w.key, portal: w.portal, bal: NewBalancer(p.cfg.Affinity, nil, nil)})
		}
	}
	changed := 0
	for k, sp := range p.ports {
		if !keep[k] {
			sp.close()
			delete(p.used, sp.portal.ProxyPort)
			delete(p.ports, k)
			changed++
		}
	}
	if len(open) > 0 {
		n := 0
		err := p.node.Do(func() error {
			lc := net.ListenConfig{}
			for _, sp := range open {
				if err := p.listen(&lc, sp); err != nil {
					return fmt.Errorf("userspace: listen for %q (listener %d of %d): %w", sp.portal.Name, n+1, len(open), err)
				}
				n++
			}
			return nil
		})
		for _, sp := range open[:n] {
			sp.portal.ProxyPort = sp.port()
			p.used[sp.portal.ProxyPort] = true
			p.ports[sp.key] = sp
			p.wg.Add(1)
			if sp.udp != nil {
				go p.serveUDP(sp)
			} else {
				go p.serve(sp)
			}
		}
		changed += n
		if err != nil {
			return changed, err
		}
	}
	for _, w := range want {
		sp := p.ports[w.key]
		proxyPort := sp.portal.ProxyPort
		sp.portal = w.portal
		sp.portal.ProxyPort = proxyPort
		sp.bal.SetAffinity(p.cfg.Affinity)
		sp.bal.Update(w.eps)
		sp.bal.CleanupStale()
		sp.endpoints = len(w.eps)
	}
	return changed, nil
}

// errPortsExhausted: every port of the range is taken.
var errPortsExhausted = errors.New("no free port left in the proxy port range")

// listen opens sp's listener (a TCP listener, or for a UDP ServicePort a
// UDP socket) on 0.0.0.0 at the next free port of the range (skipping
// ports in use by this proxier or, EADDRINUSE, by anyone else), or at a
// kernel-chosen port with KernelPorts. It runs inside the node namespace.
func (p *Proxier) listen(lc *net.ListenConfig, sp *servicePort) error {
	open := func(addr string) error {
		if sp.portal.Protocol == "UDP" {
			c, err := lc.ListenPacket(context.Background(), "udp4", addr)
			if err != nil {
				return err
			}
			sp.udp = c.(*net.UDPConn)
			sp.clients = map[netip.AddrPort]*net.UDPConn{}
			return nil
		}
		l, err := lc.Listen(context.Background(), "tcp4", addr)
		if err != nil {
			return err
		}
		sp.ln = l.(*net.TCPListener)
		return nil
	}
	if p.cfg.KernelPorts {
		return open("0.0.0.0:0")
	}
	r := p.cfg.portRange()
	for tries := 0; tries < r.Size; tries++ {
		port := uint16(int(r.First) + p.nextPort)
		p.nextPort = (p.nextPort + 1) % r.Size
		if p.used[port] {
			continue
		}
		err := open("0.0.0.0:" + strconv.Itoa(int(port)))
		if errors.Is(err, syscall.EADDRINUSE) {
			continue
		}
		return err
	}
	return fmt.Errorf("%w (%d-%d, %d in use)", errPortsExhausted, r.First, int(r.First)+r.Size-1, len(p.used))
}

// ensureJumps prepends the jumps from nat PREROUTING and OUTPUT to the
// portal chains where missing (iptables -C, then -I 1).
func (p *Proxier) ensureJumps(ctx context.Context) error {
	for _, j := range jumpRules {
		// -w 5: wait for the xtables lock at most 5 s, as kube-proxy.
		args := append([]string{"-w", "5", "-t", "nat", "-C", j.chain}, j.args...)
		if _, err := p.node.Run(ctx, nil, p.binary(""), args...); err == nil {
			continue
		}
		args[4] = "-I"
		args = append(args[:6], append([]string{"1"}, args[6:]...)...)
		if _, err := p.node.Run(ctx, nil, p.binary(""), args...); err != nil {
			return fmt.Errorf("userspace: jump nat %s -> %s: %w", j.chain, j.args[len(j.args)-1], err)
		}
	}
	return nil
}

// Cleanup stops the proxy and removes its rules: it closes every listener
// and every proxied connection, waits for their goroutines, stops the
// dial pool, deletes the jumps from nat PREROUTING and OUTPUT, then
// flushes and deletes both portal chains with one restore --noflush. Other
// rules are left alone. The next Sync is full.
func (p *Proxier) Cleanup(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.cfg.Validate(); err != nil {
		return err
	}
	p.stopLocked()
	for _, j := range jumpRules {
		// Delete every copy; -D fails once none is left (or the chain is gone).
		args := append([]string{"-w", "5", "-t", "nat", "-D", j.chain}, j.args...)
		for i := 0; i < 8; i++ {
			if _, err := p.node.Run(ctx, nil, p.binary(""), args...); err != nil {
				break
			}
		}
	}
	if _, err := p.node.Run(ctx, []byte(cleanupData), p.binary("restore"), xtables.RestoreArgs("--noflush")...); err != nil {
		return fmt.Errorf("userspace: cleanup: %w", err)
	}
	return nil
}

// Listeners returns the number of open listeners (one per ServicePort).
func (p *Proxier) Listeners() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ports)
}

// ProxyPort returns the listener port of ServicePort portName
// ("ns/name:port") and protocol, and whether it is open.
func (p *Proxier) ProxyPort(portName, protocol string) (uint16, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sp, ok := p.ports[portName+"/"+protocol]
	if !ok {
		return 0, false
	}
	return sp.portal.ProxyPort, true
}

// Counters returns the connection counts since New.
func (p *Proxier) Counters() Counters {
	return Counters{
		Accepted: p.accepted.Load(), Proxied: p.proxied.Load(), Retried: p.retried.Load(),
		DialFailures: p.dialFailures.Load(), Failed: p.failed.Load(),
	}
}

// Usage returns the proxy's cost as this process sees it: cpu is the
// user+system CPU time of the whole process (proxymodes.CPUTime) since
// the last Sync ended, so across a traffic phase it is the proxy's work
// plus the traffic driver's (the driver runs in the same process; the
// difference to a kernel mode's figure over the same traffic is the
// proxy's own cost); rssBytes is the process's resident set (VmRSS of
// /proc/self/status), 0 when unreadable.
func (p *Proxier) Usage() (cpu time.Duration, rssBytes uint64) {
	p.mu.Lock()
	mark := p.cpuMark
	p.mu.Unlock()
	return proxymodes.CPUTime() - mark, RSS()
}

// RSS returns this process's resident set size in bytes (VmRSS of
// /proc/self/status), or 0 when it cannot be read.
func RSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

// serve is the legacy tcpProxySocket.ProxyLoop: accept, tryConnect in the
// accept loop (so a slow endpoint delays the service's next accept, as it
// did), then copy in the background.
func (p *Proxier) serve(sp *servicePort) {
	defer p.wg.Done()
	for {
		c, err := sp.ln.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				// The legacy proxier panicked here; back off instead.
				time.Sleep(10 * time.Millisecond)
			}
			continue
		}
		p.accepted.Add(1)
		client := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
		res, err := TryConnect(p.ctx, sp.bal, client, p.cfg.timeouts(), p.dialer.Dial)
		if res.Tries > 1 {
			p.retried.Add(1)
		}
		if err != nil {
			p.dialFailures.Add(uint64(res.Tries))
			p.failed.Add(1)
			c.Close()
			continue
		}
		p.dialFailures.Add(uint64(res.Tries - 1))
		p.proxied.Add(1)
		out := res.Conn.(*net.TCPConn)
		if !p.track(c, out) {
			c.Close()
			out.Close()
			return
		}
		p.wg.Add(1)
		go p.proxyTCP(c, out)
	}
}

// track records a connection pair for Cleanup; false once Cleanup began.
func (p *Proxier) track(in, out *net.TCPConn) bool {
	p.connMu.Lock()
	defer p.connMu.Unlock()
	if p.ctx.Err() != nil {
		return false
	}
	p.conns[in] = struct{}{}
	p.conns[out] = struct{}{}
	return true
}

// proxyTCP copies both ways with io.Copy between *net.TCPConn, which Go
// runs as splice(2) through a pipe on Linux (net.TCPConn.ReadFrom): the
// bytes never enter user space. A direction that ends cleanly half-closes
// its destination (the legacy copyBytes closed both at once); an error on
// either closes both.
func (p *Proxier) proxyTCP(in, out *net.TCPConn) {
	defer p.wg.Done()
	var wg sync.WaitGroup
	wg.Add(2)
	half := func(dst, src *net.TCPConn) {
		defer wg.Done()
		if _, err := io.Copy(dst, src); err != nil {
			dst.Close()
			src.Close()
			return
		}
		_ = dst.CloseWrite()
	}
	go half(out, in)
	go half(in, out)
	wg.Wait()
	in.Close()
	out.Close()
	p.connMu.Lock()
	delete(p.conns, in)
	delete(p.conns, out)
	p.connMu.Unlock()
}

// DefaultUDPIdleTimeout is the legacy proxier's --udp-timeout default: a
// UDP client's socket to its endpoint is closed after 250 ms without an
// answer, and the client's next datagram picks an endpoint anew.
const DefaultUDPIdleTimeout = 250 * time.Millisecond

// serveUDP is the legacy udpProxySocket.ProxyLoop: each datagram read on
// the ServicePort's socket goes to its client's socket to an endpoint;
// a client address (ip:port) seen for the first time gets one, to the
// endpoint the balancer picks (TryConnect: UDP dials fail only on a
// local error), and a goroutine that sends the endpoint's answers back
// to the client from the ServicePort's socket (so the portal's conntrack
// entry reverses the REDIRECT) until the endpoint is idle for
// DefaultUDPIdleTimeout. A datagram for a ServicePort without endpoints
// is dropped.
func (p *Proxier) serveUDP(sp *servicePort) {
	defer p.wg.Done()
	buf := make([]byte, 65535)
	for {
		n, cli, err := sp.udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		cli = netip.AddrPortFrom(cli.Addr().Unmap(), cli.Port())
		sp.clientMu.Lock()
		out := sp.clients[cli]
		sp.clientMu.Unlock()
		if out == nil {
			p.accepted.Add(1)
			res, err := TryConnect(p.ctx, sp.bal, cli.Addr(), p.cfg.timeouts(), p.dialer.DialUDP)
			if res.Tries > 1 {
				p.retried.Add(1)
			}
			if err != nil {
				p.dialFailures.Add(uint64(res.Tries))
				p.failed.Add(1)
				continue
			}
			p.dialFailures.Add(uint64(res.Tries - 1))
			p.proxied.Add(1)
			out = res.Conn.(*net.UDPConn)
			if !p.trackConn(out) {
				out.Close()
				return
			}
			sp.clientMu.Lock()
			sp.clients[cli] = out
			sp.clientMu.Unlock()
			p.wg.Add(1)
			go p.proxyUDPClient(sp, cli, out)
		}
		_ = out.SetWriteDeadline(time.Now().Add(DefaultUDPIdleTimeout))
		if _, err := out.Write(buf[:n]); err != nil {
			p.dropUDPClient(sp, cli, out)
		}
	}
}

// proxyUDPClient sends the endpoint's answers on out back to client cli
// until out is idle for DefaultUDPIdleTimeout or fails (an ICMP error
// from the endpoint), then forgets the client.
func (p *Proxier) proxyUDPClient(sp *servicePort, cli netip.AddrPort, out *net.UDPConn) {
	defer p.wg.Done()
	defer p.dropUDPClient(sp, cli, out)
	buf := make([]byte, 65535)
	for {
		_ = out.SetReadDeadline(time.Now().Add(DefaultUDPIdleTimeout))
		n, err := out.Read(buf)
		if err != nil {
			return
		}
		if _, err := sp.udp.WriteToUDPAddrPort(buf[:n], cli); err != nil {
			return
		}
	}
}

// dropUDPClient forgets client cli's socket out (once) and closes it.
func (p *Proxier) dropUDPClient(sp *servicePort, cli netip.AddrPort, out *net.UDPConn) {
	sp.clientMu.Lock()
	if sp.clients[cli] == out {
		delete(sp.clients, cli)
	}
	sp.clientMu.Unlock()
	out.Close()
	p.connMu.Lock()
	delete(p.conns, out)
	p.connMu.Unlock()
}

// trackConn records one socket for Cleanup; false once Cleanup began.
func (p *Proxier) trackConn(c net.Conn) bool {
	p.connMu.Lock()
	defer p.connMu.Unlock()
	if p.ctx.Err() != nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}
