//go:build linux

package runner

import (
	"bytes"
	"context"
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

// KernelChoice is where a run's modes execute.
type KernelChoice struct {
	// Where is "host", "uml" or "split": with split, HostModes run on the
	// host and GuestModes in the guest, each group with its own baselines
	// (none, iptables), since figures compare only within one kernel.
	Where                 string
	HostModes, GuestModes []string
	// Why says how auto decided, for the screen and the result.
	Why string
	// FellBack maps a mode replaced under `fallback: iptables` to its
	// replacement (kube-proxy's downgrade from ipvs).
	FellBack map[string]string
}

// guestUnsupported says why the user-mode-linux guest kernel cannot run
// mode with sc's settings (the mode's GuestUnsupported); "" when it can.
func guestUnsupported(sc *scenarios.Scenario, mode string) string {
	m, err := modes.Lookup(mode)
	if err != nil || m.GuestUnsupported == nil {
		return ""
	}
	return m.GuestUnsupported(sc)
}

// ChooseKernel resolves sc.Kernel: host (every mode must work on this
// kernel, else an *InputError naming the mode, the missing feature and
// `--kernel uml` as the fix), uml (user-mode-linux must be installed) or
// auto (host when it supports every mode, else uml). Inside a guest it is
// always host. With `fallback: iptables`, on the host an ipvs mode the
// kernel lacks is replaced by iptables in sc.Modes, and FellBack records
// it. It probes in a throwaway namespace and leaves nothing behind.
func ChooseKernel(ctx context.Context, sc *scenarios.Scenario) (KernelChoice, error) {
	if uml.InGuest() {
		return KernelChoice{Where: "host", Why: "inside the user-mode-linux guest"}, nil
	}
	st, err := ProbeHost(ctx, sc, sc.Modes)
	if err != nil {
		return KernelChoice{}, err
	}
	var missing []string
	for _, s := range st {
		if !s.Available {
			missing = append(missing, s.Mode+": "+s.Reason)
		}
	}
	switch sc.Kernel {
	case "uml":
		if _, err := uml.Available(); err != nil {
			return KernelChoice{}, &InputError{Field: "kernel", Msg: "uml requested but " + err.Error()}
		}
		for _, m := range sc.Modes {
			if why := guestUnsupported(sc, m); why != "" {
				return KernelChoice{}, &InputError{Field: "modes", Msg: "mode " + m + " cannot run under --kernel uml: " + why, Fix: "run it with --kernel host (or auto), or drop the mode"}
			}
		}
		return KernelChoice{Where: "uml", Why: "kernel: uml requested"}, nil
	case "host":
		if len(missing) == 0 {
			return KernelChoice{Where: "host", Why: "kernel: host requested"}, nil
		}
		if sc.Fallback == "iptables" {
			return fallback(sc, st)
		}
		return KernelChoice{}, &InputError{Field: "modes", Msg: "this kernel cannot run " + strings.Join(missing, "; "), Fix: "run with --kernel uml (a user-mode-linux kernel with IP_VS), or drop the mode"}
	}
	// auto
	if len(missing) == 0 {
		return KernelChoice{Where: "host", Why: "auto: the host kernel supports every requested mode"}, nil
	}
	if _, err := uml.Available(); err != nil {
		return KernelChoice{}, &InputError{Field: "kernel", Msg: "auto: the host kernel cannot run " + strings.Join(missing, "; ") + ", and " + err.Error()}
	}
	var hostOnly, guest, host []string
	for _, s := range st {
		if !s.Available {
			if why := guestUnsupported(sc, s.Mode); why != "" {
				return KernelChoice{}, &InputError{Field: "modes", Msg: "no kernel here can run " + s.Mode + ": host: " + s.Reason + "; user-mode-linux: " + why, Fix: "drop the mode"}
			}
			guest = append(guest, s.Mode)
			continue
		}
		host = append(host, s.Mode)
		if guestUnsupported(sc, s.Mode) != "" {
			hostOnly = append(hostOnly, s.Mode)
		}
	}
	if len(hostOnly) == 0 {
		return KernelChoice{Where: "uml", Why: "auto: the host kernel lacks " + strings.Join(missing, "; ") + ", so every mode runs in user-mode-linux (figures compare with each other only, not with host runs)"}, nil
	}
	// Some modes run only on the host, some only in the guest: two groups,
	// each with the baselines that make its figures comparable.
	for _, b := range []string{"none", "iptables"} {
		if slices.Contains(sc.Modes, b) && !slices.Contains(guest, b) && guestUnsupported(sc, b) == "" {
			guest = append([]string{b}, guest...)
		}
	}
	slices.SortStableFunc(guest, func(a, b string) int { return slices.Index(sc.Modes, a) - slices.Index(sc.Modes, b) })
	return KernelChoice{Where: "split", HostModes: host, GuestModes: guest,
		Why: fmt.Sprintf("auto: the host cannot run %s, and user-mode-linux cannot run %s (%s); so %s run on the host and %s in user-mode-linux; compare modes within one kernel only",
			strings.Join(missing, "; "), strings.Join(hostOnly, ", "), guestUnsupported(sc, hostOnly[0]), strings.Join(host, ", "), strings.Join(guest, ", "))}, nil
}

// RunSplit runs kc.HostModes on the host and kc.GuestModes in a
// user-mode-linux guest and merges the results; every ModeResult says
// which kernel it ran on. When the guest fails, the host's result is
// returned with the error, marked Partial.
func RunSplit(ctx context.Context, sc *scenarios.Scenario, kc KernelChoice, o Options, console io.Writer) (*reports.Result, error) {
	hs, gs := *sc, *sc
	hs.Modes, gs.Modes = kc.HostModes, kc.GuestModes
	res, err := Run(ctx, &hs, o)
	if err != nil {
		if res != nil {
			res.Scenario = sc
		}
		return res, err // partial, or nil
	}
	g, err := RunInUML(ctx, &gs, o, console)
	if err != nil {
		// The host's modes are finished measurements: keep them, and
		// what the guest saved before it stopped.
		res.Scenario = sc
		if g != nil {
			res.Modes = append(res.Modes, g.Modes...)
		}
		res.Partial = fmt.Sprintf("the guest's modes (%s) failed: %v", strings.Join(kc.GuestModes, ", "), err)
		res.Finished = time.Now()
		return res, err
	}
	res.Modes = append(res.Modes, g.Modes...)
	res.Machine.KernelWhere = "host+uml"
	res.Machine.GuestKernel = g.Machine.Kernel
	res.Machine.GuestBootNs = g.Machine.GuestBootNs
	res.Scenario = sc
	res.Finished = g.Finished
	return res, nil
}

// fallback replaces each unavailable ipvs mode with iptables, as kube-proxy
// does when IPVS is missing; any other unavailable mode is still an error.
func fallback(sc *scenarios.Scenario, st []ModeStatus) (KernelChoice, error) {
	kc := KernelChoice{Where: "host", FellBack: map[string]string{}}
	var modes []string
	for _, s := range st {
		switch {
		case s.Available:
			modes = append(modes, s.Mode)
		case s.Mode == "ipvs":
			kc.FellBack["ipvs"] = "iptables"
			if !slices.Contains(sc.Modes, "iptables") {
				modes = append(modes, "iptables")
			}
		default:
			return KernelChoice{}, &InputError{Field: "modes", Msg: "this kernel cannot run " + s.Mode + ": " + s.Reason, Fix: "run with --kernel uml, or drop the mode"}
		}
	}
	sc.Modes = slices.Compact(modes)
	kc.Why = "kernel: host; fallback: ipvs is missing, so it ran as iptables (kube-proxy's downgrade)"
	return kc, nil
}

// guestConsole passes on the guest's own progress lines and drops the
// kernel's boot and halt chatter and the guest run's summary and result
// path (the host prints its own). Nil stays nil.
func guestConsole(w io.Writer) io.Writer {
	if w == nil {
		return nil
	}
	return &lineFilter{w: w}
}

type lineFilter struct {
	w       io.Writer
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
			fmt.Fprint(f.w, "user-mode-linux guest: "+strings.TrimPrefix(line, "uml: "))
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

// GuestModules is every kernel module sc's modes need in the guest.
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

// RunInUML runs sc inside a user-mode-linux guest: it writes the effective
// scenario to a host folder mounted in the guest, boots the guest with
// every module the modes need, runs this same binary's `run --kernel host`
// there for all modes (so they share one kernel), streams the guest's
// console to console, and reads back the result JSON. The result records
// kernelWhere "uml", the guest's kernel and the host's.
func RunInUML(ctx context.Context, sc *scenarios.Scenario, o Options, console io.Writer) (*reports.Result, error) {
	o.defaults()
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
	o.Progress.Start(fmt.Sprintf("user-mode-linux guest: %s, %d MiB, timeout %s", strings.Join(sc.Modes, ", "), sc.UML.MemoryMiB, sc.UML.Timeout.Duration), 1)
	res, err := uml.Run(ctx, uml.Guest{
		MemoryMiB: sc.UML.MemoryMiB, Timeout: sc.UML.Timeout.Duration, Modules: GuestModules(sc),
		Argv: []string{exe, "run", filepath.Join(uml.GuestMount, "scenario.yaml"), "--kernel", "host",
			"--run-id", o.RunID, "--output", filepath.Join(uml.GuestMount, "result.json")},
		WorkDir: dir, Console: guestConsole(console),
	})
	o.Progress.Done()
	if err != nil {
		return nil, err
	}
	r, rerr := reports.Read(filepath.Join(dir, "result.json"))
	if r != nil {
		r.Machine.KernelWhere = "uml"
		r.Machine.HostKernel = kernelRelease()
		r.Machine.GuestBootNs = int64(res.Boot)
	}
	if res.ExitCode != 0 {
		err := fmt.Errorf("the run inside the user-mode-linux guest failed (exit %d); its console is above", res.ExitCode)
		if r != nil && r.Partial != "" {
			return r, err // the guest saved what it had finished
		}
		return nil, err
	}
	if rerr != nil {
		return nil, fmt.Errorf("guest result: %w", rerr)
	}
	return r, nil
}
