//go:build linux

package testenv_test

import (
	"testing"

	"github.com/proxybench/proxybench/internal/testenv"
)

// TestShortTierSkipsKernelAndGuest: in the short tier (-short) the kernel
// and guest gates skip before the test body, whoever runs the test (root
// included), and RequireSlow skips unless PROXYBENCH_SLOW=1.
func TestShortTierSkipsKernelAndGuest(t *testing.T) {
	if testenv.Required() {
		t.Skip("PROXYBENCH_REQUIRE_KERNEL=1 turns these skips into failures")
	}
	gates := map[string]func(testing.TB){
		"RequireKernel": func(tb testing.TB) { testenv.RequireKernel(tb) },
		"RequireGuest":  func(tb testing.TB) { testenv.RequireGuest(tb) },
	}
	for name, gate := range gates {
		ran := false
		ok := t.Run(name, func(t *testing.T) {
			gate(t)
			ran = true
		})
		if !ok {
			t.Errorf("%s failed", name)
		}
		if testing.Short() && ran {
			t.Errorf("%s let the body run in the short tier", name)
		}
	}
	t.Setenv(testenv.SlowEnv, "")
	ran := false
	t.Run("RequireSlow", func(t *testing.T) {
		testenv.RequireSlow(t, "slow")
		ran = true
	})
	if ran {
		t.Errorf("RequireSlow let the body run without %s=1", testenv.SlowEnv)
	}
}
