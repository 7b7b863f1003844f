package scenarios

import (
	"math"
	"math/rand"
	"slices"
)

// EndpointCounts draws, with a generator seeded by Seed, the endpoint count of every service from the
// scenario's distribution: fixed Count; uniform on [Min, Max]; zipf gives
// 1 + rand.Zipf(S, V, Max-1), so counts lie in [1, Max] with most services
// small. The result has Services.Count entries, then each group's
// services.groups[i].endpoints.count per service of the group
// (ServiceTotal entries in all).
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
	for _, i := range sc.EmptyServices() {
		out[i] = 0
	}
	return sc.groupEndpointCounts(out)
}

// EmptyServices lists, sorted, the indices of the services that
// services.endpoints.withoutEndpoints leaves without endpoints:
// round(share × count) of them, drawn with a generator seeded by Seed+3
// among every service but the first, middle and last (the fixed traffic
// positions keep measuring lookup latency; traffic to random positions
// reaches both kinds).
func (sc *Scenario) EmptyServices() []int {
	n := sc.Services.Count
	share := sc.Services.Endpoints.WithoutEndpoints
	k := int(math.Round(share * float64(n)))
	if k <= 0 || n < 4 {
		return nil
	}
	var cand []int
	for i := 0; i < n; i++ {
		if i != 0 && i != n/2 && i != n-1 {
			cand = append(cand, i)
		}
	}
	rng := rand.New(rand.NewSource(sc.Seed + 3))
	rng.Shuffle(len(cand), func(a, b int) { cand[a], cand[b] = cand[b], cand[a] })
	out := cand[:min(k, len(cand))]
	slices.Sort(out)
	return out
}
