//go:build linux

package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/internal/uml"
	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
)

// TestGuestScenarioKeepsKubeProxyRows: a scenario with kube-proxy rows
// bound for a guest keeps them, with absolute binaries and at least
// GuestKubeMemoryMiB, in a copy (the caller's scenario is left alone);
// one without is left alone.
func TestGuestScenarioKeepsKubeProxyRows(t *testing.T) {
	t.Setenv(KubeBinEnv, "") // relative binaries resolve against the folder, not the caller's PROXYBENCH_KUBE_BIN
	in := &scenarios.Scenario{Modes: []string{"none", "ipvs"}, Implementation: []string{scenarios.ImplBuiltin, scenarios.ImplKubeProxy}}
	in.KubeProxy.Binaries = []string{"bin/kube-proxy", "/opt/kube-proxy-v1.36.3"}
	in.UML.MemoryMiB = 2048
	sc := guestScenario(in)
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
	if in.KubeProxy.Binaries[0] != "bin/kube-proxy" || in.UML.MemoryMiB != 2048 {
		t.Errorf("the caller's scenario changed: binaries %v, %d MiB", in.KubeProxy.Binaries, in.UML.MemoryMiB)
	}
	big := &scenarios.Scenario{Modes: []string{"ipvs"}, Implementation: []string{scenarios.ImplKubeProxy}}
	big.UML.MemoryMiB = 8192
	if got := guestScenario(big).UML.MemoryMiB; got != 8192 {
		t.Errorf("a larger guest was shrunk to %d MiB", got)
	}
	plain := &scenarios.Scenario{Modes: []string{"ipvs"}}
	plain.UML.MemoryMiB = 2048
	if got := guestScenario(plain).UML.MemoryMiB; got != 2048 {
		t.Errorf("a builtin-only guest got %d MiB", got)
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

// TestKeepGuestArtifactsWithoutResult: a guest stopped before it wrote
// its result (SIGINT in the middle of a phase, no mode finished) still
// has its streamed samples copied to the run's artifact folder before
// its work folder goes; with nothing streamed, or no folder to copy to,
// nothing is kept and kept says so.
func TestKeepGuestArtifactsWithoutResult(t *testing.T) {
	dir, to := t.TempDir(), filepath.Join(t.TempDir(), "artifacts")
	if kept, err := keepGuestArtifacts(nil, dir, to); kept || err != nil {
		t.Fatalf("no artifacts: kept %v, %v", kept, err)
	}
	sub := filepath.Join(dir, guestArtifacts, "slicechurn")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "ipvs-kube-proxy.jsonl"), []byte("{\"sample\":{\"i\":1}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if kept, err := keepGuestArtifacts(nil, dir, ""); kept || err != nil {
		t.Fatalf("no artifact folder: kept %v, %v", kept, err)
	}
	kept, err := keepGuestArtifacts(nil, dir, to)
	if !kept || err != nil {
		t.Fatalf("kept %v, %v", kept, err)
	}
	if b, err := os.ReadFile(filepath.Join(to, "slicechurn", "ipvs-kube-proxy.jsonl")); err != nil || !strings.Contains(string(b), `"i":1`) {
		t.Errorf("the stream was not kept: %q, %v", b, err)
	}
}
