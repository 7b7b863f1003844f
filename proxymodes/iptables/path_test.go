//go:build linux

package iptables

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenIPTablesLooksUpPATH: the iptables tool go-iptables runs is the
// one first on PATH, as kube-proxy's, so a wrapper put there (as
// failure.syncErrors does) is what runs: its --version and rule calls
// reach the wrapper. A tool on no PATH folder is an error naming it.
func TestOpenIPTablesLooksUpPATH(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	script := "#!/bin/sh\necho \"$@\" >> " + calls + "\necho 'iptables v1.8.10 (legacy)'\n"
	if err := os.WriteFile(filepath.Join(dir, "iptables-legacy"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	c, err := openIPTables("iptables-legacy")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := c.Exists("nat", "PREROUTING", "-j", "KUBE-SERVICES"); err != nil || !ok {
		t.Fatalf("Exists through the wrapper: %v, %v", ok, err)
	}
	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatalf("the wrapper first on PATH did not run: %v", err)
	}
	if got := string(b); !strings.Contains(got, "--version") || !strings.Contains(got, "PREROUTING -j KUBE-SERVICES") {
		t.Errorf("wrapper calls %q, want --version and the rule check", got)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := openIPTables("iptables-legacy"); err == nil || !strings.Contains(err.Error(), "iptables-legacy") {
		t.Errorf("open with no iptables-legacy on PATH: %v, want an error naming it", err)
	}
}

// TestResolveToolsReopens: after ResolveTools the proxier opens its
// iptables tool again (looked up on PATH anew) at its next use.
func TestResolveToolsReopens(t *testing.T) {
	ctx := context.Background()
	p, _, paths := newFakeProxier(BackendLegacy)
	if _, err := p.Sync(ctx, genServices(2, 1)); err != nil {
		t.Fatal(err)
	}
	if err := p.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if len(*paths) != 1 {
		t.Fatalf("opened %q before ResolveTools, want once", *paths)
	}
	p.ResolveTools()
	if err := p.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if len(*paths) != 2 || (*paths)[1] != "iptables-legacy" {
		t.Errorf("opened %q, want iptables-legacy again after ResolveTools", *paths)
	}
}
