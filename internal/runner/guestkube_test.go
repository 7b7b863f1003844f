//go:build linux

package runner

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/proxybench/proxybench/internal/uml"
	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
)

// TestGuestSkipsKeepsKubeProxyRows: a scenario with kube-proxy rows bound
// for a guest keeps them, with absolute binaries and at least
// GuestKubeMemoryMiB; one without is left alone.
func TestGuestSkipsKeepsKubeProxyRows(t *testing.T) {
	sc := &scenarios.Scenario{Modes: []string{"none", "ipvs"}, Implementation: []string{scenarios.ImplBuiltin, scenarios.ImplKubeProxy}}
	sc.KubeProxy.Binaries = []string{"bin/kube-proxy", "/opt/kube-proxy-v1.36.3"}
	sc.UML.MemoryMiB = 2048
	if skipped := GuestSkips(sc, "uml:6.12"); len(skipped) != 0 {
		t.Errorf("skipped %v, want none", skipped)
	}
	if !sc.KubeProxyRuns("ipvs") {
		t.Errorf("ipvs no longer runs with kube-proxy: implementation %v", sc.Implementation)
	}
	wd, _ := os.Getwd()
	if want := filepath.Join(wd, "bin/kube-proxy"); sc.KubeProxy.Binaries[0] != want || sc.KubeProxy.Binaries[1] != "/opt/kube-proxy-v1.36.3" {
		t.Errorf("binaries %v, want [%s /opt/kube-proxy-v1.36.3]", sc.KubeProxy.Binaries, want)
	}
	if sc.UML.MemoryMiB != GuestKubeMemoryMiB {
		t.Errorf("guest memory %d MiB, want %d", sc.UML.MemoryMiB, GuestKubeMemoryMiB)
	}
	big := &scenarios.Scenario{Modes: []string{"ipvs"}, Implementation: []string{scenarios.ImplKubeProxy}}
	big.UML.MemoryMiB = 8192
	GuestSkips(big, "uml:6.12")
	if big.UML.MemoryMiB != 8192 {
		t.Errorf("a larger guest was shrunk to %d MiB", big.UML.MemoryMiB)
	}
	plain := &scenarios.Scenario{Modes: []string{"ipvs"}}
	plain.UML.MemoryMiB = 2048
	GuestSkips(plain, "uml:6.12")
	if plain.UML.MemoryMiB != 2048 {
		t.Errorf("a builtin-only guest got %d MiB", plain.UML.MemoryMiB)
	}
}

// TestCopyGuestArtifacts: the guest's result/ folder lands in the host's
// artifact folder and the kube-proxy record points at the copies.
func TestCopyGuestArtifacts(t *testing.T) {
	dir, to := t.TempDir(), filepath.Join(t.TempDir(), "artifacts")
	sub := filepath.Join(dir, guestArtifacts, "ipvs-kube-proxy")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "node-0.kube-proxy.log"), []byte("synced\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inGuest := filepath.Join(uml.GuestMount, guestArtifacts, "ipvs-kube-proxy", "node-0.kube-proxy.log")
	r := &reports.Result{Modes: []reports.ModeResult{{Mode: "ipvs (kube-proxy)", KubeProxy: &measure.KubeProxy{Log: inGuest, Config: "/elsewhere/x.yaml"}}}}
	if err := copyGuestArtifacts(r, dir, to); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(to, "ipvs-kube-proxy", "node-0.kube-proxy.log")
	if b, err := os.ReadFile(want); err != nil || string(b) != "synced\n" {
		t.Fatalf("copied log %s: %q, %v", want, b, err)
	}
	if kp := r.Modes[0].KubeProxy; kp.Log != want || kp.Config != "/elsewhere/x.yaml" {
		t.Errorf("record log %q config %q, want %q and the untouched config", kp.Log, kp.Config, want)
	}
}
