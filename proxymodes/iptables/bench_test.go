package iptables

import (
	"strconv"
	"testing"
)

// BenchmarkRender renders N services x 3 endpoints (kube-proxy's
// BenchmarkSyncProxyRules sizes); it reports the nat+filter rules and the
// restore input size in MB.
func BenchmarkRender(b *testing.B) {
	for _, n := range []int{1000, 5000, 10000} {
		b.Run("services="+strconv.Itoa(n), func(b *testing.B) {
			svcs := genServices(n, 3)
			var rs *Ruleset
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var err error
				if rs, err = Render(testCfg, svcs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(rs.NatRules+rs.FilterRules), "rules")
			b.ReportMetric(float64(len(rs.Data))/1e6, "MB")
		})
	}
}
