//go:build linux

// Package traffic is the kernel-side half of the workload: the backend echo
// server and the TCP drivers (closed-loop, fairness, first picks,
// long-lived connections) that run in the testbed's pod namespaces against
// the services of package workload.
package traffic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"

	"github.com/proxybench/proxybench/internal/lib/nspool"
	"github.com/proxybench/proxybench/topology"
)

// EchoServer answers every TCP connection on its ports with the local
// address it was reached on and the peer address it saw ("ip:port
// peer-ip:port\n": the client's own, or the node's when a mode
// masqueraded the connection), then waits for the client to
// close. Run in the backend host namespace, whose AnyIP route makes it
// answer for every pod IP, it tells the driver which endpoint a
// connection landed on. It never closes first, so no TIME_WAIT piles up on
// its side; the driver closes with RST.
type EchoServer struct {
	listeners []net.Listener
	udp       []*UDPEcho
	wg        sync.WaitGroup
}

// AddUDP also answers UDP datagrams on ports inside every namespace of
// nss (a UDPEcho, stopped by Close), for UDP ServicePorts.
func (s *EchoServer) AddUDP(nss []*topology.Netns, ports []uint16) error {
	if len(ports) == 0 {
		return nil
	}
	u, err := StartUDPEchoIn(nss, ports)
	if err != nil {
		return err
	}
	s.udp = append(s.udp, u)
	return nil
}

// StartEcho listens on 0.0.0.0:port for each port inside ns. Stop it with Close.
func StartEcho(ns *topology.Netns, ports []uint16) (*EchoServer, error) {
	return StartEchoIn([]*topology.Netns{ns}, ports)
}

// StartEchoIn listens on 0.0.0.0:port for each port inside every namespace
// of nss (the isolated pods: one listener per pod and port). Stop it with Close.
func StartEchoIn(nss []*topology.Netns, ports []uint16) (*EchoServer, error) {
	s := &EchoServer{}
	for _, ns := range nss {
		if err := s.listen(ns, ports); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// StartEchoHere listens on 0.0.0.0:port for each port in this process's
// own network namespace: the echo server of the cluster engine's backend
// pool pods (proxybench echo), which answer with their pod IP. Stop it
// with Close.
func StartEchoHere(ports []uint16) (*EchoServer, error) {
	s := &EchoServer{}
	if err := s.listenIn(nspool.Here, "this process's", "tcp4", ports); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *EchoServer) listen(ns *topology.Netns, ports []uint16) error {
	return s.listenIn(ns, strconv.Quote(ns.Name), "tcp4", ports)
}

// AddIPv6 also listens on [::]:port (IPv6 only: IPV6_V6ONLY, beside the
// IPv4 listener) for each port inside every namespace of nss, for a
// dual-stack testbed (topology.Testbed.AddIPv6); its line carries the
// IPv6 addresses ("[2001:2::c613:1]:8080 [2001:2::c613:ff06]:40000").
func (s *EchoServer) AddIPv6(nss []*topology.Netns, ports []uint16) error {
	for _, ns := range nss {
		if err := s.listenIn(ns, strconv.Quote(ns.Name), "tcp6", ports); err != nil {
			return err
		}
	}
	return nil
}

// listenIn listens on each port inside ns ("tcp4": 0.0.0.0, "tcp6":
// [::] IPv6 only), named where in errors.
func (s *EchoServer) listenIn(ns nspool.Namespace, where, network string, ports []uint16) error {
	host := "0.0.0.0"
	if network == "tcp6" {
		host = "::"
	}
	for _, p := range ports {
		var l net.Listener
		err := ns.Do(func() error {
			var err error
			lc := net.ListenConfig{}
			l, err = lc.Listen(context.Background(), network, net.JoinHostPort(host, strconv.Itoa(int(p))))
			return err
		})
		if err != nil {
			return fmt.Errorf("echo server on port %d in netns %s: %w", p, where, err)
		}
		s.listeners = append(s.listeners, l)
		s.wg.Add(1)
		go s.serve(l)
	}
	return nil
}

func (s *EchoServer) serve(l net.Listener) {
	defer s.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		go func() {
			defer c.Close()
			if _, err := io.WriteString(c, c.LocalAddr().String()+" "+c.RemoteAddr().String()+"\n"); err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, c) // until the client's RST or FIN
		}()
	}
}

// Close stops every listener (and UDP echo) and waits for their loops to end.
func (s *EchoServer) Close() {
	for _, l := range s.listeners {
		l.Close()
	}
	for _, u := range s.udp {
		u.Close()
	}
	s.wg.Wait()
}
