//go:build linux

package topology

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// ChildEnv is the environment variable every long-lived process the testbed
// starts (etcd, kube-apiserver, kube-proxy) carries, set to the run ID. Its
// children (iptables-restore, nft, ipset) inherit it. LiveRuns does not
// count such processes as a sign of a live run, and Cleanup kills them when
// their run is gone.
const ChildEnv = "PROXYBENCH_CHILD_OF_RUN"

// Process is a long-lived program running inside one testbed namespace,
// started by StartProcess. Its state is read from /proc while it runs.
type Process struct {
	Name string // a label for errors and logs: "etcd", "kube-proxy n0"
	Cmd  *exec.Cmd
	// done is closed when the program has exited and been waited for.
	done chan struct{}
	err  error
}

// StartProcess starts cmd inside namespace ns as a testbed child of run
// runID: ChildEnv=runID is added to its environment, it gets SIGKILL when
// this process dies (PR_SET_PDEATHSIG, so a kill -9 of proxybench takes it
// along), and it runs in a process group of its own. The fork happens on a
// locked OS thread switched into ns that stays alive, waiting for the
// program, until it exits: the parent-death signal fires when the forking
// thread ends, so the thread must outlive the child.
func StartProcess(ns *Netns, runID, name string, cmd *exec.Cmd) (*Process, error) {
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, ChildEnv+"="+runID)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &Process{Name: name, Cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the thread (switched into ns) exits with
		// this goroutine, after the program has.
		if err := netns.Set(ns.Handle()); err != nil {
			started <- fmt.Errorf("%s: enter netns %q: %w", name, ns.Name, err)
			close(p.done)
			return
		}
		if err := cmd.Start(); err != nil {
			started <- fmt.Errorf("%s: start %s in netns %q: %w", name, cmd.Path, ns.Name, err)
			close(p.done)
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// StartPlain starts cmd as a testbed child of run runID, as StartProcess
// does, but in the namespaces of this process and with cmd.SysProcAttr
// as the caller set it (new namespaces, id maps, a session of its own):
// ChildEnv=runID is added to its environment when missing. The fork
// happens on a locked OS thread that waits for the program, so a
// Pdeathsig the caller set fires when this process dies, not when some
// runtime thread ends.
func StartPlain(runID, name string, cmd *exec.Cmd) (*Process, error) {
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	if !slices.Contains(cmd.Env, ChildEnv+"="+runID) {
		cmd.Env = append(cmd.Env, ChildEnv+"="+runID)
	}
	p := &Process{Name: name, Cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- fmt.Errorf("%s: start %s: %w", name, cmd.Path, err)
			close(p.done)
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// Pid is the program's process ID.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// CPU is the program's user+system CPU time so far (/proc/<pid>/stat
// utime+stime, in USER_HZ = 100 ticks a second); 0 once it has exited.
func (p *Process) CPU() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100
}

// Exited reports whether the program has exited, and its wait error.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Done is closed when the program has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stop sends SIGTERM to the program's process group, waits up to grace for
// it to exit, then sends SIGKILL and waits. Stopping an exited program is
// not an error; the wait error of a program killed by Stop is not returned.
func (p *Process) Stop(grace time.Duration) error {
	if ok, _ := p.Exited(); ok {
		return nil
	}
	pgid := p.Pid()
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	// A killed program still has to leave the kernel and free its memory;
	// on a loaded 2-core machine a 10k-service kube-proxy took over 10 s
	// (TestKernelProxierHaltResume failed twice at load ~25-30 with a 10 s
	// bound), so the bound is generous and the error says where it sits.
	select {
	case <-p.done:
		return nil
	case <-time.After(killWait):
		return fmt.Errorf("%s (pid %d) did not exit %v after SIGKILL (state %s)", p.Name, pgid, killWait, procState(pgid))
	}
}

// Kill sends SIGKILL to the program's process group at once (no SIGTERM
// first: a crash, as the OOM killer or a node's `kill -9` ends it) and
// waits, up to killWait, for it to exit. Killing an exited program is
// not an error; the wait error of the killed program is not returned.
func (p *Process) Kill() error {
	if ok, _ := p.Exited(); ok {
		return nil
	}
	pgid := p.Pid()
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(killWait):
		return fmt.Errorf("%s (pid %d) did not exit %v after SIGKILL (state %s)", p.Name, pgid, killWait, procState(pgid))
	}
}

// killWait bounds how long Stop waits for a program to exit after SIGKILL.
const killWait = 60 * time.Second

// procState returns the state and kernel wait channel of pid from
// /proc/<pid>/stat and /proc/<pid>/wchan ("gone" when it has exited).
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "gone"
	}
	state := "?"
	if i := bytes.LastIndexByte(b, ')'); i >= 0 {
		if f := strings.Fields(string(b[i+1:])); len(f) > 0 {
			state = f[0]
		}
	}
	w, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", pid))
	return state + ", wchan " + string(w)
}

// childRun returns the run ID in ChildEnv of process pid ("" when it is not
// a testbed child or is gone).
func childRun(pid string) string {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "environ"))
	if err != nil {
		return ""
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(ChildEnv+"=")); ok {
			return string(v)
		}
	}
	return ""
}

// ChildProcesses lists the PIDs of the testbed children (ChildEnv set) of
// run runID, or of every run when runID is empty, keyed by PID with their
// run ID.
func ChildProcesses(runID string) map[int]string {
	out := map[int]string{}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if p.Name()[0] < '0' || p.Name()[0] > '9' {
			continue
		}
		id := childRun(p.Name())
		if id == "" || (runID != "" && id != runID) {
			continue
		}
		pid, _ := strconv.Atoi(p.Name())
		out[pid] = id
	}
	return out
}

// KillOrphans sends SIGKILL to every testbed child (ChildEnv) whose run is
// not live (see LiveRuns; for runID alone when it is not empty) and waits
// up to 5 s for them to go. It returns "pid (command)" of each killed
// process. A run whose proxybench still holds a namespace is never touched.
func KillOrphans(runID string) (killed []string, err error) {
	kids := ChildProcesses(runID)
	if len(kids) == 0 {
		return nil, nil
	}
	names, err := Leftovers()
	if err != nil {
		return nil, err
	}
	live := LiveRuns(names)
	var errs []error
	var pids []int
	for pid, id := range kids {
		if live[id] {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("kill %d: %w", pid, err))
			continue
		}
		pids = append(pids, pid)
		killed = append(killed, fmt.Sprintf("%d (%s, run %s)", pid, strings.TrimSpace(string(comm)), id))
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for time.Now().Before(deadline) {
			// Gone, or a zombie whose parent will reap it.
			st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
			if err != nil || zombie(st) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return killed, errors.Join(errs...)
}

func zombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	f := strings.Fields(string(stat[i+1:]))
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}

// Veth creates a veth pair, a in na and b in nb, gives them addrA/30 and
// addrB/30 and brings both up (`ip link add a type veth peer b netns nb`).
// Deleting either namespace removes the pair.
func Veth(na *Netns, a string, nb *Netns, b string, addrA, addrB netip.Addr) error {
	return veth(na, a, nb, b, addrA, addrB)
}

// AddAddr adds addr (with its prefix length) to link name inside ns
// (`ip addr add addr dev name`).
func (n *Netns) AddAddr(name string, addr netip.Prefix) error {
	return n.withNetlink(func(h *netlink.Handle) error {
		l, err := h.LinkByName(name)
		if err != nil {
			return fmt.Errorf("netns %q: link %s: %w", n.Name, name, err)
		}
		if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipnet(addr)}); err != nil {
			return fmt.Errorf("netns %q: ip addr add %s dev %s: %w", n.Name, addr, name, err)
		}
		return nil
	})
}
