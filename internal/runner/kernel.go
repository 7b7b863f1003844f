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
	"github.com/proxybench/proxybench/topology"
)

// Target is one kernel of a run and the modes that run on it.
type Target struct {
	// Name is "host" or the guest kernel's uml.Kernel.Name ("uml:6.12");
	// every ModeResult of the target carries it as its Kernel.
	Name string
	// UML is the guest kernel; nil for the host.
	UML   *uml.Kernel
	Modes []string
	// Bridge and Baseline, for a guest target of a run that also runs
	// on the host, are the modes that run on both: Bridge (BridgeMode by
	// default) gives the guest's factor against the host, Baseline (mode
	// none) is the guest's own baseline. Recorded in reports.KernelRun.
	Bridge, Baseline string
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
// mode, the missing options and the fix; with the host listed, each guest
// target's Bridge and Baseline are set. auto runs the user's kernel
// first: every mode the host can run on the host, and only the others in
// the best guest kernel that runs them, with the baseline none and the
// bridge mode (iptables) beside them (autoPlan). With `fallback: iptables`, on the host an ipvs mode the
// kernel lacks is replaced by iptables and FellBack records it. Host
// probes run in a throwaway namespace of run runID (ProbeHost; a fresh ID
// when empty) and leave nothing behind.
func PlanKernels(ctx context.Context, sc *scenarios.Scenario, runID string) (Plan, error) {
	names := scenarios.KernelNames(sc.Kernel)
	if len(names) == 0 || (len(names) == 1 && names[0] == "auto") {
		return planAuto(ctx, sc, runID)
	}
	plan := Plan{Why: "kernel: " + strings.Join(names, ", ") + " requested"}
	for _, n := range names {
		if n == "host" {
			t, fb, err := planHost(ctx, sc, runID)
			if err != nil {
				return Plan{}, err
			}
			if len(fb) > 0 {
				plan.FellBack = fb
				plan.Why += "; fallback: ipvs is missing on the host, so it ran there as iptables (kube-proxy's downgrade before v1.26; v1.26+ exits instead, kubernetes PR#111806)"
			}
			plan.Targets = append(plan.Targets, t)
			continue
		}
		k, err := pickKernel(sc, n)
		if err != nil {
			return Plan{}, err
		}
		if slices.ContainsFunc(plan.Targets, func(t Target) bool { return t.Name == k.Name }) {
			return Plan{}, &InputError{Field: "kernel", Msg: n + " names kernel " + k.Name + ", which is already listed", Fix: "list each kernel once"}
		}
		plan.Targets = append(plan.Targets, Target{Name: k.Name, UML: k, Modes: sc.Modes})
	}
	if i := slices.IndexFunc(plan.Targets, func(t Target) bool { return t.UML == nil }); i >= 0 {
		for j := range plan.Targets {
			if t := &plan.Targets[j]; t.UML != nil {
				t.Baseline, t.Bridge = bridgeOf(sc, t.UML, plan.Targets[i].Modes)
			}
		}
	}
	return plan, nil
}

// pickKernel resolves a listed guest kernel name to the first of its
// candidates (uml.Candidates: for uml:6.12 every current build in the
// cache, newest first) that boots here and whose configuration has every
// option sc's modes need (KernelOptions), so a build without an option
// (uml:6.12 without CONFIG_IP6_NF_TARGET_REJECT, for a dual-stack ipvs
// row) is passed over for one with it. When none has them it is an
// *InputError (exit 2) naming the kernel, the mode and the first
// candidate's missing options, and make kernels as the fix.
func pickKernel(sc *scenarios.Scenario, n string) (*uml.Kernel, error) {
	ks, err := uml.Candidates(n)
	if err != nil {
		return nil, &InputError{Field: "kernel", Msg: err.Error()}
	}
	var first error
	for _, k := range ks {
		err := kernelRefusal(sc, n, k)
		if err == nil {
			return k, nil
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

// kernelRefusal is why candidate k of kernel name n cannot run sc: the
// kernel itself unusable (uml.Usable), or the first of sc's modes it
// cannot run (GuestUnsupported); nil when it runs them all.
func kernelRefusal(sc *scenarios.Scenario, n string, k *uml.Kernel) error {
	if err := uml.Usable(k); err != nil {
		return &InputError{Field: "kernel", Msg: n + ": " + err.Error()}
	}
	on := n
	if k.Path != n {
		on += " (" + k.Path + ")"
	}
	for _, m := range sc.Modes {
		if why := GuestUnsupported(sc, k, m); why != "" {
			return &InputError{Field: "modes", Msg: "mode " + m + " cannot run on kernel " + on + ": " + why,
				Fix: "run make kernels (it builds uml:6.12 and uml:6.1 with every option internal/uml/kconfig/proxybench.config lists), use another kernel (proxybench doctor lists what each can run), or drop the mode"}
		}
	}
	return nil
}

// planHost is the host target: every mode must run on this kernel, or,
// under `fallback: <mode>`, a mode that falls back to that one
// (Mode.FallsBackTo: ipvs to iptables) is replaced by it.
func planHost(ctx context.Context, sc *scenarios.Scenario, runID string) (Target, map[string]string, error) {
	st, err := ProbeHost(ctx, sc, sc.Modes, runID)
	if err != nil {
		return Target{}, nil, err
	}
	var missing, runs []string
	for _, s := range st {
		if !s.Available {
			missing = append(missing, s.Mode+": "+s.Reason)
		} else {
			runs = append(runs, s.Mode)
		}
	}
	if len(missing) == 0 {
		return Target{Name: "host", Modes: sc.Modes}, nil, nil
	}
	if sc.Fallback == "" {
		drop := "drop the mode"
		if len(runs) > 0 {
			drop += " (--modes " + strings.Join(runs, ",") + " runs what this kernel can)"
		}
		return Target{}, nil, &InputError{Field: "modes", Msg: "the host kernel cannot run " + strings.Join(missing, "; "),
			Fix: "run with --kernel auto (the default: the host runs what it can, a guest the rest) or --kernel uml (a user-mode-linux kernel; make kernels builds one with every mode), or " + drop}
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

// BridgeMode is the mode auto runs on the host and in the guest alike when
// a run splits between them: the same rules measured on both kernels give
// the guest's factor against the host (reports.GuestFactors). It is the
// first mode of proxymodes/modes.All marked SplitBaseline that has rules
// (not Direct): iptables, which programs thousands of rules with one
// restore and walks them in order, so its full sync and its rule walk
// both carry the guest's cost.
var BridgeMode = func() string {
	for _, m := range modes.All {
		if m.SplitBaseline && !m.Direct {
			return m.Name
		}
	}
	return ""
}()

// planAuto runs every mode the host kernel can run on the host and only
// the others in a guest (see autoPlan).
func planAuto(ctx context.Context, sc *scenarios.Scenario, runID string) (Plan, error) {
	st, err := ProbeHost(ctx, sc, sc.Modes, runID)
	if err != nil {
		return Plan{}, err
	}
	return autoPlan(sc, st, guestKernels())
}

// autoPlan is auto's choice from the host's probe st and the guest
// kernels, best first: the user's kernel first. Every mode the host can
// run runs there; when some cannot, those run in the first usable guest
// kernel that runs them all, with the baseline (mode none) and the bridge
// (BridgeMode when the host ran it, else the first mode with rules the
// host ran that the guest runs too), so the guest has its own baseline and
// the report its factor against the host. When the host runs no mode with
// rules, there is nothing to bridge: one guest kernel that runs every
// mode, else the split as it is. One guest for every mode stays
// `--kernel uml`.
func autoPlan(sc *scenarios.Scenario, st []ModeStatus, guests []*uml.Kernel) (Plan, error) {
	var missing, hostModes, guestOnly []string
	for _, s := range st {
		if s.Available {
			hostModes = append(hostModes, s.Mode)
		} else {
			missing = append(missing, s.Mode+": "+s.Reason)
			guestOnly = append(guestOnly, s.Mode)
		}
	}
	if len(missing) == 0 {
		return Plan{Targets: []Target{{Name: "host", Modes: sc.Modes}}, Why: "auto: the host kernel supports every requested mode"}, nil
	}
	if sc.ModeSwitch != nil {
		if p, ok := planModeSwitch(sc, st, guests); ok {
			return p, nil
		}
	}
	if len(guests) == 0 {
		_, err := uml.Default()
		msg := "no user-mode-linux kernel is installed"
		if err != nil {
			msg = err.Error()
		}
		return Plan{}, &InputError{Field: "kernel", Msg: "auto: the host kernel cannot run " + strings.Join(missing, "; ") + ", and " + msg}
	}
	lacks := func(k *uml.Kernel, ms []string) []string {
		var out []string
		for _, m := range ms {
			if why := GuestUnsupported(sc, k, m); why != "" {
				out = append(out, m+": "+why)
			}
		}
		return out
	}
	var usable []*uml.Kernel
	for _, k := range guests {
		if uml.Usable(k) == nil {
			usable = append(usable, k)
		}
	}
	if !slices.ContainsFunc(hostModes, func(m string) bool { return !isBaseline(m) }) {
		// The host runs no mode with rules: nothing to bridge.
		for _, k := range usable {
			if len(lacks(k, sc.Modes)) == 0 {
				return Plan{Targets: []Target{{Name: k.Name, UML: k, Modes: sc.Modes}},
					Why: fmt.Sprintf("auto: the host kernel lacks %s and runs no mode with rules, so every mode runs in one user-mode-linux kernel, %s (%s); its figures compare with each other only, not with host runs", strings.Join(missing, "; "), k.Name, k.Release)}, nil
			}
		}
	}
	var whyNot []string
	for _, k := range usable {
		if l := lacks(k, guestOnly); len(l) > 0 {
			whyNot = append(whyNot, strings.Join(l, "; "))
			continue
		}
		guest := slices.Clone(guestOnly)
		baseline, bridge := bridgeOf(sc, k, hostModes)
		for _, m := range []string{baseline, bridge} {
			if m != "" {
				guest = append(guest, m)
			}
		}
		slices.SortStableFunc(guest, func(a, b string) int { return slices.Index(sc.Modes, a) - slices.Index(sc.Modes, b) })
		why := fmt.Sprintf("auto: the host kernel lacks %s, so %s run on the host and %s in the user-mode-linux kernel %s (%s)",
			strings.Join(missing, "; "), strings.Join(hostModes, ", "), strings.Join(guestOnly, ", "), k.Name, k.Release)
		var with []string
		if baseline != "" {
			with = append(with, baseline+" (its own baseline)")
		}
		if bridge != "" {
			with = append(with, bridge+" (the bridge: run on both kernels, it gives the guest's factor against the host)")
		}
		if len(with) > 0 {
			why += " with " + strings.Join(with, " and ")
		}
		why += "; compare modes within one kernel only; --kernel uml runs every mode in one guest"
		if bridge == "" {
			why += "; no bridge, so no guest factor: " + k.Name + " runs none of the host's modes with rules"
		}
		if len(whyNot) > 0 {
			why += "; kernels passed over: " + strings.Join(whyNot, " | ")
		}
		return Plan{Targets: []Target{{Name: "host", Modes: hostModes}, {Name: k.Name, UML: k, Modes: guest, Bridge: bridge, Baseline: baseline}}, Why: why}, nil
	}
	// No guest kernel runs the modes the host cannot: name the first of
	// them with the best guest's reason.
	k := guests[0]
	for _, m := range guestOnly {
		if why := GuestUnsupported(sc, k, m); why != "" {
			return Plan{}, &InputError{Field: "modes", Msg: "no kernel here can run " + m + ": host: " + reasonOf(st, m) + "; " + why,
				Fix: "build a guest kernel with every mode (make kernels), or drop the mode"}
		}
	}
	return Plan{}, &InputError{Field: "kernel", Msg: "auto: the host kernel cannot run " + strings.Join(missing, "; ") + ", and no user-mode-linux kernel here is usable (" + uml.Usable(k).Error() + ")",
		Fix: "run make setup"}
}

// bridgeOf picks, of the modes the host runs, what guest kernel k runs
// beside its own modes: the baseline (mode none) and the bridge
// (BridgeMode, else the first mode with rules); "" when k cannot run one.
func bridgeOf(sc *scenarios.Scenario, k *uml.Kernel, hostModes []string) (baseline, bridge string) {
	for _, m := range hostModes {
		if isBaseline(m) && baseline == "" && GuestUnsupported(sc, k, m) == "" {
			baseline = m
		}
	}
	if slices.Contains(hostModes, BridgeMode) && GuestUnsupported(sc, k, BridgeMode) == "" {
		return baseline, BridgeMode
	}
	for _, m := range hostModes {
		if !isBaseline(m) && GuestUnsupported(sc, k, m) == "" {
			return baseline, m
		}
	}
	return baseline, ""
}

// isBaseline reports whether mode is a baseline (its Mode dials the
// endpoints directly: mode none).
func isBaseline(mode string) bool {
	m, err := modes.Lookup(mode)
	return err == nil && m.Direct
}

// reasonOf is st's reason for mode.
func reasonOf(st []ModeStatus, mode string) string {
	for _, s := range st {
		if s.Mode == mode {
			return s.Reason
		}
	}
	return ""
}

// Execute runs plan max(sc.Runs, 1) times (run --count N) and builds
// the run's Result, the only place that does: each run runs every
// target's modes on its kernel, one target after the other, merged into
// one result (every ModeResult's Kernel is its target's Name, Kernels
// describes each kernel with its release and boot times, the targets'
// sections are merged); runs 2..N, each on fresh testbeds with a run ID
// of its own and its own artifact folder (o.ArtifactDir + "-runN"),
// become Result.MoreRuns with their rows and sections. What becomes of
// the run after a target's error is fate's: rows that failed (Failed)
// keep the run going, and Execute then returns the whole result with a
// *RowsFailed; any other error stops it, and the result so far (the
// earlier runs, or this run's earlier kernels and what the stopped
// kernel saved) is returned with the error, marked partial (Result.Partial
// says why), so no measurement is lost. The result is nil only when
// nothing was measured.
func Execute(ctx context.Context, sc *scenarios.Scenario, plan Plan, o Options, console io.Writer) (*reports.Result, error) {
	return execute(ctx, sc, plan, o, console, runTarget)
}

// targetFunc runs sc (its Modes are the target's) on one target of a
// plan: runTarget, or a fake in tests.
type targetFunc func(ctx context.Context, sc *scenarios.Scenario, o Options, console io.Writer, t Target) (*reports.Result, error)

// runTarget runs sc on the host (Run) or in t's guest kernel (RunInUML).
func runTarget(ctx context.Context, sc *scenarios.Scenario, o Options, console io.Writer, t Target) (*reports.Result, error) {
	if t.UML == nil {
		return Run(ctx, sc, o)
	}
	return RunInUML(ctx, sc, o, console, t.UML)
}

// execute is Execute over run, the function that runs one target.
func execute(ctx context.Context, sc *scenarios.Scenario, plan Plan, o Options, console io.Writer, run targetFunc) (*reports.Result, error) {
	n := max(sc.Runs, 1)
	artifacts := o.ArtifactDir
	var res *reports.Result
	var failed []error // the rows that failed in every run; the runs went on
	for k := range n {
		ko := o
		if k > 0 {
			ko.RunID, ko.ArtifactDir = topology.NewRunID(), ""
			if artifacts != "" {
				ko.ArtifactDir = fmt.Sprintf("%s-run%d", artifacts, k+1)
			}
		}
		ko.defaults()
		if n > 1 && console != nil {
			fmt.Fprintf(console, "run %d of %d (%s)\n", k+1, n, ko.RunID)
		}
		r, err := executeRun(ctx, sc, plan, ko, console, run)
		if fate(ctx, err) == Failed {
			failed, err = append(failed, failedRows(r)...), nil // kept, marked failed; the next run runs
		}
		if err != nil {
			if k == 0 || res == nil {
				return r, err // r is partial (executeRun marked it), or nil
			}
			// The runs already made are kept whole; this one's rows are
			// dropped (MoreRuns holds finished runs only).
			res.Partial = stopText(ctx, fmt.Sprintf("run %d of %d failed: %v; kept the %d runs made", k+1, n, err, k))
			res.Finished = time.Now()
			return res, err
		}
		if k == 0 {
			res = r
			continue
		}
		res.MoreRuns = append(res.MoreRuns, reports.Run{RunID: r.RunID, Started: r.Started, Finished: r.Finished, Modes: r.Modes, Sections: r.Sections})
		res.Finished = r.Finished
	}
	if len(failed) > 0 {
		return res, &RowsFailed{Errs: failed}
	}
	return res, nil
}

// executeRun runs every target of plan once and merges their results.
// The error is a *RowsFailed when rows failed and every target ran (the
// result is whole, the failed rows marked), else the error that stopped
// the run, with the result so far marked partial.
func executeRun(ctx context.Context, sc *scenarios.Scenario, plan Plan, o Options, console io.Writer, run targetFunc) (*reports.Result, error) {
	var res *reports.Result
	rowsFailed := false
	for _, t := range plan.Targets {
		s := *sc
		s.Modes = t.Modes
		if t.ModeSwitch != nil {
			s.ModeSwitch = t.ModeSwitch
		}
		to := o
		to.ServiceTypesModes = serviceTypesModes(o.ServiceTypesModes, t)
		r, err := run(ctx, &s, to, console, t)
		if r != nil && fate(ctx, err) == Failed {
			rowsFailed, err = true, nil // kept, marked failed; the next kernel runs
		}
		if r != nil {
			for i := range r.Modes {
				r.Modes[i].Kernel = t.Name
				for from, to := range plan.FellBack {
					if t.UML == nil && r.Modes[i].Mode == to {
						r.Modes[i].FellBackFrom = from
					}
				}
			}
			if r.ServiceTypes != nil {
				r.ServiceTypes.SetKernel(t.Name)
			}
			if res == nil {
				res = r
				if t.UML != nil {
					res.Machine.HostKernel = kernelRelease()
				}
			} else {
				res.Modes = append(res.Modes, r.Modes...)
				res.ServiceTypes = res.ServiceTypes.Merge(r.ServiceTypes)
				for _, sec := range r.Sections {
					res.MergeSection(sec)
				}
				res.Finished = r.Finished
				if err == nil && t.UML != nil && res.Machine.GuestKernel == "" {
					res.Machine.GuestKernel = r.Machine.Kernel
					res.Machine.GuestBootNs = r.Machine.GuestBootNs
				}
			}
			mergeModeSwitch(res, r, t.Name)
		}
		if err != nil {
			// Finished measurements are kept: the earlier kernels', and
			// what this kernel's run saved before it stopped.
			if res == nil {
				return nil, err
			}
			res.Scenario = sc
			res.Machine.KernelWhy = plan.Why
			why := err.Error()
			if len(plan.Targets) > 1 {
				res.Machine.KernelWhere = strings.Join(plan.Names(), "+")
				why = fmt.Sprintf("kernel %s failed: %v; kept the modes finished on %s", t.Name, err, strings.Join(res.KernelNames(), ", "))
			}
			res.Partial = stopText(ctx, why)
			res.Finished = time.Now()
			return res, err
		}
		kr := reports.KernelRun{Name: t.Name, Release: r.Machine.Kernel, Where: "host", Modes: t.Modes, CPUs: r.Machine.CPUs, Bridge: t.Bridge, Baseline: t.Baseline, Warmup: r.Machine.Warmup}
		if t.UML != nil {
			kr.Where, kr.Source = "uml", t.UML.Source
			kr.InitNs, kr.BootNs, kr.GuestNs = r.Machine.GuestInitNs, r.Machine.GuestBootNs, r.Machine.GuestElapsedNs
		}
		res.Kernels = append(res.Kernels, kr)
	}
	if res == nil {
		return nil, errors.New("no kernel to run on")
	}
	res.Scenario = sc
	if len(plan.Targets) > 1 {
		res.Machine.KernelWhere = strings.Join(plan.Names(), "+")
	}
	res.Machine.KernelWhy = plan.Why
	if rowsFailed {
		return res, &RowsFailed{Errs: failedRows(res)}
	}
	return res, nil
}

// serviceTypesModes is the modes whose serviceTypes cells target t
// measures, of want (nil: every mode): a guest target beside the host's
// (t.Bridge or t.Baseline set) leaves its bridge and baseline to the
// host, which measured their cells on its own kernel, so the matrix has
// one row per mode and implementation; nil when t measures every mode.
func serviceTypesModes(want []string, t Target) []string {
	if t.UML == nil || (t.Bridge == "" && t.Baseline == "") {
		return want
	}
	var out []string
	for _, m := range t.Modes {
		if m == t.Bridge || m == t.Baseline || (want != nil && !slices.Contains(want, m)) {
			continue
		}
		out = append(out, m)
	}
	if out == nil {
		out = []string{} // none: not nil, which is every mode
	}
	return out
}

// stopText is a stopped run's Result.Partial: why, after the cause of
// the cancellation when the run was interrupted (SIGINT, SIGTERM).
func stopText(ctx context.Context, why string) string {
	if ctx.Err() != nil {
		return fmt.Sprintf("%v: %s", context.Cause(ctx), why)
	}
	return why
}

// guestConsole passes on the guest's own lines (its run's progress) and
// drops the kernel's boot and halt chatter. Nil stays nil.
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
		case !f.started, strings.Contains(line, "Halting.") || strings.Contains(line, "System halted") || strings.Contains(line, "wtmp record"):
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
// it writes a GuestPlan (the effective scenario for the guest, guestScenario,
// the run ID, where: the guest, the kube-proxy rows' binaries' folder,
// the result, checkpoint and artifact paths) to a host folder mounted in
// the guest, boots the guest (loading the modules the modes need when k
// is modular) on `proxybench guest-run PLAN`, the runner's own entry
// (RunGuest: Run for all modes, so they share one kernel), streams the
// guest's console (its progress lines) to console, and reads back the
// result JSON. The result records kernelWhere "uml", the guest's kernel,
// the host's, and the guest's init and boot times. A guest result with
// failed rows comes back with a *RowsFailed; a partial one (the guest's
// run stopped), or the guest's checkpoint when it was killed, with the
// error.
func RunInUML(ctx context.Context, sc *scenarios.Scenario, o Options, console io.Writer, k *uml.Kernel) (*reports.Result, error) {
	o.defaults()
	if k == nil {
		var err error
		if k, err = uml.Default(); err != nil {
			return nil, &InputError{Field: "kernel", Msg: err.Error()}
		}
	}
	sc = guestScenario(sc)
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// The work folder is held until it is removed: `proxybench cleanup`
	// tells a live run's guest from a killed one's by it (uml.WorkDir).
	wd, err := uml.NewWorkDir(o.RunID)
	if err != nil {
		return nil, err
	}
	defer wd.Remove()
	dir := wd.Path
	// Where cleanup saves the guest's finished modes if this process is
	// killed before it reads them back (KeepGuestCheckpoint).
	keep := guestKeep{Kernel: k.Name}
	if o.ArtifactDir != "" {
		if keep.ArtifactDir, err = filepath.Abs(o.ArtifactDir); err != nil {
			return nil, err
		}
		keep.Result = keep.ArtifactDir + ".json"
	}
	if err := writeGuestKeep(dir, keep); err != nil {
		return nil, err
	}
	// The guest's working folder is its own (uml.GuestMount): it finds
	// kube-apiserver, etcd and the default kube-proxy in the absolute
	// folder found here, not from its own executable's folder or ./bin.
	kubeBin := ""
	if guestRunsKubeProxy(sc) {
		if o.Checked != nil {
			kubeBin = o.Checked.KubeBin
		}
		if kubeBin == "" {
			kubeBin, _ = FindKubeBin(kubeBinNames(sc)...)
		}
	}
	plan, err := NewGuestPlan(sc, Options{RunID: o.RunID, Version: o.Version, Where: WhereGuest,
		Checkpoint:  filepath.Join(uml.GuestMount, "checkpoint.json"),
		ArtifactDir: filepath.Join(uml.GuestMount, guestArtifacts), ServiceTypesModes: o.ServiceTypesModes}, kubeBin, filepath.Join(uml.GuestMount, "result.json"))
	if err != nil {
		return nil, err
	}
	if err := plan.Write(filepath.Join(dir, "plan.json")); err != nil {
		return nil, err
	}
	o.Progress.Start(fmt.Sprintf("user-mode-linux guest %s (%s): %s, %d MiB, timeout %s", k.Name, k.Release, strings.Join(sc.Modes, ", "), sc.UML.MemoryMiB, sc.UML.Timeout.Duration), 1)
	res, err := uml.Run(ctx, uml.Guest{
		Kernel: k, MemoryMiB: sc.UML.MemoryMiB, Timeout: sc.UML.Timeout.Duration, Modules: GuestModules(sc),
		Argv:    []string{exe, GuestRunCommand, filepath.Join(uml.GuestMount, "plan.json")},
		WorkDir: dir, Console: guestConsole(console, k.Name),
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
	// stopped keeps what a guest that did not write its result had made:
	// its finished modes (the checkpoint) and its artifacts (the phases'
	// streams, kube-proxy's configs and logs) in the run's artifact
	// folder, which err then names, so a measurement already streamed is
	// not removed with the guest's work folder.
	stopped := func(err error) (*reports.Result, error) {
		cp := checkpoint()
		if kept, cerr := keepGuestArtifacts(cp, dir, o.ArtifactDir); cerr != nil {
			err = fmt.Errorf("%w (and the guest's artifacts were not kept: %v)", err, cerr)
		} else if kept {
			err = fmt.Errorf("%w (the guest's streams and logs are kept in %s)", err, o.ArtifactDir)
		}
		return cp, err
	}
	if err != nil {
		// Killed (SIGINT, timeout) or crashed: keep its finished modes
		// and what it streamed.
		return stopped(err)
	}
	r, rerr := reports.Read(filepath.Join(dir, "result.json"))
	if rerr != nil {
		err := fmt.Errorf("guest result: %w", rerr)
		if res.ExitCode != 0 {
			err = fmt.Errorf("the run inside the user-mode-linux guest %s failed (exit %d) without writing its result; its console is above", k.Name, res.ExitCode)
		}
		return stopped(err)
	}
	if cerr := copyGuestArtifacts(r, dir, o.ArtifactDir); cerr != nil && console != nil {
		fmt.Fprintln(console, "warning: "+cerr.Error())
	}
	fromGuest(r)
	// The guest's run wrote its fate into the result: partial when it
	// stopped, rows marked failed when it went on after them.
	if r.Partial != "" {
		return r, fmt.Errorf("in the user-mode-linux guest %s: %s", k.Name, r.Partial)
	}
	if errs := failedRows(r); len(errs) > 0 {
		return r, &RowsFailed{Errs: errs}
	}
	if res.ExitCode != 0 {
		return r, fmt.Errorf("the run inside the user-mode-linux guest %s failed (exit %d) after writing its whole result; its console is above", k.Name, res.ExitCode)
	}
	return r, nil
}

// guestScenario is sc prepared for a user-mode-linux guest (a copy; sc
// is not changed): the guest runs in its own work folder, so
// kubeProxy.binaries are resolved here to absolute paths
// (ResolveKubeProxy: the guest's root is the host's filesystem, so the
// host's paths hold there), and a run with kube-proxy rows gets at
// least GuestKubeMemoryMiB of memory (etcd, kube-apiserver and
// kube-proxy beside the run; kube-proxy and its control plane run
// inside the guest as on the host, proxymodes/kubeproxy's
// TestKernelIPVSInGuest).
func guestScenario(sc *scenarios.Scenario) *scenarios.Scenario {
	s := *sc
	if !guestRunsKubeProxy(&s) {
		return &s
	}
	bins := make([]string, len(s.KubeProxy.Binaries))
	for i, b := range s.KubeProxy.Binaries {
		bins[i], _ = ResolveKubeProxy(b)
	}
	s.KubeProxy.Binaries = bins
	s.UML.MemoryMiB = max(s.UML.MemoryMiB, GuestKubeMemoryMiB)
	return &s
}

// guestRunsKubeProxy says whether a guest run of sc starts kube-proxy and
// its control plane: a kube-proxy row, or the serviceTypes phase's
// kube-proxy cells (serviceTypes.kubeProxy; its rows stay builtin).
func guestRunsKubeProxy(sc *scenarios.Scenario) bool {
	return sc.UsesKubeProxy() || sc.ServiceTypesKubeScenario() != nil
}

// GuestKubeMemoryMiB is the least guest memory of a run with kube-proxy
// rows (MiB): etcd, kube-apiserver, kube-proxy and the run itself.
const GuestKubeMemoryMiB = 3072

// guestArtifacts is the folder, inside the guest's work folder, where
// the run in the guest keeps its artifacts (kube-proxy configs and logs):
// cmd/proxybench names it after the result file, result.json.
const guestArtifacts = "result"

// keepGuestArtifacts copies the artifacts of a guest run that wrote no
// result (RunInUML's stopped): as copyGuestArtifacts, with cp (the
// checkpoint, nil when no mode finished) pointed at the copies; kept
// says whether the guest had any (and there was a folder to copy to).
func keepGuestArtifacts(cp *reports.Result, dir, to string) (kept bool, err error) {
	if _, serr := os.Stat(filepath.Join(dir, guestArtifacts)); serr != nil || to == "" {
		return false, nil
	}
	if err := copyGuestArtifacts(cp, dir, to); err != nil {
		return false, err
	}
	return true, nil
}

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
