//go:build linux

package runner

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
)

// wrappedPrograms are the rule programs failure.syncErrors wraps for a
// builtin row: those the modes run through PATH at every sync (nftables
// too: the churn phase makes its proxier resolve nft again,
// proxymodes.ToolResolver).
var wrappedPrograms = []string{"iptables-legacy-restore", "iptables-nft-restore", "ipset", "nft"}

// kubeProxyWrapped are the rule programs failure.syncErrors wraps for a
// kube-proxy row: the ones kube-proxy runs by name, through its PATH,
// once per sync of an IP family to program it: `iptables-restore -w 5
// --noflush --counters` (k8s.io/kubernetes/pkg/util/iptables RestoreAll,
// the iptables and ipvs modes; the name its back end's folder of
// symlinks gives, kubeproxy.BackendPath) and `nft -f -`
// (sigs.k8s.io/knftables Run, the nftables mode; knftables resolves nft
// once, when kube-proxy starts, so the wrapper is on its PATH from its
// start). Only IPv4's calls count and fail (kube-proxy runs an IPv6
// proxier too; the figures are IPv4's): ip6tables-restore is not
// wrapped, and an `nft -f` transaction of the ip6 family runs uncounted.
// ipset is not wrapped: kube-proxy's IPVS mode runs one ipset process
// per set entry, and a failed `ipset add` is not a failed sync there.
var kubeProxyWrapped = []string{"iptables-restore", "nft"}

// maxInjectCalls bounds the precomputed list of failing calls.
const maxInjectCalls = 100000

// syncErrorWrappers is a folder of failure.syncErrors wrapper scripts,
// one per wrapped rule program, meant to be first on the PATH of the
// process that runs the programs (proxybench itself for a builtin row,
// kube-proxy for a kube-proxy row). Each script removes its folder from
// PATH and runs the next program of its name there, counting every call
// (one counter for all of the folder's programs, under flock, in file
// "count"); while the folder is armed (file "fail" lists the failing
// call numbers) a listed call reads its input and exits 1 with a message
// instead, as the real tool exits non-zero when it fails, and is
// appended to file "failed". The nft wrapper counts only
// rule-programming calls ("nft -f" without --check); its version, check
// and list calls run the real nft uncounted, as they program nothing.
// With ipv4Only, an nft transaction whose first command names the ip6
// family also runs uncounted (kube-proxy's IPv6 proxier).
type syncErrorWrappers struct{ dir string }

// writeSyncErrorWrappers writes the wrapper scripts of progs into dir
// (created), unarmed: every call runs the real program. A program not
// on PATH gets no wrapper.
func writeSyncErrorWrappers(dir string, progs []string, ipv4Only bool) (*syncErrorWrappers, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for _, prog := range progs {
		if _, err := exec.LookPath(prog); err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, prog), []byte(wrapperScript(dir, prog, ipv4Only)), 0o755); err != nil {
			return nil, err
		}
	}
	return &syncErrorWrappers{dir: dir}, nil
}

// wrapperScript is the wrapper of prog in folder dir (see
// syncErrorWrappers).
func wrapperScript(dir, prog string, ipv4Only bool) string {
	v4 := ""
	if ipv4Only {
		// The first command of a knftables transaction names its family:
		// "add table ip6 kube-proxy ...".
		v4 = `	in=$(mktemp "$D/in.XXXXXX")
	cat > "$in"
	if head -n 1 "$in" | grep -Eq '^[a-z]+ [a-z]+ ip6 '; then
		nft "$@" < "$in"; rc=$?; rm -f "$in"; exit $rc
	fi
`
	}
	return fmt.Sprintf(`#!/bin/sh
# proxybench failure.syncErrors: wraps %[2]s (the next %[2]s on PATH after this folder)
D='%[1]s'
PATH=$(printf '%%s' ":$PATH:" | sed "s#:$D:#:#g; s#^:##; s#:\$##")
export PATH
in=
if [ '%[2]s' = nft ]; then
	prog=0
	for a in "$@"; do
		case "$a" in -f|--file) prog=1 ;; -c|--check) prog=0; break ;; esac
	done
	[ "$prog" = 1 ] || exec nft "$@"
%[3]sfi
exec 9>>"$D/lock"
flock 9
n=$(( $(cat "$D/count" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$D/count"
fail=0
if [ -f "$D/fail" ] && grep -qx "$n" "$D/fail"; then
	fail=1
	echo "$n %[2]s" >> "$D/failed"
fi
flock -u 9
if [ "$fail" = 1 ]; then
	if [ -n "$in" ]; then rm -f "$in"; else cat >/dev/null; fi
	echo "proxybench failure.syncErrors: rule-program call $n fails (%[2]s not run)" >&2
	exit 1
fi
if [ -n "$in" ]; then
	%[2]s "$@" < "$in"; rc=$?; rm -f "$in"; exit $rc
fi
exec %[2]s "$@"
`, dir, prog, v4)
}

// arm makes the wrappers fail the calls se picks (every se.Every-th, or
// each at se.Rate drawn with seed), counted from 1 again.
func (w *syncErrorWrappers) arm(se scenarios.SyncErrorsSpec, seed int64) error {
	var fail strings.Builder
	rng := rand.New(rand.NewSource(seed + 7))
	for n := 1; n <= maxInjectCalls; n++ {
		if (se.Every > 0 && n%se.Every == 0) || (se.Rate > 0 && rng.Float64() < se.Rate) {
			fmt.Fprintln(&fail, n)
		}
	}
	for _, f := range []string{"count", "failed"} {
		if err := os.Remove(filepath.Join(w.dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return os.WriteFile(filepath.Join(w.dir, "fail"), []byte(fail.String()), 0o644)
}

// disarm makes every call run the real program again (the counts stay).
func (w *syncErrorWrappers) disarm() error {
	if err := os.Remove(filepath.Join(w.dir, "fail")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// counts are the calls the wrappers counted since arm, and those they
// failed.
func (w *syncErrorWrappers) counts() (calls, failed int) {
	b, _ := os.ReadFile(filepath.Join(w.dir, "count"))
	calls, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	f, _ := os.ReadFile(filepath.Join(w.dir, "failed"))
	return calls, bytes.Count(f, []byte("\n"))
}

// injected is the wrappers' account for a churn phase's result.
func (w *syncErrorWrappers) injected() *reports.InjectedErrors {
	calls, failed := w.counts()
	var progs []string
	if ents, err := os.ReadDir(w.dir); err == nil {
		for _, e := range ents {
			if e.Type().IsRegular() && isExecutable(filepath.Join(w.dir, e.Name())) {
				progs = append(progs, e.Name())
			}
		}
	}
	return &reports.InjectedErrors{Calls: calls, Failed: failed, Programs: progs}
}

// injectSyncErrors is failure.syncErrors for a builtin row: a temporary
// folder of wrappers (syncErrorWrappers) of wrappedPrograms, armed, put
// first on this process's PATH. restore puts PATH back and removes the
// folder; w counts the calls until then. A proxier that resolved its
// program before (knftables resolves nft when it is opened) must resolve
// it again (proxymodes.ToolResolver).
func injectSyncErrors(se scenarios.SyncErrorsSpec, seed int64) (w *syncErrorWrappers, restore func(), err error) {
	dir, err := os.MkdirTemp("", "proxybench-syncerrors-")
	if err != nil {
		return nil, nil, err
	}
	if w, err = writeSyncErrorWrappers(dir, wrappedPrograms, false); err == nil {
		err = w.arm(se, seed)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	old := os.Getenv("PATH")
	if err := os.Setenv("PATH", dir+string(os.PathListSeparator)+old); err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return w, func() {
		os.Setenv("PATH", old)
		os.RemoveAll(dir)
	}, nil
}
