//go:build linux

package traffic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
)

// DriveSpec configures one closed-loop traffic phase.
type DriveSpec struct {
	Clients  []*topology.Netns // client pod namespaces; worker w uses Clients[w%len]
	Services []workload.Service
	// Direct dials a uniformly drawn ready endpoint at its target port
	// instead of the ClusterIP (mode none: the no-proxy baseline).
	Direct      bool
	Position    string
	Connections int // recorded connections
	Warmup      int // connections made first and not recorded
	Concurrency int // connections in flight (one worker thread each)
	Timeout     time.Duration
	Seed        int64
}

// DriveResult holds the raw samples of one phase.
type DriveResult struct {
	Position string
	// Target is the ServicePort of a fixed position (zero for random).
	Target workload.Target
	// LatenciesNs are the connect() times of successful connections, in
	// nanoseconds: from the SYN being sent to the handshake completing,
	// through the node's rules (or directly, in Direct mode).
	LatenciesNs []int64
	// TTFBNs are the times to first byte of the same connections, in ns:
	// from the SYN to the echo line read and the socket closed. For the
	// userspace mode, whose listener completes the handshake locally, this
	// includes the proxy's own connection to the endpoint.
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
	// Elapsed is the wall time of the recorded part; Connections/Elapsed is
	// the closed-loop connection rate.
	Elapsed time.Duration
}

type sample struct {
	lat    int64
	ttfb   int64
	svc    int
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
	if spec.Concurrency < 1 || len(spec.Clients) == 0 {
		return nil, errors.New("drive: need concurrency >= 1 and a client")
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
	var startRec atomic.Int64 // unix ns when the first recorded connection starts
	per := make([][]sample, spec.Concurrency)
	var wg sync.WaitGroup
	setupErr := make(chan error, spec.Concurrency)
	for w := 0; w < spec.Concurrency; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
			if err := netns.Set(spec.Clients[w%len(spec.Clients)].Handle()); err != nil {
				setupErr <- err
				return
			}
			rng := rand.New(rand.NewSource(spec.Seed + int64(w)*7919))
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= total {
					return
				}
				if i == int64(spec.Warmup) {
					startRec.CompareAndSwap(0, time.Now().UnixNano())
				}
				t := res.Target
				if !fixed {
					t = flat[rng.Intn(len(flat))]
				}
				s := dialOnce(spec, t, rng)
				if i >= int64(spec.Warmup) {
					per[w] = append(per[w], s)
				}
			}
		}(w)
	}
	wg.Wait()
	end := time.Now()
	close(setupErr)
	if err := <-setupErr; err != nil {
		return nil, fmt.Errorf("drive: enter client netns: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if st := startRec.Load(); st != 0 {
		res.Elapsed = end.Sub(time.Unix(0, st))
	}
	for _, ss := range per {
		for _, s := range ss {
			switch {
			case s.err != nil:
				res.Errors++
				if len(res.ErrorSamples) < 5 {
					res.ErrorSamples = append(res.ErrorSamples, s.err.Error())
				}
			case s.miss:
				res.Misses++
			default:
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

// dialOnce makes one connection from the calling (namespace-locked) thread.
func dialOnce(spec DriveSpec, t workload.Target, rng *rand.Rand) sample {
	svc := &spec.Services[t.Service]
	port := svc.Ports[t.Port]
	dst, dport := svc.ClusterIP, port.Port
	if spec.Direct {
		eps := svc.ReadyEndpoints()
		if len(eps) == 0 {
			return sample{svc: t.Service, err: fmt.Errorf("%s: no ready endpoint", svc.PortName(port))}
		}
		dst, dport = eps[rng.Intn(len(eps))].IP, port.TargetPort
	}
	s := sample{svc: t.Service}
	landed, start, lat, err := DialEcho(dst, dport, spec.Timeout)
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
	sock, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, landed, time.Now(), 0, fmt.Errorf("socket: %w", err)
	}
	fd = sock
	defer func() {
		if err != nil {
			unix.Close(sock)
			fd = -1
		}
	}()
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	_ = unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	if src.IsValid() {
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
		if err = unix.Bind(fd, &unix.SockaddrInet4{Addr: src.As4()}); err != nil {
			return -1, landed, time.Now(), 0, fmt.Errorf("bind %s: %w", src, err)
		}
	}
	sa := &unix.SockaddrInet4{Port: int(port), Addr: dst.As4()}
	start = time.Now()
	err = unix.Connect(fd, sa)
	latency = time.Since(start)
	if err != nil {
		return -1, landed, start, latency, fmt.Errorf("connect %s:%d: %w", dst, port, err)
	}
	var buf [64]byte
	n := 0
	for n < len(buf) {
		m, rerr := unix.Read(fd, buf[n:])
		if rerr != nil || m == 0 {
			err = fmt.Errorf("read echo from %s:%d: %v", dst, port, rerr)
			return -1, landed, start, latency, err
		}
		n += m
		if bytes.IndexByte(buf[:n], '\n') >= 0 {
			break
		}
	}
	line := string(bytes.TrimSpace(buf[:n]))
	landed, err = netip.ParseAddrPort(line)
	if err != nil {
		err = fmt.Errorf("bad echo %q from %s:%d", line, dst, port)
		return -1, landed, start, latency, err
	}
	return fd, landed, start, latency, nil
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
	var wg sync.WaitGroup
	setupErr := make(chan error, nc*per)
	t0 := time.Now()
	for c := 0; c < nc; c++ {
		// Client c's share of every service's connections.
		share := spec.PerService / nc
		if c < spec.PerService%nc {
			share++
		}
		total := int64(share * len(flat))
		var next atomic.Int64
		var srcs []netip.Addr
		if c < len(spec.Sources) {
			srcs = spec.Sources[c]
		}
		for w := 0; w < per; w++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
				if err := netns.Set(spec.Clients[c].Handle()); err != nil {
					setupErr <- err
					return
				}
				local := map[HitKey]int{}
				var errs, misses int
				var samples []string
				for ctx.Err() == nil {
					t := next.Add(1) - 1
					if t >= total {
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
					landed, _, _, err := DialEchoFrom(src, svc.ClusterIP, port.Port, spec.Timeout)
					switch {
					case err != nil:
						errs++
						if len(samples) < 5 {
							samples = append(samples, err.Error())
						}
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
				for _, e := range samples {
					if len(res.ErrorSamples) < 5 {
						res.ErrorSamples = append(res.ErrorSamples, e)
					}
				}
			}(c)
		}
	}
	wg.Wait()
	res.Elapsed = time.Since(t0)
	close(setupErr)
	if err := <-setupErr; err != nil {
		return nil, fmt.Errorf("drive fairness: enter client netns: %w", err)
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
	errc := make(chan error, len(clients))
	var wg sync.WaitGroup
	for i, cl := range clients {
		out[i] = make([]netip.Addr, len(flat))
		wg.Add(1)
		go func(i int, cl *topology.Netns) {
			defer wg.Done()
			runtime.LockOSThread()
			if err := netns.Set(cl.Handle()); err != nil {
				errc <- err
				return
			}
			var src netip.Addr
			if i < len(sources) {
				src = sources[i]
			}
			for t, tg := range flat {
				if ctx.Err() != nil {
					return
				}
				svc := &services[tg.Service]
				landed, _, _, err := DialEchoFrom(src, svc.ClusterIP, svc.Ports[tg.Port].Port, timeout)
				if err == nil {
					out[i][t] = landed.Addr()
				}
			}
		}(i, cl)
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return nil, fmt.Errorf("first picks: enter client netns: %w", err)
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
	type job struct {
		src           netip.Addr
		dst           netip.Addr
		port, tgtPort uint16
		reply         chan openResult
	}
	jobs := make([]chan job, len(spec.Clients))
	var wg sync.WaitGroup
	setupErr := make(chan error, len(spec.Clients))
	for c, cl := range spec.Clients {
		jobs[c] = make(chan job)
		wg.Add(1)
		go func(cl *topology.Netns, in chan job) {
			defer wg.Done()
			runtime.LockOSThread()
			if err := netns.Set(cl.Handle()); err != nil {
				setupErr <- err
				for j := range in {
					j.reply <- openResult{fd: -1, err: err}
				}
				return
			}
			for j := range in {
				fd, landed, _, _, err := OpenEcho(j.src, j.dst, j.port, spec.Timeout)
				j.reply <- openResult{fd: fd, landed: landed, err: err}
			}
		}(cl, jobs[c])
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
	reply := make(chan openResult)
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
			jobs[c] <- job{src: src, dst: svc.ClusterIP, port: port.Port, tgtPort: port.TargetPort, reply: reply}
			r := <-reply
			switch {
			case r.err != nil:
				res.Errors++
				if len(res.ErrorSamples) < 5 {
					res.ErrorSamples = append(res.ErrorSamples, r.err.Error())
				}
			case r.landed.Port() != port.TargetPort || !svc.HasReadyEndpoint(r.landed.Addr()):
				res.Misses++
				unix.Close(r.fd)
			default:
				open = append(open, held{r.fd, t, r.landed.Addr()})
			}
		}
	}
	for _, in := range jobs {
		close(in)
	}
	wg.Wait()
	close(setupErr)
	if err := <-setupErr; err != nil {
		return nil, fmt.Errorf("hold: enter client netns: %w", err)
	}
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
