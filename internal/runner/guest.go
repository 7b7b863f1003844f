//go:build linux

package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
)

// GuestRunCommand is the hidden subcommand of proxybench that a
// user-mode-linux guest boots on: `proxybench guest-run PLAN.json` reads
// the GuestPlan (ReadGuestPlan) and runs it (RunGuest).
const GuestRunCommand = "guest-run"

// GuestPlan is what the run inside a user-mode-linux guest is given, as
// JSON in the guest's work folder: RunInUML writes it, the guest's
// `proxybench guest-run` reads it and calls the runner's own entry (Run)
// with it, so the guest is driven by the runner, not by the CLI's argv,
// and prints no report (the host writes the result and the summary).
type GuestPlan struct {
	// Scenario is the effective scenario as YAML (Scenario.YAML: the
	// command line's overrides applied, defaults filled, kubeProxy.binaries
	// absolute), read back with the build's catalog.
	Scenario string `json:"scenario"`
	// Modes are the modes the guest runs (its target's; also the
	// scenario's modes).
	Modes []string `json:"modes"`
	// RunID, Version, Where, Checkpoint and ArtifactDir are the run's
	// Options (Where: WhereGuest).
	RunID       string `json:"runID"`
	Version     string `json:"version,omitempty"`
	Where       Where  `json:"where"`
	Checkpoint  string `json:"checkpoint,omitempty"`
	ArtifactDir string `json:"artifactDir,omitempty"`
	// KubeBin is the folder of kube-apiserver, etcd and the default
	// kube-proxy the host found (FindKubeBin; "" without kube-proxy
	// rows): the guest's working folder is its own, so it looks there
	// ($PROXYBENCH_KUBE_BIN).
	KubeBin string `json:"kubeBin,omitempty"`
	// ServiceTypesModes is Options.ServiceTypesModes (nil: every mode).
	ServiceTypesModes []string `json:"serviceTypesModes,omitempty"`
	// Output is where the guest writes the Result JSON (in the guest's
	// work folder): whole, partial (Result.Partial) or with failed rows
	// (ModeResult.Failed), which is how the host reads the run's fate.
	Output string `json:"output"`
}

// NewGuestPlan is the plan that runs sc's modes with o (RunID, Version,
// Where, Checkpoint, ArtifactDir; the rest is the guest's own) and
// writes the result to output.
func NewGuestPlan(sc *scenarios.Scenario, o Options, kubeBin, output string) (*GuestPlan, error) {
	y, err := sc.YAML()
	if err != nil {
		return nil, err
	}
	return &GuestPlan{Scenario: string(y), Modes: append([]string{}, sc.Modes...), RunID: o.RunID, Version: o.Version, Where: o.Where,
		Checkpoint: o.Checkpoint, ArtifactDir: o.ArtifactDir, KubeBin: kubeBin, Output: output, ServiceTypesModes: o.ServiceTypesModes}, nil
}

// Write writes p as JSON to path.
func (p *GuestPlan) Write(path string) error {
	b, err := json.MarshalIndent(p, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadGuestPlan reads a plan Write wrote. Failures are *InputError.
func ReadGuestPlan(path string) (*GuestPlan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &InputError{Msg: "guest plan: " + err.Error()}
	}
	var p GuestPlan
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, &InputError{Msg: fmt.Sprintf("guest plan %s: %v", path, err)}
	}
	if p.Output == "" || p.RunID == "" {
		return nil, &InputError{Msg: fmt.Sprintf("guest plan %s: no output or run ID", path)}
	}
	return &p, nil
}

// Load is the plan's scenario (parsed and validated with the build's
// catalog, Catalog; its modes the plan's) and the run's Options.
func (p *GuestPlan) Load() (*scenarios.Scenario, Options, error) {
	sc, err := Catalog().Parse([]byte(p.Scenario), "guest plan")
	if err != nil {
		return nil, Options{}, &InputError{Field: "scenario", Msg: err.Error()}
	}
	if len(p.Modes) > 0 {
		sc.Modes = append([]string{}, p.Modes...)
		if err := sc.ValidateWith(Catalog()); err != nil {
			return nil, Options{}, &InputError{Field: "modes", Msg: err.Error()}
		}
	}
	return sc, Options{RunID: p.RunID, Version: p.Version, Where: p.Where, Checkpoint: p.Checkpoint, ArtifactDir: p.ArtifactDir, ServiceTypesModes: p.ServiceTypesModes}, nil
}

// RunGuest runs plan p (Run, the entry Execute runs a host target with,
// told where it runs by the plan) and writes the result, whole or
// partial, to p.Output; Run's error is returned (a *RowsFailed with a
// whole result, an *InputError before anything was created, or what
// stopped the run).
func RunGuest(ctx context.Context, p *GuestPlan, progress Progress) (*reports.Result, error) {
	sc, o, err := p.Load()
	if err != nil {
		return nil, err
	}
	o.Progress = progress
	if p.KubeBin != "" {
		// This process is the guest's run: FindKubeBin looks there alone.
		if err := os.Setenv(KubeBinEnv, p.KubeBin); err != nil {
			return nil, err
		}
	}
	res, err := Run(ctx, sc, o)
	if res != nil {
		if werr := res.Write(p.Output); werr != nil {
			err = errors.Join(err, fmt.Errorf("write the result: %w", werr))
		}
	}
	return res, err
}
