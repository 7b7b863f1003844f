package nftables

import (
	"strconv"
	"testing"

	"sigs.k8s.io/knftables"

	nftablestest "github.com/proxybench/proxybench/proxymodes/nftables/testing"
)

// BenchmarkRender renders N services x 3 endpoints and writes the full-sync
// transaction (what Sync does before calling nft); it reports the objects
// (chains + rules + elements) and the nft input size in MB.
func BenchmarkRender(b *testing.B) {
	for _, n := range []int{1000, 5000, 10000} {
		b.Run("services="+strconv.Itoa(n), func(b *testing.B) {
			svcs := genServices(n, 3)
			fake := nftablestest.NewFake()
			var rs *Ruleset
			var tx *knftables.Transaction
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var err error
				if rs, err = Render(testCfg, svcs); err != nil {
					b.Fatal(err)
				}
				tx = fake.NewTransaction()
				rs.Full(tx)
			}
			b.StopTimer()
			b.ReportMetric(float64(rs.Counts().Objects()), "objects")
			b.ReportMetric(float64(len(tx.String()))/1e6, "MB")
		})
	}
}
