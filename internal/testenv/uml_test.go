//go:build linux

package testenv_test

import (
	"os"
	"testing"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/internal/uml"
)

// TestInUMLRunsTheTestInTheGuest: with hostOK false the body runs only
// inside the guest, where /proc/net/ip_vs exists once ip_vs is loaded.
func TestInUMLRunsTheTestInTheGuest(t *testing.T) {
	testenv.RequireKernel(t)
	if testenv.InUML(t, false, "ip_vs") {
		return
	}
	if !uml.InGuest() {
		t.Fatal("body ran outside the guest")
	}
	if _, err := os.Stat("/proc/net/ip_vs"); err != nil {
		t.Fatalf("no IP_VS in the guest: %v", err)
	}
	ns := testenv.NewNetns(t, "umlprobe")
	if ns.Name == "" {
		t.Fatal("no namespace")
	}
}
