//go:build linux

package kerneltime

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf/btf"
)

// Offsets are the byte offsets of the kernel fields the programs read,
// from the running kernel's BTF (/sys/kernel/btf/vmlinux), so one binary
// reads every kernel's layout.
type Offsets struct {
	SkbDev      uint32 // struct sk_buff, dev (struct net_device *)
	SkbData     uint32 // struct sk_buff, data (unsigned char *: the network header at netif_receive_skb)
	SkbProtocol uint32 // struct sk_buff, protocol (__be16 ethertype)
	DevNet      uint32 // struct net_device, nd_net (possible_net_t: struct net *)
	DevIfindex  uint32 // struct net_device, ifindex (int)
	NetInum     uint32 // struct net, ns.inum (unsigned int: the nsfs inode number)
	FlowIif     uint32 // struct flowi4, __fl_common.flowic_iif (int: flowi4_iif)
	FlowDaddr   uint32 // struct flowi4, daddr (__be32)
}

// errNoBTF: the kernel exposes no BTF (CONFIG_DEBUG_INFO_BTF unset, or
// /sys/kernel/btf/vmlinux absent as in a user-mode-linux guest).
var errNoBTF = errors.New("no kernel BTF")

// loadKernelSpec is the running kernel's BTF (a seam for tests).
var loadKernelSpec = btf.LoadKernelSpec

// offsetsCache holds the running kernel's Offsets once read: parsing
// vmlinux's BTF takes ~70 ms, and the kernel does not change under a
// process.
var offsetsCache struct {
	sync.Mutex
	ok  bool
	off Offsets
}

// ReadOffsets reads Offsets from the running kernel's BTF (once per
// process; a failure is not kept). Errors name the type or member that is
// missing.
func ReadOffsets() (Offsets, error) {
	offsetsCache.Lock()
	defer offsetsCache.Unlock()
	if offsetsCache.ok {
		return offsetsCache.off, nil
	}
	spec, err := loadKernelSpec()
	if err != nil {
		return Offsets{}, fmt.Errorf("%w: %v", errNoBTF, err)
	}
	o, err := OffsetsFrom(spec)
	if err == nil {
		offsetsCache.ok, offsetsCache.off = true, o
	}
	return o, err
}

// OffsetsFrom reads Offsets from a BTF spec.
func OffsetsFrom(spec *btf.Spec) (Offsets, error) {
	var o Offsets
	fields := []struct {
		typ  string
		path []string
		dst  *uint32
	}{
		{"sk_buff", []string{"dev"}, &o.SkbDev},
		{"sk_buff", []string{"data"}, &o.SkbData},
		{"sk_buff", []string{"protocol"}, &o.SkbProtocol},
		{"net_device", []string{"nd_net", "net"}, &o.DevNet},
		{"net_device", []string{"ifindex"}, &o.DevIfindex},
		{"net", []string{"ns", "inum"}, &o.NetInum},
		{"flowi4", []string{"__fl_common", "flowic_iif"}, &o.FlowIif},
		{"flowi4", []string{"daddr"}, &o.FlowDaddr},
	}
	for _, f := range fields {
		var st *btf.Struct
		if err := spec.TypeByName(f.typ, &st); err != nil {
			return o, fmt.Errorf("BTF: struct %s: %w", f.typ, err)
		}
		off, err := memberOffset(st, f.path)
		if err != nil {
			return o, fmt.Errorf("BTF: struct %s: %w", f.typ, err)
		}
		*f.dst = off
	}
	return o, nil
}

// memberOffset is the byte offset of the member path (each name looked
// for in the struct or union before it, through anonymous members, which
// is how sk_buff's unions and struct_group()s nest their fields).
func memberOffset(t btf.Type, path []string) (uint32, error) {
	var total uint32
	for _, name := range path {
		off, mt, ok := findMember(t, name)
		if !ok {
			return 0, fmt.Errorf("no member %q", name)
		}
		total += off
		t = mt
	}
	return total, nil
}

// findMember finds name among t's members, descending into anonymous
// structs and unions; it returns the byte offset and the member's type
// with typedefs and qualifiers stripped.
func findMember(t btf.Type, name string) (uint32, btf.Type, bool) {
	var members []btf.Member
	switch c := btf.UnderlyingType(t).(type) {
	case *btf.Struct:
		members = c.Members
	case *btf.Union:
		members = c.Members
	default:
		return 0, nil, false
	}
	for _, m := range members {
		if m.Name == name {
			if m.BitfieldSize != 0 {
				return 0, nil, false
			}
			return m.Offset.Bytes(), btf.UnderlyingType(m.Type), true
		}
	}
	for _, m := range members {
		if m.Name != "" {
			continue
		}
		if off, mt, ok := findMember(m.Type, name); ok {
			return m.Offset.Bytes() + off, mt, true
		}
	}
	return 0, nil, false
}
