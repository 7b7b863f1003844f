//go:build linux

package iptables

import (
	"context"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
)

// BenchmarkFullSync10k measures, per back end in a fresh namespace, a
// Proxier.Sync of 10k services x 3 endpoints from empty and a raw
// iptables-<backend>-restore --noflush of the same bytes from empty
// (Cleanup between iterations, untimed). It reports both in seconds and
// their ratio ("ratio-vs-raw"): the Proxier's own overhead (render, jump
// rules) on top of the kernel tool. Root only; -benchtime=3x is enough.
// The nft back end runs only with PROXYBENCH_SLOW=1 (make bench-full):
// iptables-nft-restore --noflush (1.8.9) is superlinear and takes about
// 70 s per restore at 10k here.
func BenchmarkFullSync10k(b *testing.B) {
	testenv.RequireKernel(b)
	svcs := genServices(10000, 3)
	for _, backend := range []string{BackendLegacy, BackendNft} {
		b.Run("backend="+backend, func(b *testing.B) {
			testenv.RequireKernel(b, "iptables-"+backend+"-restore")
			if backend == BackendNft {
				// iptables-nft-restore 1.8.9 --noflush takes ~70 s here at 10k.
				testenv.RequireSlow(b, "nft at 10k services takes minutes")
			}
			ns := testenv.NewNetns(b, "bench"+backend)
			ctx := context.Background()
			cfg := Config{Backend: backend, ClusterCIDR: testCfg.ClusterCIDR}
			p := New(cfg, ns)
			rs, err := Render(cfg, svcs)
			if err != nil {
				b.Fatal(err)
			}
			var syncT, rawT time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if err := p.Cleanup(ctx); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				t := time.Now()
				st, err := p.Sync(ctx, svcs)
				if err != nil {
					b.Fatal(err)
				}
				b.Logf("sync phases: %v", st.Phases)
				syncT += time.Since(t)
				b.StopTimer()
				if err := p.Cleanup(ctx); err != nil {
					b.Fatal(err)
				}
				t = time.Now()
				if _, err := ns.Run(ctx, rs.Data, "iptables-"+backend+"-restore", "--noflush"); err != nil {
					b.Fatal(err)
				}
				rawT += time.Since(t)
				b.Logf("raw: %v", time.Since(t))
				b.StartTimer()
			}
			b.StopTimer()
			if err := p.Cleanup(ctx); err != nil {
				b.Fatal(err)
			}
			syncS := syncT.Seconds() / float64(b.N)
			rawS := rawT.Seconds() / float64(b.N)
			b.ReportMetric(syncS, "sync-s")
			b.ReportMetric(rawS, "raw-s")
			b.ReportMetric(syncS/rawS, "ratio-vs-raw")
		})
	}
}
