//go:build linux

package uml

import (
	"slices"
	"strings"
	"testing"
)

// TestKernelArgsUMID: the kernel is named after its work folder (umid,
// so ps shows the run ID) and keeps its umid folder (pid file, mconsole
// socket) inside it (uml_dir), unless the socket's path would not fit a
// sockaddr_un; the init script is the folder's.
func TestKernelArgsUMID(t *testing.T) {
	dir := "/tmp/proxybench-uml-3fa9c1-12345"
	args := kernelArgs(Guest{MemoryMiB: 512, WorkDir: dir}, dir+"/.init.sh")
	for _, want := range []string{"mem=512M", "rootfstype=hostfs", "init=" + dir + "/.init.sh", "umid=proxybench-uml-3fa9c1-12345", "uml_dir=" + dir} {
		if !slices.Contains(args, want) {
			t.Errorf("kernel args %q lack %q", args, want)
		}
	}
	if guestDir([]byte(strings.Join(append([]string{"/k/linux"}, args...), "\x00"))) != dir {
		t.Errorf("guestDir does not read %s back from %q", dir, args)
	}
	long := "/tmp/" + strings.Repeat("d", 90) + "/guest"
	for _, a := range kernelArgs(Guest{MemoryMiB: 512, WorkDir: long}, long+"/.init.sh") {
		if strings.HasPrefix(a, "uml_dir=") || strings.HasPrefix(a, "umid=") {
			t.Errorf("work folder of %d bytes: %q given, whose mconsole socket path cannot be bound", len(long), a)
		}
	}
}

// TestGuestDir: only a hostfs boot whose init script lives in a run's
// work folder names a guest of a run.
func TestGuestDir(t *testing.T) {
	for cmdline, want := range map[string]string{
		"linux\x00mem=512M\x00rootfstype=hostfs\x00init=/tmp/proxybench-uml-3fa9c1-1/.init.sh\x00": "/tmp/proxybench-uml-3fa9c1-1",
		"linux\x00rootfstype=hostfs\x00init=/tmp/TestFoo/001/guest/.init.sh\x00":                   "", // a test's guest
		"vim\x00init=/tmp/proxybench-uml-3fa9c1-1/.init.sh\x00":                                    "", // not a hostfs boot
		"grep\x00rootfstype=hostfs init=/tmp/proxybench-uml-3fa9c1-1/.init.sh\x00":                 "", // one argument, a pattern
	} {
		if got := guestDir([]byte(cmdline)); got != want {
			t.Errorf("guestDir(%q) = %q, want %q", cmdline, got, want)
		}
	}
}
