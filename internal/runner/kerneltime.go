//go:build linux

package runner

import (
	"fmt"
	"net/netip"
	"os"

	"github.com/proxybench/proxybench/internal/lib/kerneltime"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/traffic"
)

// kernelTimer is lookup.kernel's in-kernel timer over the node
// namespaces (kerneltime.Timer; fakes in unit tests).
type kernelTimer interface {
	// Drain returns the packets timed since the last call.
	Drain() ([]kerneltime.Sample, error)
	// Lost is how many packets the timer had no room for.
	Lost() (uint64, error)
	// Kind is the program type it runs (kerneltime.KindBTF, KindRaw).
	Kind() string
	Close() error
}

// startNodeTimer starts a kerneltime.Timer over the node namespaces of tb:
// the namespaces whose PREROUTING the clients' SYNs cross (each client pod
// reaches its node over a veth, so the SYN enters the node through
// netif_receive_skb on the node's end of it). The error's
// kerneltime.Reason says why it cannot run.
func startNodeTimer(tb *topology.Testbed) (kernelTimer, error) {
	var inos []uint64
	for _, n := range tb.Nodes {
		ino, err := kerneltime.NetnsInode(int(n.Handle()))
		if err != nil {
			return nil, err
		}
		inos = append(inos, ino)
	}
	return kerneltime.Start(kerneltime.Config{Netns: inos})
}

// DoctorKernelTime says whether lookup.kernel can be measured by this
// process on this kernel: it starts the timer over the process's own
// network namespace and stops it at once. "measured here (tp_btf
// programs)", or "not measured here: " and the reason
// (kerneltime.Reason).
func DoctorKernelTime() string {
	f, err := os.Open("/proc/self/ns/net")
	if err != nil {
		return "not measured here: " + err.Error()
	}
	defer f.Close()
	ino, err := kerneltime.NetnsInode(int(f.Fd()))
	if err != nil {
		return "not measured here: " + err.Error()
	}
	t, err := kerneltime.Start(kerneltime.Config{Netns: []uint64{ino}})
	if err != nil {
		return "not measured here: " + kerneltime.Reason(err)
	}
	kind := t.Kind()
	_ = t.Close()
	return "measured here (" + kind + " programs)"
}

// kernelAgg sorts a traffic phase's timed packets into positions: a
// packet counts for a position when it started within one of that
// position's recorded windows (a driver call's first recorded connection
// to its return, so the warmup's are left out) and went to that
// position's services, as dialled (ClusterIP and port; endpoint and
// target port for a direct mode); its SYNs are lookup.kernel, its other
// packets lookup.kernel.other. Everything else is unmatched.
type kernelAgg struct {
	timer  kernelTimer
	absent string // why lookup.kernel is not measured
	fault  string // a failure after the start (samples kept)
	// targets are the destinations a position's connections dial.
	targets map[string]map[netip.AddrPort]bool
	syn     map[string][]int64
	other   map[string][]int64
	unmatch int
}

// kernelClock is CLOCK_MONOTONIC in ns, the clock of the timer's samples
// (a seam for tests).
var kernelClock = kerneltime.MonotonicNs

// newKernelAgg starts lookup.kernel for one traffic phase: turned off by
// the scenario, not measured without a timer seam (e.start nil: the
// phases' fakes leave the result without the figure), or the timer's
// reason when it cannot start.
func newKernelAgg(sc *scenarios.Scenario, start func() (kernelTimer, error)) *kernelAgg {
	k := &kernelAgg{targets: map[string]map[netip.AddrPort]bool{}, syn: map[string][]int64{}, other: map[string][]int64{}}
	switch {
	case !sc.Traffic.KernelTimeOn():
		k.absent = "turned off (traffic.kernelTime: false)"
	case start == nil:
		return nil
	default:
		t, err := start()
		if err != nil {
			k.absent = kerneltime.Reason(err)
		} else {
			k.timer = t
		}
	}
	return k
}

// positionTargets are the destinations position's connections dial:
// its ServicePort's ClusterIP:port, or every ServicePort's for random;
// for a direct mode the endpoints at the target port instead.
func positionTargets(services []workload.Service, position string, direct bool) (map[netip.AddrPort]bool, error) {
	flat := workload.FlatTargets(services)
	ts := flat
	if position != workload.PosRandom {
		t, err := workload.PositionTarget(flat, position)
		if err != nil {
			return nil, err
		}
		ts = []workload.Target{t}
	}
	out := map[netip.AddrPort]bool{}
	for _, t := range ts {
		svc := &services[t.Service]
		p := svc.Ports[t.Port]
		if !direct {
			out[netip.AddrPortFrom(svc.ClusterIP, p.Port)] = true
			continue
		}
		for _, e := range svc.Endpoints {
			out[netip.AddrPortFrom(e.IP, p.TargetPort)] = true
		}
	}
	return out, nil
}

// step attributes the packets timed during one driver call at position
// (dr: its recorded window's start) to it.
func (k *kernelAgg) step(services []workload.Service, position string, direct bool, dr *traffic.DriveResult) {
	if k == nil || k.timer == nil || k.fault != "" {
		return
	}
	end := kernelClock()
	ss, err := k.timer.Drain()
	if err != nil {
		k.fault = fmt.Sprintf("reading the kernel timer's ring buffer failed: %v", err)
	}
	tg := k.targets[position]
	if tg == nil {
		if tg, err = positionTargets(services, position, direct); err != nil {
			k.fault = err.Error()
			return
		}
		k.targets[position] = tg
	}
	syn, other, unmatched := attributeKernel(ss, dr.RecordStartMonoNs, end, tg)
	k.syn[position] = append(k.syn[position], syn...)
	k.other[position] = append(k.other[position], other...)
	k.unmatch += unmatched
}

// attributeKernel splits samples into the SYNs and other packets that
// started in [from, to] (CLOCK_MONOTONIC ns; from 0: nothing recorded)
// to one of targets, and counts the rest.
func attributeKernel(ss []kerneltime.Sample, from, to int64, targets map[netip.AddrPort]bool) (syn, other []int64, unmatched int) {
	for _, s := range ss {
		switch {
		case from == 0 || s.StartNs < from || s.StartNs > to || !targets[s.Dst]:
			unmatched++
		case s.SYN():
			syn = append(syn, s.Ns)
		default:
			other = append(other, s.Ns)
		}
	}
	return syn, other, unmatched
}

// finish closes the timer and fills the positions' lookup.kernel; it
// returns the row's KernelTime (nil when not measured for want of a
// seam) and a fault sentence when reading failed part-way.
func (k *kernelAgg) finish(lookup []reports.PositionResult) (*reports.KernelTime, string) {
	if k == nil {
		return nil, ""
	}
	kt := &reports.KernelTime{Bracket: kerneltime.Bracket, Absent: k.absent}
	if k.timer == nil {
		return kt, ""
	}
	if lost, err := k.timer.Lost(); err == nil {
		kt.Lost = lost
	}
	kt.Programs = k.timer.Kind()
	_ = k.timer.Close()
	k.timer = nil
	kt.Unmatched = k.unmatch
	n := 0
	for i := range lookup {
		p := &lookup[i]
		p.KernelSamplesNs, p.KernelOtherSamplesNs = k.syn[p.Position], k.other[p.Position]
		p.Kernel, p.KernelOther = reports.Summarize(p.KernelSamplesNs), reports.Summarize(p.KernelOtherSamplesNs)
		n += len(p.KernelSamplesNs)
	}
	if n == 0 && k.fault != "" {
		kt.Absent = k.fault
	}
	return kt, k.fault
}

// close releases the timer when the phase stops before finish.
func (k *kernelAgg) close() {
	if k != nil && k.timer != nil {
		_ = k.timer.Close()
	}
}
