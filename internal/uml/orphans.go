//go:build linux

package uml

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// workPrefix starts the host work folders of guests started by runs
// (os.TempDir()/proxybench-uml-<runID>-<random>, NewWorkDir).
const workPrefix = "proxybench-uml-"

// WorkDirPattern returns the os.MkdirTemp pattern of a run's guest folder.
func WorkDirPattern(runID string) string { return workPrefix + runID + "-" }

// heldMarker is the file NewWorkDir writes into a work folder once it
// holds the folder's lock: in a folder that has it, the lock tells
// whether the run is live. A folder without it was made by a proxybench
// older than the lock, or is a few microseconds old (legacyRule).
const heldMarker = ".held"

// legacyGrace is how old a work folder without heldMarker and without
// guest processes must be before CleanupOrphans removes it: NewWorkDir
// writes the marker microseconds after creating the folder, so a younger
// one may be a run that is starting.
const legacyGrace = 5 * time.Second

// WorkDir is the host folder of one guest of a run,
// os.TempDir()/proxybench-uml-<runID>-<random>, which the guest mounts
// read-write at GuestMount. Its creator holds it from creation until
// Remove: an exclusive flock(2) on the folder, taken before the folder
// carries heldMarker. The kernel drops the lock when the holder's last
// file descriptor on it closes, at the latest when the holder dies, so
// a folder whose lock CleanupOrphans can take belongs to a run that is
// gone, whatever became of its guest. The descriptor is close-on-exec:
// the guest does not inherit it.
type WorkDir struct {
	// Path is the folder's absolute path.
	Path string
	lock *os.File
}

// NewWorkDir creates and holds a work folder of run runID (mode 0755:
// the guest's programs run as root but read it through hostfs). Errors
// are the file system's.
func NewWorkDir(runID string) (*WorkDir, error) {
	dir, err := os.MkdirTemp("", WorkDirPattern(runID))
	if err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	f, err := os.Open(dir)
	if err == nil {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, heldMarker), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		os.RemoveAll(dir)
		return nil, fmt.Errorf("guest work folder %s: %w", dir, err)
	}
	return &WorkDir{Path: dir, lock: f}, nil
}

// Remove deletes the folder, then lets go of it.
func (w *WorkDir) Remove() error {
	err := os.RemoveAll(w.Path)
	if cerr := w.lock.Close(); err == nil {
		err = cerr
	}
	return err
}

// GuestProcess is one host process of a user-mode-linux guest: the
// kernel (the process Run started), its helper threads and the
// processes that carry the guest's userspace (all forks of the kernel,
// with its command line, in its process group).
type GuestProcess struct {
	PID, PPID, PGID int
	// Comm is the process's name (/proc/<pid>/comm): "linux" for a
	// source-built kernel, "linux.uml" for Debian's.
	Comm string
	// Dir is the guest's work folder, from the kernel's init= argument
	// (Run boots init=<WorkDir>/.init.sh).
	Dir string
}

// procStat is the part of /proc/<pid>/stat cleanup reads.
type procStat struct {
	ppid, pgid int
	state      byte
}

func readStat(pid string) (procStat, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return procStat{}, false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 || len(f[0]) != 1 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgid, _ := strconv.Atoi(f[2])
	return procStat{ppid: ppid, pgid: pgid, state: f[0][0]}, true
}

// gone reports whether the process is gone or a zombie (dead, its
// parent not having reaped it yet).
func gone(pid int) bool {
	st, ok := readStat(strconv.Itoa(pid))
	return !ok || st.state == 'Z' || st.state == 'X'
}

// guestDir returns the work folder named by a user-mode-linux command
// line (NUL-separated /proc/<pid>/cmdline) when it boots from hostfs
// with an init script in a run's work folder, else "".
func guestDir(cmdline []byte) string {
	args := strings.Split(string(cmdline), "\x00")
	if !slices.Contains(args, "rootfstype=hostfs") {
		return ""
	}
	for _, a := range args {
		if init, ok := strings.CutPrefix(a, "init="); ok {
			dir := filepath.Dir(init)
			if strings.HasPrefix(filepath.Base(dir), workPrefix) {
				return dir
			}
		}
	}
	return ""
}

// GuestProcesses lists the host processes of the guests of runs (work
// folder os.TempDir()/proxybench-uml-*), by work folder: every living
// process whose command line boots a guest from such a folder, and
// every other living process in the process group of one (Run starts the
// kernel as a group leader). Zombies are left out: they are dead already.
func GuestProcesses() map[string][]GuestProcess {
	ents, _ := os.ReadDir("/proc")
	stats := map[int]procStat{}
	dirOf := map[int]string{}
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		st, ok := readStat(e.Name())
		if !ok || st.state == 'Z' || st.state == 'X' {
			continue
		}
		pid, _ := strconv.Atoi(e.Name())
		stats[pid] = st
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil {
			if d := guestDir(b); d != "" {
				dirOf[pid] = d
			}
		}
	}
	// The group of a guest's kernel (a leader whose command line names
	// a folder) is the guest's: whatever it runs is the guest's too.
	for pid, st := range stats {
		if _, ok := dirOf[pid]; ok {
			continue
		}
		if d, ok := dirOf[st.pgid]; ok && stats[st.pgid].pgid == st.pgid {
			dirOf[pid] = d
		}
	}
	out := map[string][]GuestProcess{}
	for pid, d := range dirOf {
		comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
		st := stats[pid]
		out[d] = append(out[d], GuestProcess{PID: pid, PPID: st.ppid, PGID: st.pgid, Comm: strings.TrimSpace(string(comm)), Dir: d})
	}
	for d := range out {
		slices.SortFunc(out[d], func(a, b GuestProcess) int { return a.PID - b.PID })
	}
	return out
}

// RunIDOfDir returns the run ID in a work folder's name
// (proxybench-uml-<runID>-<random>), or "".
func RunIDOfDir(dir string) string {
	rest, ok := strings.CutPrefix(filepath.Base(dir), workPrefix)
	if !ok {
		return ""
	}
	id, _, ok := strings.Cut(rest, "-")
	if !ok {
		return ""
	}
	return id
}

// Cleaned is what CleanupOrphans did.
type Cleaned struct {
	// Killed are the guest processes killed, "pid (comm, run R)".
	Killed []string
	// Removed are the work folders removed (and ~/.uml/<umid> folders of
	// guests booted without uml_dir by an older proxybench).
	Removed []string
	// Kept are the guests of live runs, left alone: "run R: folder F,
	// guest pids P..., held by pid H".
	Kept []string
	// Saved are what keep saved from dead guests' folders.
	Saved []string
}

// CleanupOrphans kills the guests of runs that are gone and removes
// their work folders; with runID, only that run's. A run is gone when
// its work folder's lock is free (see WorkDir): its proxybench died,
// whatever happened to the guest (killed with it by PR_SET_PDEATHSIG, or
// left running, e.g. reparented to a subreaper). A folder without the
// lock's marker (made by an older proxybench) follows that version's
// rule: its guest is gone when reparented to init (parent pid 1), and a
// folder no guest uses is removed once legacyGrace old. A live run is
// never touched: its guest is listed in Kept.
//
// For each gone run's folder, once its guest processes are gone (SIGKILL
// to each, then up to 5 s for the kernel to reap them), keep (when not
// nil) is called with the folder before it is removed: to save what the
// guest finished (its checkpoint). A keep error leaves the folder in
// place, so nothing measured is thrown away.
func CleanupOrphans(runID string, keep func(dir string) (saved string, err error)) (Cleaned, error) {
	var c Cleaned
	var errs []error
	procs := GuestProcesses()
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), workPrefix+runID+"*"))
	for d := range procs {
		if !slices.Contains(dirs, d) && (runID == "" || RunIDOfDir(d) == runID) {
			dirs = append(dirs, d) // its folder is gone; the guest may not be
		}
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		id := RunIDOfDir(d)
		if id == "" || (runID != "" && id != runID) {
			continue
		}
		gp := procs[d]
		lock, live, holder := liveness(d, gp)
		if live {
			c.Kept = append(c.Kept, keptLine(id, d, gp, holder))
			continue
		}
		c.Killed = append(c.Killed, killGuest(id, gp)...)
		if len(gp) == 0 && lock == nil && !oldEnough(d) {
			continue // no marker yet: maybe a run starting (legacyGrace)
		}
		if err := removeGuestDir(d, gp, keep, &c); err != nil {
			errs = append(errs, err)
		}
		if lock != nil {
			lock.Close()
		}
	}
	return c, errors.Join(errs...)
}

// liveness tells whether the run of work folder d is live. With the
// marker, the folder's lock decides: taken here (returned, held until
// the folder is removed) means gone; busy means live, held by holder.
// Without it (or without the folder), the older rule: live while a guest
// process has a parent other than init and other than the guest itself.
func liveness(d string, gp []GuestProcess) (lock *os.File, live bool, holder int) {
	if _, err := os.Stat(filepath.Join(d, heldMarker)); err == nil {
		f, err := os.Open(d)
		if err == nil {
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
			if err == nil {
				return f, false, 0
			}
			f.Close()
		}
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, true, lockHolder(d)
		}
		// Gone in between (its run removed it): nothing to hold.
	}
	own := map[int]bool{}
	for _, p := range gp {
		own[p.PID] = true
	}
	for _, p := range gp {
		if p.PPID != 1 && !own[p.PPID] && !gone(p.PPID) {
			return nil, true, p.PPID
		}
	}
	return nil, false, 0
}

// lockHolder returns the PID /proc/locks names for the flock on folder
// d (the proxybench of its run), or 0. Its lines read
// "1: FLOCK  ADVISORY  WRITE 4361 00:1f:12345 0 EOF" (fs/locks.c,
// lock_get_status: major:minor in hex, then the inode).
func lockHolder(d string) int {
	var st syscall.Stat_t
	if syscall.Stat(d, &st) != nil {
		return 0
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "FLOCK" {
			continue
		}
		id := strings.Split(f[5], ":")
		if len(id) != 3 || id[2] != strconv.FormatUint(st.Ino, 10) {
			continue
		}
		major, _ := strconv.ParseUint(id[0], 16, 32)
		minor, _ := strconv.ParseUint(id[1], 16, 32)
		// st.Dev in glibc's encoding (gnu_dev_major, gnu_dev_minor).
		dev := uint64(st.Dev)
		if major == (dev>>8)&0xfff|(dev>>32)&0xfffff000 && minor == dev&0xff|(dev>>12)&0xffffff00 {
			pid, _ := strconv.Atoi(f[4])
			return pid
		}
	}
	return 0
}

func keptLine(id, d string, gp []GuestProcess, holder int) string {
	pids := make([]string, len(gp))
	for i, p := range gp {
		pids[i] = strconv.Itoa(p.PID)
	}
	s := fmt.Sprintf("run %s: %s", id, d)
	if len(gp) > 0 {
		s += ", guest pids " + strings.Join(pids, " ")
	}
	if holder > 0 {
		cmd, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(holder), "cmdline"))
		s += fmt.Sprintf(", held by pid %d (%s)", holder, strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " ")))
	}
	return s
}

// killGuest sends SIGKILL to each guest process (and the group of each
// group leader among them) and waits up to 5 s for them to be gone.
func killGuest(id string, gp []GuestProcess) []string {
	var killed []string
	for _, p := range gp {
		if syscall.Kill(p.PID, syscall.SIGKILL) == nil {
			killed = append(killed, fmt.Sprintf("%d (%s, run %s)", p.PID, p.Comm, id))
		}
		if p.PGID == p.PID {
			_ = syscall.Kill(-p.PGID, syscall.SIGKILL)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, p := range gp {
		for !gone(p.PID) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	return killed
}

func oldEnough(d string) bool {
	st, err := os.Stat(d)
	return err == nil && time.Since(st.ModTime()) >= legacyGrace
}

// removeGuestDir saves what keep saves from folder d, then removes it,
// and the ~/.uml/<umid> folder of each killed guest an older proxybench
// booted without uml_dir (its pid file names the kernel).
func removeGuestDir(d string, gp []GuestProcess, keep func(string) (string, error), c *Cleaned) error {
	if _, err := os.Stat(d); err == nil {
		if keep != nil {
			saved, err := keep(d)
			if err != nil {
				return fmt.Errorf("kept %s: saving what its guest finished failed: %w", d, err)
			}
			if saved != "" {
				c.Saved = append(c.Saved, saved)
			}
		}
		if err := os.RemoveAll(d); err != nil {
			return err
		}
		c.Removed = append(c.Removed, d)
	}
	if len(gp) == 0 {
		return nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return nil
	}
	umids, _ := filepath.Glob(filepath.Join(home, ".uml", "*", "pid"))
	for _, f := range umids {
		b, _ := os.ReadFile(f)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if pid > 0 && slices.ContainsFunc(gp, func(p GuestProcess) bool { return p.PID == pid }) {
			if os.RemoveAll(filepath.Dir(f)) == nil {
				c.Removed = append(c.Removed, filepath.Dir(f))
			}
		}
	}
	return nil
}
