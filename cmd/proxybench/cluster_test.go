package main

import (
	"strings"
	"testing"
	"time"
)

// TestClusterEngineBadInput: the cluster engine's bad input exits 2 with
// the cause and fix, quickly, before any contact with a cluster: a
// kubeconfig that does not exist (run and cleanup), no kubeconfig at all
// (our own message, not client-go's KUBERNETES_MASTER hint), a flag it
// does not take, an unknown cleanup engine, each before "cluster run
// <id>" is printed; rbac needs exactly one subject and prints the roles
// for it.
func TestClusterEngineBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
		env  []string
	}{
		{[]string{"run", "1k-services", "--engine", "cluster", "--kubeconfig", "/nonexistent-pb/kc"}, []string{"--kubeconfig /nonexistent-pb/kc", "does not load", "fix:", "proxybench cluster up"}, nil},
		{[]string{"run", "1k-services", "--engine", "cluster"}, []string{"no kubeconfig: --kubeconfig is not given, and KUBECONFIG=/nonexistent-pb/kc names none", "fix: proxybench cluster up"}, []string{"KUBECONFIG=/nonexistent-pb/kc"}},
		{[]string{"run", "1k-services", "--engine", "cluster", "--kernel", "host"}, []string{"--kernel", "not with --engine cluster"}, nil},
		{[]string{"cleanup", "--engine", "cluster", "--kubeconfig", "/nonexistent-pb/kc"}, []string{"--kubeconfig /nonexistent-pb/kc", "fix:"}, nil},
		{[]string{"cleanup", "--engine", "bogus"}, []string{`--engine "bogus"`, "fix:"}, nil},
		{[]string{"rbac"}, []string{"--user", "--service-account"}, nil},
		{[]string{"rbac", "--service-account", "nons"}, []string{"namespace/name"}, nil},
		// The local cluster: refused before anything is created.
		{[]string{"cluster", "up", "--nodes", "0"}, []string{"--nodes 0", "fix:"}, nil},
		{[]string{"cluster", "up", "--nodes", "2", "--run", "XYZ"}, []string{`--run "XYZ"`, "fix:"}, nil},
		{[]string{"cluster", "up", "--bin", "/nonexistent-pb"}, []string{"--bin /nonexistent-pb", "kube-cluster", "fix:"}, nil},
		{[]string{"cluster", "down", "--run", "nothex"}, []string{`--run "nothex"`, "fix:"}, nil},
	} {
		t0 := time.Now()
		_, stderr, code := run(t, c.env, c.args...)
		if code != 2 || time.Since(t0) > 30*time.Second {
			t.Errorf("%v: exit %d after %s, want 2 within 30 s; stderr %q", c.args, code, time.Since(t0), stderr)
		}
		if strings.Contains(stderr, "cluster run ") || strings.Contains(stderr, "KUBERNETES_MASTER") {
			t.Errorf("%v: stderr %q announces a run, or passes on client-go's KUBERNETES_MASTER hint", c.args, stderr)
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
