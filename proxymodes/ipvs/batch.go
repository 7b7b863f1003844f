//go:build linux

package ipvs

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/moby/ipvs"
	"github.com/sirupsen/logrus"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// batchBytes bounds one sendmsg of batched requests (the kernel refuses a
// netlink message larger than the socket's send buffer, 208 KiB by
// default).
const batchBytes = 64 << 10

// batchSocket sends many netlink requests per sendmsg(2). Every request
// but the last of a batch goes without NLM_F_ACK, so the kernel
// (netlink_rcv_skb) answers only the failures and the last request: one
// sendmsg and about one recvmsg per batch instead of one round trip per
// object. The kernel processes every request of a batch even after one
// fails.
type batchSocket struct {
	sock *nl.NetlinkSocket
	seq  uint32
	buf  []byte
}

func newBatchSocket(ns netns.NsHandle, proto int) (*batchSocket, error) {
	s, err := nl.GetNetlinkSocketAt(ns, netns.None(), proto)
	if err != nil {
		return nil, err
	}
	tv := unix.NsecToTimeval((30 * time.Second).Nanoseconds())
	if err := s.SetReceiveTimeout(&tv); err != nil {
		s.Close()
		return nil, err
	}
	// Room for the error replies of a whole batch.
	_ = s.SetReceiveBufferSize(4<<20, true)
	return &batchSocket{sock: s, buf: make([]byte, 0, batchBytes+4096)}, nil
}

func (b *batchSocket) close() { b.sock.Close() }

// send builds n requests with appendMsg (which appends one whole netlink
// message, header included, to buf) and sends them in batches. It stops
// after the batch holding the first failure and returns the bytes sent,
// the index of the first failed request (-1 if none) and its error.
func (b *batchSocket) send(n int, appendMsg func(buf []byte, i int) []byte) (sent, failed int, err error) {
	failed = -1
	for i := 0; i < n; {
		buf := b.buf[:0]
		start, first := i, b.seq+1
		last := 0
		for i < n && len(buf) < batchBytes {
			last = len(buf)
			buf = appendMsg(buf, i)
			b.seq++
			binary.NativeEndian.PutUint32(buf[last+8:], b.seq)
			i++
		}
		flags := binary.NativeEndian.Uint16(buf[last+6:])
		binary.NativeEndian.PutUint16(buf[last+6:], flags|unix.NLM_F_ACK)
		if err := unix.Sendto(b.sock.GetFd(), buf, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			return sent, start, fmt.Errorf("netlink sendmsg of %d requests: %w", i-start, err)
		}
		sent += len(buf)
		for done := false; !done; {
			msgs, _, rerr := b.sock.Receive()
			if rerr != nil {
				return sent, start, fmt.Errorf("netlink recvmsg: %w", rerr)
			}
			for _, m := range msgs {
				if m.Header.Type != unix.NLMSG_ERROR || m.Header.Seq < first || m.Header.Seq > b.seq {
					continue
				}
				if e := int32(binary.NativeEndian.Uint32(m.Data[0:4])); e != 0 && failed < 0 {
					failed, err = start+int(m.Header.Seq-first), syscall.Errno(-e)
				}
				if m.Header.Seq == b.seq {
					done = true
				}
			}
		}
		if failed >= 0 {
			return sent, failed, err
		}
	}
	return sent, -1, nil
}

// appendHdr appends an nlmsghdr (length patched by endMsg, seq by send).
func appendHdr(buf []byte, typ, flags uint16) []byte {
	var h [16]byte
	binary.NativeEndian.PutUint16(h[4:], typ)
	binary.NativeEndian.PutUint16(h[6:], flags|unix.NLM_F_REQUEST)
	return append(buf, h[:]...)
}

// endMsg patches the length of the message starting at off.
func endMsg(buf []byte, off int) []byte {
	binary.NativeEndian.PutUint32(buf[off:], uint32(len(buf)-off))
	return buf
}

// appendAttr appends one netlink attribute, padded to 4 bytes.
func appendAttr(buf []byte, typ uint16, val []byte) []byte {
	var h [4]byte
	binary.NativeEndian.PutUint16(h[0:], uint16(4+len(val)))
	binary.NativeEndian.PutUint16(h[2:], typ)
	buf = append(append(buf, h[:]...), val...)
	for len(buf)%4 != 0 {
		buf = append(buf, 0)
	}
	return buf
}

func u16(v uint16) []byte { return binary.NativeEndian.AppendUint16(nil, v) }
func u32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }
func be16(v uint16) []byte {
	return binary.BigEndian.AppendUint16(nil, v)
}

// beginNested appends a nested attribute header; endNested patches its length.
func beginNested(buf []byte, typ uint16) ([]byte, int) {
	off := len(buf)
	return appendAttr(buf, typ, nil), off
}

func endNested(buf []byte, off int) []byte {
	binary.NativeEndian.PutUint16(buf[off:], uint16(len(buf)-off))
	return buf
}

// Generic netlink IPVS commands and attributes (include/uapi/linux/ip_vs.h).
const (
	ipvsCmdNewService = 1
	ipvsCmdSetService = 2
	ipvsCmdDelService = 3
	ipvsCmdNewDest    = 5
	ipvsCmdSetDest    = 6
	ipvsCmdDelDest    = 7

	ipvsCmdAttrService = 1
	ipvsCmdAttrDest    = 2

	ipvsSvcAttrAF        = 1
	ipvsSvcAttrProtocol  = 2
	ipvsSvcAttrAddr      = 3
	ipvsSvcAttrPort      = 4
	ipvsSvcAttrFWMark    = 5
	ipvsSvcAttrSchedName = 6
	ipvsSvcAttrFlags     = 7
	ipvsSvcAttrTimeout   = 8
	ipvsSvcAttrNetmask   = 9

	ipvsDestAttrAddr      = 1
	ipvsDestAttrPort      = 2
	ipvsDestAttrFwdMethod = 3
	ipvsDestAttrWeight    = 4
	ipvsDestAttrUThresh   = 5
	ipvsDestAttrLThresh   = 6
)

var opCmds = [...]uint8{ipvsCmdNewService, ipvsCmdSetService, ipvsCmdDelService, ipvsCmdNewDest, ipvsCmdSetDest, ipvsCmdDelDest}

// rawIP is the address as moby/ipvs sends it: 4 bytes for IPv4.
func rawIP(ip net.IP) []byte {
	if v4 := ip.To4(); v4 != nil {
		return v4
	}
	return ip
}

// appendIPVSMsg appends op as the request moby/ipvs would send
// (fillService, fillDestination).
func appendIPVSMsg(buf []byte, family uint16, op Op) []byte {
	off := len(buf)
	buf = appendHdr(buf, family, 0)
	buf = append(buf, opCmds[op.Kind], 1, 0, 0) // genlmsghdr: cmd, version 1
	s := op.Service
	var svc int
	buf, svc = beginNested(buf, ipvsCmdAttrService)
	buf = appendAttr(buf, ipvsSvcAttrAF, u16(s.AddressFamily))
	if s.FWMark != 0 {
		buf = appendAttr(buf, ipvsSvcAttrFWMark, u32(s.FWMark))
	} else {
		buf = appendAttr(buf, ipvsSvcAttrProtocol, u16(s.Protocol))
		buf = appendAttr(buf, ipvsSvcAttrAddr, rawIP(s.Address))
		buf = appendAttr(buf, ipvsSvcAttrPort, be16(s.Port))
	}
	buf = appendAttr(buf, ipvsSvcAttrSchedName, append([]byte(s.SchedName), 0))
	buf = appendAttr(buf, ipvsSvcAttrFlags, append(u32(s.Flags), u32(0xffffffff)...))
	buf = appendAttr(buf, ipvsSvcAttrTimeout, u32(s.Timeout))
	buf = appendAttr(buf, ipvsSvcAttrNetmask, u32(s.Netmask))
	buf = endNested(buf, svc)
	if d := op.Dest; d != nil {
		var dst int
		buf, dst = beginNested(buf, ipvsCmdAttrDest)
		buf = appendAttr(buf, ipvsDestAttrAddr, rawIP(d.Address))
		buf = appendAttr(buf, ipvsDestAttrPort, be16(d.Port))
		buf = appendAttr(buf, ipvsDestAttrFwdMethod, u32(d.ConnectionFlags&ipvs.ConnectionFlagFwdMask))
		buf = appendAttr(buf, ipvsDestAttrWeight, u32(uint32(d.Weight)))
		buf = appendAttr(buf, ipvsDestAttrUThresh, u32(d.UpperThreshold))
		buf = appendAttr(buf, ipvsDestAttrLThresh, u32(d.LowerThreshold))
		buf = endNested(buf, dst)
	}
	return endMsg(buf, off)
}

// BatchHandle is a moby/ipvs handle (reads, per-object calls, SetConfig)
// plus a second generic netlink socket in the same namespace through which
// Apply sends a sync's changes in batches (see batchSocket): the requests
// are byte for byte those moby/ipvs sends, minus NLM_F_ACK on all but the
// last of each batch.
type BatchHandle struct {
	*ipvs.Handle
	b      *batchSocket
	family uint16
}

var (
	_ Handle  = (*BatchHandle)(nil)
	_ Batcher = (*BatchHandle)(nil)
)

// NewBatchHandle opens both sockets in ns. It fails when the kernel has
// no IPVS generic netlink family (no IP_VS).
func NewBatchHandle(ns netns.NsHandle) (*BatchHandle, error) {
	fam, err := netlink.GenlFamilyGet("IPVS")
	if err != nil {
		return nil, fmt.Errorf("generic netlink family IPVS: %w", err)
	}
	h, err := newMobyHandle(ns)
	if err != nil {
		return nil, err
	}
	b, err := newBatchSocket(ns, unix.NETLINK_GENERIC)
	if err != nil {
		h.Close()
		return nil, err
	}
	return &BatchHandle{Handle: h, b: b, family: fam.ID}, nil
}

// Apply sends ops in batches and returns the bytes sent. On failure it
// names the first failed op; ops after it in the same batch were
// processed by the kernel, later batches were not sent.
func (h *BatchHandle) Apply(ops []Op) (int, error) {
	sent, failed, err := h.b.send(len(ops), func(buf []byte, i int) []byte {
		return appendIPVSMsg(buf, h.family, ops[i])
	})
	if err != nil {
		if failed >= 0 && failed < len(ops) {
			return sent, fmt.Errorf("ipvs: %s %s: %w", ops[failed].Kind, describe(ops[failed]), err)
		}
		return sent, fmt.Errorf("ipvs: %w", err)
	}
	return sent, nil
}

// quietOnce lowers logrus (used only by moby/ipvs) to errors before the
// first moby/ipvs handle: moby/ipvs runs `modprobe ip_vs` once per process
// and logs a warning when that fails, as it does wherever the modules are
// not under /lib/modules (the UML guest loads them itself).
var quietOnce sync.Once

// newMobyHandle opens a moby/ipvs handle in ns (moby/ipvs opens a
// namespace by path; /proc/self/fd/N names ours).
func newMobyHandle(ns netns.NsHandle) (*ipvs.Handle, error) {
	quietOnce.Do(func() {
		if logrus.GetLevel() > logrus.ErrorLevel {
			logrus.SetLevel(logrus.ErrorLevel)
		}
	})
	return ipvs.New(fmt.Sprintf("/proc/self/fd/%d", int(ns)))
}

// Close closes both sockets.
func (h *BatchHandle) Close() {
	h.Handle.Close()
	h.b.close()
}

// appendAddrMsg appends an RTM_NEWADDR (create, exclusive) or RTM_DELADDR
// request for a/32 (IPv6: a/128) on link index, as netlink.AddrAdd/AddrDel
// build it.
func appendAddrMsg(buf []byte, typ uint16, index int, a netip.Addr) []byte {
	off := len(buf)
	var flags uint16
	if typ == unix.RTM_NEWADDR {
		flags = unix.NLM_F_CREATE | unix.NLM_F_EXCL
	}
	buf = appendHdr(buf, typ, flags)
	if a.Is6() {
		// IPv6: /128, without flags, as netlink.AddrAdd sends it.
		buf = append(buf, unix.AF_INET6, 128, 0, 0)
		buf = binary.NativeEndian.AppendUint32(buf, uint32(index))
		ip := a.As16()
		buf = appendAttr(buf, unix.IFA_LOCAL, ip[:])
		buf = appendAttr(buf, unix.IFA_ADDRESS, ip[:])
		return endMsg(buf, off)
	}
	buf = append(buf, unix.AF_INET, 32, 0, 0) // ifaddrmsg: family, prefixlen, flags, scope universe
	buf = binary.NativeEndian.AppendUint32(buf, uint32(index))
	ip := a.As4()
	buf = appendAttr(buf, unix.IFA_LOCAL, ip[:])
	buf = appendAttr(buf, unix.IFA_ADDRESS, ip[:])
	return endMsg(buf, off)
}
