//go:build linux

// Package runner carries one scenario through the data flow of
// docs/architecture.md: services from the scenario, a testbed, and for each mode
// a proxier's full syncs and the traffic driver's phases, into a
// reports.Result. The CLI only wires flags and output to it.
package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/proxybench/proxybench/internal/monitoring"
	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/traffic"
)

// InputError is bad input or an unusable machine, found before anything is
// created: the CLI prints it as one line and exits 2.
type InputError struct{ Field, Msg, Fix string }

func (e *InputError) Error() string {
	s := e.Msg
	if e.Field != "" {
		s = e.Field + ": " + s
	}
	if e.Fix != "" {
		s += "; fix: " + e.Fix
	}
	return s
}

// Progress reports long steps; the CLI draws bars or plain lines.
type Progress interface {
	// Start begins a step of total units; Add advances it; Done ends it.
	Start(step string, total int)
	Add(n int)
	Done()
}

type noProgress struct{}

func (noProgress) Start(string, int) {}
func (noProgress) Add(int)           {}
func (noProgress) Done()             {}

// Options configure Run.
type Options struct {
	RunID    string // empty: a new one
	Version  string
	Progress Progress
	// Checkpoint, when set, is a path Run rewrites (atomically) after
	// every finished mode with the result so far, marked partial: a run
	// inside a user-mode-linux guest writes it to the host folder, so the
	// host keeps the guest's finished modes when the guest is killed
	// (SIGINT, timeout, crash).
	Checkpoint string
	// LookPath and Geteuid are os/exec.LookPath and os.Geteuid, replaceable in tests.
	LookPath func(string) (string, error)
	Geteuid  func() int
	// ArtifactDir is the folder beside the result that keeps what rows
	// leave to read afterwards (each kube-proxy row's config and log, a
	// folder per row); empty: a temporary folder of the run
	// (os.TempDir()/pb-<runid>-artifacts, removed by cleanup).
	ArtifactDir string
	// Checked is Preflight's check of the scenario's kube-proxy rows
	// (the kube-proxy binaries' --version, --help and dry runs, the
	// control plane's binaries): Run uses it instead of checking again
	// when it was made for the same scenario and covers the modes Run
	// runs; nil: Run checks.
	Checked *Checked
	// Where is where this run executes (WhereHost, WhereGuest): every row
	// records it as its kernel, and modes and phases are told it (the
	// kube-proxy rows' control plane takes the guest's timeouts). Empty:
	// the host; the guest's entry (GuestPlan, `proxybench guest-run`)
	// sets WhereGuest.
	Where Where
	// ServiceTypesModes, when set, are the modes whose serviceTypes cells
	// this run measures (nil: every mode with rules): a guest target of a
	// split run (--kernel auto) measures its own modes only, not the
	// bridge and baseline the host target measured (Execute sets it).
	ServiceTypesModes []string

	// live is the run's live metrics (Run sets it for a monitored
	// scenario; nil: none kept).
	live *monitoring.Live
}

func (o *Options) defaults() {
	if o.Where == "" {
		o.Where = WhereHost
	}
	if o.RunID == "" {
		o.RunID = topology.NewRunID()
	}
	if o.Progress == nil {
		o.Progress = noProgress{}
	}
	if o.LookPath == nil {
		o.LookPath = exec.LookPath
	}
	if o.Geteuid == nil {
		o.Geteuid = os.Geteuid
	}
	if o.ArtifactDir == "" {
		o.ArtifactDir = filepath.Join(os.TempDir(), "pb-"+o.RunID+"-artifacts")
	}
	if abs, err := filepath.Abs(o.ArtifactDir); err == nil {
		o.ArtifactDir = abs // kube-proxy runs in its own folder
	}
}

// Preflight checks, before anything is created, that the scenario can run
// here: root privileges, the network namespace directory, each mode's
// programs, and the kube-proxy binaries a kube-proxy row runs (their
// --version and --help, and a dry run of each mode's configuration) with
// the control plane's (FindKubeBin). It returns what it checked of the
// kube-proxy rows, for Options.Checked: Run then checks them no more.
// Failures are *InputError.
func Preflight(sc *scenarios.Scenario, o Options) (*Checked, error) {
	o.Checked = nil
	return preflight(context.Background(), sc, o)
}

// preflight is Preflight, taking the kube-proxy rows' check from
// o.Checked when it covers sc (Checked.covers), so Run checks them once.
func preflight(ctx context.Context, sc *scenarios.Scenario, o Options) (*Checked, error) {
	if err := checkPrograms(sc, o); err != nil {
		return nil, err
	}
	if o.Checked.covers(sc) {
		return o.Checked, nil
	}
	o.defaults()
	ar, err := loadAlerts(ctx, sc, o)
	if err != nil {
		return nil, err
	}
	c, err := kubeProxyBinaries(ctx, sc)
	if err != nil {
		return nil, err
	}
	c.alerts = ar
	if ar != nil {
		c.Warnings = ar.Warnings
	}
	if sc.Engine != "sim" {
		c.Warnings = append(c.Warnings, topology.HostOverlaps(networkPrefixes(sc))...)
	}
	return c, nil
}

// checkPrograms is the part of Preflight before the kube-proxy binaries:
// root, the traffic driver's protocols and each mode's programs.
func checkPrograms(sc *scenarios.Scenario, o Options) error {
	o.defaults()
	if o.Geteuid() != 0 {
		return &InputError{Msg: "proxybench run needs root: it creates network namespaces and programs their rules", Fix: "run it as root (sudo bin/proxybench run ...)"}
	}
	for _, p := range sc.Services.Protocols() {
		if !slices.Contains(scenarios.DriverProtocols, p) {
			return &InputError{Field: "services", Msg: fmt.Sprintf("%s ports render, but the traffic driver sends %s only", p, strings.Join(scenarios.DriverProtocols, ", ")),
				Fix: "use " + strings.Join(scenarios.DriverProtocols, " or ") + " ports"}
		}
	}
	for _, m := range sc.Modes {
		mode, err := modes.Lookup(m)
		if err != nil {
			return &InputError{Field: "modes", Msg: err.Error(), Fix: "use one of " + strings.Join(modes.Names(), ", ")}
		}
		if mode.Binaries == nil {
			continue
		}
		for _, b := range mode.Binaries(sc) {
			if _, err := o.LookPath(b); err != nil {
				return &InputError{Field: "modes", Msg: fmt.Sprintf("mode %s needs %s, which is not on PATH", m, b), Fix: "run make setup (installs Debian's iptables package) or drop the mode"}
			}
		}
		if sc.KubeProxyRuns(m) {
			for _, b := range kubeproxy.ModeBinaries[m] {
				if _, err := o.LookPath(b); err != nil {
					return &InputError{Field: "implementation", Msg: fmt.Sprintf("kube-proxy in mode %s runs %s, which is not on PATH", m, b), Fix: "install Debian's iptables, ipset and nftables packages (make setup), or drop kube-proxy for the mode (kubeProxy.modes)"}
				}
			}
		}
	}
	return nil
}

// Run executes sc: Preflight, build the testbed, then for each mode
// Repetitions full syncs (each from empty) and Repetitions rounds of
// traffic at every position, then teardown. The testbed is torn down on
// success, on error and on ctx cancellation (SIGINT/SIGTERM in the CLI).
//
// With a sweep (sc.Sweep.Services), every mode runs once per size, and the
// result holds one ModeResult per (size, mode), in that order.
//
// When a mode fails or ctx is cancelled after the testbed was built, Run
// returns the error together with a result marked Partial that holds the
// modes finished so far and the finished phases of the mode that stopped
// (its ModeResult.Partial says why); it is nil only when nothing was
// measured yet.
func Run(ctx context.Context, sc *scenarios.Scenario, o Options) (res *reports.Result, err error) {
	o.defaults()
	checked, err := preflight(ctx, sc, o)
	if err != nil {
		return nil, err
	}
	if sc.Monitored() {
		o.live = monitoring.NewLive()
	}
	sizes := sc.Sizes()
	perSize := make([][]workload.Service, len(sizes))
	for i, n := range sizes {
		if perSize[i], err = workload.Services(sc.AtSize(n)); err != nil {
			return nil, &InputError{Field: "services", Msg: err.Error()}
		}
		applyWeights(sc.AtSize(n), perSize[i])
	}
	res = &reports.Result{
		SchemaVersion: reports.SchemaVersion, Tool: "proxybench " + o.Version, RunID: o.RunID,
		Engine: "real", Started: time.Now(), Machine: MachineInfo(), Scenario: sc,
	}
	// The testbed, the failure injection and the run-scoped phases take
	// the largest size (a sweep need not end with it).
	largest := perSize[len(perSize)-1]
	for _, ps := range perSize {
		if len(ps) > len(largest) {
			largest = ps
		}
	}
	tb, echo, err := buildPhase(ctx, sc, o, append(slices.Clone(perSize), largest))
	if err != nil {
		return nil, err
	}
	if res.NodeSysctls, err = nodeSysctls(sc, tb); err != nil {
		echo.Close()
		if terr := tb.Teardown(); terr != nil {
			err = errors.Join(err, fmt.Errorf("teardown: %w", terr))
		}
		return nil, err
	}
	defer func() {
		echo.Close()
		if terr := tb.Teardown(); terr != nil && err == nil {
			err = fmt.Errorf("teardown: %w", terr)
		}
	}()
	e := newEnv(tb)
	// Before the first row (the baseline none) and before the failure
	// injection kills endpoints the pass would dial: warm a guest's
	// kernel. The host kernel has run for hours: its first and last
	// quarter of a whole-plan pass differed by 5% (38.1 / 36.2 µs,
	// 1k-services), where a freshly booted guest's none was 302 against
	// iptables' 82 µs.
	if o.Where == WhereGuest {
		if res.Machine.Warmup, err = warmupPhase(ctx, sc, e, tb.Clients, perSize[0], o.Progress); err != nil {
			return nil, err
		}
	}
	undo, err := failurePhase(ctx, sc, e, largest)
	if err != nil {
		return nil, err
	}
	defer func() {
		if uerr := undo(); uerr != nil && err == nil {
			err = fmt.Errorf("failure injection: undo: %w", uerr)
		}
	}()
	var failed []error // rows whose proxy program exited on its own
	// one runs row at size index i (carry: a kube-proxy row's sweep) and
	// keeps it in res; it returns an error only when the run stops.
	one := func(row proxymodes.Mode, vsc *scenarios.Scenario, i int, carry *sweepCarry) (bool, error) {
		// Every generated service: the size (services.count) and the
		// groups' services beside it.
		n := len(perSize[i])
		mr, secs, err := runRow(ctx, Phases, vsc, o, tb, e, perSize[i], row, carry)
		if mr != nil {
			mr.Services = n
		}
		for _, sec := range secs {
			res.MergeSection(sec)
		}
		switch fate(ctx, err) {
		case Keep, Partial:
			res.Modes = append(res.Modes, *mr)
			checkpoint(res, o.Checkpoint)
			return false, nil
		case Failed:
			// Its proxy program exited on its own: the row is
			// kept, marked failed, and the run goes on.
			err = fmt.Errorf("mode %s at %d services: %w", rowLabel(row, vsc), n, err)
			mr.Failed = err.Error()
			res.Modes = append(res.Modes, *mr)
			failed = append(failed, err)
			checkpoint(res, o.Checkpoint)
			return false, nil
		}
		// Stop: what was measured is kept (the rows before this
		// one and this row's finished phases), the run stops.
		err = fmt.Errorf("mode %s at %d services: %w", rowLabel(row, vsc), n, err)
		if mr != nil {
			mr.Partial = err.Error()
			res.Modes = append(res.Modes, *mr)
		}
		res.Finished = time.Now()
		res.Partial = err.Error()
		return true, err
	}
	for i, n := range sizes {
		for _, mode := range sc.Modes {
			m, err := modes.Lookup(mode)
			if err != nil {
				return nil, &InputError{Field: "modes", Msg: err.Error()}
			}
			rs, err := rows(sc, m, checked.kubeProxies, checked.bin, o.ArtifactDir, dataPlaneProbe(e), o.Where, monitor(sc, checked.alerts, o.live), kubeProxyNodes(sc, tb))
			if err != nil {
				if len(res.Modes) == 0 {
					return nil, err
				}
				res.Finished, res.Partial = time.Now(), err.Error()
				return res, err
			}
			for _, row := range rs {
				if !sweepsKubeProxy(sc, row) {
					for _, vsc := range modeVariants(sc.AtSize(n), m) {
						if stop, err := one(row, vsc, i, nil); stop {
							return res, err
						}
					}
					continue
				}
				if i > 0 {
					continue // its every size ran at the first
				}
				// A kube-proxy row of a sweep runs its sizes one after the
				// other on one control plane and kube-proxy (sweepCarry),
				// each size's services written through the API.
				for v := range modeVariants(sc.AtSize(n), m) {
					carry := &sweepCarry{}
					for j := range sizes {
						carry.last = j == len(sizes)-1
						vsc := modeVariants(sc.AtSize(sizes[j]), m)[v]
						if stop, err := one(row, vsc, j, carry); stop {
							return res, err
						}
						if carry.p == nil && !carry.last {
							break // it stopped early: its row says so
						}
						carry.from = sizes[j]
					}
				}
			}
		}
	}
	if err := runScoped(ctx, sc, o, tb, e, largest, res, checked); err != nil {
		res.Finished = time.Now()
		res.Partial = err.Error()
		return res, err
	}
	res.Finished = time.Now()
	if len(failed) > 0 {
		return res, &RowsFailed{Errs: failed}
	}
	return res, nil
}

// RowsFailed is the error of a run that went on after rows failed
// because their proxy program exited on its own (proxymodes.Failed,
// e.g. kube-proxy killed): the result holds every row, the failed ones
// with what was measured before and marked (ModeResult.Failed). The CLI
// saves it as a whole result and exits 1, as for a row that stopped
// the run.
type RowsFailed struct{ Errs []error }

func (e *RowsFailed) Error() string {
	msgs := make([]string, len(e.Errs))
	for i, err := range e.Errs {
		msgs[i] = err.Error()
	}
	return fmt.Sprintf("%d row(s) failed (kept in the result, marked failed): %s", len(e.Errs), strings.Join(msgs, "; "))
}

func (e *RowsFailed) Unwrap() []error { return e.Errs }

// failedRows returns the failures of r's rows marked failed, as errors:
// a *RowsFailed's from a result (a guest's, or Execute's over several
// kernels and runs).
func failedRows(r *reports.Result) []error {
	var out []error
	for _, m := range r.Modes {
		if m.Failed != "" {
			out = append(out, errors.New(m.Failed))
		}
	}
	return out
}

// rowLabel names a row in messages: modeLabel, or a variant's label.
func rowLabel(m proxymodes.Mode, sc *scenarios.Scenario) string {
	if m.Base != "" {
		return m.Name
	}
	return modeLabel(m, sc)
}

// buildPhase builds the testbed for the largest service set (the last of
// perSize) and starts the echo server for the first. On error nothing is
// left behind.
func buildPhase(ctx context.Context, sc *scenarios.Scenario, o Options, perSize [][]workload.Service) (*topology.Testbed, *traffic.EchoServer, error) {
	o.Progress.Start("building testbed "+o.RunID, 1)
	tb, err := topology.Build(ctx, topologySpec(sc, o.RunID, perSize[len(perSize)-1]))
	o.Progress.Done()
	if err != nil {
		return nil, nil, fmt.Errorf("build testbed: %w", err)
	}
	echo, err := startEcho(tb, perSize[0])
	if err != nil {
		if terr := tb.Teardown(); terr != nil {
			err = errors.Join(err, fmt.Errorf("teardown: %w", terr))
		}
		return nil, nil, err
	}
	return tb, echo, nil
}

// runMode runs one row: its mode's proxier on node0 and, in order, each
// of phases that applies to the row (Phase.applies), then the row's
// deferred cleanups, the proxy's record and cleanup and a flush of the
// node's conntrack table. It always returns the row (nil only when the
// proxier could not be made) with what its phases measured, its faults
// and kube-proxy record, and the sections of its phases; the error is
// the phase's that stopped the row, or the program's exit seen after
// the last phase (fate decides what becomes of both).
func runMode(ctx context.Context, sc *scenarios.Scenario, o Options, tb *topology.Testbed, e *env, services []workload.Service, m proxymodes.Mode) (*reports.ModeResult, error) {
	mr, _, err := runRow(ctx, Phases, sc, o, tb, e, services, m, nil)
	return mr, err
}

// runRow is runMode over the phase list phases (tests inject failing
// phases), also returning the row's sections. With carry (a kube-proxy
// row of sweep.services) the row is one size of the sweep: it takes the
// proxier of the size before from carry (a new one at the first size)
// and leaves it to the next size running, unless this is the last size
// or the row failed (then it is cleaned up and carry.p is nil).
func runRow(ctx context.Context, phases []Phase, sc *scenarios.Scenario, o Options, tb *topology.Testbed, e *env, services []workload.Service, m proxymodes.Mode, carry *sweepCarry) (_ *reports.ModeResult, _ []reports.Section, err error) {
	var p proxymodes.Proxier
	if carry != nil && carry.p != nil {
		p = carry.p
	} else if p, err = m.New(sc, tb.Node); err != nil {
		return nil, nil, err
	}
	if carry != nil {
		carry.p = p
	}
	mr := &reports.ModeResult{Mode: m.Name, Info: p.Info(), Kernel: string(o.Where), Traits: m.Traits}
	if m.Base != "" {
		mr.Implementation, mr.BaseMode = m.Implementation, m.Base
	}
	var f faults
	r := &Row{Sc: sc, O: o, Testbed: tb, Env: e, Mode: m, Proxier: p, Proxiers: []proxymodes.Proxier{p}, Services: services, Result: mr, Faults: &f, sweep: carry}
	r.Live = o.live.BeginRow(rowLabels(m, sc, o.Where))
	defer o.live.EndRow(r.Live)
	if _, kp := p.(prometheusHolder); o.live != nil && !kp {
		// A builtin row's Prometheus (a kube-proxy row's starts with its
		// control plane): before the first phase, so the whole row is in
		// its TSDB.
		rp, perr := startRowPrometheus(ctx, r, o.live, filepath.Join(o.ArtifactDir, rowDir(rowLabel(m, sc))))
		if perr != nil {
			_ = p.Cleanup(context.WithoutCancel(ctx))
			return mr, nil, perr
		}
		r.prom = rp
		r.Defer(rp.stop)
	}
	ran := []Phase{}
	run := func(ph Phase) error {
		r.Live.Phase(ph.Name, true)
		defer r.Live.Phase(ph.Name, false)
		return ph.Run(ctx, r)
	}
	for i, ph := range phases {
		if !ph.applies(sc, m) || ph.Final {
			continue
		}
		ran = append(ran, ph)
		r.later = nil
		for _, next := range phases[i+1:] {
			if next.applies(sc, m) && !next.Final {
				r.later = append(r.later, next.Name)
			}
		}
		if err = run(ph); err != nil {
			break
		}
	}
	for _, ph := range phases {
		if !ph.applies(sc, m) || !ph.Final || ctx.Err() != nil {
			continue
		}
		ran = append(ran, ph)
		if ferr := run(ph); ferr != nil && err == nil {
			err = ferr
		}
	}
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		if cerr := r.cleanups[i](); cerr != nil && err == nil {
			err = cerr
		}
	}
	// A proxy program that exited on its own (kube-proxy) fails the row,
	// also when no phase noticed (it died during traffic); not asked again
	// when the row's error already is that exit (fate Failed, whether or
	// not the run was cancelled).
	atEnd := false
	if x, ok := p.(proxymodes.Exiter); ok && fate(context.WithoutCancel(ctx), err) != Failed {
		if xerr := x.Exited(); xerr != nil {
			atEnd = err == nil
			err = errors.Join(xerr, err)
		}
	}
	switch fate(ctx, err) {
	case Partial:
		mr.Partial = partialText(err)
		err = nil // kept as data: the run goes on without error
	case Failed:
		if !atEnd {
			mr.Partial = err.Error() // its later phases were not run
		}
	}
	if rec, ok := p.(kubeProxyRecorder); ok {
		mr.KubeProxy = rec.KubeProxyRecord(context.WithoutCancel(ctx))
		mr.Info = p.Info()
	}
	if carry != nil && !carry.last && err == nil && mr.Partial == "" && ctx.Err() == nil {
		// The sweep's next size takes it over, running.
	} else {
		if carry != nil {
			if !carry.last {
				mr.Partial = strings.TrimPrefix(mr.Partial+"; its larger sizes of sweep.services were not run", "; ")
			}
			carry.p = nil
		}
		if cerr := p.Cleanup(context.WithoutCancel(ctx)); cerr != nil && err == nil {
			err = fmt.Errorf("cleanup: %w", cerr)
		}
	}
	if ferr := e.flush(0); ferr != nil {
		f.add("conntrack flush of node0 after the mode failed (the next mode may follow its NAT entries): %v", ferr)
	}
	mr.Faults = f
	label := rowLabel(m, sc)
	for _, ph := range ran {
		if ph.Report != nil {
			r.AddSection(ph.Report(label, mr)...)
		}
	}
	return mr, r.Sections, err
}

// kubeProxyRecorder is a proxier that runs the real kube-proxy
// (kubeproxy.Proxier): what the result records about it.
type kubeProxyRecorder interface {
	KubeProxyRecord(ctx context.Context) *measure.KubeProxy
}

// MachineInfo describes this machine for the result.
func MachineInfo() reports.Machine {
	m := reports.Machine{KernelWhere: "host", CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	m.Hostname, _ = os.Hostname()
	m.Kernel = kernelRelease()
	m.CPUModel, m.MemoryBytes = cpuAndMemory()
	return m
}

// IsInput reports whether err is bad input (exit code 2).
func IsInput(err error) bool {
	var ie *InputError
	return errors.As(err, &ie)
}

// nodeSysctls writes the scenario's node.sysctls in every node namespace
// (a default key whose file does not exist there, such as the IPVS ones
// without ip_vs, is skipped; a key the scenario gives must exist) and
// returns what the first node reads back.
func nodeSysctls(sc *scenarios.Scenario, tb *topology.Testbed) (map[string]string, error) {
	return applyNodeSysctls(sc, tb, "", nil)
}

// applyNodeSysctls is nodeSysctls for the keys starting with prefix, with
// override's values replacing the scenario's (a phase's pass, such as
// conn-reuse's conn_reuse_mode values; an overridden key must exist).
// Keys are written only where the value differs, on every node.
func applyNodeSysctls(sc *scenarios.Scenario, tb *topology.Testbed, prefix string, override map[string]string) (map[string]string, error) {
	out := map[string]string{}
	want := map[string]string{}
	for k, v := range sc.Node.Sysctls {
		if strings.HasPrefix(k, prefix) {
			want[k] = v
		}
	}
	for k, v := range override {
		want[k] = v
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		path := strings.ReplaceAll(k, ".", "/")
		_, overridden := override[k]
		for i, n := range tb.Nodes {
			got, err := n.ReadSysctl(path)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) && !overridden && scenarios.NodeSysctlDefaults[k] == want[k] {
					break // not in this kernel or without its module: left out
				}
				return nil, fmt.Errorf("node.sysctls.%s: %w", k, err)
			}
			if got != want[k] {
				if err := n.Sysctl(path, want[k]); err != nil {
					return nil, fmt.Errorf("node.sysctls.%s: %w", k, err)
				}
				if got, err = n.ReadSysctl(path); err != nil {
					return nil, fmt.Errorf("node.sysctls.%s: %w", k, err)
				}
			}
			if i == 0 {
				out[k] = got
			}
		}
	}
	return out, nil
}

// errNoCounters: the env reads no ICMP counters.
var errNoCounters = errors.New("no ICMP counters")

// icmpCounters sums the ICMP counters of the node namespaces and the
// clients' lock-dropped ICMP errors and SYN retransmissions (see
// reports.ICMPCounters).
func icmpCounters(tb *topology.Testbed) (reports.ICMPCounters, error) {
	var c reports.ICMPCounters
	for _, n := range tb.Nodes {
		m, err := n.NetCounters()
		if err != nil {
			return c, err
		}
		c.DestUnreachSent += m["Icmp.OutDestUnreachs"]
		c.RateLimitedHost += m["Icmp.OutRateLimitHost"]
		c.RateLimitedGlobal += m["Icmp.OutRateLimitGlobal"]
	}
	for _, n := range tb.Clients {
		m, err := n.NetCounters()
		if err != nil {
			return c, err
		}
		c.LockDropped += m["TcpExt.LockDroppedIcmps"]
		c.SynRetrans += m["TcpExt.TCPSynRetrans"]
	}
	return c, nil
}

// checkpoint writes res, marked partial, to path (nothing when path is
// empty). A failed write does not stop the run: the checkpoint only
// matters if the run is killed, and the final result is written anyway.
func checkpoint(res *reports.Result, path string) {
	if path == "" {
		return
	}
	cp := *res
	cp.Finished = time.Now()
	done := make([]string, 0, len(res.Modes))
	for _, m := range res.Modes {
		done = append(done, m.Mode)
	}
	cp.Partial = "stopped before the run finished; checkpoint after modes " + strings.Join(done, ", ")
	if err := cp.Write(path); err != nil {
		fmt.Fprintf(os.Stderr, "proxybench: checkpoint %s: %v\n", path, err)
	}
}

// networkPrefixes are sc's network prefixes by field, those that parse
// (validate has refused the others).
func networkPrefixes(sc *scenarios.Scenario) map[string]netip.Prefix {
	out := map[string]netip.Prefix{}
	n := sc.Network
	for field, v := range map[string]string{"network.serviceCIDR": n.ServiceCIDR, "network.podCIDR": n.PodCIDR,
		"network.nodeCIDR": n.NodeCIDR, "network.clusterCIDR": n.ClusterCIDR, "network.clientCIDR": sc.ClientPrefixString()} {
		if p, err := netip.ParsePrefix(v); err == nil {
			out[field] = p
		}
	}
	return out
}
