//go:build linux

package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/uml"
)

// InUML makes the calling kernel test run inside a user-mode-linux guest
// when the host kernel lacks what it needs (hostOK false), as the IPVS
// tests do on a host without IP_VS:
//
//	if testenv.InUML(t, hostHasIPVS(), modules...) { return }
//
// Inside the guest (or when hostOK), it returns false and the test body
// runs here. Otherwise it boots a guest that runs this same test binary
// with -test.run for this test only, with modules loaded, logs the guest's
// output, fails the test when the guest's run failed, and returns true.
// Without user-mode-linux, or in the short tier, it skips (a failure when
// kernel tests are required). Call it after RequireKernel.
func InUML(t *testing.T, hostOK bool, modules ...string) bool {
	t.Helper()
	return InUMLWith(t, UMLOptions{}, hostOK, modules...)
}

// UMLOptions size the guest of InUMLWith.
type UMLOptions struct {
	// MemoryMiB is the guest's memory (default 2048).
	MemoryMiB int
	// Timeout bounds the guest run (default 8 min); the test inside gets
	// one minute less as its -test.timeout.
	Timeout time.Duration
	// Env is added to the test's environment in the guest (KEY=value).
	Env []string
}

// InUMLWith is InUML with a guest sized by o, for tests that run a
// control plane or thousands of services in the guest.
func InUMLWith(t *testing.T, o UMLOptions, hostOK bool, modules ...string) bool {
	t.Helper()
	if o.MemoryMiB <= 0 {
		o.MemoryMiB = 2048
	}
	if o.Timeout <= 0 {
		o.Timeout = 8 * time.Minute
	}
	inner := o.Timeout - time.Minute
	if inner < time.Minute {
		inner = o.Timeout
	}
	if hostOK || uml.InGuest() {
		return false
	}
	if Short() {
		Skip(t, shortReason)
	}
	if _, err := uml.Available(); err != nil {
		Skip(t, "host kernel lacks the feature and "+err.Error())
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o755)
	name := "^" + strings.ReplaceAll(t.Name(), "/", "$/^") + "$"
	env := append([]string{}, o.Env...)
	if Required() {
		env = append(env, "PROXYBENCH_REQUIRE_KERNEL=1")
	}
	// The guest runs in its work folder, outside the checkout: tell
	// RequireKube where the host's bin/ is.
	if d := os.Getenv("PROXYBENCH_KUBE_BIN"); d != "" {
		env = append(env, "PROXYBENCH_KUBE_BIN="+d)
	} else if root, ok := RepoRoot(); ok {
		env = append(env, "PROXYBENCH_KUBE_BIN="+filepath.Join(root, "bin"))
	}
	res, err := uml.Run(context.Background(), uml.Guest{
		MemoryMiB: o.MemoryMiB, Timeout: o.Timeout,
		Modules: append(append([]string{}, uml.BaseModules...), modules...),
		Argv:    []string{exe, "-test.run", name, "-test.v", "-test.count=1", "-test.timeout=" + inner.String()},
		Env:     env, WorkDir: filepath.Join(dir, "guest"),
	})
	if res != nil {
		t.Logf("user-mode-linux guest (kernel %s, boot %v, run %v):\n%s", res.Release, res.Boot.Round(time.Millisecond), res.Elapsed.Round(time.Millisecond), res.Log)
	}
	if err != nil {
		t.Fatalf("guest: %v", err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("test failed inside the user-mode-linux guest (exit %d)", res.ExitCode)
	}
	if strings.Contains(string(res.Log), "--- SKIP") {
		t.Fatalf("test skipped inside the user-mode-linux guest")
	}
	return true
}

// RequireGuest skips (or fails, see Skip) in the short tier and when
// user-mode-linux is not installed: for tests that boot a guest themselves.
func RequireGuest(t testing.TB) {
	t.Helper()
	if Short() {
		Skip(t, shortReason)
	}
	if _, err := uml.Available(); err != nil {
		Skip(t, err.Error())
	}
}
