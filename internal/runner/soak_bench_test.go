//go:build linux

package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// BenchmarkSoakSelfMemory: proxybench's own memory over an hour's soak
// (360 samples, the default 10 s interval), time compressed on the
// phases' fakes: 360 intervals of 50 ms, changes arriving at 1000/s (the
// generator skips those whose service still has a change pending, so
// about 10,000 are made at low load, a third of the measured hour's 36k:
// the changes/op metric) and 400 connections/s, for a builtin row (its sync loop) and a
// kube-proxy row (API writes to a fake kube-proxy that logs a "Network
// programming" line per trigger time, its log handed over and forgotten
// as a log file keeps it; its writes not recorded: an API server keeps
// them, not proxybench). Each sample's memory is read after a garbage
// collection (runtime.GC), so the heap is the live heap and what the
// soak keeps shows at once. Reported: RSS and Go heap at the end over at
// the 30th sample (minute 5 of a real soak), rss-ratio and heap-ratio
// (the bound: within 10%, ratio ≤ 1.10), and the live heap's
// growth per change (the slope over the samples from minute 5 on). The
// time compression holds only on an idle machine: at load 30 the
// intervals stretch and the figures mean nothing. What grows with the changes grows here; what grows with wall
// time (the kernel, kube-proxy) is not in it. Session 10's kube-proxy
// rows kept every change and its observation for the end's match of
// kube-proxy's log (1.083 here then, with 3,000 changes and no collection
// before the reading; 166 → 272 MiB over the measured hour).
// BenchmarkSoakSelfMemory measures; TestProgrammedStreamMatchesBatch
// checks the match that replaced it.
func BenchmarkSoakSelfMemory(b *testing.B) {
	for _, impl := range []string{scenarios.ImplBuiltin, scenarios.ImplKubeProxy} {
		b.Run(impl, func(b *testing.B) {
			sc, err := scenarios.Parse([]byte(`
seed: 4
modes: [iptables]
services: {count: 8000, endpoints: {count: 3}}
traffic: {timeout: 200ms}
soak: {duration: 18s, interval: 100ms, rate: 400, churn: 1000, idle: 0, quiet: 0, probes: 32}
`), "bench.yaml")
			if err != nil {
				b.Fatal(err)
			}
			// Time compressed, below validate's 100 ms.
			sc.Soak.Interval.Duration = 50 * time.Millisecond
			svcs, err := workload.Services(sc)
			if err != nil {
				b.Fatal(err)
			}
			for range b.N {
				var ap churnApplier
				var proc soakProcess
				var e *fakeEnv
				if impl == scenarios.ImplKubeProxy {
					f := &fakeKubeProxy{fakeAPI: newFakeAPI()}
					f.noWrites = true
					if _, err := f.Sync(context.Background(), svcs); err != nil {
						b.Fatal(err)
					}
					e, ap, proc = newFakeEnv(f.fakeProxier), newAPIApplier(f, 0), f
				} else {
					p := newFakeProxier()
					if _, err := p.Sync(context.Background(), svcs); err != nil {
						b.Fatal(err)
					}
					e, ap = newFakeEnv(p), &loopApplier{p: p, sc: sc, minSync: 20 * time.Millisecond, period: time.Hour}
				}
				e.self = func() selfStats {
					runtime.GC()
					return readSelf()
				}
				var fl faults
				sr, err := soakPhase(context.Background(), soakRun{sc: sc, e: &e.env, services: svcs, ap: ap, proc: proc,
					path: filepath.Join(b.TempDir(), "s.jsonl"), header: reports.SoakHeader{Row: "bench"}, prog: &recProgress{}, faults: &fl})
				if err != nil {
					b.Fatal(err)
				}
				if len(sr.Samples) < 60 {
					b.Fatalf("%d samples", len(sr.Samples))
				}
				at5, end := sr.Samples[29], sr.Samples[len(sr.Samples)-1]
				b.ReportMetric(float64(end.SelfRSSBytes)/float64(at5.SelfRSSBytes), "rss-ratio")
				b.ReportMetric(float64(end.SelfHeapBytes)/float64(at5.SelfHeapBytes), "heap-ratio")
				b.ReportMetric(float64(end.SelfRSSBytes)/(1<<20), "rss-MiB")
				changes := sr.End.Changes
				// The live heap's growth per change: the slope of the
				// heap over the changes made so far, every sample from
				// minute 5 on (a two-point difference drowns in the fakes'
				// own garbage of the moment, a few MiB).
				var made, heap []float64
				n := 0
				for i, x := range sr.Samples {
					n += x.Changes
					if i >= 29 {
						made, heap = append(made, float64(n)), append(heap, float64(x.SelfHeapBytes))
					}
				}
				if changes > 0 {
					_, perChange := stat.LinearRegression(made, heap, nil, false)
					b.ReportMetric(perChange, "heap-B/change")
				}
				b.ReportMetric(float64(changes), "changes")
				if testing.Verbose() {
					fmt.Printf("%s: %d samples, %d changes, RSS %d -> %d MiB, heap %d -> %d MiB\n", impl, len(sr.Samples), changes,
						at5.SelfRSSBytes>>20, end.SelfRSSBytes>>20, at5.SelfHeapBytes>>20, end.SelfHeapBytes>>20)
				}
			}
		})
	}
}
