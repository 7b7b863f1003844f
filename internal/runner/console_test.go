//go:build linux

package runner

import (
	"bytes"
	"strings"
	"testing"
)

// TestGuestConsoleFilter keeps the guest run's progress and drops the
// kernel's chatter and its halt messages (the guest's run prints no
// summary: RunGuest).
func TestGuestConsoleFilter(t *testing.T) {
	var out bytes.Buffer
	w := guestConsole(&out, "uml:debian")
	in := "SELinux: CONFIG_SECURITY_SELINUX_CHECKREQPROT_VALUE is non-zero.\numl: kernel 6.1.176 up\numl: module nft_nat not loaded\n" +
		"uml: modules loaded in 3777 ms\nbuilding testbed 4ec463 ...\nipvs: sync.full × 3 (200 services): done in 5.2s\n" +
		"proxybench: mode ipvs at 200 services: sync.full: boom\n\x1b[0;1mFailed to write wtmp record\nHalting.\nreboot: System halted\n"
	for _, chunk := range []string{in[:50], in[50:130], in[130:]} { // split mid-line
		w.Write([]byte(chunk))
	}
	got := out.String()
	for _, want := range []string{"uml: module nft_nat not loaded", "user-mode-linux guest uml:debian: modules loaded in 3777 ms", "  guest: building testbed", "  guest: ipvs: sync.full", "  guest: proxybench: mode ipvs at 200 services"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	for _, bad := range []string{"SELinux", "wtmp", "Halting", "System halted"} {
		if strings.Contains(got, bad) {
			t.Errorf("kept %q in:\n%s", bad, got)
		}
	}
	if guestConsole(nil, "x") != nil {
		t.Error("nil console must stay nil")
	}
}
