//go:build linux

package runner

import (
	"context"
	"fmt"
	"os"
	"os/exec"

	"github.com/proxybench/proxybench/internal/uml"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/scenarios"

	"github.com/proxybench/proxybench/topology"
)

// ModeStatus says whether this machine can run one mode, and why not.
type ModeStatus struct {
	Mode      string
	Available bool
	Reason    string
}

// ProbeHost probes the modes called names (every mode of
// proxymodes/modes when nil) on this kernel, in a
// throwaway namespace pb-<runID>-probe that it removes afterwards, with
// sc's settings for binaries. runID is the run the probe is for (a fresh
// ID when empty): a run killed mid-probe leaves its probe namespace under
// its own ID, which `proxybench cleanup --run <id>` removes (under a
// fresh ID only a plain cleanup did). It needs root.
func ProbeHost(ctx context.Context, sc *scenarios.Scenario, names []string, runID string) ([]ModeStatus, error) {
	if os.Geteuid() != 0 {
		return nil, &InputError{Msg: "probing the kernel needs root (network namespaces)", Fix: "run as root"}
	}
	if names == nil {
		names = modes.Names()
	}
	if runID == "" {
		runID = topology.NewRunID()
	}
	name := topology.NetnsName(runID, "probe")
	ns, err := topology.CreateNetns(name)
	if err != nil {
		return nil, fmt.Errorf("cannot create a network namespace: %w", err)
	}
	defer func() { ns.Close(); _ = topology.DeleteNetns(name) }()
	var out []ModeStatus
	for _, name := range names {
		m, err := modes.Lookup(name)
		if err != nil {
			out = append(out, ModeStatus{name, false, "not implemented in this build"})
			continue
		}
		st := ModeStatus{Mode: name}
		if m.Binaries != nil {
			for _, b := range m.Binaries(sc) {
				if _, err := exec.LookPath(b); err != nil {
					st.Reason = b + " not on PATH; run make setup"
				}
			}
		}
		if st.Reason == "" {
			st.Available, st.Reason = m.Probe(ctx, ns)
		}
		out = append(out, st)
	}
	return out, nil
}

// Doctor probes every mode of this build on this kernel (see
// ProbeHost), with the default scenario's settings.
func Doctor(ctx context.Context) ([]ModeStatus, error) {
	sc := &scenarios.Scenario{}
	sc.SetDefaults()
	return ProbeHost(ctx, sc, modes.Names(), "")
}

// KernelStatus is what doctor says about one user-mode-linux kernel.
type KernelStatus struct {
	Kernel *uml.Kernel
	// Unusable says why the kernel cannot boot here ("" when it can).
	Unusable string
	// Modes says, from the kernel's own configuration (--showconfig and
	// KernelOptions), which modes it can run and why not.
	Modes []ModeStatus
}

// DoctorKernels lists every user-mode-linux kernel found (uml.Kernels) with
// what each can run, judged from its build configuration with the default
// scenario's settings; it boots nothing.
func DoctorKernels() []KernelStatus {
	sc := &scenarios.Scenario{}
	sc.SetDefaults()
	var out []KernelStatus
	for _, k := range uml.Kernels() {
		ks := KernelStatus{Kernel: k}
		if err := uml.Usable(k); err != nil {
			ks.Unusable = err.Error()
		} else if k.Stale != "" {
			ks.Unusable = k.Stale
		}
		for _, m := range modes.Names() {
			st := ModeStatus{Mode: m, Reason: GuestUnsupported(sc, k, m)}
			if st.Reason == "" {
				st.Available, st.Reason = true, "every option it needs is configured"
				if k.Modular {
					st.Reason += " (as modules, loaded at boot)"
				} else {
					st.Reason += " (built in)"
				}
			}
			ks.Modes = append(ks.Modes, st)
		}
		out = append(out, ks)
	}
	return out
}
