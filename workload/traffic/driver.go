//go:build linux

package traffic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proxybench/proxybench/internal/lib/nspool"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
)

// DriveSpec configures one closed-loop traffic phase.
type DriveSpec struct {
	Clients []*topology.Netns // client pod namespaces; worker w uses Clients[w%len]
	// InPlace runs every worker in this process's own network namespace
	// (nspool.Here) instead of Clients: the cluster engine's agent,
	// which runs in its pod and may not switch namespaces.
	InPlace  bool
	Services []workload.Service
	// Direct dials a uniformly drawn ready endpoint at its target port
	// instead of the ClusterIP (mode none: the no-proxy baseline).
	Direct bool
	// NodeAddrs, when given, makes worker w dial NodeAddrs[w mod len]
	// (one per client, as Clients) at each ServicePort's NodePort instead
	// of the ClusterIP (a NodePort lookup; a port without a node port is
	// an error of that connection).
	NodeAddrs   []netip.Addr
	Position    string
	Connections int // recorded connections
	Warmup      int // connections made first and not recorded
	Concurrency int // connections in flight (one worker thread each)
	Timeout     time.Duration
	Seed        int64
	// UDPSourcePort, when > 0, is the first source port of the UDP
	// exchanges and UDPSourcePorts (>= Concurrency) how many from it:
	// worker w uses ports UDPSourcePort+j for j ≡ w mod Concurrency, in
	// turn. 0: the kernel picks an ephemeral port per exchange.
	UDPSourcePort  uint16
	UDPSourcePorts int
}

// DriveResult holds the raw samples of one phase.
type DriveResult struct {
	Position string
	// Target is the ServicePort of a fixed position (zero for random).
	Target workload.Target
	// LatenciesNs are the connect() times of successful connections, in
	// nanoseconds: from the SYN being sent to the handshake completing,
	// through the node's rules (or directly, in Direct mode). For a UDP
	// ServicePort, the round trip of one exchange: from the datagram sent
	// to the echo's answer read.
	LatenciesNs []int64
	// TTFBNs are the times to first byte of the same connections, in ns:
	// from the SYN to the echo line read and the socket closed. For the
	// userspace mode, whose listener completes the handshake locally, this
	// includes the proxy's own connection to the endpoint. For UDP, from
	// the send to the socket closed after the answer.
	TTFBNs []int64
	// Hits counts, per service index, the connections that landed on each
	// endpoint, as reported by the echo server.
	Hits map[int]map[netip.Addr]int
	// Errors counts failed connections (timeout, refused, reset, bad echo);
	// Misses counts connections answered by an address that is not an
	// endpoint of the service dialled.
	Errors, Misses int
	// ErrorSamples holds up to 5 error texts.
	ErrorSamples []string
	// ErrorTimesNs holds, per cause (ErrorKind: refused, timeout, reset,
	// unreachable, other), the time from the connect to the error of every
	// failed connection, in ns.
	ErrorTimesNs map[string][]int64
	// Elapsed is the wall time of the recorded part; Connections/Elapsed is
	// the closed-loop connection rate.
	Elapsed time.Duration
	// RecordStartMonoNs is when the first recorded connection started,
	// CLOCK_MONOTONIC ns (the clock of the kernel's bpf_ktime_get_ns, so
	// in-kernel packet times can be told apart from the warmup's); 0
	// when none was.
	RecordStartMonoNs int64
	// ByPort splits the recorded connections by ServicePort index within
	// its service (Services[i].Ports[j] counts under j), so a multi-port
	// service's ports (dns-tcp, dns) each get their figures.
	ByPort map[int]*PortSamples
}

// PortSamples are one ServicePort index's share of a DriveResult.
type PortSamples struct {
	LatenciesNs    []int64
	Errors, Misses int
	// ErrorKinds counts the failures per ErrorKind.
	ErrorKinds map[string]int
}

type sample struct {
	lat    int64
	ttfb   int64
	svc    int
	port   int
	landed netip.Addr
	err    error
	miss   bool
}

// Drive runs Warmup+Connections TCP connections at the spec's position with
// Concurrency workers, each on an OS thread locked into a client pod
// namespace. Each connection is a blocking connect(2) (timed), a read of
// the echo line, and a close with SO_LINGER 0 (RST), so neither side keeps
// TIME_WAIT state and 10k+ services never exhaust ports. Connection
// failures are counted, not returned; the error is for a setup failure or
// ctx cancellation.
func Drive(ctx context.Context, spec DriveSpec) (*DriveResult, error) {
	if spec.Concurrency < 1 || (len(spec.Clients) == 0 && !spec.InPlace) {
		return nil, errors.New("drive: need concurrency >= 1 and a client (or InPlace)")
	}
	flat := workload.FlatTargets(spec.Services)
	res := &DriveResult{Position: spec.Position, Hits: map[int]map[netip.Addr]int{}}
	fixed := spec.Position != workload.PosRandom
	if fixed {
		t, err := workload.PositionTarget(flat, spec.Position)
		if err != nil {
			return nil, err
		}
		res.Target = t
	}
	total := int64(spec.Warmup + spec.Connections)
	var next atomic.Int64
	var startRec atomic.Int64  // unix ns when the first recorded connection starts
	var startMono atomic.Int64 // the same, CLOCK_MONOTONIC ns
	per := make([][]sample, spec.Concurrency)
	nsOf := func(w int) nspool.Namespace { return spec.Clients[w%len(spec.Clients)] }
	if spec.InPlace {
		nsOf = func(int) nspool.Namespace { return nspool.Here }
	}
	err := nspool.Run(spec.Concurrency, nsOf, func(w int) {
		rng := rand.New(rand.NewSource(spec.Seed + int64(w)*7919))
		udp := 0 // UDP exchanges made by this worker
		for ctx.Err() == nil {
			i := next.Add(1) - 1
			if i >= total {
				return
			}
			if i == int64(spec.Warmup) {
				var ts unix.Timespec
				_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
				startMono.CompareAndSwap(0, ts.Nano())
				startRec.CompareAndSwap(0, time.Now().UnixNano())
			}
			t := res.Target
			if !fixed {
				t = flat[rng.Intn(len(flat))]
			}
			s := dialOnce(spec, t, rng, w, &udp)
			if i >= int64(spec.Warmup) {
				per[w] = append(per[w], s)
			}
		}
	})
	end := time.Now()
	if err != nil {
		return nil, fmt.Errorf("drive: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if st := startRec.Load(); st != 0 {
		res.Elapsed = end.Sub(time.Unix(0, st))
	}
	res.RecordStartMonoNs = startMono.Load()
	res.ByPort = map[int]*PortSamples{}
	for _, ss := range per {
		for _, s := range ss {
			bp := res.ByPort[s.port]
			if bp == nil {
				bp = &PortSamples{}
				res.ByPort[s.port] = bp
			}
			switch {
			case s.err != nil:
				countError(&res.Errors, &res.ErrorSamples, s.err)
				if res.ErrorTimesNs == nil {
					res.ErrorTimesNs = map[string][]int64{}
				}
				k := ErrorKind(s.err)
				res.ErrorTimesNs[k] = append(res.ErrorTimesNs[k], s.ttfb)
				bp.Errors++
				if bp.ErrorKinds == nil {
					bp.ErrorKinds = map[string]int{}
				}
				bp.ErrorKinds[k]++
			case s.miss:
				res.Misses++
				bp.Misses++
			default:
				bp.LatenciesNs = append(bp.LatenciesNs, s.lat)
				res.LatenciesNs = append(res.LatenciesNs, s.lat)
				res.TTFBNs = append(res.TTFBNs, s.ttfb)
				h := res.Hits[s.svc]
				if h == nil {
					h = map[netip.Addr]int{}
					res.Hits[s.svc] = h
				}
				h[s.landed]++
			}
		}
	}
	return res, nil
}

// maxErrorSamples is how many error texts a result keeps.
const maxErrorSamples = 5

// countError counts a failed connection in *n and keeps its text in
// *samples while fewer than maxErrorSamples are kept.
func countError(n *int, samples *[]string, err error) {
	*n++
	if len(*samples) < maxErrorSamples {
		*samples = append(*samples, err.Error())
	}
}

// dialOnce makes one connection (one exchange for a UDP ServicePort)
// from the calling (namespace-locked) thread of worker w; *udp counts the
// worker's UDP exchanges, which pick its source ports in turn.
func dialOnce(spec DriveSpec, t workload.Target, rng *rand.Rand, w int, udp *int) sample {
	svc := &spec.Services[t.Service]
	port := svc.Ports[t.Port]
	dst, dport := svc.ClusterIP, port.Port
	if spec.Direct {
		eps := svc.ReadyEndpoints()
		if len(eps) == 0 {
			return sample{svc: t.Service, port: t.Port, err: fmt.Errorf("%s: no ready endpoint", svc.PortName(port))}
		}
		dst, dport = eps[rng.Intn(len(eps))].IP, port.TargetPort
	} else if len(spec.NodeAddrs) > 0 {
		if port.NodePort == 0 {
			return sample{svc: t.Service, port: t.Port, err: fmt.Errorf("%s: no node port", svc.PortName(port))}
		}
		dst, dport = spec.NodeAddrs[w%len(spec.NodeAddrs)], port.NodePort
	}
	s := sample{svc: t.Service, port: t.Port}
	var src netip.AddrPort
	tag := ""
	if port.Protocol == "UDP" {
		if spec.UDPSourcePort > 0 {
			n := spec.UDPSourcePorts
			per := (n - w + spec.Concurrency - 1) / spec.Concurrency // ports j < n with j ≡ w mod Concurrency
			j := w + (*udp%max(per, 1))*spec.Concurrency
			src = netip.AddrPortFrom(netip.Addr{}, spec.UDPSourcePort+uint16(j))
		}
		*udp++
		tag = strconv.FormatUint(rng.Uint64(), 36)
	}
	landed, start, lat, err := EchoVia(port.Protocol, src, dst, dport, tag, spec.Timeout)
	s.lat = int64(lat)
	s.ttfb = int64(time.Since(start))
	if err != nil {
		s.err = err
		return s
	}
	s.landed = landed.Addr()
	s.miss = landed.Port() != port.TargetPort || !svc.HasReadyEndpoint(landed.Addr())
	return s
}

// DialEcho makes one TCP connection to dst:port from the calling thread,
// which must be locked into a client namespace: a blocking connect(2)
// (timed: latency is from the SYN being sent to the handshake completing),
// a read of the echo server's line (the endpoint address the connection
// landed on), and a close with SO_LINGER 0 (RST, no TIME_WAIT). start is
// when the connect began. Errors name the address and the step.
func DialEcho(dst netip.Addr, port uint16, timeout time.Duration) (landed netip.AddrPort, start time.Time, latency time.Duration, err error) {
	return DialEchoFrom(netip.Addr{}, dst, port, timeout)
}

// DialEchoFrom is DialEcho with the connection bound to source address
// src (one of the calling namespace's addresses; the zero Addr lets the
// kernel choose). The port is picked at connect time
// (IP_BIND_ADDRESS_NO_PORT), so one source can open as many connections
// as the ephemeral range allows.
func DialEchoFrom(src, dst netip.Addr, port uint16, timeout time.Duration) (landed netip.AddrPort, start time.Time, latency time.Duration, err error) {
	fd, landed, start, latency, err := OpenEcho(src, dst, port, timeout)
	if fd >= 0 {
		unix.Close(fd) // with SO_LINGER 0: sends RST, leaves no TIME_WAIT
	}
	return landed, start, latency, err
}

// OpenEcho is DialEchoFrom without the close: on success it returns the
// open socket fd (close it with unix.Close: SO_LINGER 0 sends RST), so a
// caller can hold the connection (an active connection on the endpoint it
// landed on). On failure fd is -1.
func OpenEcho(src, dst netip.Addr, port uint16, timeout time.Duration) (fd int, landed netip.AddrPort, start time.Time, latency time.Duration, err error) {
	fd, landed, _, start, latency, err = openEcho(src, dst, port, timeout)
	return fd, landed, start, latency, err
}

// DialEchoPeer is DialEchoFrom that also returns the peer address the
// echo server saw (the connection's source after every NAT on the way:
// the client's own address, or a node's when a mode masqueraded it).
func DialEchoPeer(src, dst netip.Addr, port uint16, timeout time.Duration) (landed, peer netip.AddrPort, latency time.Duration, err error) {
	fd, landed, peer, _, latency, err := openEcho(src, dst, port, timeout)
	if fd >= 0 {
		unix.Close(fd)
	}
	return landed, peer, latency, err
}

// sockaddr is a's socket address with port: IPv4 or IPv6 by a's family.
func sockaddr(a netip.Addr, port uint16) unix.Sockaddr {
	if a.Is6() {
		return &unix.SockaddrInet6{Port: int(port), Addr: a.As16()}
	}
	return &unix.SockaddrInet4{Port: int(port), Addr: a.As4()}
}

func openEcho(src, dst netip.Addr, port uint16, timeout time.Duration) (fd int, landed, peer netip.AddrPort, start time.Time, latency time.Duration, err error) {
	family := unix.AF_INET
	if dst.Is6() {
		family = unix.AF_INET6 // an IPv6 ClusterIP or pod (dual-stack)
	}
	sock, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, landed, peer, time.Now(), 0, fmt.Errorf("socket: %w", err)
	}
	fd = sock
	defer func() {
		if err != nil {
			unix.Close(sock)
			fd = -1
		}
	}()
	// Each option decides whether the connection measures what it should
	// (no TIME_WAIT left behind, a bounded connect and read, a source port
	// picked at connect time): a failure fails the connection, which the
	// caller counts as an error with this text.
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	if err = unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0}); err != nil {
		return -1, landed, peer, time.Now(), 0, fmt.Errorf("setsockopt SO_LINGER: %w", err)
	}
	if err = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		return -1, landed, peer, time.Now(), 0, fmt.Errorf("setsockopt SO_SNDTIMEO %v: %w", timeout, err)
	}
	if err = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return -1, landed, peer, time.Now(), 0, fmt.Errorf("setsockopt SO_RCVTIMEO %v: %w", timeout, err)
	}
	if src.IsValid() {
		if err = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1); err != nil {
			return -1, landed, peer, time.Now(), 0, fmt.Errorf("setsockopt IP_BIND_ADDRESS_NO_PORT: %w", err)
		}
		if err = unix.Bind(fd, sockaddr(src, 0)); err != nil {
			return -1, landed, peer, time.Now(), 0, fmt.Errorf("bind %s: %w", src, err)
		}
	}
	// The connect is non-blocking, then waited for with poll and SO_ERROR,
	// as Go's net.Dial, curl and most clients do. A blocking connect would
	// miss the node's ICMP port unreachable (a mode's REJECT): over veth it
	// comes back in the same softirq, while connect(2) still holds the
	// socket lock, so tcp_v4_err keeps it only as a soft error
	// (TcpExtLockDroppedIcmps) and a blocking connect sleeps until the SYN
	// retransmission 1 s later (TCP_TIMEOUT_INIT); a poll sees it at once.
	if err = unix.SetNonblock(fd, true); err != nil {
		return -1, landed, peer, time.Now(), 0, fmt.Errorf("set O_NONBLOCK: %w", err)
	}
	sa := sockaddr(dst, port)
	start = time.Now()
	err = unix.Connect(fd, sa)
	if err == unix.EINPROGRESS || err == unix.EINTR {
		// In progress (or interrupted by a signal, the Go runtime's
		// preemption SIGURG): the connect goes on in the kernel; wait
		// for its outcome.
		err = awaitConnect(fd, start.Add(timeout))
	}
	latency = time.Since(start)
	if err != nil {
		return -1, landed, peer, start, latency, fmt.Errorf("connect %s:%d: %w", dst, port, err)
	}
	// Blocking again, so the read below waits (bounded by SO_RCVTIMEO).
	if err = unix.SetNonblock(fd, false); err != nil {
		return -1, landed, peer, start, latency, fmt.Errorf("clear O_NONBLOCK: %w", err)
	}
	var buf [64]byte
	n := 0
	for n < len(buf) {
		m, rerr := unix.Read(fd, buf[n:])
		if rerr == unix.EINTR {
			continue // interrupted before any byte arrived: read again
		}
		if rerr != nil || m == 0 {
			if rerr == nil {
				rerr = errClosed
			}
			err = afterConnect{fmt.Errorf("read echo from %s:%d: %w", dst, port, rerr)}
			return -1, landed, peer, start, latency, err
		}
		n += m
		if bytes.IndexByte(buf[:n], '\n') >= 0 {
			break
		}
	}
	line := string(bytes.TrimSpace(buf[:n]))
	local, remote, _ := strings.Cut(line, " ")
	landed, err = netip.ParseAddrPort(local)
	if err == nil && remote != "" {
		peer, err = netip.ParseAddrPort(remote)
	}
	if err != nil {
		err = afterConnect{fmt.Errorf("bad echo %q from %s:%d", line, dst, port)}
		return -1, landed, peer, start, latency, err
	}
	return fd, landed, peer, start, latency, nil
}

// FairnessSpec configures the fairness phase: PerService connections to
// every ServicePort's ClusterIP, spread evenly over the client pods and,
// within a client pod, over its source addresses in turn.
type FairnessSpec struct {
	Clients []*topology.Netns
	// Sources[c] are client c's source addresses (empty: unbound).
	Sources     [][]netip.Addr
	Services    []workload.Service
	PerService  int
	Concurrency int // connections in flight over all clients (>= 1)
	Timeout     time.Duration
}

// HitKey identifies one cell of the fairness counts: connections from
// source Sources[Client][Source] to service Target that landed on Endpoint.
type HitKey struct {
	Client, Source int
	Target         workload.Target
	Endpoint       netip.Addr
}

// FairnessResult holds the fairness phase's raw counts.
type FairnessResult struct {
	Hits map[HitKey]int
	// Errors counts failed connections, Misses answers from an address
	// that is not an endpoint of the service.
	Errors, Misses int
	ErrorSamples   []string
	Elapsed        time.Duration
}

// DriveFairness runs the fairness phase. Client c makes its share of
// PerService connections to every ServicePort (task t of client c goes to
// ServicePort t mod S from source (t div S) mod len(Sources[c])), with
// max(1, Concurrency/len(Clients)) workers locked into its namespace, so
// every source address reaches every service about equally often.
func DriveFairness(ctx context.Context, spec FairnessSpec) (*FairnessResult, error) {
	if len(spec.Clients) == 0 || spec.PerService < 1 {
		return nil, errors.New("drive fairness: need a client and perService >= 1")
	}
	flat := workload.FlatTargets(spec.Services)
	nc := len(spec.Clients)
	per := max(1, spec.Concurrency/nc)
	res := &FairnessResult{Hits: map[HitKey]int{}}
	var mu sync.Mutex
	// Client c's share of every service's connections, taken in turn by
	// its per workers (workers c*per .. c*per+per-1).
	totals := make([]int64, nc)
	nexts := make([]atomic.Int64, nc)
	for c := range totals {
		share := spec.PerService / nc
		if c < spec.PerService%nc {
			share++
		}
		totals[c] = int64(share * len(flat))
	}
	t0 := time.Now()
	err := nspool.Run(nc*per, func(w int) nspool.Namespace { return spec.Clients[w/per] }, func(w int) {
		c := w / per
		var srcs []netip.Addr
		if c < len(spec.Sources) {
			srcs = spec.Sources[c]
		}
		local := map[HitKey]int{}
		var errs, misses int
		var samples []string
		for ctx.Err() == nil {
			t := nexts[c].Add(1) - 1
			if t >= totals[c] {
				break
			}
			tg := flat[int(t)%len(flat)]
			si := 0
			var src netip.Addr
			if len(srcs) > 0 {
				si = int(t/int64(len(flat))) % len(srcs)
				src = srcs[si]
			}
			svc := &spec.Services[tg.Service]
			port := svc.Ports[tg.Port]
			landed, _, _, err := EchoVia(port.Protocol, netip.AddrPortFrom(src, 0), svc.ClusterIP, port.Port, strconv.FormatInt(t, 36), spec.Timeout)
			switch {
			case err != nil:
				countError(&errs, &samples, err)
			case landed.Port() != port.TargetPort || !svc.HasReadyEndpoint(landed.Addr()):
				misses++
			default:
				local[HitKey{Client: c, Source: si, Target: tg, Endpoint: landed.Addr()}]++
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for k, v := range local {
			res.Hits[k] += v
		}
		res.Errors += errs
		res.Misses += misses
		res.ErrorSamples = append(res.ErrorSamples, samples[:min(len(samples), maxErrorSamples-len(res.ErrorSamples))]...)
	})
	res.Elapsed = time.Since(t0)
	if err != nil {
		return nil, fmt.Errorf("drive fairness: %w", err)
	}
	return res, ctx.Err()
}

// FirstPicks makes, from every client in clients (typically the first
// client pod of each node) at the same time, one connection to every
// ServicePort in order, and returns the endpoint each landed on
// (out[i][t] for clients[i] and workload.FlatTargets(services)[t]; the zero Addr
// on failure). Right after a fresh sync this is each node's first pick:
// with identical endpoint order, per-node rr picks the same endpoint on
// every node.
func FirstPicks(ctx context.Context, clients []*topology.Netns, sources []netip.Addr, services []workload.Service, timeout time.Duration) ([][]netip.Addr, error) {
	flat := workload.FlatTargets(services)
	out := make([][]netip.Addr, len(clients))
	for i := range out {
		out[i] = make([]netip.Addr, len(flat))
	}
	if len(clients) == 0 {
		return out, ctx.Err()
	}
	err := nspool.Run(len(clients), func(i int) nspool.Namespace { return clients[i] }, func(i int) {
		var src netip.Addr
		if i < len(sources) {
			src = sources[i]
		}
		for t, tg := range flat {
			if ctx.Err() != nil {
				return
			}
			svc := &services[tg.Service]
			p := svc.Ports[tg.Port]
			landed, _, _, err := EchoVia(p.Protocol, netip.AddrPortFrom(src, 0), svc.ClusterIP, p.Port, "first-"+strconv.Itoa(t), timeout)
			if err == nil {
				out[i][t] = landed.Addr()
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("first picks: %w", err)
	}
	return out, ctx.Err()
}

// HoldSpec configures the long-lived phase: for every ServicePort, in
// turn, PerService connections opened one after another from the clients
// in rotation (connection j from Clients[j mod len], source j div len of
// its Sources), all held open until Hold after the last one opened.
type HoldSpec struct {
	Clients    []*topology.Netns
	Sources    [][]netip.Addr
	Services   []workload.Service
	PerService int
	Hold       time.Duration
	Timeout    time.Duration
}

// HoldResult counts the connections still open at the end of the hold,
// per ServicePort and endpoint: the active connections per real server.
type HoldResult struct {
	// Active[t][ep] for workload.FlatTargets(services)[t].
	Active         []map[netip.Addr]int
	Errors, Misses int
	ErrorSamples   []string
}

// HoldConnections runs the long-lived phase. Every connection is verified
// open at the end (a zero-byte-free poll: a peer reset counts as closed,
// not active), then all are closed with RST. Opening is sequential, so a
// least-connection scheduler sees every earlier connection as active when
// it places the next one. One OS thread per client pod stays locked in its
// namespace for the phase.
func HoldConnections(ctx context.Context, spec HoldSpec) (*HoldResult, error) {
	if len(spec.Clients) == 0 || spec.PerService < 1 {
		return nil, errors.New("hold: need a client and perService >= 1")
	}
	flat := workload.FlatTargets(spec.Services)
	// One worker per client pod opens that client's connections.
	workers, err := nspool.Start(len(spec.Clients), func(c int) nspool.Namespace { return spec.Clients[c] })
	if err != nil {
		return nil, fmt.Errorf("hold: %w", err)
	}
	res := &HoldResult{Active: make([]map[netip.Addr]int, len(flat))}
	type held struct {
		fd int
		t  int
		ep netip.Addr
	}
	var open []held
	defer func() {
		for _, h := range open {
			unix.Close(h.fd)
		}
	}()
	for t, tg := range flat {
		svc := &spec.Services[tg.Service]
		port := svc.Ports[tg.Port]
		res.Active[t] = map[netip.Addr]int{}
		for j := 0; j < spec.PerService && ctx.Err() == nil; j++ {
			c := j % len(spec.Clients)
			var src netip.Addr
			if c < len(spec.Sources) && len(spec.Sources[c]) > 0 {
				src = spec.Sources[c][(j/len(spec.Clients))%len(spec.Sources[c])]
			}
			var r openResult
			workers.Do(c, func() {
				r.fd, r.landed, _, _, r.err = OpenEcho(src, svc.ClusterIP, port.Port, spec.Timeout)
			})
			switch {
			case r.err != nil:
				countError(&res.Errors, &res.ErrorSamples, r.err)
			case r.landed.Port() != port.TargetPort || !svc.HasReadyEndpoint(r.landed.Addr()):
				res.Misses++
				unix.Close(r.fd)
			default:
				open = append(open, held{r.fd, t, r.landed.Addr()})
			}
		}
	}
	workers.Close()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(spec.Hold):
	}
	for _, h := range open {
		if alive(h.fd) {
			res.Active[h.t][h.ep]++
		}
	}
	return res, nil
}

type openResult struct {
	fd     int
	landed netip.AddrPort
	err    error
}

// alive reports whether a held connection is still established: poll
// without waiting finds no hang-up or error and no pending EOF.
func alive(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}}
	n, err := unix.Poll(fds, 0)
	if err != nil {
		return false
	}
	return n == 0 || fds[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLRDHUP) == 0
}

// awaitConnect waits until deadline for the outcome of a connect(2) that
// returned EINTR (the connection attempt continues, see connect(2)):
// poll(2) for writability, retried on EINTR, then SO_ERROR. It returns nil
// when connected, the connection's error, or ETIMEDOUT. At or past the
// deadline it still polls once without waiting, so a connect that
// completed while the calling thread waited for a CPU (the deadline
// passed before the first poll, or before the retry after an EINTR: a
// machine at load 50, 2026-12-03) is a connection, not a timeout: the
// kernel had the handshake done (the client namespace's AttemptFails
// stayed 0 while the soak counted timeouts).
func awaitConnect(fd int, deadline time.Time) error {
	for {
		ms := max(int(time.Until(deadline).Milliseconds()), 0)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(fds, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return unix.ETIMEDOUT
		}
		soerr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil {
			return err
		}
		if soerr != 0 {
			return unix.Errno(soerr)
		}
		return nil
	}
}

// afterConnect is the failure of a TCP connection whose connect(2) had
// completed (the handshake done): the echo line did not come within the
// timeout, the stream ended or was reset before it, or it was not an
// echo line. Its text and errno are the wrapped error's.
type afterConnect struct{ error }

func (e afterConnect) Unwrap() error { return e.error }

// AfterConnect reports whether err failed a TCP connection (DialEcho,
// OpenEcho, DialEchoPeer) after its connect completed: in the echo
// line's read, not in the handshake. A timeout there is the echo server
// late (the testbed's echo server runs inside proxybench, so a starved
// proxybench is one cause) or the data lost after the handshake; a
// timeout of the connect is the SYN or SYN-ACK not through in time.
func AfterConnect(err error) bool {
	var a afterConnect
	return errors.As(err, &a)
}

// errClosed is a read of the echo line that met the end of the stream.
var errClosed = errors.New("connection closed before the echo line")

// ErrorKinds are the causes ErrorKind tells apart.
var ErrorKinds = []string{"refused", "timeout", "reset", "unreachable", "other"}

// ErrorKind names the cause of a failed connection from its errno:
// refused (ECONNREFUSED: a RST to the SYN, e.g. a mode's REJECT for a
// service without endpoints, or ICMP port unreachable), timeout
// (ETIMEDOUT, or EINPROGRESS/EAGAIN when SO_SNDTIMEO/SO_RCVTIMEO expired),
// reset (ECONNRESET, EPIPE, or the stream closed before the echo line),
// unreachable (EHOSTUNREACH, ENETUNREACH: ICMP host/net unreachable),
// other.
func ErrorKind(err error) string {
	switch {
	case errors.Is(err, unix.ECONNREFUSED):
		return "refused"
	case errors.Is(err, unix.ETIMEDOUT), errors.Is(err, unix.EINPROGRESS), errors.Is(err, unix.EAGAIN):
		return "timeout"
	case errors.Is(err, unix.ECONNRESET), errors.Is(err, unix.EPIPE), errors.Is(err, errClosed):
		return "reset"
	case errors.Is(err, unix.EHOSTUNREACH), errors.Is(err, unix.ENETUNREACH):
		return "unreachable"
	}
	return "other"
}
