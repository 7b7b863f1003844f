// Package testenv holds the test tiers' helpers. There are two tiers:
//
//   - short (go test -short, make test-short): no kernel, no guest. Runs as
//     any user, changes nothing on the machine; RequireKernel, RequireGuest
//     and InUML skip every kernel and guest test. This is the tier a
//     contributor runs in a loop.
//   - full (go test, make test): kernel tests run as root in throwaway
//     network namespaces, IPVS tests in a user-mode-linux guest when the
//     host kernel lacks IP_VS.
//
// A third switch, PROXYBENCH_SLOW=1 (make test-slow, make bench-full),
// adds the tests and benchmark cases that take minutes or repeat what a
// cheaper default test covers (RequireSlow); make test stays under 10 min.
//
// A kernel test skips on a machine that cannot run it, except when
// PROXYBENCH_REQUIRE_KERNEL=1 (set by .ci/run), where every skip through
// this package is a failure (so is combining it with -short).
// Benchmarks use the same helpers: testing.TB is enough.
package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"testing"

	"github.com/proxybench/proxybench/topology"
)

// Required reports whether PROXYBENCH_REQUIRE_KERNEL=1 is set.
func Required() bool { return os.Getenv("PROXYBENCH_REQUIRE_KERNEL") == "1" }

// Skip skips the test with reason, or fails it when kernel tests are required.
func Skip(t testing.TB, reason string) {
	t.Helper()
	if Required() {
		t.Fatalf("kernel test cannot run (PROXYBENCH_REQUIRE_KERNEL=1): %s", reason)
	}
	t.Skip(reason)
}

// Short reports whether this is the short tier (go test -short): no
// kernel, no guest.
func Short() bool { return testing.Short() }

// shortReason is the skip message of kernel and guest tests in the short tier.
const shortReason = "short tier (-short): no kernel, no guest; run it without -short, as root (make test, make bench)"

// RequireKernel skips (or fails, see Skip) in the short tier, and unless
// the test runs as root and every named binary is on PATH.
func RequireKernel(t testing.TB, binaries ...string) {
	t.Helper()
	if Short() {
		Skip(t, shortReason)
	}
	RequireRoot(t)
	RequireTool(t, binaries...)
}

// SlowEnv is the variable that enables the slow tests (make test-slow)
// and benchmark cases taking minutes per iteration (make bench-full).
const SlowEnv = "PROXYBENCH_SLOW"

// Slow reports whether PROXYBENCH_SLOW=1 is set.
func Slow() bool { return os.Getenv(SlowEnv) == "1" }

// RequireSlow skips a slow test (one whose coverage the default suite
// keeps more cheaply) or a benchmark case that takes minutes per
// iteration unless PROXYBENCH_SLOW=1. The skip is a choice, not a missing
// kernel, so it is never a failure.
func RequireSlow(tb testing.TB, why string) {
	tb.Helper()
	if !Slow() {
		tb.Skip(why + "; set " + SlowEnv + "=1 (make test-slow, make bench-full) to run it")
	}
}

// RequireRoot skips (or fails, see Skip) unless the test runs as root. For
// tests that need the privilege but touch no kernel state (the CLI's
// checks that come after its root check); it does not skip in the short
// tier.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Skip(t, "needs root (network namespaces)")
	}
}

// RequireTool skips (or fails, see Skip) unless every named binary is on
// PATH. For tests that run a tool but need no kernel (a browser).
func RequireTool(t testing.TB, binaries ...string) {
	t.Helper()
	for _, b := range binaries {
		if _, err := exec.LookPath(b); err != nil {
			Skip(t, "needs "+b+" on PATH (make setup installs it)")
		}
	}
}

// NewNetns creates a throwaway named namespace pb-<6 hex>-<suffix>, deleted
// when the test ends (proxybench cleanup also removes it if the test dies).
func NewNetns(t testing.TB, suffix string) *topology.Netns {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	name := "pb-" + hex.EncodeToString(b) + "-" + suffix
	n, err := topology.CreateNetns(name)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		n.Close()
		if err := topology.DeleteNetns(name); err != nil {
			t.Errorf("%v", err)
		}
	})
	return n
}
