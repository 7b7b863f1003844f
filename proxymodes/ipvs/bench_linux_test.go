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
// 3 endpoints and reports each phase in seconds per sync. Variants:
// "batch" (the default: changes in netlink batches) and "per-object" (one
// netlink round trip per object and ipset restore lines, as moby/ipvs and
// kube-proxy do), each in a fresh namespace per iteration; and
// "batch-after-cleanup", in one namespace with Cleanup between
// iterations, where the kernel's trash of deleted real servers (kept ~1-2
// minutes and scanned linearly by every real-server add,
// ip_vs_trash_get_dest in net/netfilter/ipvs/ip_vs_ctl.c) slows the adds.
// Namespace creation and Cleanup are not timed. It needs IP_VS: run it in
// the UML guest.
func BenchmarkKernelFullSync(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, v := range []string{"batch", "per-object", "batch-after-cleanup"} {
			b.Run(fmt.Sprintf("%d/%s", n, v), func(b *testing.B) { benchFullSync(b, n, v) })
		}
	}
}

func benchFullSync(b *testing.B, n int, variant string) {
	testenv.RequireKernel(b, binIPSet, binRestore, binSave)
	probe := testenv.NewNetns(b, "ipvsprobe")
	if ok, why := hasIPVS(probe); !ok {
		testenv.Skip(b, why)
	}
	svcs := genServices(n, 3)
	ctx := context.Background()
	phases := map[string]time.Duration{}
	var cpu time.Duration
	var p *Proxier
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		if variant != "batch-after-cleanup" || p == nil {
			if p != nil {
				_ = p.Cleanup(ctx)
			}
			p = New(testCfg, testenv.NewNetns(b, fmt.Sprintf("ipvsb%d", i)))
			p.perObject = variant == "per-object"
		} else if err := p.Cleanup(ctx); err != nil {
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
	b.StopTimer()
	_ = p.Cleanup(ctx)
	for k, v := range phases {
		b.ReportMetric(v.Seconds()/float64(b.N), k+"-s/op")
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
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
