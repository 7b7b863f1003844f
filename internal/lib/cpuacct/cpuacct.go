// Package cpuacct reads the CPU time (user+system) of the calling OS
// thread and of the process's waited-for children, from getrusage(2)
// (RUSAGE_THREAD, RUSAGE_CHILDREN). Used to charge a sync only the CPU
// the proxy spends on it (proxymodes.SyncCPU, topology.Netns.CPU).
package cpuacct

import (
	"time"

	"golang.org/x/sys/unix"
)

func tv(t unix.Timeval) time.Duration { return time.Duration(t.Nano()) }

// Thread is the calling thread's CPU time so far (RUSAGE_THREAD). The
// caller must hold its thread (runtime.LockOSThread) between two readings
// for their difference to mean anything.
func Thread() time.Duration {
	var r unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &r); err != nil {
		return 0
	}
	return tv(r.Utime) + tv(r.Stime)
}

// Children is the CPU time of every child the process has waited for so
// far (RUSAGE_CHILDREN): a child counts once it is reaped.
func Children() time.Duration {
	var r unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_CHILDREN, &r); err != nil {
		return 0
	}
	return tv(r.Utime) + tv(r.Stime)
}
