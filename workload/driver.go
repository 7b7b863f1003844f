//go:build linux

package workload

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
)

// Positions a driver can aim at, over the flat list of ServicePorts in the
// order the proxier rendered them (service 0 port 0 first): "first" is the
// first ServicePort, "middle" the one at index total/2, "last" the last,
// "random" a uniformly drawn one for every connection. In iptables mode the
// index is the rule's position in KUBE-SERVICES, which the kernel walks
// linearly.
const (
	PosFirst  = "first"
	PosMiddle = "middle"
	PosLast   = "last"
	PosRandom = "random"
)

// Target is one ServicePort: Services[Service].Ports[Port].
type Target struct{ Service, Port int }

// DriveSpec configures one closed-loop traffic phase.
type DriveSpec struct {
	Clients  []*topology.Netns // client pod namespaces; worker w uses Clients[w%len]
	Services []Service
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
	Target Target
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

// FlatTargets returns every ServicePort in render order.
func FlatTargets(services []Service) []Target {
	var out []Target
	for i, s := range services {
		for j := range s.Ports {
			out = append(out, Target{i, j})
		}
	}
	return out
}

// PositionTarget maps a fixed position to its ServicePort.
func PositionTarget(flat []Target, pos string) (Target, error) {
	if len(flat) == 0 {
		return Target{}, errors.New("no services")
	}
	switch pos {
	case PosFirst:
		return flat[0], nil
	case PosMiddle:
		return flat[len(flat)/2], nil
	case PosLast:
		return flat[len(flat)-1], nil
	}
	return Target{}, fmt.Errorf("position %q is not fixed", pos)
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
	flat := FlatTargets(spec.Services)
	res := &DriveResult{Position: spec.Position, Hits: map[int]map[netip.Addr]int{}}
	fixed := spec.Position != PosRandom
	if fixed {
		t, err := PositionTarget(flat, spec.Position)
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
func dialOnce(spec DriveSpec, t Target, rng *rand.Rand) sample {
	svc := &spec.Services[t.Service]
	port := svc.Ports[t.Port]
	dst, dport := svc.ClusterIP, port.Port
	if spec.Direct {
		eps := readyEndpoints(svc)
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
	s.miss = landed.Port() != port.TargetPort || !isEndpoint(svc, landed.Addr())
	return s
}

// DialEcho makes one TCP connection to dst:port from the calling thread,
// which must be locked into a client namespace: a blocking connect(2)
// (timed: latency is from the SYN being sent to the handshake completing),
// a read of the echo server's line (the endpoint address the connection
// landed on), and a close with SO_LINGER 0 (RST, no TIME_WAIT). start is
// when the connect began. Errors name the address and the step.
func DialEcho(dst netip.Addr, port uint16, timeout time.Duration) (landed netip.AddrPort, start time.Time, latency time.Duration, err error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return landed, time.Now(), 0, fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd) // with SO_LINGER 0: sends RST, leaves no TIME_WAIT
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	_ = unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	sa := &unix.SockaddrInet4{Port: int(port), Addr: dst.As4()}
	start = time.Now()
	err = unix.Connect(fd, sa)
	latency = time.Since(start)
	if err != nil {
		return landed, start, latency, fmt.Errorf("connect %s:%d: %w", dst, port, err)
	}
	var buf [64]byte
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err != nil || m == 0 {
			return landed, start, latency, fmt.Errorf("read echo from %s:%d: %v", dst, port, err)
		}
		n += m
		if bytes.IndexByte(buf[:n], '\n') >= 0 {
			break
		}
	}
	line := string(bytes.TrimSpace(buf[:n]))
	landed, err = netip.ParseAddrPort(line)
	if err != nil {
		return landed, start, latency, fmt.Errorf("bad echo %q from %s:%d", line, dst, port)
	}
	return landed, start, latency, nil
}

func readyEndpoints(s *Service) []Endpoint {
	out := make([]Endpoint, 0, len(s.Endpoints))
	for _, e := range s.Endpoints {
		if e.Ready {
			out = append(out, e)
		}
	}
	return out
}

func isEndpoint(s *Service, a netip.Addr) bool {
	for _, e := range s.Endpoints {
		if e.IP == a && e.Ready {
			return true
		}
	}
	return false
}

// TargetPorts returns the distinct target ports of services (for the echo server).
func TargetPorts(services []Service) []uint16 {
	seen := map[uint16]bool{}
	var out []uint16
	for _, s := range services {
		for _, p := range s.Ports {
			if !seen[p.TargetPort] {
				seen[p.TargetPort] = true
				out = append(out, p.TargetPort)
			}
		}
	}
	return out
}
