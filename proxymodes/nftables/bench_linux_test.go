//go:build linux

package nftables

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	nftablestest "github.com/proxybench/proxybench/proxymodes/nftables/testing"
)

// BenchmarkFullSync measures, in a fresh namespace, a Proxier.Sync of N
// services x 3 endpoints from empty and a raw "nft -f -" of the same
// ruleset text (Ruleset.Full, one transaction) from empty, Cleanup between
// iterations (untimed). It reports both in seconds, the Sync's "chains"
// and "elements" phases, and the ratio Sync/raw ("ratio-vs-raw"): the
// Proxier's overhead (render, knftables, two transactions) on top of nft,
// with Config.ChainsPerTransaction 0 (one transaction of chains and rules)
// and 4000 (rules in transactions of 4000 chains).
// Root only; 1k and 3k services, plus 10k with PROXYBENCH_SLOW=1 (about
// 30 s per nft -f on this kernel; make bench runs it once); -benchtime=3x
// is enough.
func BenchmarkFullSync(b *testing.B) {
	testenv.RequireKernel(b, "nft")
	sizes := []int{1000, 3000}
	if testenv.Slow() {
		sizes = append(sizes, 10000)
	}
	for _, n := range sizes {
		for _, perTx := range []int{0, 4000} {
			benchFullSync(b, n, perTx)
		}
	}
}

// benchFullSync is one BenchmarkFullSync case: perTx is
// Config.ChainsPerTransaction (0: one transaction of chains and rules).
func benchFullSync(b *testing.B, n, perTx int) {
	b.Run("services="+strconv.Itoa(n)+"/chainsPerTx="+strconv.Itoa(perTx), func(b *testing.B) {
		testenv.RequireKernel(b, "nft")
		svcs := genServices(n, 3)
		ns := testenv.NewNetns(b, "nftbench")
		ctx := context.Background()
		cfg := testCfg
		cfg.ChainsPerTransaction = perTx
		p := New(cfg, ns)
		rs, err := Render(testCfg, svcs)
		if err != nil {
			b.Fatal(err)
		}
		tx := nftablestest.NewFake().NewTransaction()
		rs.Full(tx)
		raw := []byte(tx.String())
		var syncT, rawT, chainsT, elemsT time.Duration
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
			syncT += time.Since(t)
			chainsT += st.Phases["chains"]
			elemsT += st.Phases["elements"]
			b.StopTimer()
			b.Logf("sync: wall %v cpu %v phases %v", st.Wall, st.CPU, st.Phases)
			if err := p.Cleanup(ctx); err != nil {
				b.Fatal(err)
			}
			t = time.Now()
			if _, err := ns.Run(ctx, raw, "nft", "-f", "-"); err != nil {
				b.Fatal(err)
			}
			rawT += time.Since(t)
			b.Logf("raw nft -f: %v", time.Since(t))
			b.StartTimer()
		}
		b.StopTimer()
		if err := p.Cleanup(ctx); err != nil {
			b.Fatal(err)
		}
		per := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
		b.ReportMetric(per(syncT), "sync-s")
		b.ReportMetric(per(chainsT), "chains-s")
		b.ReportMetric(per(elemsT), "elements-s")
		b.ReportMetric(per(rawT), "raw-s")
		b.ReportMetric(per(syncT)/per(rawT), "ratio-vs-raw")
	})
}
