package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Shim actions: what a KubeProxyShim's program does from its at-th call on.
const (
	// ShimKill sends SIGKILL to the kube-proxy that ran the program (its
	// parent) and fails the call: kube-proxy dies in the middle of a sync.
	ShimKill = "kill"
	// ShimBlock never returns (sleeps 120 s, the sync's own bound): the
	// sync that ran it does not finish.
	ShimBlock = "block"
)

// KubeProxyShim writes, in a temporary folder of t, a wrapper around the
// kube-proxy binary real and returns its path (to give as the kube-proxy
// binary). When the wrapper runs as kube-proxy's daemon (`--config FILE
// --v N`, as kubeproxy.Start runs it), it puts a shim of program (a rule
// program kube-proxy runs by name, such as "iptables-restore") first on
// its PATH: the shim counts its calls over the test, runs the real
// program (the next of that name on PATH) for the calls before the at-th,
// and from the at-th on does action (ShimKill or ShimBlock). Every other
// run of the wrapper (--version, --help, the dry run's
// --write-config-to, --cleanup) is kube-proxy unchanged. With ShimKill
// at 1, iptables-restore kills kube-proxy in its first sync, before any
// rule is written (its canary chains and jumps are created earlier, with
// iptables); at 2, right after the first sync, at its next.
func KubeProxyShim(t testing.TB, real, program string, at int, action string) string {
	t.Helper()
	if action != ShimKill && action != ShimBlock {
		t.Fatalf("KubeProxyShim: action %q, want %q or %q", action, ShimKill, ShimBlock)
	}
	dir := t.TempDir()
	shims := filepath.Join(dir, "shims")
	if err := os.Mkdir(shims, 0o755); err != nil {
		t.Fatal(err)
	}
	do := "kill -9 $PPID; exit 1"
	if action == ShimBlock {
		do = "exec sleep 120"
	}
	shim := fmt.Sprintf(`#!/bin/sh
# proxybench test shim of %[1]s (testenv.KubeProxyShim): call %[2]d on: %[3]s
n=$(($(cat %[4]q 2>/dev/null || echo 0) + 1))
echo $n > %[4]q
if [ $n -ge %[2]d ]; then
	%[5]s
fi
PATH=${PATH#%[6]s:}
exec %[1]s "$@"
`, program, at, action, filepath.Join(dir, "calls"), do, shims)
	if err := os.WriteFile(filepath.Join(shims, program), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf(`#!/bin/sh
# proxybench test wrapper of %[1]s (testenv.KubeProxyShim)
if [ "$1" = --config ] && [ "$3" = --v ]; then
	PATH=%[2]s:$PATH
	export PATH
fi
exec %[1]q "$@"
`, real, shims)
	path := filepath.Join(dir, "kube-proxy")
	if err := os.WriteFile(path, []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// ShimCalls returns how many times the shim of the wrapper at path
// (KubeProxyShim) has been called.
func ShimCalls(t testing.TB, wrapper string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(wrapper), "calls"))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	var n int
	fmt.Sscan(string(b), &n)
	return n
}
