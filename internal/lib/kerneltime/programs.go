//go:build linux

package kerneltime

import (
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// The per-CPU state a packet's entry arms and its route lookup closes
// (the value of the "state" per-CPU array, key 0), in bytes:
const (
	stStart   = 0  // u64: bpf_ktime_get_ns at netif_receive_skb; 0 when not armed
	stIfindex = 8  // u32: skb->dev->ifindex of the armed packet
	stDaddr   = 12 // u32: IPv4 destination (network order)
	stSaddr   = 16 // u32: IPv4 source
	stDport   = 20 // u16: TCP destination port (network order)
	stSport   = 22 // u16: TCP source port
	stFlags   = 24 // u8: TCP flags (byte 13 of the TCP header)
	stLost    = 32 // u64: records the ring buffer had no room for
	// With Config.SelfTime, the programs' own run time (ns) and runs,
	// bpf_ktime_get_ns at a program's start to its end:
	stEntryNs = 40 // u64
	stEntryN  = 48 // u64
	stExitNs  = 56 // u64
	stExitN   = 64 // u64
	stateSize = 72
)

// selfStart is the stack slot of a program's start time (SelfTime).
const selfStart = -64

// selfTimed wraps a program's body (which jumps to "exit" to end, with
// R9 the state or 0) so that it adds its run time to the state's
// nsOff and runs to nOff: the body's first instruction is preceded by
// R9 = 0 and followed, once the state is in R9, by the start time's
// store (the body calls mark at that point).
func selfTimed(nsOff, nOff int16) (prologue, mark, epilogue asm.Instructions) {
	prologue = asm.Instructions{asm.Mov.Imm(asm.R9, 0)}
	mark = asm.Instructions{
		asm.FnKtimeGetNs.Call(),
		asm.StoreMem(asm.RFP, selfStart, asm.R0, asm.DWord),
	}
	epilogue = asm.Instructions{
		asm.JEq.Imm(asm.R9, 0, "ret").WithSymbol("exit"),
		asm.FnKtimeGetNs.Call(),
		asm.LoadMem(asm.R1, asm.RFP, selfStart, asm.DWord),
		asm.Sub.Reg(asm.R0, asm.R1),
		asm.LoadMem(asm.R2, asm.R9, nsOff, asm.DWord),
		asm.Add.Reg(asm.R2, asm.R0),
		asm.StoreMem(asm.R9, nsOff, asm.R2, asm.DWord),
		asm.LoadMem(asm.R2, asm.R9, nOff, asm.DWord),
		asm.Add.Imm(asm.R2, 1),
		asm.StoreMem(asm.R9, nOff, asm.R2, asm.DWord),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("ret"),
		asm.Return(),
	}
	return prologue, mark, epilogue
}

// withSelfTime makes p (ending in the "exit" label's R0 = 0, return,
// with the state in R9 after its instruction at mark) self-timed.
func withSelfTime(p asm.Instructions, mark int, nsOff, nOff int16) asm.Instructions {
	pro, mk, epi := selfTimed(nsOff, nOff)
	body := append(asm.Instructions(nil), p[:len(p)-2]...) // without "exit": R0 = 0, return
	out := append(asm.Instructions(nil), pro...)
	out = append(out, body[:mark+1]...)
	out = append(out, mk...)
	out = append(out, body[mark+1:]...)
	return append(out, epi...)
}

// A record in the ring buffer (recordSize bytes, little-endian host
// order but for the addresses and ports, which are in network order):
const (
	recStart   = 0  // u64: start, CLOCK_MONOTONIC ns
	recNs      = 8  // u32: netif_receive_skb to fib_table_lookup, ns
	recDaddr   = 12 // u32: destination as the packet arrived (the ClusterIP)
	recRouted  = 16 // u32: destination the route lookup was for (after DNAT: the endpoint)
	recSaddr   = 20 // u32
	recDport   = 24 // u16
	recSport   = 26 // u16
	recFlags   = 28 // u8
	recordSize = 32
)

// brNoWakeup is BPF_RB_NO_WAKEUP: bpf_ringbuf_output wakes no reader;
// the Timer drains the ring itself (Drain), so a packet costs no wakeup.
const brNoWakeup = 1

// ethPIPLE is htons(ETH_P_IP) as a little-endian load of the __be16
// skb->protocol reads it.
const ethPIPLE = 0x0008

// fragMaskLE is htons(IP_MF | IP_OFFSET) (0x3fff) read little-endian:
// a fragment's later parts carry no TCP header.
const fragMaskLE = 0xff3f

// entryProgram is the raw tracepoint program on netif_receive_skb
// (args[0]: struct sk_buff *, in __netif_receive_skb_core of
// net/core/dev.c, where skb->data is the network header): it disarms
// this CPU's state, and for an IPv4 TCP packet (first fragment) received
// by a device of a namespace in the netns map it records the device, the
// addresses, ports and TCP flags and arms the state with the time.
func entryProgram(o Offsets, state, netns *ebpf.Map) asm.Instructions {
	read := func(dstOff int16, size int32, base asm.Register, off uint32) asm.Instructions {
		return asm.Instructions{
			asm.Mov.Reg(asm.R1, asm.RFP),
			asm.Add.Imm(asm.R1, int32(dstOff)),
			asm.Mov.Imm(asm.R2, size),
			asm.Mov.Reg(asm.R3, base),
			asm.Add.Imm(asm.R3, int32(off)),
			asm.FnProbeReadKernel.Call(),
			asm.JNE.Imm(asm.R0, 0, "exit"),
		}
	}
	p := entryState(state)
	p = append(p, read(-16, 8, asm.R7, o.SkbDev)...)
	p = append(p,
		asm.LoadMem(asm.R8, asm.RFP, -16, asm.DWord), // dev
		asm.JEq.Imm(asm.R8, 0, "exit"),
	)
	p = append(p, read(-16, 8, asm.R8, o.DevNet)...)
	p = append(p,
		asm.LoadMem(asm.R3, asm.RFP, -16, asm.DWord), // struct net *
		asm.JEq.Imm(asm.R3, 0, "exit"),
		asm.Add.Imm(asm.R3, int32(o.NetInum)),
		asm.Mov.Reg(asm.R1, asm.RFP),
		asm.Add.Imm(asm.R1, -8),
		asm.Mov.Imm(asm.R2, 4),
		asm.FnProbeReadKernel.Call(),
		asm.JNE.Imm(asm.R0, 0, "exit"),
		asm.LoadMapPtr(asm.R1, netns.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "exit"),
	)
	p = append(p, read(-16, 2, asm.R7, o.SkbProtocol)...)
	p = append(p,
		asm.LoadMem(asm.R1, asm.RFP, -16, asm.Half),
		asm.JNE.Imm(asm.R1, ethPIPLE, "exit"),
	)
	p = append(p, read(-16, 4, asm.R8, o.DevIfindex)...)
	p = append(p,
		asm.LoadMem(asm.R1, asm.RFP, -16, asm.Word),
		asm.StoreMem(asm.R9, stIfindex, asm.R1, asm.Word),
	)
	p = append(p, read(-16, 8, asm.R7, o.SkbData)...)
	p = append(p, asm.LoadMem(asm.R7, asm.RFP, -16, asm.DWord)) // the IPv4 header
	p = append(p, read(-40, 20, asm.R7, 0)...)
	p = append(p, ipv4Header(-40)...)
	// the TCP header's first 14 bytes, at data + ihl*4
	p = append(p, tcpHeader(-56)...)
	p = append(p, armState(-56)...)
	return p
}

// exitProgram is the raw tracepoint program on fib_table_lookup
// (args: u32 tb_id, const struct flowi4 *flp, const struct
// fib_nh_common *nhc, int err; in fib_table_lookup of
// net/ipv4/fib_trie.c): when this CPU's state is armed and the lookup is
// an input route lookup on the armed packet's device (flowi4_iif, which
// ip_route_input_slow sets to the device's ifindex; the lookups of
// addrtype matches or nft's fib expression use another), it writes the
// record to the ring buffer and disarms the state. That lookup is the
// first thing ip_rcv_finish does after PREROUTING returns, so the
// interval is ip_rcv, the PREROUTING hooks (conntrack, the nat rule
// walk) and the route lookup's start.
func exitProgram(o Offsets, state, ring *ebpf.Map) asm.Instructions {
	p := append(exitState(state),
		asm.Mov.Reg(asm.R1, asm.RFP),
		asm.Add.Imm(asm.R1, -16),
		asm.Mov.Imm(asm.R2, 4),
		asm.Mov.Reg(asm.R3, asm.R8),
		asm.Add.Imm(asm.R3, int32(o.FlowIif)),
		asm.FnProbeReadKernel.Call(),
		asm.JNE.Imm(asm.R0, 0, "exit"),
		asm.LoadMem(asm.R1, asm.RFP, -16, asm.Word),
		asm.LoadMem(asm.R2, asm.R9, stIfindex, asm.Word),
		asm.JNE.Reg(asm.R1, asm.R2, "exit"),
		asm.Mov.Reg(asm.R1, asm.RFP),
		asm.Add.Imm(asm.R1, -16),
		asm.Mov.Imm(asm.R2, 4),
		asm.Mov.Reg(asm.R3, asm.R8),
		asm.Add.Imm(asm.R3, int32(o.FlowDaddr)),
		asm.FnProbeReadKernel.Call(), // zeroes the buffer on failure
	)
	p = append(p, timeRecord()...)
	return append(append(p,
		asm.LoadMem(asm.R1, asm.RFP, -16, asm.Word),
		asm.StoreMem(asm.RFP, -48+recRouted, asm.R1, asm.Word),
	), emitRecord(ring)...)
}

// stateMark is the index of the instruction that puts the state in R9
// (mov r9, r0 after the state's lookup).
func stateMark(p asm.Instructions) int {
	want := asm.Mov.Reg(asm.R9, asm.R0)
	for i, ins := range p {
		if ins.OpCode == want.OpCode && ins.Dst == want.Dst && ins.Src == want.Src {
			return i
		}
	}
	panic("kerneltime: no state load in the program")
}

// maxInlineNetns is the most namespaces the tp_btf entry program compares
// inline (more go through the netns map).
const maxInlineNetns = 16

// entryProgramBTF is entryProgram as a BTF-typed raw tracepoint program
// (tp_btf): the skb, device and namespace fields are read with plain
// loads, which the verifier checks against the kernel's BTF and the JIT
// guards (BPF_PROBE_MEM), instead of bpf_probe_read_kernel calls, and the
// namespace is compared inline, so a packet of another namespace costs a
// few loads; the headers (skb->data is not a BTF-typed pointer) are read
// with one bpf_probe_read_kernel of 40 bytes (a second for IP options).
func entryProgramBTF(o Offsets, state, netns *ebpf.Map, inums []uint32) asm.Instructions {
	p := append(entryState(state),
		asm.LoadMem(asm.R8, asm.R7, int16(o.SkbDev), asm.DWord),
		asm.JEq.Imm(asm.R8, 0, "exit"),
		asm.LoadMem(asm.R1, asm.R8, int16(o.DevNet), asm.DWord),
		asm.JEq.Imm(asm.R1, 0, "exit"),
		asm.LoadMem(asm.R1, asm.R1, int16(o.NetInum), asm.Word),
	)
	if len(inums) <= maxInlineNetns {
		for _, ino := range inums {
			p = append(p, asm.JEq.Imm32(asm.R1, int32(ino), "ours")) // inums are u32
		}
		p = append(p, asm.Ja.Label("exit"))
	} else {
		p = append(p,
			asm.StoreMem(asm.RFP, -8, asm.R1, asm.Word),
			asm.LoadMapPtr(asm.R1, netns.FD()),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -8),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "exit"),
		)
	}
	p = append(p,
		asm.LoadMem(asm.R1, asm.R7, int16(o.SkbProtocol), asm.Half).WithSymbol("ours"),
		asm.JNE.Imm(asm.R1, ethPIPLE, "exit"),
		asm.LoadMem(asm.R1, asm.R8, int16(o.DevIfindex), asm.Word),
		asm.StoreMem(asm.R9, stIfindex, asm.R1, asm.Word),
		asm.LoadMem(asm.R7, asm.R7, int16(o.SkbData), asm.DWord), // the IPv4 header
		asm.Mov.Reg(asm.R1, asm.RFP),
		asm.Add.Imm(asm.R1, -56),
		asm.Mov.Imm(asm.R2, 40), // IPv4 without options and 20 bytes of TCP
		asm.Mov.Reg(asm.R3, asm.R7),
		asm.FnProbeReadKernel.Call(),
		asm.JNE.Imm(asm.R0, 0, "exit"),
	)
	p = append(p, ipv4Header(-56)...)
	p = append(p, asm.JEq.Imm(asm.R1, 20, "tcp"))
	// IP options: the TCP header's first 14 bytes at data + ihl*4
	p = append(p, tcpHeader(-36)...)
	arm := armState(-36)
	arm[0] = arm[0].WithSymbol("tcp")
	p = append(p, arm...)
	return p
}

// exitProgramBTF is exitProgram as a tp_btf program: flowi4's fields by
// plain loads.
func exitProgramBTF(o Offsets, state, ring *ebpf.Map) asm.Instructions {
	p := append(exitState(state),
		asm.JEq.Imm(asm.R8, 0, "exit"),
		asm.LoadMem(asm.R1, asm.R8, int16(o.FlowIif), asm.Word),
		asm.LoadMem(asm.R2, asm.R9, stIfindex, asm.Word),
		asm.JNE.Reg(asm.R1, asm.R2, "exit"),
		asm.LoadMem(asm.R1, asm.R8, int16(o.FlowDaddr), asm.Word),
		asm.StoreMem(asm.RFP, -48+recRouted, asm.R1, asm.Word),
	)
	p = append(p, timeRecord()...)
	return append(p, emitRecord(ring)...)
}

// The fragments both program types share (raw_tp and tp_btf differ in
// how they read the skb, device and flowi4 fields, not in these).

// lookupState looks this CPU's state up (R6 = the context, R9 = the
// state; "exit" when there is none).
func lookupState(state *ebpf.Map) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.StoreImm(asm.RFP, -4, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, state.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "exit"),
		asm.Mov.Reg(asm.R9, asm.R0),
	}
}

// entryState is an entry program's start: the state looked up and
// disarmed, R7 = the skb.
func entryState(state *ebpf.Map) asm.Instructions {
	return append(lookupState(state),
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.R9, stStart, asm.R1, asm.DWord), // disarm
		asm.LoadMem(asm.R7, asm.R6, 0, asm.DWord),        // skb
	)
}

// exitState is an exit program's start: the state looked up, "exit"
// unless armed; R7 = the armed time, R8 = the flowi4.
func exitState(state *ebpf.Map) asm.Instructions {
	return append(lookupState(state),
		asm.LoadMem(asm.R7, asm.R9, stStart, asm.DWord),
		asm.JEq.Imm(asm.R7, 0, "exit"),
		asm.LoadMem(asm.R8, asm.R6, 8, asm.DWord), // flp
	)
}

// ipv4Header checks the IPv4 header copied to the stack at h: version 4,
// ihl >= 5 (R1 = its length in bytes), TCP, first fragment; it stores
// the addresses in the state.
func ipv4Header(h int16) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R1, asm.RFP, h, asm.Byte), // version, ihl
		asm.Mov.Reg(asm.R2, asm.R1),
		asm.RSh.Imm(asm.R2, 4),
		asm.JNE.Imm(asm.R2, 4, "exit"),
		asm.And.Imm(asm.R1, 0x0f),
		asm.LSh.Imm(asm.R1, 2),
		asm.JLT.Imm(asm.R1, 20, "exit"),
		asm.LoadMem(asm.R2, asm.RFP, h+9, asm.Byte), // protocol
		asm.JNE.Imm(asm.R2, 6, "exit"),
		asm.LoadMem(asm.R2, asm.RFP, h+6, asm.Half), // frag_off
		asm.And.Imm(asm.R2, fragMaskLE),
		asm.JNE.Imm(asm.R2, 0, "exit"),
		asm.LoadMem(asm.R2, asm.RFP, h+12, asm.Word),
		asm.StoreMem(asm.R9, stSaddr, asm.R2, asm.Word),
		asm.LoadMem(asm.R2, asm.RFP, h+16, asm.Word),
		asm.StoreMem(asm.R9, stDaddr, asm.R2, asm.Word),
	}
}

// tcpHeader copies the TCP header's first 14 bytes (at R7, the IPv4
// header, + R1, its length) to the stack at t.
func tcpHeader(t int16) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R3, asm.R7),
		asm.Add.Reg(asm.R3, asm.R1),
		asm.Mov.Reg(asm.R1, asm.RFP),
		asm.Add.Imm(asm.R1, int32(t)),
		asm.Mov.Imm(asm.R2, 14),
		asm.FnProbeReadKernel.Call(),
		asm.JNE.Imm(asm.R0, 0, "exit"),
	}
}

// armState stores the ports and flags of the TCP header on the stack at
// t and arms the state with the time; it ends the program ("exit").
func armState(t int16) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R1, asm.RFP, t, asm.Half),
		asm.StoreMem(asm.R9, stSport, asm.R1, asm.Half),
		asm.LoadMem(asm.R1, asm.RFP, t+2, asm.Half),
		asm.StoreMem(asm.R9, stDport, asm.R1, asm.Half),
		asm.LoadMem(asm.R1, asm.RFP, t+13, asm.Byte),
		asm.StoreMem(asm.R9, stFlags, asm.R1, asm.Byte),
		asm.FnKtimeGetNs.Call(),
		asm.StoreMem(asm.R9, stStart, asm.R0, asm.DWord),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("exit"),
		asm.Return(),
	}
}

// timeRecord starts the record at -48: the armed time (R7), the
// interval to now, the destination.
func timeRecord() asm.Instructions {
	return asm.Instructions{
		asm.FnKtimeGetNs.Call(),
		asm.Sub.Reg(asm.R0, asm.R7),
		asm.StoreMem(asm.RFP, -48+recStart, asm.R7, asm.DWord),
		asm.StoreMem(asm.RFP, -48+recNs, asm.R0, asm.Word),
		asm.LoadMem(asm.R1, asm.R9, stDaddr, asm.Word),
		asm.StoreMem(asm.RFP, -48+recDaddr, asm.R1, asm.Word),
	}
}

// emitRecord finishes the record at -48 from the state, disarms the
// state and writes the record to the ring buffer (counting it lost when
// there is no room); it ends the program ("exit").
func emitRecord(ring *ebpf.Map) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R1, asm.R9, stSaddr, asm.Word),
		asm.StoreMem(asm.RFP, -48+recSaddr, asm.R1, asm.Word),
		asm.LoadMem(asm.R1, asm.R9, stDport, asm.Half),
		asm.StoreMem(asm.RFP, -48+recDport, asm.R1, asm.Half),
		asm.LoadMem(asm.R1, asm.R9, stSport, asm.Half),
		asm.StoreMem(asm.RFP, -48+recSport, asm.R1, asm.Half),
		asm.LoadMem(asm.R1, asm.R9, stFlags, asm.Byte),
		asm.StoreMem(asm.RFP, -48+recFlags, asm.R1, asm.Byte),
		asm.StoreImm(asm.RFP, -48+recFlags+1, 0, asm.Byte),
		asm.StoreImm(asm.RFP, -48+recFlags+2, 0, asm.Half),
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.R9, stStart, asm.R1, asm.DWord), // disarm
		asm.LoadMapPtr(asm.R1, ring.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -48),
		asm.Mov.Imm(asm.R3, recordSize),
		asm.Mov.Imm(asm.R4, brNoWakeup),
		asm.FnRingbufOutput.Call(),
		asm.JEq.Imm(asm.R0, 0, "exit"),
		asm.LoadMem(asm.R1, asm.R9, stLost, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R9, stLost, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("exit"),
		asm.Return(),
	}
}
