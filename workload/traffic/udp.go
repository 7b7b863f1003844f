//go:build linux

package traffic

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/proxybench/proxybench/topology"
)

// UDPEcho answers every UDP datagram on its ports with the local address
// it was sent to followed by the datagram's text ("ip:port <text>\n"),
// sent from that address (IP_PKTINFO), so a
// reply passes the node's conntrack reverse NAT and tells the client which
// endpoint answered. Run in the backend host namespace (AnyIP) or in each
// isolated pod, like EchoServer.
type UDPEcho struct {
	conns []*net.UDPConn
	wg    sync.WaitGroup
}

// StartUDPEchoIn listens on 0.0.0.0:port (UDP) for each port inside every
// namespace of nss. Stop it with Close.
func StartUDPEchoIn(nss []*topology.Netns, ports []uint16) (*UDPEcho, error) {
	s := &UDPEcho{}
	for _, ns := range nss {
		for _, p := range ports {
			var c *net.UDPConn
			err := ns.Do(func() error {
				var err error
				c, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4zero, Port: int(p)})
				return err
			})
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("UDP echo on port %d in netns %q: %w", p, ns.Name, err)
			}
			pc := ipv4.NewPacketConn(c)
			if err := pc.SetControlMessage(ipv4.FlagDst, true); err != nil {
				c.Close()
				s.Close()
				return nil, fmt.Errorf("UDP echo on port %d: IP_PKTINFO: %w", p, err)
			}
			s.conns = append(s.conns, c)
			s.wg.Add(1)
			go s.serve(pc, p)
		}
	}
	return s, nil
}

func (s *UDPEcho) serve(pc *ipv4.PacketConn, port uint16) {
	defer s.wg.Done()
	buf := make([]byte, 2048)
	for {
		n, cm, src, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if cm == nil || cm.Dst == nil {
			continue
		}
		reply := net.JoinHostPort(cm.Dst.String(), strconv.Itoa(int(port))) + " " + strings.TrimSpace(string(buf[:n])) + "\n"
		_, _ = pc.WriteTo([]byte(reply), &ipv4.ControlMessage{Src: cm.Dst}, src)
	}
}

// Close stops every socket and waits for the loops to end.
func (s *UDPEcho) Close() {
	for _, c := range s.conns {
		c.Close()
	}
	s.wg.Wait()
}

// DialUDP opens a UDP socket inside ns from source port srcPort (0: the
// kernel picks an ephemeral port) connected to dst. A fixed source port
// keeps every datagram in one conntrack entry, as a DNS client that
// reuses its socket does (kubernetes#48370).
func DialUDP(ns *topology.Netns, srcPort uint16, dst netip.AddrPort) (*net.UDPConn, error) {
	var c *net.UDPConn
	err := ns.Do(func() error {
		d := net.Dialer{LocalAddr: &net.UDPAddr{Port: int(srcPort)}}
		conn, err := d.DialContext(context.Background(), "udp4", dst.String())
		if err != nil {
			return err
		}
		c = conn.(*net.UDPConn)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("UDP socket in netns %q from port %d to %s: %w", ns.Name, srcPort, dst, err)
	}
	return c, nil
}

// UDPExchange sends one datagram on c and waits up to timeout for the
// answer of a UDPEcho: it returns the endpoint address that answered and
// the round-trip time. Errors: a timeout (no answer: dropped or
// black-holed), ECONNREFUSED (an ICMP port unreachable, for example a
// mode's REJECT of a service without endpoints), or a malformed answer.
// Answers to earlier, timed-out datagrams are skipped by their sequence.
func UDPExchange(c *net.UDPConn, seq uint64, timeout time.Duration) (netip.AddrPort, time.Duration, error) {
	start := time.Now()
	deadline := start.Add(timeout)
	if err := c.SetDeadline(deadline); err != nil {
		return netip.AddrPort{}, 0, err
	}
	if _, err := c.Write([]byte(strconv.FormatUint(seq, 10) + "\n")); err != nil {
		return netip.AddrPort{}, 0, err
	}
	want := strconv.FormatUint(seq, 10)
	buf := make([]byte, 256)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return netip.AddrPort{}, time.Since(start), err
		}
		rtt := time.Since(start)
		addr, got, _ := strings.Cut(strings.TrimSpace(string(buf[:n])), " ")
		if got != want {
			continue // the answer to an earlier, timed-out datagram
		}
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			return netip.AddrPort{}, rtt, fmt.Errorf("bad UDP echo %q: %w", buf[:n], err)
		}
		return ap, rtt, nil
	}
}

// Alive reports whether the TCP connection fd (from OpenEcho) is still
// open: no reset, hang-up or error pending (a poll that reads nothing).
func Alive(fd int) bool { return alive(fd) }

// errUDPTimeout is the error of a UDP exchange that got no answer in
// time (ErrorKind "timeout").
var errUDPTimeout = fmt.Errorf("no answer: %w", unix.ETIMEDOUT)

// ExchangeUDP makes one UDP request/response exchange from the calling
// thread, which must be locked into a client namespace: a new UDP socket
// bound to src (zero Addr: any address; port 0: the kernel picks an
// ephemeral one) and connected to dst:port sends one datagram (the text
// tag) and waits up to timeout for the UDPEcho answer naming the
// endpoint it reached, then closes. latency is from the send to the
// answer read (one round trip, as a TCP connect's SYN to SYN-ACK); start
// is when the send began. Errors: a timeout (no answer: dropped or
// black-holed; ETIMEDOUT), ECONNREFUSED (an ICMP port unreachable, such
// as a mode's REJECT of a service without endpoints), a bind error
// (EADDRINUSE when the fixed source port is taken), or a malformed
// answer. Answers to an earlier exchange of the same 5-tuple (a late
// echo after a timeout) are skipped by their tag.
func ExchangeUDP(src netip.AddrPort, dst netip.Addr, port uint16, tag string, timeout time.Duration) (landed netip.AddrPort, start time.Time, latency time.Duration, err error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return landed, time.Now(), 0, fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	if src.Port() != 0 || src.Addr().IsValid() {
		// A fixed port is rebound right after the previous exchange
		// closed it; SO_REUSEADDR keeps a socket still closing from
		// refusing the bind.
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
			return landed, time.Now(), 0, fmt.Errorf("setsockopt SO_REUSEADDR: %w", err)
		}
		sa := &unix.SockaddrInet4{Port: int(src.Port())}
		if src.Addr().IsValid() {
			sa.Addr = src.Addr().As4()
		}
		if err := unix.Bind(fd, sa); err != nil {
			return landed, time.Now(), 0, fmt.Errorf("bind %s: %w", src, err)
		}
	}
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: int(port), Addr: dst.As4()}); err != nil {
		return landed, time.Now(), 0, fmt.Errorf("connect udp %s:%d: %w", dst, port, err)
	}
	msg := []byte(tag + "\n")
	start = time.Now()
	deadline := start.Add(timeout)
	for {
		_, err = unix.Write(fd, msg)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return landed, start, time.Since(start), fmt.Errorf("send udp %s:%d: %w", dst, port, err)
	}
	var buf [256]byte
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return landed, start, time.Since(start), fmt.Errorf("udp %s:%d: %w", dst, port, errUDPTimeout)
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, int((left+time.Millisecond-1)/time.Millisecond))
		if err == unix.EINTR || n == 0 {
			continue
		}
		if err != nil {
			return landed, start, time.Since(start), fmt.Errorf("poll udp %s:%d: %w", dst, port, err)
		}
		m, err := unix.Read(fd, buf[:])
		latency = time.Since(start)
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err != nil {
			return landed, start, latency, fmt.Errorf("udp %s:%d: %w", dst, port, err)
		}
		addr, got, _ := strings.Cut(strings.TrimSpace(string(buf[:m])), " ")
		if got != tag {
			continue // the answer to an earlier exchange of this 5-tuple
		}
		landed, err = netip.ParseAddrPort(addr)
		if err != nil {
			return landed, start, latency, fmt.Errorf("bad UDP echo %q from %s:%d", buf[:m], dst, port)
		}
		return landed, start, latency, nil
	}
}

// EchoVia makes one exchange with the echo servers over protocol ("TCP":
// DialEchoFrom, a connection from src's address, closed with RST; "UDP":
// ExchangeUDP from src with tag) from the calling, namespace-locked
// thread.
func EchoVia(protocol string, src netip.AddrPort, dst netip.Addr, port uint16, tag string, timeout time.Duration) (landed netip.AddrPort, start time.Time, latency time.Duration, err error) {
	switch protocol {
	case "UDP":
		return ExchangeUDP(src, dst, port, tag, timeout)
	case "TCP", "":
		return DialEchoFrom(src.Addr(), dst, port, timeout)
	}
	return landed, time.Now(), 0, fmt.Errorf("%s:%d: the driver sends TCP and UDP, not %s", dst, port, protocol)
}
