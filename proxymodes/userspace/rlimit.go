//go:build linux

package userspace

import (
	"fmt"
	"syscall"
)

// FileReserve is the number of descriptors EnsureFileLimit keeps free
// beyond one per listener: two per proxied connection in flight, the dial
// pool, the iptables pipes and the rest of the process.
const FileReserve = 8192

// LimitError says that RLIMIT_NOFILE is below what the listeners need and
// could not be raised.
type LimitError struct {
	Listeners  int
	Need       uint64 // descriptors wanted: Listeners + FileReserve
	Soft, Hard uint64 // the limit as found
	Err        error  // from setrlimit(2)
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("userspace: %d listeners need RLIMIT_NOFILE >= %d open files, but it is %d (hard limit %d) and raising it failed: %v; "+
		"fix: run as root (CAP_SYS_RESOURCE may raise the hard limit), or raise it before starting: ulimit -n %d (LimitNOFILE=%d under systemd; sysctl fs.nr_open must be >= %d)",
		e.Listeners, e.Need, e.Soft, e.Hard, e.Err, e.Need, e.Need, e.Need)
}

func (e *LimitError) Unwrap() error { return e.Err }

// EnsureFileLimit raises this process's RLIMIT_NOFILE so that listeners
// listeners and FileReserve more descriptors fit: the soft limit, and the
// hard limit too when it is lower (which needs CAP_SYS_RESOURCE). It never
// lowers a limit. It returns the soft limit in force, or a *LimitError
// naming the limit and the fix. (The legacy proxier left this to the
// operator and panicked on EMFILE in Accept.)
func EnsureFileLimit(listeners int) (uint64, error) {
	return ensureFileLimit(listeners, getrlimit, setrlimit)
}

func getrlimit() (soft, hard uint64, err error) {
	var r syscall.Rlimit
	err = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r)
	return r.Cur, r.Max, err
}

// setrlimit uses package syscall so that os/exec knows the limit changed.
func setrlimit(soft, hard uint64) error {
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: soft, Max: hard})
}

func ensureFileLimit(listeners int, get func() (uint64, uint64, error), set func(soft, hard uint64) error) (uint64, error) {
	need := uint64(listeners) + FileReserve
	soft, hard, err := get()
	if err != nil {
		return 0, fmt.Errorf("userspace: getrlimit(RLIMIT_NOFILE): %w", err)
	}
	if soft >= need {
		return soft, nil
	}
	newHard := max(hard, need)
	if err := set(need, newHard); err != nil {
		return soft, &LimitError{Listeners: listeners, Need: need, Soft: soft, Hard: hard, Err: err}
	}
	return need, nil
}
