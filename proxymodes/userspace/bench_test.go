//go:build linux

package userspace_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/iptables"
	"github.com/proxybench/proxybench/proxymodes/userspace"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/traffic"
)

// BenchmarkFullSync measures, in a fresh namespace, a full Sync of 1k and
// 10k services x 3 endpoints from empty (listeners opened, portals
// restored, jumps ensured; Cleanup between iterations, untimed), with
// listener ports from DefaultPortRange and, at 10k, chosen by the kernel
// (bind to port 0, the legacy default). It
// reports the Sync's wall time ("sync-s"), listeners opened per second of
// the "listeners" phase and of the whole Sync, and the restore phase.
// Root only; -benchtime=3x is enough.
func BenchmarkFullSync(b *testing.B) {
	testenv.RequireKernel(b)
	for _, tc := range []struct {
		n      int
		kernel bool
	}{{1000, false}, {10000, false}, {10000, true}} {
		n := tc.n
		name := fmt.Sprintf("services=%d/ports=range", n)
		if tc.kernel {
			name = fmt.Sprintf("services=%d/ports=kernel", n)
		}
		b.Run(name, func(b *testing.B) {
			testenv.RequireKernel(b, "iptables-legacy-restore", "iptables-legacy")
			svcs := testServices(b, n, 3)
			ns := testenv.NewNetns(b, "usbench")
			ctx := context.Background()
			p := userspace.New(userspace.Config{Backend: userspace.BackendLegacy, KernelPorts: tc.kernel}, ns)
			var wall, listen, restore time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				st, err := p.Sync(ctx, svcs)
				if err != nil {
					b.Fatal(err)
				}
				wall += st.Wall
				listen += st.Phases["listeners"]
				restore += st.Phases["restore"]
				b.StopTimer()
				if err := p.Cleanup(ctx); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(wall.Seconds()/float64(b.N), "sync-s")
			b.ReportMetric(restore.Seconds()/float64(b.N), "restore-s")
			b.ReportMetric(float64(n*b.N)/listen.Seconds(), "listeners/s")
			b.ReportMetric(float64(n*b.N)/wall.Seconds(), "services/s")
		})
	}
}

// BenchmarkTrafficCPU drives the same closed-loop traffic (random
// position, 1k services x 3 endpoints, concurrency 4) through iptables
// mode and through the userspace proxy and reports this process's CPU
// time per connection ("cpu-us/conn": driver + proxy + the kernel work
// charged to the process), connections per second and, for userspace,
// the process's RSS after the traffic ("rss-MiB"). The userspace figure
// minus the iptables one is the proxy's own CPU cost per connection.
func BenchmarkTrafficCPU(b *testing.B) {
	testenv.RequireKernel(b)
	testenv.RequireKernel(b, "iptables-legacy-restore", "iptables-legacy")
	svcs := testServices(b, 1000, 3)
	tb := testbedB(b, svcs)
	ctx := context.Background()
	for _, mode := range []string{"iptables", "userspace"} {
		b.Run("mode="+mode, func(b *testing.B) {
			var p interface {
				Cleanup(context.Context) error
			}
			if mode == "iptables" {
				ip := iptables.New(iptables.Config{Backend: iptables.BackendLegacy}, tb.Node)
				if _, err := ip.Sync(ctx, svcs); err != nil {
					b.Fatal(err)
				}
				p = ip
			} else {
				us := userspace.New(userspace.Config{Backend: userspace.BackendLegacy}, tb.Node)
				if _, err := us.Sync(ctx, svcs); err != nil {
					b.Fatal(err)
				}
				p = us
			}
			const conns = 5000
			var cpu, wall time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c0, t0 := proxymodes.CPUTime(), time.Now()
				res, err := traffic.Drive(ctx, traffic.DriveSpec{Clients: tb.Clients, Services: svcs, Position: workload.PosRandom,
					Connections: conns, Concurrency: 4, Timeout: 2 * time.Second, Seed: int64(i)})
				if err != nil || res.Errors != 0 {
					b.Fatalf("%v %v", err, res.ErrorSamples)
				}
				cpu += proxymodes.CPUTime() - c0
				wall += time.Since(t0)
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(conns*b.N), "cpu-us/conn")
			b.ReportMetric(float64(conns*b.N)/wall.Seconds(), "conn/s")
			if us, ok := p.(*userspace.Proxier); ok {
				_, rss := us.Usage()
				b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
			}
			b.StopTimer()
			if err := p.Cleanup(ctx); err != nil {
				b.Fatal(err)
			}
			flushConntrack(b, tb.Node)
		})
	}
}
