package kubeproxy

import (
	"path/filepath"
	"testing"

	"github.com/proxybench/proxybench/topology"
)

// TestXtablesLockPerNode: every node's kube-proxy, one node's included,
// gets an xtables lock file of its own beside its log, so a run never
// waits on the machine's /run/xtables.lock that other runs' legacy
// iptables tools hold; a lock the spec names wins; without a Dir the
// default lock ("") stays.
func TestXtablesLockPerNode(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		spec ProxierSpec
		node string
		want string
	}{
		{"one node", ProxierSpec{Dir: dir}, NodeName(0), filepath.Join(dir, NodeName(0)+".xtables.lock")},
		{"several nodes", ProxierSpec{Dir: dir, Others: make([]*topology.Netns, 1)}, NodeName(1), filepath.Join(dir, NodeName(1)+".xtables.lock")},
		{"named lock", ProxierSpec{Dir: dir, XtablesLock: "/x/lock"}, NodeName(0), "/x/lock"},
		{"no dir", ProxierSpec{}, NodeName(0), ""},
	} {
		p := &Proxier{spec: tc.spec}
		if got := p.xtablesLock(tc.node); got != tc.want {
			t.Errorf("%s: lock %q, want %q", tc.name, got, tc.want)
		}
	}
}
