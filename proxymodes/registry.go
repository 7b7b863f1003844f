package proxymodes

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proxybench/proxybench/scenarios"
)

// Node is what a mode needs of the node namespace it programs: running a
// function or a program inside it (satisfied by *topology.Netns).
type Node interface {
	Do(fn func() error) error
	Run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error)
}

// Mode describes one proxy mode to the runner, the CLI and doctor.
type Mode struct {
	// Name as written in scenarios ("iptables").
	Name string
	// New builds the mode's proxier for sc, programming node.
	New func(sc *scenarios.Scenario, node Node) (Proxier, error)
	// Binaries lists the programs the mode needs on PATH with sc's settings.
	Binaries func(sc *scenarios.Scenario) []string
	// Modules lists the kernel modules the mode needs with sc's settings,
	// loaded by the user-mode-linux guest before a run (the host kernel has
	// no loadable modules; built-in ones are skipped). Nil: none beyond
	// uml.BaseModules.
	Modules func(sc *scenarios.Scenario) []string
	// Direct makes the traffic driver dial endpoints directly instead of
	// ClusterIPs (mode none, the baseline).
	Direct bool
	// Probe checks, in a throwaway namespace, that the kernel has what the
	// mode needs; it returns whether it does and why (for doctor).
	Probe func(ctx context.Context, node Node) (ok bool, why string)
}

var (
	mu    sync.Mutex
	modes = map[string]Mode{}
)

// Register adds a mode (called from each mode package's init) and makes
// its name valid in scenarios. Registering a name twice panics.
func Register(m Mode) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := modes[m.Name]; dup {
		panic("proxymodes: mode registered twice: " + m.Name)
	}
	modes[m.Name] = m
	scenarios.RegisterMode(m.Name)
}

// Lookup returns the registered mode called name.
func Lookup(name string) (Mode, error) {
	mu.Lock()
	defer mu.Unlock()
	m, ok := modes[name]
	if !ok {
		return Mode{}, fmt.Errorf("unknown proxy mode %q (registered: %v)", name, namesLocked())
	}
	return m, nil
}

// Names lists the registered modes, sorted.
func Names() []string {
	mu.Lock()
	defer mu.Unlock()
	return namesLocked()
}

func namesLocked() []string {
	out := make([]string, 0, len(modes))
	for n := range modes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// CPUTime returns user+system CPU time consumed so far by this process and
// its waited-for children (getrusage(2) RUSAGE_SELF + RUSAGE_CHILDREN).
// The difference across a Sync is SyncStats.CPU.
func CPUTime() time.Duration {
	var self, kids unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &self)
	_ = unix.Getrusage(unix.RUSAGE_CHILDREN, &kids)
	tv := func(t unix.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

// IPTablesBinary names an iptables tool of a back end: for backend
// "legacy", tool "restore" gives "iptables-legacy-restore" and tool ""
// "iptables-legacy". Used by every mode that programs iptables.
func IPTablesBinary(backend, tool string) string {
	name := "iptables-" + backend
	if tool != "" {
		name += "-" + tool
	}
	return name
}
