//go:build linux

package uml_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/proxybench/proxybench/internal/uml"
	"github.com/proxybench/proxybench/topology"
)

// fakeEnv turns this test binary into the processes of a fake guest run
// (TestFakeGuestHelper).
const fakeEnv = "PROXYBENCH_UML_FAKE"

// TestFakeGuestHelper is not a test. Under fakeEnv=holder:<runID> it is a
// run's proxybench: it holds a work folder of run runID (NewWorkDir) and
// starts a fake guest in it, as Run starts a kernel but without a
// parent-death signal (a guest that outlives its proxybench), prints
// "ready <folder>" and waits. Under fakeEnv=guest it is that guest: its
// command line boots "from" the folder as a user-mode-linux kernel's
// does (rootfstype=hostfs init=<folder>/.init.sh); it starts a sleep in
// its process group, as the kernel's helpers are, and waits.
func TestFakeGuestHelper(t *testing.T) {
	v := os.Getenv(fakeEnv)
	switch {
	case v == "":
		t.Skip("helper process of the CleanupOrphans tests")
	case v == "guest":
		if err := exec.Command("sleep", "600").Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Minute)
	case strings.HasPrefix(v, "holder:"):
		wd, err := NewWorkDir(strings.TrimPrefix(v, "holder:"))
		if err != nil {
			t.Fatal(err)
		}
		g := fakeGuest(wd.Path)
		if err := g.Start(); err != nil {
			t.Fatal(err)
		}
		fmt.Println("ready", wd.Path)
		time.Sleep(10 * time.Minute)
	}
}

// fakeGuest is the command of a fake guest booted from work folder dir,
// a process group leader as Run's kernel is.
func fakeGuest(dir string) *exec.Cmd {
	g := exec.Command(os.Args[0], "-test.run=^TestFakeGuestHelper$", "--", "mem=64M", "rootfstype=hostfs", "init="+filepath.Join(dir, ".init.sh"))
	g.Env = append(os.Environ(), fakeEnv+"=guest")
	g.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return g
}

// startHolder starts a fake run's proxybench (TestFakeGuestHelper) and
// returns it with its work folder, once its guest and the guest's helper
// are up.
func startHolder(t *testing.T, runID string) (*exec.Cmd, string) {
	t.Helper()
	h := exec.Command(os.Args[0], "-test.run=^TestFakeGuestHelper$", "-test.v")
	h.Env = append(os.Environ(), fakeEnv+"=holder:"+runID)
	out, err := h.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	h.Stderr = os.Stderr
	if err := h.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Process.Kill(); h.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if dir, ok := strings.CutPrefix(sc.Text(), "ready "); ok {
			go func() {
				for sc.Scan() {
				}
			}()
			waitFor(t, func() bool { return len(GuestProcesses()[dir]) == 2 }, "the fake guest and its helper of "+dir)
			for _, p := range GuestProcesses()[dir] {
				t.Cleanup(func() { syscall.Kill(-p.PGID, syscall.SIGKILL) })
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			return h, dir
		}
	}
	t.Fatalf("the fake run %s did not get ready", runID)
	return nil, ""
}

func waitFor(t *testing.T, ok func() bool, what string) {
	t.Helper()
	for range 250 {
		if ok() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// alive reports whether pid runs (exists and is not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER (include/uapi/linux/prctl.h).
const prSetChildSubreaper = 36

// TestCleanupOrphansGoneRunWhateverItsParent: two fake guest runs, each a
// holder process (its proxybench: NewWorkDir) and a guest that does not
// die with it, plus the guest's helper in its process group. This test
// process is a child subreaper (as systemd --user or a container's init
// can be), so an orphaned guest is reparented to it, not to init: the
// case the former rule (parent pid 1 means orphaned) missed. While the
// holders live, CleanupOrphans keeps both guests and names the holder.
// After kill -9 of run A's holder, its guest is still running with a
// living parent; CleanupOrphans(A) kills the guest and its helper and
// removes A's folder, and run B, live, is untouched; once B's holder is
// killed too, B goes the same way.
func TestCleanupOrphansGoneRunWhateverItsParent(t *testing.T) {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		t.Fatalf("prctl(PR_SET_CHILD_SUBREAPER): %v", e)
	}
	t.Cleanup(func() { syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 0, 0) })
	a, b := topology.NewRunID(), topology.NewRunID()
	ha, da := startHolder(t, a)
	hb, db := startHolder(t, b)
	guestsB := GuestProcesses()[db]

	for _, id := range []string{a, b} {
		c, err := CleanupOrphans(id, nil)
		if err != nil || len(c.Killed)+len(c.Removed) > 0 || len(c.Kept) != 1 {
			t.Fatalf("cleanup of live run %s: killed %v, removed %v, kept %v, err %v; want it kept", id, c.Killed, c.Removed, c.Kept, err)
		}
		h := ha
		if id == b {
			h = hb
		}
		if want := fmt.Sprintf("held by pid %d", h.Process.Pid); !strings.Contains(c.Kept[0], want) {
			t.Errorf("kept %q, want it to name the holder (%s)", c.Kept[0], want)
		}
	}

	if err := ha.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	ha.Wait()
	// The guest runs on, reparented to this process: a living parent.
	waitFor(t, func() bool {
		gp := GuestProcesses()[da]
		return len(gp) == 2 && slices.ContainsFunc(gp, func(p GuestProcess) bool { return p.PPID == os.Getpid() })
	}, "run "+a+"'s guest to be reparented to this process")
	guestsA := GuestProcesses()[da]
	c, err := CleanupOrphans(a, func(dir string) (string, error) { return "kept " + dir, nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cleanup of run %s: killed %v, removed %v, saved %v", a, c.Killed, c.Removed, c.Saved)
	if len(c.Killed) != 2 || !slices.Equal(c.Removed, []string{da}) || !slices.Equal(c.Saved, []string{"kept " + da}) || len(c.Kept) != 0 {
		t.Errorf("cleanup of gone run %s: killed %v, removed %v, saved %v, kept %v; want its guest and helper killed, %s saved and removed", a, c.Killed, c.Removed, c.Saved, c.Kept, da)
	}
	for _, p := range guestsA {
		if alive(p.PID) {
			t.Errorf("guest process %d of gone run %s still runs", p.PID, a)
		}
		var ws syscall.WaitStatus
		syscall.Wait4(p.PID, &ws, syscall.WNOHANG, nil) // ours now: reap it
	}
	if _, err := os.Stat(da); !os.IsNotExist(err) {
		t.Errorf("work folder %s of gone run %s: %v, want it removed", da, a, err)
	}
	for _, p := range guestsB {
		if !alive(p.PID) {
			t.Errorf("guest process %d of live run %s was killed", p.PID, b)
		}
	}
	if _, err := os.Stat(filepath.Join(db, ".held")); err != nil {
		t.Errorf("live run %s's folder: %v", b, err)
	}

	hb.Process.Kill()
	hb.Wait()
	waitFor(t, func() bool { return !alive(hb.Process.Pid) }, "run "+b+"'s holder to die")
	c, err = CleanupOrphans(b, nil)
	if err != nil || len(c.Killed) != 2 || !slices.Equal(c.Removed, []string{db}) {
		t.Errorf("cleanup of run %s after its holder died: killed %v, removed %v, err %v", b, c.Killed, c.Removed, err)
	}
	for _, p := range guestsB {
		var ws syscall.WaitStatus
		syscall.Wait4(p.PID, &ws, syscall.WNOHANG, nil)
	}
}

// TestCleanupOrphansLegacyFolder: a work folder without the lock's marker
// (a proxybench from before NewWorkDir) follows the former rule: kept
// while its guest has a living parent other than init; without a guest,
// removed once it is older than a run takes to write its marker, and not
// before (it may be a run starting).
func TestCleanupOrphansLegacyFolder(t *testing.T) {
	id := topology.NewRunID()
	dir, err := os.MkdirTemp("", WorkDirPattern(id))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	g := fakeGuest(dir)
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-g.Process.Pid, syscall.SIGKILL); g.Wait() })
	waitFor(t, func() bool { return len(GuestProcesses()[dir]) == 2 }, "the fake guest")
	c, err := CleanupOrphans(id, nil)
	if err != nil || len(c.Killed)+len(c.Removed) > 0 || len(c.Kept) != 1 || !strings.Contains(c.Kept[0], fmt.Sprintf("held by pid %d", os.Getpid())) {
		t.Fatalf("legacy folder with a guest whose parent lives: killed %v, removed %v, kept %v, err %v; want it kept, naming this process", c.Killed, c.Removed, c.Kept, err)
	}
	syscall.Kill(-g.Process.Pid, syscall.SIGKILL)
	g.Wait()
	waitFor(t, func() bool { return len(GuestProcesses()[dir]) == 0 }, "the fake guest to go")

	if c, err := CleanupOrphans(id, nil); err != nil || len(c.Removed) > 0 {
		t.Fatalf("a legacy folder made just now: removed %v (%v), want it left (a run may be starting)", c.Removed, err)
	}
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(dir, old, old); err != nil {
		t.Fatal(err)
	}
	if c, err := CleanupOrphans(id, nil); err != nil || !slices.Equal(c.Removed, []string{dir}) {
		t.Fatalf("a legacy folder a minute old without a guest: removed %v (%v), want %s", c.Removed, err, dir)
	}
}

// TestWorkDirHeldUntilRemove: a work folder is held from NewWorkDir on,
// also against this same process (a lock per open file: CleanupOrphans
// keeps it, naming this process), and Remove deletes it.
func TestWorkDirHeldUntilRemove(t *testing.T) {
	id := topology.NewRunID()
	wd, err := NewWorkDir(id)
	if err != nil {
		t.Fatal(err)
	}
	if RunIDOfDir(wd.Path) != id || !filepath.IsAbs(wd.Path) || filepath.Dir(wd.Path) != filepath.Clean(os.TempDir()) {
		t.Errorf("work folder %s, want an absolute os.TempDir()/%s*", wd.Path, WorkDirPattern(id))
	}
	c, err := CleanupOrphans(id, nil)
	if err != nil || len(c.Removed) > 0 || len(c.Kept) != 1 || !strings.Contains(c.Kept[0], fmt.Sprintf("held by pid %d", os.Getpid())) {
		t.Fatalf("held folder: removed %v, kept %v (%v); want it kept, held by this process", c.Removed, c.Kept, err)
	}
	if err := wd.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(wd.Path); !os.IsNotExist(err) {
		t.Errorf("after Remove: %v", err)
	}
}

// TestRunIDOfDir: the run ID is read from a work folder's name only.
func TestRunIDOfDir(t *testing.T) {
	for dir, want := range map[string]string{
		"/tmp/proxybench-uml-3fa9c1-12345": "3fa9c1",
		"proxybench-uml-3fa9c1-1":          "3fa9c1",
		"/tmp/proxybench-uml-3fa9c1":       "", // no random part: not NewWorkDir's
		"/tmp/pb-3fa9c1-kube-1":            "",
		"/tmp/proxybench-doctor-1":         "",
	} {
		if got := RunIDOfDir(dir); got != want {
			t.Errorf("RunIDOfDir(%q) = %q, want %q", dir, got, want)
		}
	}
}
