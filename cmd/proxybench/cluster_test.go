package main

import (
	"strings"
	"testing"
	"time"
)

// TestClusterEngineBadInput: the cluster engine's bad input exits 2 with
// the cause and fix, quickly, before any contact with a cluster: a
// kubeconfig that does not exist (run and cleanup), a flag it does not
// take, an unknown cleanup engine; rbac needs exactly one subject and
// prints the roles for it.
func TestClusterEngineBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"run", "1k-services", "--engine", "cluster", "--kubeconfig", "/nonexistent-pb/kc"}, []string{"--kubeconfig /nonexistent-pb/kc", "does not load", "fix:"}},
		{[]string{"run", "1k-services", "--engine", "cluster", "--kernel", "host"}, []string{"--kernel", "not with --engine cluster"}},
		{[]string{"cleanup", "--engine", "cluster", "--kubeconfig", "/nonexistent-pb/kc"}, []string{"--kubeconfig /nonexistent-pb/kc", "fix:"}},
		{[]string{"cleanup", "--engine", "bogus"}, []string{`--engine "bogus"`, "fix:"}},
		{[]string{"rbac"}, []string{"--user", "--service-account"}},
		{[]string{"rbac", "--service-account", "nons"}, []string{"namespace/name"}},
		// The local cluster: refused before anything is created.
		{[]string{"cluster", "up", "--nodes", "0"}, []string{"--nodes 0", "fix:"}},
		{[]string{"cluster", "up", "--nodes", "2", "--run", "XYZ"}, []string{`--run "XYZ"`, "fix:"}},
		{[]string{"cluster", "up", "--bin", "/nonexistent-pb"}, []string{"--bin /nonexistent-pb", "kube-cluster", "fix:"}},
		{[]string{"cluster", "down", "--run", "nothex"}, []string{`--run "nothex"`, "fix:"}},
	} {
		t0 := time.Now()
		_, stderr, code := run(t, nil, c.args...)
		if code != 2 || time.Since(t0) > 30*time.Second {
			t.Errorf("%v: exit %d after %s, want 2 within 30 s; stderr %q", c.args, code, time.Since(t0), stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v: stderr %q lacks %q", c.args, stderr, w)
			}
		}
	}
	out, _, code := run(t, nil, "rbac", "--user", "alice")
	if code != 0 || !strings.Contains(out, "kind: ClusterRole\n") || !strings.Contains(out, "name: alice") || !strings.Contains(out, "pods/proxy") {
		t.Errorf("rbac --user alice: exit %d\n%s", code, out)
	}
}
