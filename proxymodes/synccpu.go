package proxymodes

import (
	"runtime"
	"time"

	"github.com/proxybench/proxybench/internal/lib/cpuacct"
)

// NamespaceCPU is implemented by a namespace that accounts the CPU spent
// in it (topology.Netns.CPU: its Do bodies and the programs they run).
type NamespaceCPU interface{ CPU() time.Duration }

// SyncCPU measures the CPU one sync costs the proxy itself, never the
// probes, echo server or traffic driver running in the same process:
// the calling goroutine's thread (locked to it until Stop: rendering,
// planning) plus what ns accounts meanwhile (the rule programs a sync
// runs and its netlink calls in the namespace), when ns implements
// NamespaceCPU. So SyncStats.CPU is at most wall time × the threads the
// proxy itself runs at once (this one, or one rule program while it
// waits).
type SyncCPU struct {
	thread0, ns0 time.Duration
	ns           NamespaceCPU
}

// StartSyncCPU starts a measurement on the calling goroutine, which it
// locks to its thread until Stop.
func StartSyncCPU(ns any) *SyncCPU {
	runtime.LockOSThread()
	m := &SyncCPU{thread0: cpuacct.Thread()}
	if c, ok := ns.(NamespaceCPU); ok {
		m.ns, m.ns0 = c, c.CPU()
	}
	return m
}

// Elapsed is the CPU charged since Start; call it on the same goroutine.
func (m *SyncCPU) Elapsed() time.Duration {
	d := cpuacct.Thread() - m.thread0
	if m.ns != nil {
		d += m.ns.CPU() - m.ns0
	}
	return d
}

// Stop returns Elapsed and unlocks the thread.
func (m *SyncCPU) Stop() time.Duration {
	d := m.Elapsed()
	runtime.UnlockOSThread()
	return d
}
