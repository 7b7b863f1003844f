//go:build linux

package runner

import (
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/proxybench/proxybench/scenarios"
)

// wrappedPrograms are the rule programs failure.syncErrors wraps: those the
// modes run through PATH at every sync (nftables too: the churn phase makes
// its proxier resolve nft again, proxymodes.ToolResolver).
var wrappedPrograms = []string{"iptables-legacy-restore", "iptables-nft-restore", "ipset", "nft"}

// maxInjectCalls bounds the precomputed list of failing calls.
const maxInjectCalls = 100000

// injectSyncErrors puts a folder of wrapper scripts first on PATH, one per
// wrapped program found on PATH: each counts its call (one counter for all
// of them, under flock) and either execs the real program or, on a call
// listed in the folder's "fail" file (every N-th, or drawn at rate with
// seed), reads its input and exits 1 with a message, as the real tool
// exits non-zero when it fails. restore puts PATH back and removes the
// folder. A proxier that resolved its program before (knftables resolves nft
// when it is opened) must resolve it again (proxymodes.ToolResolver). The
// nft wrapper counts and fails only rule-programming calls ("nft -f"
// without --check); its version, check and list calls run the real nft
// uncounted, as they program nothing.
func injectSyncErrors(se scenarios.SyncErrorsSpec, seed int64) (restore func(), err error) {
	dir, err := os.MkdirTemp("", "proxybench-syncerrors-")
	if err != nil {
		return nil, err
	}
	var fail strings.Builder
	rng := rand.New(rand.NewSource(seed + 7))
	for n := 1; n <= maxInjectCalls; n++ {
		if (se.Every > 0 && n%se.Every == 0) || (se.Rate > 0 && rng.Float64() < se.Rate) {
			fmt.Fprintln(&fail, n)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "fail"), []byte(fail.String()), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	for _, prog := range wrappedPrograms {
		real, err := exec.LookPath(prog)
		if err != nil {
			continue
		}
		script := fmt.Sprintf(`#!/bin/sh
# proxybench failure.syncErrors: wraps %[1]s
if [ '%[3]s' = nft ]; then
	prog=0
	for a in "$@"; do
		case "$a" in -f) prog=1 ;; -c|--check) prog=0; break ;; esac
	done
	[ "$prog" = 1 ] || exec '%[1]s' "$@"
fi
exec 9>>'%[2]s/lock'
flock 9
n=$(( $(cat '%[2]s/count' 2>/dev/null || echo 0) + 1 ))
echo "$n" > '%[2]s/count'
flock -u 9
if grep -qx "$n" '%[2]s/fail'; then
	cat >/dev/null
	echo "proxybench failure.syncErrors: rule-program call $n fails (%[3]s not run)" >&2
	exit 1
fi
exec '%[1]s' "$@"
`, real, dir, prog)
		if err := os.WriteFile(filepath.Join(dir, prog), []byte(script), 0o755); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	old := os.Getenv("PATH")
	if err := os.Setenv("PATH", dir+string(os.PathListSeparator)+old); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return func() {
		os.Setenv("PATH", old)
		os.RemoveAll(dir)
	}, nil
}
