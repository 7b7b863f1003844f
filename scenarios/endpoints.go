package scenarios

import (
	"math/rand"
	"time"
)

// EndpointCounts draws, with a generator seeded by Seed, the endpoint count of every service from the
// scenario's distribution: fixed Count; uniform on [Min, Max]; zipf gives
// 1 + rand.Zipf(S, V, Max-1), so counts lie in [1, Max] with most services
// small. The result has Services.Count entries.
func (sc *Scenario) EndpointCounts() []int {
	rng := rand.New(rand.NewSource(sc.Seed))
	e := sc.Services.Endpoints
	out := make([]int, sc.Services.Count)
	var z *rand.Zipf
	if e.Distribution == "zipf" {
		z = rand.NewZipf(rng, e.S, e.V, uint64(e.Max-1))
	}
	for i := range out {
		switch e.Distribution {
		case "uniform":
			out[i] = e.Min + rng.Intn(e.Max-e.Min+1)
		case "zipf":
			out[i] = 1 + int(z.Uint64())
		default:
			out[i] = e.Count
		}
	}
	return out
}

// ChurnSyncPeriods returns, for mode, the minSyncPeriod values its churn
// phase runs with (sweep.minSyncPeriod when set, else the mode's own
// KubeProxyConfiguration block: ipvs, nftables, or iptables for iptables
// and userspace) and its syncPeriod.
func (s *Scenario) ChurnSyncPeriods(mode string) (minSyncs []time.Duration, period time.Duration) {
	var min time.Duration
	switch mode {
	case "ipvs":
		min, period = s.IPVS.MinSyncPeriod.Duration, s.IPVS.SyncPeriod.Duration
	case "nftables":
		min, period = s.NFTables.MinSyncPeriod.Duration, s.NFTables.SyncPeriod.Duration
	default:
		min, period = s.IPTables.MinSyncPeriod.Duration, s.IPTables.SyncPeriod.Duration
	}
	if len(s.Sweep.MinSyncPeriod) == 0 {
		return []time.Duration{min}, period
	}
	for _, d := range s.Sweep.MinSyncPeriod {
		minSyncs = append(minSyncs, d.Duration)
	}
	return minSyncs, period
}
