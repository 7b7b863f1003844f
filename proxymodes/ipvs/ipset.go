//go:build linux

package ipvs

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ipset's netlink protocol (include/uapi/linux/netfilter/ipset/ip_set.h,
// net/netfilter/ipset/ip_set_core.c): nfnetlink subsystem 6.
const (
	nfnlSubsysIPSet = 6
	ipsetCmdAdd     = 9
	ipsetCmdDel     = 10
	ipsetProtocol   = 6 // IPSET_PROTOCOL_MIN: every kernel since 3.x accepts it

	ipsetAttrProtocol = 1
	ipsetAttrSetName  = 2
	ipsetAttrData     = 7
	ipsetAttrADT      = 8
	ipsetAttrLineno   = 9

	ipsetAttrIP     = 1
	ipsetAttrPort   = 4
	ipsetAttrProto  = 7
	ipsetAttrIPAddr = 1 // IPSET_ATTR_IPADDR_IPV4

	nlaFNested    = 0x8000 // NLA_F_NESTED: ipset requires it
	nlaFByteOrder = 0x4000 // NLA_F_NET_BYTEORDER: ipset requires it on addresses and ports

	// ipsetPerMsg bounds the entries of one IPSET_ATTR_ADT list (32 bytes
	// each; a netlink attribute holds at most 64 KiB).
	ipsetPerMsg = 1000
)

// setMember is one hash:ip,port member.
type setMember struct {
	ip    netip.Addr
	proto uint8
	port  uint16
}

// parseSetEntry parses "198.18.0.1,tcp:80" (setEntry's form).
func parseSetEntry(s string) (setMember, error) {
	ip, pp, ok1 := strings.Cut(s, ",")
	proto, port, ok2 := strings.Cut(pp, ":")
	a, err1 := netip.ParseAddr(ip)
	n, err2 := strconv.ParseUint(port, 10, 16)
	m := setMember{ip: a, port: uint16(n)}
	switch proto {
	case "tcp":
		m.proto = unix.IPPROTO_TCP
	case "udp":
		m.proto = unix.IPPROTO_UDP
	default:
		ok2 = false
	}
	if !ok1 || !ok2 || err1 != nil || err2 != nil || !a.Is4() {
		return setMember{}, fmt.Errorf("ipvs: bad ipset entry %q", s)
	}
	return m, nil
}

// ipsetNetlink adds and deletes KUBE-CLUSTER-IP members over netlink, up
// to ipsetPerMsg members per IPSET_CMD_ADD/DEL message (one IPSET_ATTR_ADT
// list), several messages per sendmsg: what `ipset restore` sends one
// round trip per line.
type ipsetNetlink struct {
	b *batchSocket
}

func openIPSetNetlink(ns netns.NsHandle) (*ipsetNetlink, error) {
	b, err := newBatchSocket(ns, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("ipvs: open nfnetlink socket: %w", err)
	}
	return &ipsetNetlink{b: b}, nil
}

func (s *ipsetNetlink) close() { s.b.close() }

// change sends add (or del) of entries to set. Adding a member that exists
// or deleting one that does not is not an error (ipset -exist). It
// returns the bytes sent.
func (s *ipsetNetlink) change(set string, del bool, entries []string) (int, error) {
	members := make([]setMember, len(entries))
	for i, e := range entries {
		m, err := parseSetEntry(e)
		if err != nil {
			return 0, err
		}
		members[i] = m
	}
	cmd := uint16(ipsetCmdAdd)
	if del {
		cmd = ipsetCmdDel
	}
	msgs := (len(members) + ipsetPerMsg - 1) / ipsetPerMsg
	sent, failed, err := s.b.send(msgs, func(buf []byte, i int) []byte {
		end := min((i+1)*ipsetPerMsg, len(members))
		return appendIPSetMsg(buf, nfnlSubsysIPSet<<8|cmd, set, members[i*ipsetPerMsg:end])
	})
	if err != nil {
		verb := "add"
		if del {
			verb = "del"
		}
		if failed >= 0 {
			return sent, fmt.Errorf("ipvs: ipset %s %s of entries %d-%d: %w", verb, set, failed*ipsetPerMsg, min((failed+1)*ipsetPerMsg, len(members))-1, ipsetError(err))
		}
		return sent, fmt.Errorf("ipvs: ipset %s %s: %w", verb, set, err)
	}
	return sent, nil
}

// ipsetError names ipset's own error codes (IPSET_ERR_PRIVATE + n).
func ipsetError(err error) error {
	if e, ok := err.(unix.Errno); ok && e >= 4096 {
		return fmt.Errorf("ipset error %d (IPSET_ERR_PRIVATE+%d)", int(e), int(e)-4096)
	}
	return err
}

// appendIPSetMsg appends one ADD/DEL request for members: nfgenmsg, then
// protocol, set name, line number and the ADT list of DATA {IP {IPADDR_IPV4}, PORT,
// PROTO}. Without NLM_F_EXCL the kernel ignores existing (or, on delete,
// missing) members.
func appendIPSetMsg(buf []byte, typ uint16, set string, members []setMember) []byte {
	off := len(buf)
	buf = appendHdr(buf, typ, 0)
	buf = append(buf, unix.AF_INET, 0, 0, 0) // nfgenmsg: family, version 0, res_id 0
	buf = appendAttr(buf, ipsetAttrProtocol, []byte{ipsetProtocol})
	buf = appendAttr(buf, ipsetAttrSetName, append([]byte(set), 0))
	// The kernel wants a line number with an ADT list (ip_set_uadd); it
	// echoes it only for errors of range adds, which these are not.
	buf = appendAttr(buf, ipsetAttrLineno, u32(0))
	buf, adt := beginNested(buf, ipsetAttrADT|nlaFNested)
	for _, m := range members {
		var data, ip int
		buf, data = beginNested(buf, ipsetAttrData|nlaFNested)
		buf, ip = beginNested(buf, ipsetAttrIP|nlaFNested)
		a := m.ip.As4()
		buf = appendAttr(buf, ipsetAttrIPAddr|nlaFByteOrder, a[:])
		buf = endNested(buf, ip)
		buf = appendAttr(buf, ipsetAttrPort|nlaFByteOrder, binary.BigEndian.AppendUint16(nil, m.port))
		buf = appendAttr(buf, ipsetAttrProto, []byte{m.proto})
		buf = endNested(buf, data)
	}
	buf = endNested(buf, adt)
	return endMsg(buf, off)
}
