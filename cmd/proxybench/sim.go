package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/proxybench/proxybench/internal/runner"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/sim"
)

// runSim is `run` with engine sim: no root, no namespaces, no kernel
// choice; the result has the real runs' schema with Engine "sim".
func runSim(cmd *cobra.Command, sc *scenarios.Scenario, out string, def bool, calibration string, quiet bool, junit string) error {
	cal, err := sim.LoadCalibration(firstNonEmpty(calibration, sc.Sim.Calibration))
	if err != nil {
		return badInput(err)
	}
	if cal.Default && !quiet {
		fmt.Fprintf(os.Stderr, "sim: using the DEFAULT calibration shipped in the binary (measured on %s, kernel %s); run 'proxybench calibrate' for this machine\n", cal.Machine, cal.Kernel)
	}
	if err := scenarios.RefuseUnmodelled(sc, runner.PhaseRules(), sim.Modelled, "sim"); err != nil {
		return badInput(err)
	}
	for _, m := range sc.Modes {
		md, err := modes.Lookup(m)
		if err != nil {
			return badInput(err)
		}
		if _, err := cal.ModeCost(md); err != nil {
			return badInput(err)
		}
	}
	opts := sim.Options{Version: version, Calibration: cal, Modes: modes.All, Phases: runner.PhaseRules()}
	if !quiet {
		opts.Progress = func(s string) { fmt.Fprintln(os.Stderr, s) }
	}
	start := time.Now()
	res, err := sim.Run(cmd.Context(), sc, opts)
	if err != nil {
		return &exitError{1, err}
	}
	if !quiet {
		fmt.Fprintf(os.Stderr, "sim: done in %s\n", time.Since(start).Round(time.Millisecond))
	}
	return finish(res, sc, out, def, junit, fmt.Sprintf("engine: sim; calibration: %s (default: %t)\n", cal.Source, cal.Default))
}

func firstNonEmpty(xs ...string) string {
	for _, x := range xs {
		if x != "" {
			return x
		}
	}
	return ""
}

func newSimCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "The sim engine: check it against real runs",
		Long: `The sim engine runs scenarios from models of each mode's rendered ruleset,
calibrated on a real kernel ('proxybench calibrate'). Run a scenario in it
with 'proxybench run SCENARIO --engine sim' (or engine: sim in the file).`,
		Example: "  proxybench sim validate scenarios/10k-services.yaml\n  proxybench run sim-5000-nodes",
		Args:    cobra.NoArgs,
	}
	cmd.AddCommand(newSimValidateCmd())
	return cmd
}

func newSimValidateCmd() *cobra.Command {
	var sizes, modeList, calibration, keep, kernel string
	cmd := &cobra.Command{
		Use:   "validate SCENARIO",
		Short: "Run SCENARIO for real and in sim at several sizes and print the error of each figure",
		Long: `validate runs SCENARIO for real (executing this binary's run command, so it
needs root) and in the sim engine at each service count of --sizes, and
prints the relative error (sim - real) / real of sync.full, lookup latency
p50 and p99 per position, and the fairness index, per mode.`,
		Example: `  proxybench sim validate scenarios/10k-services.yaml
  proxybench sim validate 1k-services --sizes 1000,5000 --modes none,iptables --calibration calibration.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := parseSizes(sizes)
			if err != nil {
				return badInput(err)
			}
			base, err := runner.Catalog().Load(args[0])
			if err != nil {
				return badInput(err)
			}
			if modeList != "" {
				base.Modes = strings.Split(modeList, ",")
			}
			if os.Geteuid() != 0 {
				return badInput(fmt.Errorf("sim validate needs root for the real runs; fix: run it as root"))
			}
			cal, err := sim.LoadCalibration(calibration)
			if err != nil {
				return badInput(err)
			}
			dir := keep
			if dir == "" {
				if dir, err = os.MkdirTemp("", "proxybench-simvalidate"); err != nil {
					return &exitError{1, err}
				}
				defer os.RemoveAll(dir)
			} else if err := os.MkdirAll(dir, 0o755); err != nil {
				return &exitError{1, err}
			}
			var rows []sim.ValidationRow
			for _, n := range ns {
				extra := []string{"--services", strconv.Itoa(n), "--modes", strings.Join(base.Modes, ","), "--kernel", kernel}
				real, err := realRun(cmd.Context(), dir, "", n, args[0], extra...)
				if err != nil {
					return &exitError{1, err}
				}
				sc := *real.Scenario
				sc.Sweep.Services = nil
				sr, err := sim.Run(cmd.Context(), &sc, sim.Options{Version: version, Calibration: cal, Modes: modes.All, Phases: runner.PhaseRules()})
				if err != nil {
					return &exitError{1, err}
				}
				if err := sr.Write(filepath.Join(dir, fmt.Sprintf("sim-%d.json", n))); err != nil {
					return &exitError{1, err}
				}
				rows = append(rows, sim.CompareResults(real, sr)...)
			}
			fmt.Printf("calibration: %s (default: %t; machine %s, kernel %s)\n\n", cal.Source, cal.Default, cal.Machine, cal.Kernel)
			return sim.WriteValidation(os.Stdout, rows)
		},
	}
	cmd.Flags().StringVar(&sizes, "sizes", "1000,5000,10000", "service counts")
	cmd.Flags().StringVar(&modeList, "modes", "none,iptables,nftables", "modes to compare (none is the baseline)")
	cmd.Flags().StringVar(&calibration, "calibration", "", "calibration file (default: the one shipped in the binary)")
	cmd.Flags().StringVar(&kernel, "kernel", "host", "kernel of the real runs: host or uml")
	cmd.Flags().StringVar(&keep, "keep", "", "keep the real and sim results in this folder")
	return cmd
}
