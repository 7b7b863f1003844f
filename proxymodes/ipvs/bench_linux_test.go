//go:build linux

package ipvs

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
)

// BenchmarkKernelFullSync measures a full sync from empty of N services x
// 3 endpoints in a throwaway namespace (Cleanup between iterations, not
// timed), with changes sent in batches (the default) or one netlink round
// trip per object (as moby/ipvs and kube-proxy do), and reports each phase
// in seconds per sync. It needs IP_VS: run it in the UML guest.
func BenchmarkKernelFullSync(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, perObject := range []bool{false, true} {
			name := fmt.Sprintf("%d/batch", n)
			if perObject {
				name = fmt.Sprintf("%d/per-object", n)
			}
			b.Run(name, func(b *testing.B) { benchFullSync(b, n, perObject) })
		}
	}
}

func benchFullSync(b *testing.B, n int, perObject bool) {
	{
		{
			testenv.RequireKernel(b, binIPSet, binRestore, binSave)
			ns := testenv.NewNetns(b, "ipvsbench")
			if ok, why := hasIPVS(ns); !ok {
				testenv.Skip(b, why)
			}
			svcs := genServices(n, 3)
			p := New(testCfg, ns)
			p.perObject = perObject
			ctx := context.Background()
			phases := map[string]time.Duration{}
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				if err := p.Cleanup(ctx); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				st, err := p.Sync(ctx, svcs)
				if err != nil {
					b.Fatal(err)
				}
				for k, v := range st.Phases {
					phases[k] += v
				}
				cpu += st.CPU
			}
			for k, v := range phases {
				b.ReportMetric(v.Seconds()/float64(b.N), k+"-s/op")
			}
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
		}
	}
}

// BenchmarkKernelIncrementalSync measures a Sync after one endpoint change
// at 10k services x 3 endpoints (kube-proxy's sync.incremental): one
// virtual server dump, one real-server read, one delete and one add.
func BenchmarkKernelIncrementalSync(b *testing.B) {
	testenv.RequireKernel(b, binIPSet, binRestore, binSave)
	ns := testenv.NewNetns(b, "ipvsinc")
	if ok, why := hasIPVS(ns); !ok {
		testenv.Skip(b, why)
	}
	svcs := genServices(10000, 3)
	p := New(testCfg, ns)
	ctx := context.Background()
	if _, err := p.Sync(ctx, svcs); err != nil {
		b.Fatal(err)
	}
	phases := map[string]time.Duration{}
	orig := svcs[5000].Endpoints[0].IP
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			svcs[5000].Endpoints[0].IP = netip.MustParseAddr("198.19.250.1")
		} else {
			svcs[5000].Endpoints[0].IP = orig
		}
		st, err := p.Sync(ctx, svcs)
		if err != nil {
			b.Fatal(err)
		}
		if st.Kind != "incremental" || st.Objects != 2 {
			b.Fatalf("stats %+v", st)
		}
		for k, v := range st.Phases {
			phases[k] += v
		}
	}
	for k, v := range phases {
		b.ReportMetric(v.Seconds()/float64(b.N), k+"-s/op")
	}
	_ = p.Cleanup(ctx)
}
