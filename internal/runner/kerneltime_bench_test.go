//go:build linux

package runner

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/lib/kerneltime"
	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
)

// BenchmarkLookupKernelOverhead measures what lookup.kernel costs the
// figures beside it, both ways in one run: on one testbed with iptables
// at 10000 services, each iteration runs the traffic phase (4 positions
// × 2000 connections, concurrency 4: one repetition of 10k-services'
// lookup phase) with the BPF timer (on), without it (off:
// traffic.kernelTime: false) and without it again (off'), back to back
// in an order rotated every iteration, so a neighbour's load falls on
// all alike. It reports the phase's wall time and its connect p50
// (lookup.latency, median over positions), each the median over
// iterations, and in percent the median over iterations of on/off:
// wall-overhead-% (target < 5) and p50-overhead-% (target < 2); of
// off'/off, the same for two timer-off phases: wall-aa-% and p50-aa-%,
// the noise floor an overhead must clear to be seen. Where the floor is
// larger than the targets (a loaded machine), the load-independent
// figures are what the programs ran in the kernel (kerneltime's
// SelfTime, an upper bound: it holds one bpf_ktime_get_ns a run) per
// connection, prog-ns/conn, and as a share of a timer-off phase's wall
// time, prog-%-of-wall.
func BenchmarkLookupKernelOverhead(b *testing.B) {
	testenv.RequireKernel(b, "iptables-legacy-restore")
	sc, err := scenarios.Parse([]byte(`
name: lookup-kernel-overhead
seed: 3
repetitions: 1
kernel: host
modes: [iptables]
services: {count: 10000, endpoints: {count: 3}}
traffic: {connections: 2000, concurrency: 4, warmup: 50}
`), "lookup-kernel-overhead.yaml")
	if err != nil {
		b.Fatal(err)
	}
	off := *sc
	no := false
	off.Traffic.KernelTime = &no
	ctx := context.Background()
	svcs, err := workload.Services(sc)
	if err != nil {
		b.Fatal(err)
	}
	tb, err := topology.Build(ctx, topologySpec(sc, topology.NewRunID(), svcs))
	if err != nil {
		b.Fatal(err)
	}
	defer tb.Teardown()
	echo, err := startEcho(tb, svcs)
	if err != nil {
		b.Fatal(err)
	}
	defer echo.Close()
	m, err := modes.Lookup("iptables")
	if err != nil {
		b.Fatal(err)
	}
	p, err := m.New(sc, tb.Node)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Cleanup(context.Background())
	if _, err := p.Sync(ctx, svcs); err != nil {
		b.Fatal(err)
	}
	e := newEnv(tb)
	// The timer of the "on" phases also times itself (kerneltime's
	// SelfTime), read as the phase closes it.
	var self kerneltime.SelfTime
	e.kernelTimer = func() (kernelTimer, error) {
		ino, err := kerneltime.NetnsInode(int(tb.Node.Handle()))
		if err != nil {
			return nil, err
		}
		t, err := kerneltime.Start(kerneltime.Config{Netns: []uint64{ino}, SelfTime: true})
		if err != nil {
			return nil, err
		}
		return selfTimer{t, &self}, nil
	}
	conns := 0
	var wall, p50 [3][]float64 // [0] off, [1] on, [2] off again (the A/A reference)
	phase := func(i int) {
		on := i == 1
		s := &off
		if on {
			s = sc
		}
		start := time.Now()
		to, err := trafficPhase(ctx, s, e, tb.Clients, svcs, false, "iptables", &recProgress{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if on {
			if to.kernel == nil || to.kernel.Absent != "" {
				b.Skipf("lookup.kernel not measured here: %+v", to.kernel)
			}
		}
		wall[i] = append(wall[i], float64(time.Since(start)))
		if on {
			conns += to.conns
		}
		var ps []float64
		for _, l := range to.lookup {
			ps = append(ps, float64(l.Latency.P50))
		}
		slices.Sort(ps)
		p50[i] = append(p50[i], ps[len(ps)/2])
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range 3 { // off, on, off again, rotated by the iteration
			phase((i + k) % 3)
		}
	}
	b.StopTimer()
	med := func(xs []float64) float64 { s := slices.Clone(xs); slices.Sort(s); return s[len(s)/2] }
	b.ReportMetric(med(wall[1])/1e6, "wall-on-ms")
	b.ReportMetric(med(wall[0])/1e6, "wall-off-ms")
	ratio := func(num, den []float64) float64 {
		var rs []float64
		for i := range den {
			rs = append(rs, num[i]/den[i])
		}
		return 100 * (med(rs) - 1)
	}
	b.ReportMetric(ratio(wall[1], wall[0]), "wall-overhead-%")
	b.ReportMetric(ratio(wall[2], wall[0]), "wall-aa-%")
	b.ReportMetric(ratio(p50[2], p50[0]), "p50-aa-%")
	b.ReportMetric(med(p50[1])/1e3, "p50-on-µs")
	b.ReportMetric(med(p50[0])/1e3, "p50-off-µs")
	b.ReportMetric(ratio(p50[1], p50[0]), "p50-overhead-%")
	if conns > 0 {
		perConn := float64(self.EntryNs+self.ExitNs) / float64(conns)
		b.ReportMetric(perConn, "prog-ns/conn")
		b.ReportMetric(100*perConn*float64(conns/max(b.N, 1))/med(wall[0]), "prog-%-of-wall")
	}
}

// selfTimer is a kerneltime.Timer whose Close first adds its SelfTime to
// sum.
type selfTimer struct {
	*kerneltime.Timer
	sum *kerneltime.SelfTime
}

func (s selfTimer) Close() error {
	if st, err := s.SelfTime(); err == nil {
		s.sum.EntryNs += st.EntryNs
		s.sum.ExitNs += st.ExitNs
		s.sum.EntryRuns += st.EntryRuns
		s.sum.ExitRuns += st.ExitRuns
	}
	return s.Timer.Close()
}
