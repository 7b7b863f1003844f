package sim

import (
	"math"
	"math/rand"
	"testing"
)

// TestStatisticChoice: kube-proxy's 1/(n-i) chain is uniform.
func TestStatisticChoice(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, n := range []int{1, 2, 3, 7} {
		hits := make([]int, n)
		const N = 70000
		for i := 0; i < N; i++ {
			ep, rules := StatisticChoice(n, rng)
			if rules != ep+1 {
				t.Fatalf("rules %d for endpoint %d", rules, ep)
			}
			hits[ep]++
		}
		for k, h := range hits {
			if math.Abs(float64(h)-N/float64(n)) > 5*math.Sqrt(N/float64(n)) {
				t.Fatalf("n=%d: endpoint %d got %d of %d", n, k, h, N)
			}
		}
	}
	if p := statProb(2); p != 0x40000000 {
		t.Fatalf("probability 0.5 is %#x, want 0x40000000", p)
	}
}

// TestNumgenChoice: reciprocal_scale stays in [0, n) and is uniform.
func TestNumgenChoice(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	hits := make([]int, 3)
	for i := 0; i < 30000; i++ {
		hits[NumgenChoice(3, rng)]++
	}
	for _, h := range hits {
		if h < 9500 || h > 10500 {
			t.Fatalf("numgen hits %v", hits)
		}
	}
}
