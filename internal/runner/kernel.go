//go:build linux

package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/proxybench/proxybench/internal/uml"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
)

// Target is one kernel of a run and the modes that run on it.
type Target struct {
	// Name is "host" or the guest kernel's uml.Kernel.Name ("uml:6.12");
	// every ModeResult of the target carries it as its Kernel.
	Name string
	// UML is the guest kernel; nil for the host.
	UML   *uml.Kernel
	Modes []string
	// ModeSwitch, when set, replaces the scenario's modeSwitch on this
	// target: the switches that run on its kernel (planModeSwitch).
	ModeSwitch *scenarios.ModeSwitchSpec
}

// Plan is where a run's modes execute: one target per kernel, run one
// after the other. Figures compare only between modes of one target.
type Plan struct {
	Targets []Target
	// Why says how the kernels were chosen, for the screen and the result.
	Why string
	// FellBack maps a mode replaced under `fallback: iptables` to its
	// replacement (kube-proxy's downgrade from ipvs).
	FellBack map[string]string
}

// Names returns the targets' names.
func (p Plan) Names() []string {
	var out []string
	for _, t := range p.Targets {
		out = append(out, t.Name)
	}
	return out
}

// KernelOptions are the kernel build options (CONFIG_X) mode needs with
// sc's settings: the mode's own list (proxymodes.Mode.KernelOptions), what
// a user-mode-linux kernel's --showconfig must list as =y (or =m in a
// modular kernel) for the mode to run there. Nil for a mode without a
// list or a name no mode has (it is then assumed to run).
func KernelOptions(sc *scenarios.Scenario, mode string) []string {
	m, err := modes.Lookup(mode)
	if err != nil || m.KernelOptions == nil {
		return nil
	}
	return m.KernelOptions(sc)
}

// GuestUnsupported says why guest kernel k cannot run mode with sc's
// settings ("" when it can): the options of KernelOptions its
// configuration lacks.
func GuestUnsupported(sc *scenarios.Scenario, k *uml.Kernel, mode string) string {
	missing, err := k.Has(KernelOptions(sc, mode)...)
	if err != nil {
		return err.Error()
	}
	if len(missing) == 0 {
		return ""
	}
	why := k.Name + " lacks " + strings.Join(missing, ", ")
	if slices.Contains(missing, "CONFIG_NF_TABLES_IPV4") {
		why += " (no nf_tables ip family)"
		if m, err := modes.Lookup(mode); err == nil && m.UsesIPTables {
			why += "; use iptables.backend: legacy"
		}
	}
	return why
}

// guestKernels lists the user-mode-linux kernels auto may use, best first:
// the default (uml), then the other current source-built ones, then
// Debian's.
func guestKernels() []*uml.Kernel {
	var out []*uml.Kernel
	if d, err := uml.Default(); err == nil {
		out = append(out, d)
	}
	for _, k := range uml.Kernels() {
		if k.Stale == "" && !slices.ContainsFunc(out, func(o *uml.Kernel) bool { return o.Path == k.Path }) {
			out = append(out, k)
		}
	}
	return out
}

// PlanKernels resolves sc.Kernel into a Plan. A list (host, uml, uml:6.12,
// uml:6.1, uml:debian, a kernel path) runs every mode on each kernel; a
// kernel that cannot run one is an *InputError naming the kernel, the
// mode, the missing options and the fix. auto picks the host when it runs
// every mode, else ONE user-mode-linux kernel that runs every mode, and
// only when none does, a split (the modes the host can run there, the rest
// plus the none and iptables baselines in the best guest kernel). Inside a
// guest it is always the host. With `fallback: iptables`, on the host an
// ipvs mode the kernel lacks is replaced by iptables and FellBack records
// it. Host probes run in a throwaway namespace and leave nothing behind.
func PlanKernels(ctx context.Context, sc *scenarios.Scenario) (Plan, error) {
	if uml.InGuest() {
		return Plan{Targets: []Target{{Name: "host", Modes: sc.Modes}}, Why: "inside the user-mode-linux guest"}, nil
	}
	names := scenarios.KernelNames(sc.Kernel)
	if len(names) == 0 || (len(names) == 1 && names[0] == "auto") {
		return planAuto(ctx, sc)
	}
	plan := Plan{Why: "kernel: " + strings.Join(names, ", ") + " requested"}
	for _, n := range names {
		if n == "host" {
			t, fb, err := planHost(ctx, sc)
			if err != nil {
				return Plan{}, err
			}
			if len(fb) > 0 {
				plan.FellBack = fb
				plan.Why += "; fallback: ipvs is missing on the host, so it ran there as iptables (kube-proxy's downgrade)"
			}
			plan.Targets = append(plan.Targets, t)
			continue
		}
		k, err := uml.Find(n)
		if err != nil {
			return Plan{}, &InputError{Field: "kernel", Msg: err.Error()}
		}
		if err := uml.Usable(k); err != nil {
			return Plan{}, &InputError{Field: "kernel", Msg: n + ": " + err.Error()}
		}
		for _, m := range sc.Modes {
			if why := GuestUnsupported(sc, k, m); why != "" {
				return Plan{}, &InputError{Field: "modes", Msg: "mode " + m + " cannot run on kernel " + n + ": " + why,
					Fix: "use another kernel (proxybench doctor lists what each can run; make kernels builds uml:6.12 and uml:6.1), or drop the mode"}
			}
		}
		if slices.ContainsFunc(plan.Targets, func(t Target) bool { return t.Name == k.Name }) {
			return Plan{}, &InputError{Field: "kernel", Msg: n + " names kernel " + k.Name + ", which is already listed", Fix: "list each kernel once"}
		}
		plan.Targets = append(plan.Targets, Target{Name: k.Name, UML: k, Modes: sc.Modes})
	}
	return plan, nil
}

// planHost is the host target: every mode must run on this kernel, or,
// under `fallback: <mode>`, a mode that falls back to that one
// (Mode.FallsBackTo: ipvs to iptables) is replaced by it.
func planHost(ctx context.Context, sc *scenarios.Scenario) (Target, map[string]string, error) {
	st, err := ProbeHost(ctx, sc, sc.Modes)
	if err != nil {
		return Target{}, nil, err
	}
	var missing []string
	for _, s := range st {
		if !s.Available {
			missing = append(missing, s.Mode+": "+s.Reason)
		}
	}
	if len(missing) == 0 {
		return Target{Name: "host", Modes: sc.Modes}, nil, nil
	}
	if sc.Fallback == "" {
		return Target{}, nil, &InputError{Field: "modes", Msg: "the host kernel cannot run " + strings.Join(missing, "; "),
			Fix: "run with --kernel uml (a user-mode-linux kernel; make kernels builds one with every mode), or drop the mode"}
	}
	fb := map[string]string{}
	var modes []string
	for _, s := range st {
		switch {
		case s.Available:
			modes = append(modes, s.Mode)
		case fallsBackTo(s.Mode) == sc.Fallback && sc.KubeProxyRuns(s.Mode):
			// kube-proxy itself no longer falls back (kubernetes PR#111806,
			// v1.26): with mode ipvs on a kernel without IP_VS, v1.36.3 and
			// v1.37.2 exit with status 1, "can't use the IPVS proxier: ipvs
			// not supported", programming nothing
			// (TestKernelIPVSModeWithoutIPVS). A row that ran as the
			// fallback would report what kube-proxy does not do.
			return Target{}, nil, &InputError{Field: "fallback", Msg: fmt.Sprintf("the host kernel cannot run %s (%s), and kube-proxy does not fall back since v1.26 (kubernetes PR#111806): it exits with \"can't use the IPVS proxier\"", s.Mode, s.Reason),
				Fix: "run the kube-proxy row in a guest (--kernel uml), or keep fallback for builtin only (kubeProxy.modes without " + s.Mode + ")"}
		case fallsBackTo(s.Mode) == sc.Fallback:
			fb[s.Mode] = sc.Fallback
			if !slices.Contains(sc.Modes, sc.Fallback) {
				modes = append(modes, sc.Fallback)
			}
		default:
			return Target{}, nil, &InputError{Field: "modes", Msg: "the host kernel cannot run " + s.Mode + ": " + s.Reason, Fix: "run with --kernel uml, or drop the mode"}
		}
	}
	return Target{Name: "host", Modes: slices.Compact(modes)}, fb, nil
}

// fallsBackTo is the mode that replaces mode under a scenario's fallback
// (Mode.FallsBackTo), "" for none or a name no mode has.
func fallsBackTo(mode string) string {
	m, err := modes.Lookup(mode)
	if err != nil {
		return ""
	}
	return m.FallsBackTo
}

// splitBaselines are the modes a split plan's guest group runs too when
// the scenario has them (Mode.SplitBaseline), in modes.All's order.
func splitBaselines() []string {
	var out []string
	for _, m := range modes.All {
		if m.SplitBaseline {
			out = append(out, m.Name)
		}
	}
	return out
}

func planAuto(ctx context.Context, sc *scenarios.Scenario) (Plan, error) {
	st, err := ProbeHost(ctx, sc, sc.Modes)
	if err != nil {
		return Plan{}, err
	}
	var missing, hostModes []string
	for _, s := range st {
		if s.Available {
			hostModes = append(hostModes, s.Mode)
		} else {
			missing = append(missing, s.Mode+": "+s.Reason)
		}
	}
	if len(missing) == 0 {
		return Plan{Targets: []Target{{Name: "host", Modes: sc.Modes}}, Why: "auto: the host kernel supports every requested mode"}, nil
	}
	guests := guestKernels()
	if sc.ModeSwitch != nil {
		if p, ok := planModeSwitch(sc, st, guests); ok {
			return p, nil
		}
	}
	if len(guests) == 0 {
		_, err := uml.Default()
		return Plan{}, &InputError{Field: "kernel", Msg: "auto: the host kernel cannot run " + strings.Join(missing, "; ") + ", and " + err.Error()}
	}
	var whyNot []string
	for _, k := range guests {
		if uml.Usable(k) != nil {
			continue
		}
		var lacks []string
		for _, m := range sc.Modes {
			if why := GuestUnsupported(sc, k, m); why != "" {
				lacks = append(lacks, m+": "+why)
			}
		}
		if len(lacks) == 0 {
			return Plan{Targets: []Target{{Name: k.Name, UML: k, Modes: sc.Modes}},
				Why: fmt.Sprintf("auto: the host kernel lacks %s, so every mode runs in one user-mode-linux kernel, %s (%s); its figures compare with each other only, not with host runs", strings.Join(missing, "; "), k.Name, k.Release)}, nil
		}
		whyNot = append(whyNot, strings.Join(lacks, "; "))
	}
	// No single kernel runs every mode: split between the host and the best
	// guest kernel, each group with the baselines that make it comparable.
	k := guests[0]
	var guest []string
	for _, s := range st {
		why := GuestUnsupported(sc, k, s.Mode)
		switch {
		case !s.Available && why != "":
			return Plan{}, &InputError{Field: "modes", Msg: "no kernel here can run " + s.Mode + ": host: " + s.Reason + "; " + why,
				Fix: "build a guest kernel with every mode (make kernels), or drop the mode"}
		case !s.Available:
			guest = append(guest, s.Mode)
		}
	}
	for _, b := range splitBaselines() {
		if slices.Contains(sc.Modes, b) && !slices.Contains(guest, b) && GuestUnsupported(sc, k, b) == "" {
			guest = append([]string{b}, guest...)
		}
	}
	slices.SortStableFunc(guest, func(a, b string) int { return slices.Index(sc.Modes, a) - slices.Index(sc.Modes, b) })
	return Plan{Targets: []Target{{Name: "host", Modes: hostModes}, {Name: k.Name, UML: k, Modes: guest}},
		Why: fmt.Sprintf("auto: the host cannot run %s, and no user-mode-linux kernel here runs every mode (%s); so %s run on the host and %s in %s; compare modes within one kernel only (make kernels builds uml:6.12, which runs every mode)",
			strings.Join(missing, "; "), strings.Join(whyNot, " | "), strings.Join(hostModes, ", "), strings.Join(guest, ", "), k.Name)}, nil
}

// Execute runs plan: each target's modes on its kernel, one target after
// the other, and merges the results. Every ModeResult's Kernel is its
// target's Name and Kernels describes each kernel (release, boot
// times). When a later target fails, the result of the earlier ones is
// returned with the error, so no measurement is lost.
func Execute(ctx context.Context, sc *scenarios.Scenario, plan Plan, o Options, console io.Writer) (*reports.Result, error) {
	o.defaults()
	var res *reports.Result
	var skipped []string
	var failed []error // rows failed, the run went on (RowsFailed)
	for _, t := range plan.Targets {
		s := *sc
		s.Modes = t.Modes
		if t.ModeSwitch != nil {
			s.ModeSwitch = t.ModeSwitch
		}
		if t.UML != nil {
			if why := GuestSkips(&s, t.Name); len(why) > 0 {
				skipped = append(skipped, why...)
				if console != nil {
					for _, w := range why {
						fmt.Fprintln(console, "note: skipped "+w)
					}
				}
			}
		}
		var r *reports.Result
		var err error
		if t.UML == nil {
			r, err = Run(ctx, &s, o)
		} else {
			r, err = RunInUML(ctx, &s, o, console, t.UML)
		}
		if rf := (*RowsFailed)(nil); errors.As(err, &rf) && r != nil {
			failed, err = append(failed, rf.Errs...), nil // kept; the next kernel runs
		}
		if err != nil {
			// Finished measurements are kept: the earlier kernels', and
			// what this kernel's run saved before it stopped.
			if r != nil {
				for i := range r.Modes {
					r.Modes[i].Kernel = t.Name
				}
				if res == nil {
					res = r
				} else {
					res.Modes = append(res.Modes, r.Modes...)
				}
				mergeModeSwitch(res, r, t.Name)
			}
			if res == nil {
				return nil, err
			}
			res.Scenario = sc
			res.Skipped = append(res.Skipped, skipped...)
			res.Machine.KernelWhy = plan.Why
			if len(plan.Targets) > 1 {
				res.Machine.KernelWhere = strings.Join(plan.Names(), "+")
				res.Partial = fmt.Sprintf("kernel %s failed: %v; kept the modes finished on %s", t.Name, err, strings.Join(res.KernelNames(), ", "))
			}
			res.Finished = time.Now()
			return res, err
		}
		kr := reports.KernelRun{Name: t.Name, Release: r.Machine.Kernel, Where: "host", Modes: t.Modes, CPUs: r.Machine.CPUs}
		if t.UML != nil {
			kr.Where, kr.Source = "uml", t.UML.Source
			kr.InitNs, kr.BootNs, kr.GuestNs = r.Machine.GuestInitNs, r.Machine.GuestBootNs, r.Machine.GuestElapsedNs
		}
		for i := range r.Modes {
			r.Modes[i].Kernel = t.Name
			for from, to := range plan.FellBack {
				if t.UML == nil && r.Modes[i].Mode == to {
					r.Modes[i].FellBackFrom = from
				}
			}
		}
		if res == nil {
			res = r
			if t.UML != nil {
				res.Machine.HostKernel = kernelRelease()
			}
		} else {
			res.Modes = append(res.Modes, r.Modes...)
			res.Finished = r.Finished
			if t.UML != nil && res.Machine.GuestKernel == "" {
				res.Machine.GuestKernel = r.Machine.Kernel
				res.Machine.GuestBootNs = r.Machine.GuestBootNs
			}
		}
		mergeModeSwitch(res, r, t.Name)
		res.Kernels = append(res.Kernels, kr)
	}
	if res == nil {
		return nil, errors.New("no kernel to run on")
	}
	res.Scenario = sc
	res.Skipped = append(res.Skipped, skipped...)
	if len(plan.Targets) > 1 {
		res.Machine.KernelWhere = strings.Join(plan.Names(), "+")
	}
	res.Machine.KernelWhy = plan.Why
	if len(failed) > 0 {
		return res, &RowsFailed{Errs: failed}
	}
	return res, nil
}

// guestConsole passes on the guest's own progress lines and drops the
// kernel's boot and halt chatter and the guest run's summary and result
// path (the host prints its own). Nil stays nil.
func guestConsole(w io.Writer, name string) io.Writer {
	if w == nil {
		return nil
	}
	return &lineFilter{w: w, name: name}
}

type lineFilter struct {
	w       io.Writer
	name    string
	buf     []byte
	started bool // past "uml: modules loaded"
	summary bool // inside the guest run's Markdown summary
}

func (f *lineFilter) Write(p []byte) (int, error) {
	f.buf = append(f.buf, p...)
	for {
		i := bytes.IndexByte(f.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(f.buf[:i+1])
		f.buf = f.buf[i+1:]
		switch {
		case strings.HasPrefix(line, "uml: modules loaded"):
			f.started = true
			fmt.Fprint(f.w, "user-mode-linux guest "+f.name+": "+strings.TrimPrefix(line, "uml: "))
		case strings.HasPrefix(line, "uml: module "):
			fmt.Fprint(f.w, line)
		case !f.started, strings.HasPrefix(line, "## proxybench"):
			f.summary = f.summary || strings.HasPrefix(line, "## proxybench")
		case f.summary || strings.Contains(line, "Halting.") || strings.Contains(line, "System halted") || strings.Contains(line, "wtmp record"):
		default:
			fmt.Fprint(f.w, "  guest: "+line)
		}
	}
}

// GuestModules is every kernel module sc's modes need in a modular guest
// kernel (Debian's); a kernel built by make kernels has them built in.
func GuestModules(sc *scenarios.Scenario) []string {
	mods := append([]string{}, uml.BaseModules...)
	if sc.Topology.NodeCount() > 1 {
		mods = append(mods, "bridge") // the fabric joining the nodes
	}
	for _, s := range sc.Sweep.Schedulers {
		mods = append(mods, "ip_vs_"+s)
	}
	for _, name := range sc.Modes {
		if m, err := modes.Lookup(name); err == nil && m.Modules != nil {
			for _, x := range m.Modules(sc) {
				if !slices.Contains(mods, x) {
					mods = append(mods, x)
				}
			}
		}
	}
	return mods
}

// RunInUML runs sc inside user-mode-linux guest kernel k (nil: uml.Default):
// it writes the effective scenario to a host folder mounted in the guest,
// boots the guest (loading the modules the modes need when k is modular),
// runs this same binary's `run --kernel host` there for all modes (so they
// share one kernel), streams the guest's console to console, and reads
// back the result JSON. The result records kernelWhere "uml", the guest's
// kernel, the host's, and the guest's init and boot times.
func RunInUML(ctx context.Context, sc *scenarios.Scenario, o Options, console io.Writer, k *uml.Kernel) (*reports.Result, error) {
	o.defaults()
	if k == nil {
		var err error
		if k, err = uml.Default(); err != nil {
			return nil, &InputError{Field: "kernel", Msg: err.Error()}
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", uml.WorkDirPattern(o.RunID))
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	_ = os.Chmod(dir, 0o755)
	y, err := sc.YAML()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "scenario.yaml"), y, 0o644); err != nil {
		return nil, err
	}
	// The guest's working folder is its own (uml.GuestMount): it finds
	// kube-apiserver, etcd and the default kube-proxy in the absolute
	// folder found here, not from its own executable's folder or ./bin.
	var env []string
	if sc.UsesKubeProxy() {
		dir := ""
		if o.Checked != nil {
			dir = o.Checked.KubeBin
		}
		if dir == "" {
			dir, _ = FindKubeBin(kubeBinNames(sc)...)
		}
		if dir != "" {
			env = append(env, KubeBinEnv+"="+dir)
		}
	}
	o.Progress.Start(fmt.Sprintf("user-mode-linux guest %s (%s): %s, %d MiB, timeout %s", k.Name, k.Release, strings.Join(sc.Modes, ", "), sc.UML.MemoryMiB, sc.UML.Timeout.Duration), 1)
	res, err := uml.Run(ctx, uml.Guest{
		Kernel: k, MemoryMiB: sc.UML.MemoryMiB, Timeout: sc.UML.Timeout.Duration, Modules: GuestModules(sc),
		Argv: []string{exe, "run", filepath.Join(uml.GuestMount, "scenario.yaml"), "--kernel", "host",
			"--run-id", o.RunID, "--output", filepath.Join(uml.GuestMount, "result.json"),
			"--checkpoint", filepath.Join(uml.GuestMount, "checkpoint.json")},
		WorkDir: dir, Console: guestConsole(console, k.Name), Env: env,
	})
	o.Progress.Done()
	// fromGuest marks a result read from the guest's folder as this
	// kernel's.
	fromGuest := func(r *reports.Result) *reports.Result {
		r.Machine.KernelWhere = "uml"
		r.Machine.HostKernel = kernelRelease()
		if res != nil {
			r.Machine.GuestInitNs = int64(res.Init)
			r.Machine.GuestBootNs = int64(res.Boot)
			r.Machine.GuestElapsedNs = int64(res.Elapsed)
		}
		r.Kernels = nil // the guest's own entry says "host"; Execute adds this kernel's
		for i := range r.Modes {
			r.Modes[i].Kernel = k.Name
		}
		return r
	}
	// checkpoint is what the guest had finished when it was stopped: the
	// modes its run saved after each one (Options.Checkpoint), nil when
	// none had finished.
	checkpoint := func() *reports.Result {
		cp, cerr := reports.Read(filepath.Join(dir, "checkpoint.json"))
		if cerr != nil || len(cp.Modes) == 0 {
			return nil
		}
		return fromGuest(cp)
	}
	if err != nil {
		// Killed (SIGINT, timeout) or crashed: keep its finished modes.
		if cp := checkpoint(); cp != nil {
			return cp, err
		}
		return nil, err
	}
	r, rerr := reports.Read(filepath.Join(dir, "result.json"))
	if cerr := copyGuestArtifacts(r, dir, o.ArtifactDir); cerr != nil && console != nil {
		fmt.Fprintln(console, "warning: "+cerr.Error())
	}
	if r != nil {
		fromGuest(r)
	}
	if res.ExitCode != 0 && r != nil && r.Partial == "" {
		// A whole result with failed rows: the guest went on after them.
		if errs := failedRows(r); len(errs) > 0 {
			return r, &RowsFailed{Errs: errs}
		}
	}
	if res.ExitCode != 0 {
		err := fmt.Errorf("the run inside the user-mode-linux guest %s failed (exit %d); its console is above", k.Name, res.ExitCode)
		if r != nil && r.Partial != "" {
			return r, err // the guest saved what it had finished
		}
		if cp := checkpoint(); cp != nil {
			return cp, err
		}
		return nil, err
	}
	if rerr != nil {
		return nil, fmt.Errorf("guest result: %w", rerr)
	}
	return r, nil
}

// GuestSkips prepares s, a scenario about to run in user-mode-linux
// guest kernel name, for its kube-proxy rows and returns the rows it
// skips (none: kube-proxy and its control plane run inside the guest as
// on the host; proxymodes/kubeproxy's TestKernelIPVSInGuest). The guest
// runs in its own work folder, so kubeProxy.binaries are resolved here
// to absolute paths (ResolveKubeProxy: the guest's root is the host's
// filesystem, so the host's paths hold there; RunInUML passes the folder
// of the control plane's binaries), and it gets at least
// GuestKubeMemoryMiB of memory (etcd, kube-apiserver and kube-proxy
// beside the run).
func GuestSkips(s *scenarios.Scenario, name string) []string {
	if !s.UsesKubeProxy() {
		return nil
	}
	bins := make([]string, len(s.KubeProxy.Binaries))
	for i, b := range s.KubeProxy.Binaries {
		bins[i], _ = ResolveKubeProxy(b)
	}
	s.KubeProxy.Binaries = bins
	s.UML.MemoryMiB = max(s.UML.MemoryMiB, GuestKubeMemoryMiB)
	return nil
}

// GuestKubeMemoryMiB is the least guest memory of a run with kube-proxy
// rows (MiB): etcd, kube-apiserver, kube-proxy and the run itself.
const GuestKubeMemoryMiB = 3072

// guestArtifacts is the folder, inside the guest's work folder, where
// the run in the guest keeps its artifacts (kube-proxy configs and logs):
// cmd/proxybench names it after the result file, result.json.
const guestArtifacts = "result"

// copyGuestArtifacts copies the guest run's artifacts from the guest's
// work folder dir to the host's artifact folder to, and points the
// result's kube-proxy records at the copies. Errors are returned for the
// caller to report; the measurements stand without the artifacts.
func copyGuestArtifacts(r *reports.Result, dir, to string) error {
	from := filepath.Join(dir, guestArtifacts)
	if _, err := os.Stat(from); err != nil {
		return nil // no artifacts (no kube-proxy row)
	}
	if to == "" {
		return nil
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		return fmt.Errorf("copy the guest's artifacts to %s: %w", to, err)
	}
	inGuest := filepath.Join(uml.GuestMount, guestArtifacts)
	if r == nil {
		return nil
	}
	for i := range r.Modes {
		if kp := r.Modes[i].KubeProxy; kp != nil {
			for _, f := range []*string{&kp.Config, &kp.Log} {
				if rest, ok := strings.CutPrefix(*f, inGuest); ok {
					*f = to + rest
				}
			}
		}
	}
	return nil
}
