package scenarios

import (
	"math/rand"
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
