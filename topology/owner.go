//go:build linux

package topology

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// OwnerEnv is the environment variable every program Netns.Run starts
// carries: "<pid>:<start>" of the process that started it (its owner: the
// run's proxybench or a test binary), start being field 22 of
// /proc/<pid>/stat (clock ticks since boot), so a reused PID is told
// apart. RunIDEnv carries the run ID of the namespace the program runs in.
// Cleanup uses them to recognise the orphans of a killed run.
const (
	OwnerEnv = "PROXYBENCH_OWNER"
	RunIDEnv = "PROXYBENCH_RUN_ID"
)

var selfOwner = sync.OnceValue(func() string {
	return ownerTag(os.Getpid())
})

// ownerTag returns "<pid>:<start>" for a live pid, "" when the process is
// gone (or its stat is unreadable).
func ownerTag(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return ""
	}
	// Fields after the command name "(...)": state is field 3, start time 22.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return ""
	}
	return strconv.Itoa(pid) + ":" + f[19]
}

// childAttr is what Netns.Run gives each program: the owner and run ID
// tags in its environment, and SIGKILL when the thread that started it
// exits (Do's thread waits for the program, so it only exits first when
// the whole owner is killed): a kill -9'd run leaves no program behind.
func childAttr(nsName string) ([]string, *syscall.SysProcAttr) {
	var env []string
	for _, kv := range os.Environ() { // a tag inherited from our own owner is replaced
		if !strings.HasPrefix(kv, OwnerEnv+"=") && !strings.HasPrefix(kv, RunIDEnv+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, OwnerEnv+"="+selfOwner(), RunIDEnv+"="+RunIDOf(nsName))
	return env, &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// orphaned reports whether process pid is a program Netns.Run started for
// an owner that is gone (the owner tag in its environment names a process
// that no longer exists, or a newer one with the same PID). A process
// without the tag (a user's shell in the namespace, the owner itself) is
// never an orphan.
func orphaned(pid string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "environ"))
	if err != nil {
		return false
	}
	for _, kv := range strings.Split(string(b), "\x00") {
		tag, ok := strings.CutPrefix(kv, OwnerEnv+"=")
		if !ok {
			continue
		}
		p, _, ok := strings.Cut(tag, ":")
		n, err := strconv.Atoi(p)
		if !ok || err != nil || n <= 0 {
			return false
		}
		return ownerTag(n) != tag
	}
	return false
}
