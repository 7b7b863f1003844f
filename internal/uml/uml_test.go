//go:build linux

package uml_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	. "github.com/proxybench/proxybench/internal/uml"
)

// TestGuestRunsProgramWithIPVS boots a guest, loads ip_vs and checks the
// program ran inside it (its kernel release, /proc/net/ip_vs, a file
// written through the hostfs mount and the exit code back on the host).
func TestGuestRunsProgramWithIPVS(t *testing.T) {
	testenv.RequireGuest(t)
	dir := t.TempDir()
	res, err := Run(context.Background(), Guest{
		MemoryMiB: 512, Timeout: 60 * time.Second, Modules: []string{"ip_vs", "ip_vs_rr"},
		Argv:    []string{"/bin/sh", "-c", "uname -r > out.txt; cat /proc/net/ip_vs >> out.txt; echo $PROXYBENCH_IN_UML >> out.txt; exit 7"},
		WorkDir: dir,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Log)
	}
	if res.ExitCode != 7 {
		t.Errorf("exit code %d, want 7", res.ExitCode)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "out.txt"))
	out := string(b)
	rel, _ := Release()
	if !strings.HasPrefix(out, rel) || !strings.Contains(out, "IP Virtual Server") || !strings.HasSuffix(strings.TrimSpace(out), "1") {
		t.Errorf("guest output %q: want release %s, /proc/net/ip_vs and %s=1", out, rel, InGuestEnv)
	}
	if res.Boot <= 0 || res.Boot > res.Elapsed {
		t.Errorf("boot %v elapsed %v", res.Boot, res.Elapsed)
	}
	t.Logf("guest boot+modules %v, whole run %v", res.Boot, res.Elapsed)
}

// TestGuestTimeoutKills: a program that hangs is killed at the timeout,
// with an error that says so, and no guest process remains.
func TestGuestTimeoutKills(t *testing.T) {
	testenv.RequireGuest(t)
	dir := t.TempDir()
	start := time.Now()
	// The timeout is short: it holds whether it strikes during the boot
	// or in the program, so the test need not wait for a boot under load.
	res, err := Run(context.Background(), Guest{MemoryMiB: 256, Timeout: 3 * time.Second, Argv: []string{"/bin/sleep", "600"}, WorkDir: dir})
	if err == nil || !strings.Contains(err.Error(), "did not finish within") {
		t.Fatalf("err = %v, want a timeout error", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("took %v after a 3 s timeout", d)
	}
	_ = res
	if pids := umlProcesses(dir); len(pids) > 0 {
		t.Errorf("guest processes remain: %v", pids)
	}
}

// TestGuestCrashIsAnError: a guest whose program never reports an exit
// code (here: the kernel halts under it) is an error, not a success.
func TestGuestCrashIsAnError(t *testing.T) {
	testenv.RequireGuest(t)
	dir := t.TempDir()
	_, err := Run(context.Background(), Guest{MemoryMiB: 256, Timeout: 60 * time.Second, Argv: []string{"/sbin/halt", "-f"}, WorkDir: dir})
	if err == nil || !strings.Contains(err.Error(), "stopped before the program finished") {
		t.Fatalf("err = %v, want a crash error", err)
	}
}

// umlProcesses lists running processes whose command line names dir
// (the guest's work folder: the kernel and its helpers). Matching the
// folder, not the test's name, leaves out this test process and go test
// when they were started with -run naming the test.
func umlProcesses(dir string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), dir) {
			out = append(out, e.Name())
		}
	}
	return out
}
