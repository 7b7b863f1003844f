package iptables

import (
	"net/netip"
	"strconv"
	"testing"

	"github.com/proxybench/proxybench/workload"
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

// BenchmarkRenderIncremental is the render step of a partial sync at N
// services after one endpoint changed, as Proxier.Sync does it: plan,
// fingerprints, compare with the last applied ones, and write KUBE-SERVICES
// whole plus the changed service's chains only. It reports the rules and
// MB written (compare with BenchmarkRender's full sync).
func BenchmarkRenderIncremental(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run("services="+strconv.Itoa(n), func(b *testing.B) {
			svcs := genServices(n, 3)
			pl, err := newPlan(testCfg, svcs)
			if err != nil {
				b.Fatal(err)
			}
			applied := pl.fingerprints()
			changed := append([]workload.Service(nil), svcs...)
			eps := append([]workload.Endpoint(nil), changed[n/2].Endpoints...)
			eps[0].IP = netip.MustParseAddr("198.19.250.1")
			changed[n/2].Endpoints = eps
			var rs *Ruleset
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				pl, err := newPlan(testCfg, changed)
				if err != nil {
					b.Fatal(err)
				}
				fps := pl.fingerprints()
				unchanged := make([]bool, len(pl.ports))
				for k := range pl.ports {
					old, ok := applied[pl.ports[k].name]
					unchanged[k] = ok && old == fps[pl.ports[k].name]
				}
				rs = pl.write(nil, unchanged)
			}
			b.ReportMetric(float64(rs.NatRules+rs.FilterRules), "rules")
			b.ReportMetric(float64(len(rs.Data))/1e6, "MB")
		})
	}
}
