//go:build linux

package runner

import (
	"context"
	"fmt"
	"os"
	"os/exec"

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
// throwaway namespace pb-<runid>-probe that it removes afterwards, with
// sc's settings for binaries. It needs root.
func ProbeHost(ctx context.Context, sc *scenarios.Scenario, names []string) ([]ModeStatus, error) {
	if os.Geteuid() != 0 {
		return nil, &InputError{Msg: "probing the kernel needs root (network namespaces)", Fix: "run as root"}
	}
	if names == nil {
		names = modes.Names()
	}
	name := topology.NetnsName(topology.NewRunID(), "probe")
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
	return ProbeHost(ctx, sc, modes.Names())
}
