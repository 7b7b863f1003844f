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
