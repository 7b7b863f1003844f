// Package testenv holds the test tiers' helpers: kernel tests skip on a
// machine that cannot run them, except when PROXYBENCH_REQUIRE_KERNEL=1
// (set by .ci/run), where a skip is a failure.
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

// RequireKernel skips (or fails, see Skip) unless the test runs as root and
// every named binary is on PATH.
func RequireKernel(t testing.TB, binaries ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Skip(t, "needs root (network namespaces)")
	}
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
