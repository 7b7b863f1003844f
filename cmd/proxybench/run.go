package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/proxybench/proxybench/internal/runner"
	"github.com/proxybench/proxybench/internal/uml"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
)

type runFlags struct {
	kernel   string
	runID    string
	modes    string
	services int
	output   string
	seed     int64
	quiet    bool
	junit    string
	// engine and calibration select the sim engine (sim.go).
	engine      string
	calibration string
}

// loadScenario loads a scenario and applies run's overrides, then validates
// again. Every failure is bad input.
func loadScenario(cmd *cobra.Command, arg string, f *runFlags) (*scenarios.Scenario, error) {
	sc, err := scenarios.Load(arg)
	if err != nil {
		return nil, badInput(err)
	}
	if f == nil {
		return sc, nil
	}
	if cmd.Flags().Changed("modes") {
		sc.Modes = strings.Split(f.modes, ",")
	}
	if cmd.Flags().Changed("services") {
		sc.Services.Count = f.services
	}
	if cmd.Flags().Changed("seed") {
		sc.Seed = f.seed
	}
	if cmd.Flags().Changed("kernel") {
		sc.Kernel = f.kernel
	}
	if cmd.Flags().Lookup("engine") != nil && cmd.Flags().Changed("engine") {
		sc.Engine = f.engine
	}
	if err := sc.Validate(); err != nil {
		return nil, badInput(fmt.Errorf("after command-line overrides: %w", err))
	}
	return sc, nil
}

func newRunCmd() *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run SCENARIO",
		Short: "Run a scenario: build the testbed, sync each mode, drive traffic, report",
		Long: `run loads SCENARIO (a file, or the name of a scenario shipped in the binary),
builds the testbed namespaces, and for each mode measures sync.full,
lookup.latency per service position and fairness. It writes a JSON result
and prints a Markdown summary on stdout; progress goes to stderr. The
testbed is removed at the end, on error and on SIGINT/SIGTERM; after a
kill -9, run 'proxybench cleanup'. Needs root.`,
		Example: `  proxybench run scenarios/10k-services.yaml
  proxybench run 1k-services --modes none,iptables --services 2000 --seed 7 --output /tmp/r.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sc, err := loadScenario(cmd, args[0], f)
			if err != nil {
				return err
			}
			if sc.Engine == "sim" {
				// No root, namespaces or kernel: the sim engine (sim.go).
				return runSim(cmd, sc, f.output, f.calibration, f.quiet, f.junit)
			}
			if err := runner.Preflight(sc, runner.Options{}); err != nil {
				return badInput(err)
			}
			if left, _ := topology.Stale(); len(left) > 0 && !uml.InGuest() {
				fmt.Fprintf(os.Stderr, "note: %d namespaces of earlier runs are still here (%s ...); 'proxybench cleanup' removes them\n", len(left), left[0])
			}
			// SIGPIPE too: a closed stdout/stderr pipe ends the run with
			// its testbed removed, like SIGINT and SIGTERM.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM, syscall.SIGPIPE)
			defer stop()
			plan, err := runner.PlanKernels(ctx, sc)
			if err != nil {
				if runner.IsInput(err) {
					return badInput(err)
				}
				return &exitError{1, err}
			}
			if !uml.InGuest() {
				fmt.Fprintf(os.Stderr, "kernel: %s (%s)\n", strings.Join(plan.Names(), ", "), plan.Why)
			}
			runID := f.runID
			if runID == "" {
				runID = topology.NewRunID()
			}
			out := f.output
			if out == "" {
				out = filepath.Join("results", fmt.Sprintf("%s-%s.json", sc.Name, time.Now().UTC().Format("20060102T150405Z")))
			}
			opts := runner.Options{RunID: runID, Version: version, Progress: newProgress(f.quiet)}
			var console io.Writer = os.Stderr
			if f.quiet {
				console = nil
			}
			res, err := runner.Execute(ctx, sc, plan, opts, console)
			if err != nil && res != nil && len(res.Modes) > 0 {
				// Keep what the finished kernels measured.
				if werr := res.Write(out); werr == nil {
					fmt.Fprintf(os.Stderr, "partial result (kernels %s): %s\n", strings.Join(res.KernelNames(), ", "), out)
				}
			}
			if err != nil {
				if runner.IsInput(err) {
					return badInput(err)
				}
				if ctx.Err() != nil {
					return &exitError{130, fmt.Errorf("interrupted; testbed %s removed: %w", runID, err)}
				}
				return &exitError{1, err}
			}
			if err := res.Write(out); err != nil {
				return &exitError{1, fmt.Errorf("write result: %w", err)}
			}
			if err := reports.WriteMarkdown(os.Stdout, res); err != nil {
				return &exitError{1, err}
			}
			fmt.Fprintf(os.Stdout, "\nresult: %s\n", out)
			return evaluateGates(res, sc, f.junit)
		},
	}
	cmd.Flags().StringVar(&f.modes, "modes", "", "comma-separated modes to run instead of the scenario's, e.g. none,iptables,nftables")
	cmd.Flags().IntVar(&f.services, "services", 0, "number of services instead of the scenario's services.count")
	cmd.Flags().StringVar(&f.output, "output", "", "result JSON path (default results/<scenario>-<timestamp>.json)")
	cmd.Flags().Int64Var(&f.seed, "seed", 0, "random seed instead of the scenario's")
	cmd.Flags().BoolVarP(&f.quiet, "quiet", "q", false, "no progress output")
	cmd.Flags().StringVar(&f.kernel, "kernel", "", "kernels to run on instead of the scenario's (default auto: the host if it can run every mode, else one user-mode-linux kernel that runs them all, else a split); or a comma-separated list run one after the other, each reported on its own: host, uml (default guest kernel), uml:6.12, uml:6.1 (make kernels), uml:debian, or a path to a user-mode-linux kernel binary")
	cmd.Flags().StringVar(&f.runID, "run-id", "", "run ID (6 hex characters; default random)")
	_ = cmd.Flags().MarkHidden("run-id")
	cmd.Flags().StringVar(&f.engine, "engine", "", "real (network namespaces, needs root) or sim (models calibrated on a real kernel; no root)")
	cmd.Flags().StringVar(&f.calibration, "calibration", "", "with --engine sim: a calibration file from 'proxybench calibrate' (default: the shipped one)")
	cmd.Flags().StringVar(&f.junit, "junit", "", "write the scenario's gates (or, without gates, every figure) as JUnit XML to this file")
	return cmd
}

// evaluateGates checks the scenario's gates against res, prints each
// check with its measured value, writes JUnit XML when junit is set, and
// returns exit 1 when a gate failed.
func evaluateGates(res *reports.Result, sc *scenarios.Scenario, junit string) error {
	gates := reports.EvaluateGates(res, sc.Gates)
	if len(sc.Gates) > 0 {
		fmt.Fprintln(os.Stdout)
		if err := reports.WriteGates(os.Stdout, gates); err != nil {
			return &exitError{1, err}
		}
	}
	if junit != "" {
		opt := reports.ReportOptions{}
		if len(sc.Gates) > 0 {
			opt.Gates = gates
		}
		if err := writeTo(junit, func(w io.Writer) error { return reports.WriteFormat(w, res, "junit", opt) }); err != nil {
			return err
		}
	}
	if !reports.GatesPassed(gates) {
		n := 0
		for _, g := range gates {
			if !g.Pass {
				n++
			}
		}
		return &exitError{1, fmt.Errorf("%d of %d gates failed", n, len(gates))}
	}
	return nil
}

func newValidateCmd() *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "validate SCENARIO",
		Short: "Check a scenario and print it with defaults filled; creates nothing",
		Example: `  proxybench validate scenarios/10k-services.yaml
  proxybench validate my.yaml --services 20000`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sc, err := loadScenario(cmd, args[0], f)
			if err != nil {
				return err
			}
			b, err := sc.YAML()
			if err != nil {
				return &exitError{1, err}
			}
			fmt.Fprintf(os.Stdout, "# %s: valid\n%s", args[0], b)
			if len(b) > 0 && b[len(b)-1] != '\n' {
				fmt.Fprintln(os.Stdout)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&f.modes, "modes", "", "comma-separated modes")
	cmd.Flags().IntVar(&f.services, "services", 0, "number of services")
	cmd.Flags().Int64Var(&f.seed, "seed", 0, "random seed")
	return cmd
}

func newCleanupCmd() *cobra.Command {
	var runID string
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Remove every leftover namespace (and with it every link, route and rule) of earlier runs",
		Long: `cleanup deletes the network namespaces named pb-<runid>-* that earlier runs,
killed or crashed, left behind. Links, routes and proxy rules live inside
them and go with them; the root namespace is never touched. A run that is
still going (a process holds one of its namespaces) is left alone. It also
kills user-mode-linux guests whose proxybench was killed, and removes their
work folders.`,
		Example: "  proxybench cleanup\n  proxybench cleanup --run 3fa9c1",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if os.Geteuid() != 0 {
				return badInput(fmt.Errorf("cleanup needs root to delete network namespaces; fix: run it as root"))
			}
			done, skipped, err := topology.Cleanup(runID)
			for _, n := range done {
				fmt.Println("removed netns", n)
			}
			for _, n := range skipped {
				fmt.Println("kept netns", n, "(its run is still going)")
			}
			killed, dirs := uml.CleanupOrphans(runID)
			for _, k := range killed {
				fmt.Println("killed orphaned user-mode-linux guest", k)
			}
			for _, d := range dirs {
				fmt.Println("removed", d)
			}
			if err != nil {
				return &exitError{1, err}
			}
			if len(done)+len(killed)+len(dirs) == 0 {
				fmt.Println("nothing to clean up")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&runID, "run", "", "only this run ID")
	return cmd
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print proxybench's version and result schema version",
		Example: "  proxybench version",
		Args:    cobra.NoArgs,
		Run: func(cmd *cobra.Command, args []string) {
			fmt.Printf("proxybench %s (result schema %d)\n", version, reports.SchemaVersion)
		},
	}
}
