//go:build linux

package kubeproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/topology"
)

// versionRE matches `kube-proxy --version` ("Kubernetes v1.37.2").
var versionRE = regexp.MustCompile(`^Kubernetes (v[0-9]+\.[0-9]+\.[0-9]+\S*)\s*$`)

// Version runs `bin --version` and returns kube-proxy's version
// ("v1.37.2"). A program that does not answer like kube-proxy is an error
// naming it, in one line (bad input: --kube-proxy must name a kube-proxy
// binary): a path that does not exist, is a folder or is not executable
// (checked before running it); --version failing or printing something
// other than "Kubernetes vX.Y.Z" (its first line is quoted, cut at 60
// characters); a --help that does not mention kube-proxy (another
// Kubernetes program prints the same --version). Each ends with "; fix:".
func Version(ctx context.Context, bin string) (string, error) {
	const fix = "; fix: give the path of a kube-proxy binary (bin/kube-proxy after `make kube`, or one built from a branch)"
	st, err := os.Stat(bin)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("%s does not exist%s", bin, fix)
	case err != nil:
		return "", fmt.Errorf("%s: %v%s", bin, err, fix)
	case st.IsDir():
		return "", fmt.Errorf("%s is a folder, not a kube-proxy binary%s, e.g. %s", bin, fix, filepath.Join(bin, "kube-proxy"))
	case st.Mode()&0o111 == 0:
		return "", fmt.Errorf("%s is not executable (mode %s); fix: chmod +x %s, if it is a kube-proxy binary", bin, st.Mode().Perm(), bin)
	}
	var stderr bytes.Buffer
	cmd := answerCommand(ctx, bin, "--version")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if cmd.ctx.Err() == context.DeadlineExceeded {
		return "", fmt.Errorf("%s did not answer --version within %s; fix: give the path of a kube-proxy binary that runs here (does `%s --version` hang?)", bin, seconds(answerTimeout), bin)
	}
	cmd.cancel()
	if err != nil {
		said := ""
		if l := firstLine(append(stderr.Bytes(), out...)); l != "nothing" {
			said = ", printing " + l
		}
		return "", fmt.Errorf("%s is not kube-proxy: `%s --version` failed (%v)%s%s", bin, filepath.Base(bin), err, said, fix)
	}
	m := versionRE.FindSubmatch(bytes.TrimSpace(out))
	if m == nil {
		return "", fmt.Errorf("%s is not kube-proxy: `%s --version` printed %s, not \"Kubernetes vX.Y.Z\"%s", bin, filepath.Base(bin), firstLine(out), fix)
	}
	hc := answerCommand(ctx, bin, "--help")
	help, _ := hc.CombinedOutput()
	if hc.ctx.Err() == context.DeadlineExceeded {
		return "", fmt.Errorf("%s did not answer --help within %s; fix: give the path of a kube-proxy binary that runs here (does `%s --help` hang?)", bin, seconds(answerTimeout), bin)
	}
	hc.cancel()
	if !bytes.Contains(help, []byte("kube-proxy")) {
		return "", fmt.Errorf("%s is not kube-proxy: it reports %s, but its --help does not mention kube-proxy (another Kubernetes program?)%s", bin, m[1], fix)
	}
	return string(m[1]), nil
}

// answerTimeout bounds `kube-proxy --version` and `--help`, which answer
// at once on a quiet machine; a binary that hangs must not hang validate
// or run. It is generous because the first start of the 114 MB binary
// reads it from disk: on a 2-core machine at load 25 with its page cache
// cold, `--help` took 6.5 s and `--version` over 10 s (the old bound,
// which refused a working binary).
var answerTimeout = 60 * time.Second

// timedCommand is an exec.Cmd under its own deadline (answerTimeout):
// at the deadline its whole process group is killed and, a second later,
// its pipes are closed (WaitDelay), so a child that keeps them open (a
// script's sleep) cannot hold Output either.
type timedCommand struct {
	*exec.Cmd
	ctx    context.Context
	cancel context.CancelFunc
}

// seconds writes d as "10 s".
func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s" }

func answerCommand(parent context.Context, bin string, args ...string) timedCommand {
	ctx, cancel := context.WithTimeout(parent, answerTimeout)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	return timedCommand{cmd, ctx, cancel}
}

// firstLine quotes the first line of b, cut at 60 characters ("..."
// marks a cut), and counts the lines left out: "\"ls (GNU coreutils)
// 9.1\" and 7 more lines"; "nothing" when b is blank.
func firstLine(b []byte) string {
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "nothing"
	}
	lines := strings.Split(t, "\n")
	l := strings.TrimSpace(lines[0])
	if r := []rune(l); len(r) > 60 {
		l = string(r[:60]) + "..."
	}
	q := strconv.Quote(l)
	if len(lines) > 1 {
		q += fmt.Sprintf(" and %d more lines", len(lines)-1)
	}
	return q
}

// Spec is what Start runs.
type Spec struct {
	RunID string
	// Node is the node namespace kube-proxy runs in.
	Node   *topology.Netns
	Binary string
	// Version is Binary's version when the caller has checked it already
	// (Version's answer); empty: Start checks it first.
	Version string
	Config  ConfigSpec
	// Dir receives the node's config (<NodeName>.kube-proxy.yaml) and log
	// (<NodeName>.kube-proxy.log), kept beside the result.
	Dir string
	// Verbosity is kube-proxy's -v (default 2: one line per sync with its
	// duration).
	Verbosity int
	// IPTablesBackend, "legacy" or "nft", makes kube-proxy's `iptables`,
	// `iptables-save`, `iptables-restore` (and the ip6tables ones) those
	// of that back end, through a folder of symlinks first on its PATH
	// (BackendPath), as update-alternatives would on a node; "" leaves
	// the PATH alone (Debian's default alternative is nft).
	IPTablesBackend string
	// XtablesLock, when set, is the xtables lock file of kube-proxy's
	// iptables tools (environment XTABLES_LOCKFILE, also for `kube-proxy
	// --cleanup`) instead of /run/xtables.lock, which is one file for
	// every network namespace of the machine. Only the legacy back end
	// takes the lock (iptables-legacy 1.8.9 here honours the variable;
	// iptables-nft takes no lock at all, whatever its -w).
	XtablesLock string
	// PathFirst, when set, is a folder put first on kube-proxy's PATH,
	// before the iptables back end's (the runner's failure.syncErrors
	// wrappers of the rule programs kube-proxy runs by name): it is on
	// the PATH of every kube-proxy started with this Spec and of its
	// `--cleanup`.
	PathFirst string
}

// env is kube-proxy's environment: nil (this process's) unless the spec
// sets its PATH (path, from IPTablesBackend) or XtablesLock.
func (s Spec) env(path string) []string {
	if path == "" && s.XtablesLock == "" {
		return nil
	}
	env := os.Environ()
	if path != "" {
		env = append(env, "PATH="+path)
	}
	if s.XtablesLock != "" {
		env = append(env, "XTABLES_LOCKFILE="+s.XtablesLock)
	}
	return env
}

// iptablesTools are the programs kube-proxy runs by name for iptables
// (k8s.io/kubernetes/pkg/util/iptables).
var iptablesTools = []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"}

// BackendPath creates dir/iptables-<backend> holding symlinks named as
// kube-proxy's iptables tools to the back end's own binaries
// (iptables-legacy-save, ...) found on PATH, and returns the PATH value
// with that folder first. An unknown back end or a missing binary is an
// error naming it.
func BackendPath(dir, backend string) (string, error) {
	if backend != "legacy" && backend != "nft" {
		return "", fmt.Errorf("kube-proxy: iptables back end %q: want legacy or nft", backend)
	}
	shim := filepath.Join(dir, "iptables-"+backend)
	if err := os.MkdirAll(shim, 0o755); err != nil {
		return "", err
	}
	for _, t := range iptablesTools {
		fam, tool, _ := strings.Cut(t, "-")
		name := fam + "-" + backend
		if tool != "" {
			name += "-" + tool
		}
		target, err := exec.LookPath(name)
		if err != nil {
			return "", fmt.Errorf("kube-proxy: iptables back end %s: %s is not on PATH; fix: run make setup", backend, name)
		}
		link := filepath.Join(shim, t)
		_ = os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			return "", err
		}
	}
	return shim + string(os.PathListSeparator) + os.Getenv("PATH"), nil
}

// Proxy is one running kube-proxy.
type Proxy struct {
	Spec       Spec
	Version    string
	ConfigPath string
	LogPath    string
	// Owned are the testbed-owned config fields and their values.
	Owned map[string]string
	// Args is kube-proxy's command line.
	Args []string
	// Path is kube-proxy's PATH when Spec.IPTablesBackend chose a back
	// end or Spec.PathFirst put a folder first ("" otherwise: this
	// process's PATH).
	Path string
	Proc *topology.Process
	// Started is when the process was forked (after the --version check
	// and the config were written).
	Started time.Time
	res     *resourceWatch
	http    *http.Client
	// last is the last scrape that answered, and when (LastScrape).
	lastMu sync.Mutex
	last   Metrics
	lastAt time.Time
}

// Start writes the node's config and starts kube-proxy in spec.Node. It
// returns once the process runs; use WaitSynced to wait for its first sync.
func Start(ctx context.Context, spec Spec) (*Proxy, error) {
	ver := spec.Version
	if ver == "" {
		var err error
		if ver, err = Version(ctx, spec.Binary); err != nil {
			return nil, err
		}
	}
	cfg, owned, err := Config(spec.Config)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(spec.Dir, 0o755); err != nil {
		return nil, err
	}
	p := &Proxy{Spec: spec, Version: ver, Owned: owned,
		ConfigPath: filepath.Join(spec.Dir, spec.Config.NodeName+".kube-proxy.yaml"),
		LogPath:    filepath.Join(spec.Dir, spec.Config.NodeName+".kube-proxy.log")}
	if err := os.WriteFile(p.ConfigPath, cfg, 0o644); err != nil {
		return nil, err
	}
	v := spec.Verbosity
	if v == 0 {
		v = 2
	}
	p.Args = []string{"--config", p.ConfigPath, "--v", strconv.Itoa(v)}
	log, err := os.Create(p.LogPath)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(spec.Binary, p.Args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = spec.Dir
	if spec.IPTablesBackend != "" {
		if p.Path, err = BackendPath(spec.Dir, spec.IPTablesBackend); err != nil {
			return nil, err
		}
	}
	if spec.PathFirst != "" {
		rest := p.Path
		if rest == "" {
			rest = os.Getenv("PATH")
		}
		p.Path = spec.PathFirst + string(os.PathListSeparator) + rest
	}
	cmd.Env = spec.env(p.Path)
	p.Started = time.Now()
	if p.Proc, err = topology.StartProcess(spec.Node, spec.RunID, "kube-proxy "+spec.Config.NodeName, cmd); err != nil {
		return nil, err
	}
	p.res = watchResources(p.Proc.Pid())
	p.http = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := spec.Node.Do(func() error {
				var err error
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		}}}
	return p, nil
}

// get fetches http://127.0.0.1:port/path inside the node namespace.
func (p *Proxy) get(ctx context.Context, port int, path string) (int, []byte, error) {
	return p.do(ctx, http.MethodGet, port, path, nil)
}

// do sends method http://127.0.0.1:port/path with body (nil: none)
// inside the node namespace and returns the status and the answer.
func (p *Proxy) do(ctx context.Context, method string, port int, path string, body io.Reader) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, fmt.Sprintf("http://127.0.0.1:%d%s", port, path), body)
	if err != nil {
		return 0, nil, err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes(), err
}

// WaitHealthy waits until kube-proxy's /healthz answers 200 (its health
// server is up: 200 also while it starts, before its first sync; see
// WaitSynced) or the process exits or timeout passes; the error then
// carries the tail of its log.
func (p *Proxy) WaitHealthy(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if done, werr := p.Proc.Exited(); done {
			return fmt.Errorf("kube-proxy on %s exited (%v):\n%s", p.Spec.Config.NodeName, werr, p.LogTail(20))
		}
		code, _, err := p.get(ctx, HealthzPort, "/healthz")
		if err == nil && code == http.StatusOK {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-proxy on %s not healthy after %v (last: %d %v):\n%s", p.Spec.Config.NodeName, timeout, code, err, p.LogTail(20))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitSynced waits until kube-proxy has finished its first IPv4 sync
// successfully (its kubeproxy_sync_proxy_rules_duration_seconds{ip_family="IPv4"}
// counted one and kubeproxy_sync_proxy_rules_last_timestamp_seconds has
// an IPv4 value, which kube-proxy sets only after a successful sync), or
// that sync failed (counted without the timestamp: a *FirstSyncFailed),
// or the process exits, or timeout passes; the error then carries the
// tail of its log. It returns the sync's duration from the metric.
// /healthz is no such signal: kube-proxy's ProxierHealthServer answers
// 200 while the proxier starts up (pkg/proxy/healthcheck), before any
// rule is programmed, so WaitHealthy returns before the first sync.
func (p *Proxy) WaitSynced(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	suspect := false // the previous scrape counted a sync without the timestamp
	for {
		if done, werr := p.Proc.Exited(); done {
			return 0, fmt.Errorf("kube-proxy on %s exited (%v) before its first sync:\n%s", p.Spec.Config.NodeName, werr, p.LogTail(20))
		}
		m, err := p.Scrape(ctx)
		if err == nil {
			var h Histogram
			if h, err = m.Histogram(MetricSync, "IPv4"); err == nil && h.Count > 0 {
				mean := time.Duration(h.Sum / float64(h.Count) * float64(time.Second))
				ts, _ := lastSyncOf(m)
				switch {
				case !ts.IsZero():
					return mean, nil
				case suspect:
					// Two scrapes apart: not a scrape that read the
					// timestamp just before a successful sync set it.
					return 0, &FirstSyncFailed{Node: p.Spec.Config.NodeName, Own: mean, At: time.Now(), Cause: failureCause(readFile(p.LogPath), 0)}
				}
				suspect = true
			}
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("kube-proxy on %s did not finish a sync within %v (last: %v):\n%s", p.Spec.Config.NodeName, timeout, last, p.LogTail(20))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// FirstSyncFailed is WaitSynced's error when kube-proxy's first IPv4 sync
// ended without success (see failedBetween). kube-proxy v1.37 runs that
// sync outside its BoundedFrequencyRunner (OnServiceSynced and
// OnEndpointSlicesSynced call syncProxyRules directly), so the retry it
// logs ("Sync failed" retryingTime=<syncPeriod>) is not scheduled in the
// iptables and nftables modes: the next sync comes with the next Service
// or EndpointSlice change, or after FullSyncPeriod (1 h). IPVS mode
// resyncs every syncPeriod anyway.
type FirstSyncFailed struct {
	Node string
	// Own is the failed sync's duration by kube-proxy's histogram.
	Own time.Duration
	// At is when the failure was seen.
	At time.Time
	// Cause is the IPv4 errors of kube-proxy's log (failureCause).
	Cause string
}

func (e *FirstSyncFailed) Error() string {
	return fmt.Sprintf("kube-proxy on %s: first sync failed after %v (its log: %s)", e.Node, e.Own.Round(time.Millisecond), e.Cause)
}

// MinSyncPeriod is the minSyncPeriod kube-proxy logged at its start
// (syncPeriods; 0 when the line is not in its log).
func (p *Proxy) MinSyncPeriod() time.Duration {
	minSync, _ := syncPeriods(readFile(p.LogPath))
	return minSync
}

// LogTail returns the last n lines of kube-proxy's log.
func (p *Proxy) LogTail(n int) string {
	b, _ := os.ReadFile(p.LogPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Usage is the CPU time and peak memory of one kube-proxy process and of
// the rule programs it ran (iptables-restore, iptables-save, nft, ipset).
type Usage struct {
	// CPU is kube-proxy's user+system time, and ChildCPU that of the
	// children it waited for (/proc/<pid>/stat utime+stime, cutime+cstime).
	CPU, ChildCPU time.Duration
	// PeakRSS is kube-proxy's VmHWM (bytes); ChildPeakRSS the largest
	// VmHWM seen of any child, sampled every 20 ms (a child living less
	// than that may be missed).
	PeakRSS, ChildPeakRSS int64
	// Children counts the distinct child processes seen by the sampler.
	Children int
	// RSS is kube-proxy's resident set (VmRSS, bytes) at the last sample,
	// and WindowPeakRSS the largest VmRSS sampled since the last
	// StartRSSWindow (0 before the first).
	RSS, WindowPeakRSS int64
}

// Usage returns the process's usage so far (after Stop: at its exit).
func (p *Proxy) Usage() Usage { return p.res.usage() }

// StartRSSWindow starts a window over which Usage's WindowPeakRSS is the
// largest resident set sampled (every 20 ms, from the current one on):
// VmHWM is the peak since the process started, which a phase after the
// first sync cannot tell apart from the first sync's.
func (p *Proxy) StartRSSWindow() { p.res.startWindow() }

// Programs returns the rule programs kube-proxy ran so far, by command.
func (p *Proxy) Programs() []measure.ProgramUse { return p.res.programs() }

// Stop stops kube-proxy (SIGTERM, SIGKILL after 5 s). Its rules stay in
// the node namespace (they go with it).
func (p *Proxy) Stop() error {
	if p == nil || p.Proc == nil {
		return nil
	}
	p.res.stop()
	err := p.Proc.Stop(5 * time.Second)
	return err
}

// resourceWatch samples a process and its children from /proc.
type resourceWatch struct {
	pid   int
	self  string // kube-proxy's own command (commandOf)
	mu    sync.Mutex
	u     Usage
	seen  map[int]bool
	alive map[int]*kidRun
	progs map[string]*measure.ProgramUse
	order []string
	done  chan struct{}
	once  sync.Once
}

// kidRun is one child seen by the sampler.
type kidRun struct {
	command     string
	first, last time.Time
	cpu         time.Duration
	hwm         int64
}

func watchResources(pid int) *resourceWatch {
	w := &resourceWatch{pid: pid, self: commandOf(pid), seen: map[int]bool{}, alive: map[int]*kidRun{}, progs: map[string]*measure.ProgramUse{}, done: make(chan struct{})}
	go func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			w.sample()
			select {
			case <-w.done:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *resourceWatch) stop() {
	w.sample()
	w.once.Do(func() { close(w.done) })
}

func (w *resourceWatch) startWindow() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.u.WindowPeakRSS = w.u.RSS
}

func (w *resourceWatch) usage() Usage {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.u
}

// ticks is USER_HZ, the unit of /proc/<pid>/stat times (100 on Linux).
const ticks = 100

func (w *resourceWatch) sample() {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", w.pid))
	if err != nil {
		return // exited: keep the last sample
	}
	f := statFields(stat)
	hwm, rss := vmMem(w.pid)
	// Children of every thread: Go forks from whichever thread runs the
	// exec, and /proc/<pid>/task/<tid>/children lists only that thread's.
	var kids []int
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", w.pid))
	for _, task := range tasks {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", w.pid, task.Name())); err == nil {
			for _, s := range strings.Fields(string(b)) {
				if k, err := strconv.Atoi(s); err == nil {
					kids = append(kids, k)
				}
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(f) > 14 {
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		cut, _ := strconv.ParseInt(f[13], 10, 64)
		cst, _ := strconv.ParseInt(f[14], 10, 64)
		w.u.CPU = time.Duration(ut+st) * time.Second / ticks
		w.u.ChildCPU = time.Duration(cut+cst) * time.Second / ticks
	}
	w.u.PeakRSS = max(w.u.PeakRSS, hwm)
	if rss > 0 {
		w.u.RSS = rss
		w.u.WindowPeakRSS = max(w.u.WindowPeakRSS, rss)
	}
	now := time.Now()
	live := map[int]bool{}
	for _, k := range kids {
		if !w.seen[k] {
			w.seen[k] = true
			w.u.Children++
			w.alive[k] = &kidRun{command: "unknown (exited before a sample saw its program)", first: now}
		}
		// Between fork and exec a child is still a copy of kube-proxy
		// (its command line and resident set): count it from its exec on.
		c := commandOf(k)
		execd := !strings.HasPrefix(c, "pid ") && !strings.HasPrefix(c, w.self)
		kh := int64(0)
		if execd {
			kh, _ = vmMem(k)
			w.u.ChildPeakRSS = max(w.u.ChildPeakRSS, kh)
		}
		if r := w.alive[k]; r != nil {
			live[k] = true
			r.last = now
			if execd {
				r.command = c
			}
			r.hwm = max(r.hwm, kh)
			if kf := statFields(readFile(fmt.Sprintf("/proc/%d/stat", k))); len(kf) > 12 {
				ut, _ := strconv.ParseInt(kf[11], 10, 64)
				st, _ := strconv.ParseInt(kf[12], 10, 64)
				r.cpu = time.Duration(ut+st) * time.Second / ticks
			}
		}
	}
	for k, r := range w.alive {
		if !live[k] {
			w.retire(r, now)
			delete(w.alive, k)
		}
	}
}

// retire adds a finished child's sampled use to its command's total; its
// wall time runs from the first sample that saw it to the first that did
// not (at most one sample period too long or short).
func (w *resourceWatch) retire(r *kidRun, end time.Time) {
	p := w.progs[r.command]
	if p == nil {
		p = &measure.ProgramUse{Command: r.command}
		w.progs[r.command] = p
		w.order = append(w.order, r.command)
	}
	p.Runs++
	p.CPUNs += int64(r.cpu)
	p.WallNs += int64(end.Sub(r.first))
	p.PeakRSSBytes = max(p.PeakRSSBytes, r.hwm)
}

// programs returns the children's use by command, in order of first run;
// children still running are counted up to now.
func (w *resourceWatch) programs() []measure.ProgramUse {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []measure.ProgramUse
	for _, c := range w.order {
		out = append(out, *w.progs[c])
	}
	return out
}

// logSize is the size of kube-proxy's log in bytes (0 when unreadable).
func (p *Proxy) logSize() int {
	fi, err := os.Stat(p.LogPath)
	if err != nil {
		return 0
	}
	return int(fi.Size())
}

// readFrom reads the file at path from byte offset off to its end (an
// offset past the end: nothing).
func readFrom(path string, off int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if off >= fi.Size() {
		return nil, nil
	}
	b := make([]byte, fi.Size()-off)
	n, err := f.ReadAt(b, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:n], nil
}

func readFile(path string) []byte {
	b, _ := os.ReadFile(path)
	return b
}

// commandOf names a child by its program's base name and up to two of
// its first arguments ("nft -f -", "iptables-restore -w 5").
func commandOf(pid int) string {
	args := strings.Split(strings.TrimRight(string(readFile(fmt.Sprintf("/proc/%d/cmdline", pid))), "\x00"), "\x00")
	if len(args) == 0 || args[0] == "" {
		return fmt.Sprintf("pid %d", pid)
	}
	out := append([]string{filepath.Base(args[0])}, args[1:min(len(args), 3)]...)
	return strings.Join(out, " ")
}

// statFields returns the fields of /proc/<pid>/stat after the command
// name (field 3, the state, is [0]).
func statFields(stat []byte) []string {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(stat[i+1:]))
}

// vmMem is the process's peak and current resident set (VmHWM and
// VmRSS of /proc/<pid>/status, bytes), 0 when unknown.
func vmMem(pid int) (hwm, rss int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	kb := func(v string) int64 {
		n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		return n << 10
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			hwm = kb(v)
		} else if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			rss = kb(v)
		}
	}
	return hwm, rss
}

// errNoMetric is returned by the metric accessors for a missing family.
var errNoMetric = errors.New("metric not exposed")

// IsNoMetric says err is a metric accessor's "metric not exposed": the
// family or series is absent, as a histogram is before its first
// observation (kube-proxy's network programming histogram after a
// restart, until it observes a change).
func IsNoMetric(err error) bool { return errors.Is(err, errNoMetric) }

// Scrape fetches and parses kube-proxy's metrics endpoint (in the node
// namespace).
func (p *Proxy) Scrape(ctx context.Context) (Metrics, error) {
	code, body, err := p.get(ctx, MetricsPort, "/metrics")
	if err != nil {
		return nil, fmt.Errorf("kube-proxy on %s: scrape metrics: %w", p.Spec.Config.NodeName, err)
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("kube-proxy on %s: scrape metrics: HTTP %d", p.Spec.Config.NodeName, code)
	}
	m, err := ParseMetrics(body)
	if err == nil {
		p.lastMu.Lock()
		p.last, p.lastAt = m, time.Now()
		p.lastMu.Unlock()
	}
	return m, err
}

// LastScrape returns the last scrape of kube-proxy's metrics that
// answered (Scrape's, whoever called it) and when it answered; nil and
// the zero time before the first. After kube-proxy exited it is what
// was measured of it last.
func (p *Proxy) LastScrape() (Metrics, time.Time) {
	p.lastMu.Lock()
	defer p.lastMu.Unlock()
	return p.last, p.lastAt
}

// exitedWithin reports whether the process has exited, waiting up to d
// for it: a scrape that failed because kube-proxy died can come before
// its wait returns.
func (p *Proxy) exitedWithin(d time.Duration) bool {
	if done, _ := p.Proc.Exited(); done || d <= 0 {
		return done // (a select with a 0 timer could pick either)
	}
	select {
	case <-p.Proc.Done():
		return true
	case <-time.After(d):
		return false
	}
}

// syncLineRE matches kube-proxy's log lines about its syncs and their
// steps ("SyncProxyRules complete" elapsed=..., and at -v=4 its steps).
var syncLineRE = regexp.MustCompile(`(?i)syncproxyrules|elapsed=|full sync|partial sync|reloading service|restoring|nft(ables)? transaction|deleting stale`)

// SyncLines returns the last n lines of kube-proxy's log about its syncs.
func (p *Proxy) SyncLines(n int) []string {
	var out []string
	for _, l := range strings.Split(string(readFile(p.LogPath)), "\n") {
		if syncLineRE.MatchString(l) {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}
