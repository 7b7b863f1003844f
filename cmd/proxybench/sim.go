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
	"github.com/proxybench/proxybench/reports"
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
	for _, m := range sc.Modes {
		md, err := modes.Lookup(m)
		if err != nil {
			return badInput(err)
		}
		if _, err := cal.ModeCost(md); err != nil {
			return badInput(err)
		}
		if sc.KubeProxyRuns(m) {
			if _, _, err := cal.Implementation(scenarios.ImplKubeProxy, m); err != nil {
				return badInput(err)
			}
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
	var sizes, modeList, calibration, keep, kernel, nodeList, realList string
	cmd := &cobra.Command{
		Use:   "validate SCENARIO",
		Short: "Run SCENARIO for real and in sim at several sizes and print the error of each figure",
		Long: `validate runs SCENARIO for real (executing this binary's run command, so it
needs root) and in the sim engine at each service count of --sizes, and
prints the relative error (sim - real) / real of sync.full, lookup latency
p50 and p99 per position, and the fairness index, per mode.

kube-proxy rows (implementation: [kube-proxy]) are compared on kube-proxy's
own figures: its first full sync (kubeproxy_sync_full_proxy_rules_duration_seconds)
and network programming latency p50 and p99 under churn, pooled over every
node, at each node count of --nodes (topology.nodes of the real run; the
sim runs as many nodes sharing the real run's CPUs, sim.sharedCores).
--real compares saved real results instead of running them.`,
		Example: `  proxybench sim validate scenarios/10k-services.yaml
  proxybench sim validate 1k-services --sizes 1000,5000 --modes none,iptables --calibration calibration.json
  proxybench sim validate sim-validate-kube-proxy --nodes 1,5,20
  proxybench sim validate sim-validate-kube-proxy --real n1.json,n5.json,n20.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := parseSizes(sizes)
			if err != nil {
				return badInput(err)
			}
			nodes, err := parseNodes(nodeList)
			if err != nil {
				return badInput(err)
			}
			base, err := runner.Catalog().Load(args[0])
			if err != nil {
				return badInput(err)
			}
			if cmd.Flags().Changed("modes") || !base.UsesKubeProxy() {
				base.Modes = strings.Split(modeList, ",")
			}
			cal, err := sim.LoadCalibration(calibration)
			if err != nil {
				return badInput(err)
			}
			if base.UsesKubeProxy() {
				for _, m := range base.Modes {
					if base.KubeProxyRuns(m) {
						if _, _, err := cal.Implementation(scenarios.ImplKubeProxy, m); err != nil {
							return badInput(err)
						}
					}
				}
			}
			var reals []*reports.Result
			if realList != "" {
				for _, f := range strings.Split(realList, ",") {
					r, err := reports.Read(f)
					if err != nil {
						return badInput(fmt.Errorf("--real: %w", err))
					}
					if r.Scenario == nil || r.Engine == "sim" {
						return badInput(fmt.Errorf("--real %s: not a real run's result (engine %q); fix: give results of proxybench run", f, r.Engine))
					}
					reals = append(reals, r)
				}
			} else if os.Geteuid() != 0 {
				return badInput(fmt.Errorf("sim validate needs root for the real runs; fix: run it as root, or give saved results with --real"))
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
			if realList == "" {
				for _, n := range ns {
					for _, nn := range nodes {
						r, err := validateRealRun(cmd, dir, args[0], base, n, nn, kernel)
						if err != nil {
							return &exitError{1, err}
						}
						reals = append(reals, r)
					}
				}
			}
			var rows []sim.ValidationRow
			for i, real := range reals {
				sc := simOfReal(real)
				sr, err := sim.Run(cmd.Context(), sc, sim.Options{Version: version, Calibration: cal, Modes: modes.All, Phases: runner.PhaseRules()})
				if err != nil {
					return &exitError{1, err}
				}
				if err := sr.Write(filepath.Join(dir, fmt.Sprintf("sim-%d.json", i))); err != nil {
					return &exitError{1, err}
				}
				rows = append(rows, sim.CompareResults(real, sr)...)
			}
			fmt.Printf("calibration: %s (default: %t; machine %s, kernel %s)\n", cal.Source, cal.Default, cal.Machine, cal.Kernel)
			if kp := cal.Implementations[scenarios.ImplKubeProxy]; kp != nil && base.UsesKubeProxy() {
				fmt.Printf("kube-proxy costs: %s, measured %s from %s\n", kp.Version, kp.Measured.UTC().Format(time.RFC3339), strings.Join(kp.Sources, "; "))
			}
			fmt.Println()
			return sim.WriteValidation(os.Stdout, rows)
		},
	}
	cmd.Flags().StringVar(&sizes, "sizes", "1000,5000,10000", "service counts")
	cmd.Flags().StringVar(&modeList, "modes", "none,iptables,nftables", "modes to compare (none is the baseline); default for a scenario with kube-proxy rows: its own modes")
	cmd.Flags().StringVar(&calibration, "calibration", "", "calibration file (default: the one shipped in the binary)")
	cmd.Flags().StringVar(&kernel, "kernel", "host", "kernel of the real runs: host or uml")
	cmd.Flags().StringVar(&keep, "keep", "", "keep the real and sim results in this folder")
	cmd.Flags().StringVar(&nodeList, "nodes", "", "node counts (topology.nodes) of the real runs, comma-separated, e.g. 1,5,20 (default: the scenario's)")
	cmd.Flags().StringVar(&realList, "real", "", "compare these saved real results (comma-separated files) instead of running the scenario for real")
	return cmd
}

// parseNodes reads --nodes: empty is the scenario's own (0).
func parseNodes(s string) ([]int, error) {
	if s == "" {
		return []int{0}, nil
	}
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 || n > 64 {
			return nil, fmt.Errorf("--nodes: %q is not a node count 1..64; fix: write counts such as 1,5,20", p)
		}
		out = append(out, n)
	}
	return out, nil
}

// validateRealRun runs base for real at n services and, when nodes > 0,
// on that many nodes (topology.nodes; one client pod per node at most
// the scenario's), by executing this binary's run command.
func validateRealRun(cmd *cobra.Command, dir, arg string, base *scenarios.Scenario, n, nodes int, kernel string) (*reports.Result, error) {
	extra := []string{"--services", strconv.Itoa(n), "--modes", strings.Join(base.Modes, ","), "--kernel", kernel}
	if nodes == 0 {
		return realRun(cmd.Context(), dir, "", n, arg, extra...)
	}
	sc := *base
	sc.Topology.Nodes = nodes
	y, err := sc.YAML()
	if err != nil {
		return nil, err
	}
	return realRun(cmd.Context(), dir, string(y), n*1000+nodes, "", extra...)
}

// simOfReal is the scenario the sim runs to match a real result: the
// real run's own (its seed, churn, sync periods and size), its
// topology.nodes as sim.nodes sharing the real machine's CPUs
// (sim.sharedCores) when it ran kube-proxy rows, no sweep.
func simOfReal(real *reports.Result) *scenarios.Scenario {
	sc := *real.Scenario
	sc.Sweep.Services = nil
	sc.Engine = "sim"
	if sc.UsesKubeProxy() {
		sc.Sim.Nodes = sc.Topology.NodeCount()
		sc.Sim.SharedCores = real.Machine.CPUs
		sc.Topology.Nodes = 0
	}
	return &sc
}
