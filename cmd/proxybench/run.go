package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/proxybench/proxybench/internal/runner"
	"github.com/proxybench/proxybench/internal/uml"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/sim"
	"github.com/proxybench/proxybench/topology"
)

type runFlags struct {
	// cluster are the cluster engine's flags (cluster.go).
	cluster  clusterFlags
	kernel   string
	runID    string
	modes    string
	services int
	count    int
	output   string
	seed     int64
	quiet    bool
	junit    string
	// engine and calibration select the sim engine (sim.go).
	engine      string
	calibration string
	// implementation and kubeProxy override the scenario's implementation
	// and kubeProxy.binaries (comma-separated).
	implementation string
	kubeProxy      string
	// alerts and alertsScale override the scenario's alerts and
	// monitoring.timeScale.
	alerts      string
	alertsScale float64
	// duration overrides soak.duration.
	duration time.Duration
	// geteuid replaces os.Geteuid in Preflight (nil: os.Geteuid).
	geteuid func() int
}

// loadScenario loads a scenario and applies run's overrides, then validates
// again. Every failure is bad input.
func loadScenario(cmd *cobra.Command, arg string, f *runFlags) (*scenarios.Scenario, error) {
	sc, err := runner.Catalog().Load(arg)
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
	if cmd.Flags().Lookup("count") != nil && cmd.Flags().Changed("count") {
		sc.Runs = f.count
	}
	if cmd.Flags().Changed("kernel") {
		sc.Kernel = f.kernel
	}
	if cmd.Flags().Lookup("engine") != nil && cmd.Flags().Changed("engine") {
		sc.Engine = f.engine
	}
	if cmd.Flags().Lookup("implementation") != nil && cmd.Flags().Changed("implementation") {
		sc.Implementation = splitList(f.implementation)
		if err := checkListFlag("--implementation", f.implementation, sc.Implementation, []string{scenarios.ImplBuiltin, scenarios.ImplKubeProxy},
			"--implementation builtin, kube-proxy or builtin,kube-proxy"); err != nil {
			return nil, badInput(err)
		}
	}
	if cmd.Flags().Lookup("kube-proxy") != nil && cmd.Flags().Changed("kube-proxy") {
		sc.KubeProxy.Binaries = splitList(f.kubeProxy)
		if err := checkListFlag("--kube-proxy", f.kubeProxy, sc.KubeProxy.Binaries, nil,
			"give kube-proxy binaries, comma-separated: --kube-proxy bin/kube-proxy-v1.36.3,bin/kube-proxy"); err != nil {
			return nil, badInput(err)
		}
		if !slices.Contains(sc.Implementation, scenarios.ImplKubeProxy) {
			return nil, badInput(fmt.Errorf("--kube-proxy %s: no mode runs with kube-proxy; fix: add --implementation builtin,kube-proxy (or implementation: [builtin, kube-proxy] in the scenario)", f.kubeProxy))
		}
	}
	if cmd.Flags().Lookup("alerts") != nil && cmd.Flags().Changed("alerts") {
		if f.alerts == "" {
			return nil, badInput(fmt.Errorf("--alerts \"\": empty; fix: give a Prometheus rule file or PrometheusRule, e.g. --alerts scenarios/alerts/seeds.yaml"))
		}
		sc.Alerts = f.alerts
	}
	if cmd.Flags().Lookup("alerts-time-scale") != nil && cmd.Flags().Changed("alerts-time-scale") {
		sc.Monitoring.TimeScale = f.alertsScale
	}
	if cmd.Flags().Lookup("duration") != nil && cmd.Flags().Changed("duration") {
		slice := sc.Faults != nil && sc.Faults.SliceChurn != nil
		if sc.Soak == nil && !slice {
			return nil, badInput(fmt.Errorf("--duration %s: the scenario has no soak block; fix: give --duration to a soak scenario (proxybench run soak --duration 5m), or add a soak: block", f.duration))
		}
		if sc.Soak != nil {
			sc.Soak.Duration = scenarios.Duration{Duration: f.duration}
		}
		if slice {
			sc.Faults.SliceChurn.Duration = scenarios.Duration{Duration: f.duration}
		}
	}
	sc.SetMonitoringDefaults()
	if err := sc.ValidateWith(runner.Catalog()); err != nil {
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
and prints on stdout the Markdown report that report --format md gives
(findings and, for a sweep, capacity at the default budgets); progress goes to stderr. The
testbed is removed at the end, on error and on SIGINT/SIGTERM; after a
kill -9, run 'proxybench cleanup'. Needs root.

kube-proxy rows (--implementation kube-proxy) take kube-proxy (unless
--kube-proxy or kubeProxy.binaries name one), kube-apiserver and etcd from
the first of these folders holding them all: $PROXYBENCH_KUBE_BIN when
set; else the folder of this proxybench executable (a checkout's
bin/proxybench finds the bin/ that make kube filled, from any folder);
else ./bin. A user-mode-linux guest is given the folder found here.`,
		Example: `  proxybench run scenarios/10k-services.yaml
  proxybench run 1k-services --modes none,iptables --services 2000 --seed 7 --output /tmp/r.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sc, err := loadScenario(cmd, args[0], f)
			if err != nil {
				return err
			}
			out, def, checked, err := checkRun(sc, f)
			if err != nil {
				return err
			}
			printWarnings(checked)
			if sc.Engine == scenarios.EngineCluster {
				if err := clusterIgnored(cmd); err != nil {
					return err
				}
				return runCluster(cmd, sc, &f.cluster, out, def, f.junit, f.runID)
			}
			if sc.Engine == "sim" {
				// No root, namespaces or kernel: the sim engine (sim.go).
				if sc.Runs > 1 {
					fmt.Fprintf(os.Stderr, "note: runs: %d ignored: the sim engine is deterministic, so every run would give the same figures\n", sc.Runs)
				}
				return runSim(cmd, sc, out, def, f.calibration, f.quiet, f.junit)
			}
			if left, _ := topology.Stale(); len(left) > 0 {
				fmt.Fprintf(os.Stderr, "note: %d namespaces of earlier runs are still here (%s ...); 'proxybench cleanup' removes them\n", len(left), left[0])
			}
			// SIGINT/SIGTERM end the run with its testbed removed; a
			// closed stderr pipe does too (runSignals), a closed stdout
			// pipe fails only the summary, after the result is saved.
			ctx, stderr, stop := runSignals(cmd.Context())
			defer stop()
			runID := f.runID
			if runID == "" {
				runID = topology.NewRunID()
			}
			// The host probe's namespace is the run's (pb-<id>-probe):
			// killed while probing, cleanup --run <id> removes it.
			plan, err := runner.PlanKernels(ctx, sc, runID)
			if err != nil {
				if runner.IsInput(err) {
					return badInput(err)
				}
				return &exitError{1, err}
			}
			fmt.Fprintf(os.Stderr, "kernel: %s (%s)\n", strings.Join(plan.Names(), ", "), plan.Why)
			var console io.Writer = stderr
			if f.quiet {
				console = nil
			}
			// runner.Execute builds the result: every kernel of the plan,
			// runs: N (--count N) times, each on a fresh testbed with its
			// own run ID, so drift between runs hits every mode alike.
			opts := runner.Options{RunID: runID, Version: version, Progress: newProgress(f.quiet, stderr), ArtifactDir: artifactDir(out),
				Checked: checked} // checked once, above
			res, err := runner.Execute(ctx, sc, plan, opts, console)
			if runner.IsInput(err) {
				return badInput(err)
			}
			switch runner.FateOf(ctx, err) {
			case runner.Keep:
				return finish(res, sc, out, def, f.junit, "")
			case runner.Failed:
				// Rows failed and the run went on: the result is whole;
				// exit 1, as when a row stops the run.
				if ferr := finish(res, sc, out, def, f.junit, ""); ferr != nil {
					return &exitError{1, fmt.Errorf("%v\nproxybench: %w", ferr, err)}
				}
				return &exitError{1, fmt.Errorf("%w\nproxybench: the result, every row in it, is saved at %s; 'proxybench report %s' renders it", err, out, out)}
			}
			code, msg := 1, err.Error()
			if ctx.Err() != nil {
				code, msg = 130, fmt.Sprintf("%v; testbed %s removed: %v", context.Cause(ctx), runID, err)
			}
			return savePartial(res, out, def, code, msg)
		},
	}
	cmd.Flags().StringVar(&f.modes, "modes", "", "comma-separated modes to run instead of the scenario's, e.g. none,iptables,nftables")
	cmd.Flags().IntVar(&f.services, "services", 0, "number of services instead of the scenario's services.count")
	cmd.Flags().IntVar(&f.count, "count", 0, "repeat the whole measurement N times instead of the scenario's runs (default 1); the result holds every run, for compare")
	cmd.Flags().StringVar(&f.output, "output", "", "result JSON path (default results/<scenario>-<timestamp>.json)")
	cmd.Flags().Int64Var(&f.seed, "seed", 0, "random seed instead of the scenario's")
	cmd.Flags().BoolVarP(&f.quiet, "quiet", "q", false, "no progress output")
	cmd.Flags().StringVar(&f.kernel, "kernel", "", "kernels to run on instead of the scenario's (default auto: every mode the host kernel can run on the host, the others in a user-mode-linux kernel beside none and iptables, which give the guest's factor against the host); or a comma-separated list run one after the other, each reported on its own: host, uml (default guest kernel), uml:6.12, uml:6.1 (make kernels), uml:debian, or a path to a user-mode-linux kernel binary")
	cmd.Flags().StringVar(&f.runID, "run-id", "", "run ID (6 hex characters; default random)")
	_ = cmd.Flags().MarkHidden("run-id")
	cmd.Flags().StringVar(&f.engine, "engine", "", "real (network namespaces, needs root), sim (models calibrated on a real kernel; no root) or cluster (a real Kubernetes cluster: --kubeconfig, docs/cluster.md)")
	cmd.Flags().StringVar(&f.calibration, "calibration", "", "with --engine sim: a calibration file from 'proxybench calibrate' (default: the shipped one)")
	cmd.Flags().StringVar(&f.junit, "junit", "", "write the scenario's gates (or, without gates, every figure) as JUnit XML to this file")
	addImplementationFlags(cmd, f)
	addClusterFlags(cmd, &f.cluster, true)
	return cmd
}

// addImplementationFlags adds --implementation and --kube-proxy (run and
// validate).
func addImplementationFlags(cmd *cobra.Command, f *runFlags) {
	cmd.Flags().StringVar(&f.implementation, "implementation", "", "who programs the rules, instead of the scenario's implementation: builtin, kube-proxy, or builtin,kube-proxy (one row each, e.g. nftables and nftables (kube-proxy))")
	cmd.Flags().StringVar(&f.alerts, "alerts", "", "a Prometheus rule file or PrometheusRule (instead of the scenario's alerts:) that a Prometheus beside each kube-proxy row evaluates; scenarios/alerts/seeds.yaml (or seeds) ships the seeds' rules")
	cmd.Flags().Float64Var(&f.alertsScale, "alerts-time-scale", 0, "multiply every alert's for: and every range window of the rules by this (instead of monitoring.timeScale; default 1), e.g. 0.2 makes for: 5m 1m for a short row")
	cmd.Flags().DurationVar(&f.duration, "duration", 0, "how long the soak's churn runs, instead of the scenario's soak.duration (and faults.sliceChurn.duration), e.g. 5m")
	cmd.Flags().StringVar(&f.kubeProxy, "kube-proxy", "", "kube-proxy binaries to run instead of the scenario's kubeProxy.binaries (default bin/kube-proxy), comma-separated; several give one row each, named with the version: nftables (kube-proxy v1.36.3)")
}

// splitList splits a comma-separated flag value, trimming blanks.
// checkListFlag refuses a comma-separated flag value with an empty entry,
// a duplicate or (known non-nil) an unknown entry, naming the flag: the
// scenario's own checks would name the scenario's field and line instead.
func checkListFlag(flag, raw string, list, known []string, fix string) error {
	for i, v := range list {
		switch {
		case v == "":
			return fmt.Errorf("%s %q: entry %d is empty; fix: %s", flag, raw, i+1, fix)
		case known != nil && !slices.Contains(known, v):
			return fmt.Errorf("%s %q: unknown value %q; fix: %s", flag, raw, v, fix)
		case slices.Index(list, v) < i:
			return fmt.Errorf("%s %q: %q is given twice; fix: give it once", flag, raw, v)
		}
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		out = append(out, strings.TrimSpace(v))
	}
	return out
}

// artifactDir is the folder beside result path out that keeps a run's
// artifacts (kube-proxy configs and logs): out without ".json"
// (runner.Execute adds "-runN" for the N-th run of --count).
func artifactDir(out string) string {
	return strings.TrimSuffix(out, ".json")
}

// checkRun does the checks run does before anything is created, after
// the scenario's own validation: the output and JUnit paths can be written
// (checkOutput) and, for the real engine, the machine can run the
// scenario (runner.Preflight: root, each mode's programs). validate calls
// it too, so that validate and run agree. It returns the result path,
// whether it is the default, and Preflight's check of the kube-proxy rows
// for runner.Options.Checked (nil for the sim engine).
func checkRun(sc *scenarios.Scenario, f *runFlags) (out string, def bool, checked *runner.Checked, err error) {
	if sc.Engine == "sim" {
		// The sim refuses a phase it does not model (validate as run).
		if err := scenarios.RefuseUnmodelled(sc, runner.PhaseRules(), sim.Modelled, "sim"); err != nil {
			return "", false, nil, badInput(err)
		}
	}
	if sc.Engine != "sim" && sc.Engine != scenarios.EngineCluster {
		if checked, err = runner.Preflight(sc, runner.Options{Geteuid: f.geteuid}); err != nil {
			// A binary given with --kube-proxy is named by the flag, not
			// by the scenario field it overrides.
			// A field the scenario file gives is named with its file and
			// line, as validation's errors are.
			var ie *runner.InputError
			switch {
			case !errors.As(err, &ie):
			case f.kubeProxy != "" && strings.HasPrefix(ie.Field, "kubeProxy.binaries"):
				e := *ie
				e.Field = "--kube-proxy"
				err = &e
			case f.alerts != "" && ie.Field == "alerts":
				e := *ie
				e.Field = "--alerts"
				err = &e
			case ie.Field != "":
				if fe := sc.At(ie.Field, ie.Msg, ie.Fix); fe.Line > 0 {
					err = fe
				}
			}
			return "", false, nil, badInput(err)
		}
	}
	out, def = resultPath(f.output, sc, sc.Engine)
	if err := checkOutput("--output", out, def); err != nil {
		return "", false, nil, err
	}
	if f.junit != "" {
		if err := checkOutput("--junit", f.junit, false); err != nil {
			return "", false, nil, err
		}
	}
	return out, def, checked, nil
}

// finish saves res (saveResult: atomic, with a fallback file named on
// stderr when out cannot be written), prints the Markdown summary on
// stdout in every case (report --format md's, findings included, at the
// default budgets), and evaluates the gates. extra is printed after
// the result line (the sim's calibration).
func finish(res *reports.Result, sc *scenarios.Scenario, out string, def bool, junit, extra string) error {
	saved, werr := saveResult(res, out, def)
	if werr != nil && saved != "" {
		fmt.Fprintf(os.Stderr, "proxybench: %v\nproxybench: the result is saved at %s instead\n", werr, saved)
	}
	if err := reports.WriteReportMarkdown(os.Stdout, res, reports.DefaultBudgets); err != nil {
		return &exitError{1, err}
	}
	if saved != "" {
		fmt.Fprintf(os.Stdout, "\n%sresult: %s\n", extra, saved)
	}
	if werr != nil {
		return &exitError{1, werr}
	}
	return evaluateGates(res, sc, junit)
}

// signalContext is cancelled on the first of sigs, with the cause
// "interrupted by <signal>"; stop restores the default handling.
func signalContext(parent context.Context, sigs ...os.Signal) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	go func() {
		select {
		case s := <-ch:
			cancel(fmt.Errorf("interrupted by %s", unix.SignalName(s.(syscall.Signal))))
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel(nil) }
}

// runSignals sets up the signals of a run (run, dump): ctx is cancelled
// on SIGINT or SIGTERM (signalContext), and SIGPIPE is caught, never acted
// on. Go delivers SIGPIPE for a broken pipe on any descriptor once it is
// caught (os/signal, "SIGPIPE"), including the stdin of a child
// (iptables-restore, nft, kube-proxy) that exited before reading it all:
// that is the child's error (EPIPE), not the end of the run. Being caught,
// a write to a closed stdout or stderr fails with EPIPE instead of
// killing the process, so the result is still saved; stderr is the
// returned writer, which cancels ctx with the cause "stderr was closed"
// on EPIPE so the run stops with its testbed removed, as on SIGINT. The
// catch stays until the process exits, so the final messages cannot kill
// it either; stop ends the rest.
func runSignals(parent context.Context) (ctx context.Context, stderr io.Writer, stop func()) {
	pipe := make(chan os.Signal, 1) // never read: further signals are dropped
	signal.Notify(pipe, syscall.SIGPIPE)
	ctx, stopSig := signalContext(parent, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancelCause(ctx)
	return ctx, cancelOnEPIPE{os.Stderr, "stderr", cancel}, func() { cancel(nil); stopSig() }
}

// cancelOnEPIPE passes writes to w; a write failing with EPIPE (the
// reader of the pipe went away) cancels with the cause "<name> was closed
// (broken pipe)". The error is returned unchanged.
type cancelOnEPIPE struct {
	w      io.Writer
	name   string
	cancel context.CancelCauseFunc
}

func (c cancelOnEPIPE) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		c.cancel(fmt.Errorf("interrupted: %s was closed (broken pipe)", c.name))
	}
	return n, err
}

// savePartial ends a run that stopped early (code 130: a signal, 1: a
// mode failed): when res holds finished measurements (runner.Execute
// marked it partial, Result.Partial) it is saved (saveResult) and
// summarised on stdout, and the error, msg, says where it is. The exit
// code stays code.
func savePartial(res *reports.Result, out string, def bool, code int, msg string) error {
	if res == nil || len(res.Modes) == 0 {
		return &exitError{code, fmt.Errorf("%s; no mode finished yet, no result written", msg)}
	}
	var done []string
	for _, m := range res.Modes {
		label := m.Mode
		switch {
		case m.Failed != "":
			label += " (failed)"
		case m.Partial != "":
			label += " (partly)"
		}
		done = append(done, label)
	}
	saved, werr := saveResult(res, out, def)
	_ = reports.WriteReportMarkdown(os.Stdout, res, reports.DefaultBudgets)
	if saved == "" {
		return &exitError{code, fmt.Errorf("%s; the partial result (%s) could not be saved: %v", msg, strings.Join(done, ", "), werr)}
	}
	if werr != nil {
		fmt.Fprintf(os.Stderr, "proxybench: %v\n", werr)
	}
	fmt.Fprintf(os.Stdout, "\npartial result: %s\n", saved)
	return &exitError{code, fmt.Errorf("%s\nproxybench: partial result (finished: %s) saved at %s; 'proxybench report %s' renders it", msg, strings.Join(done, ", "), saved, saved)}
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
		Long: `validate does every check run does before it creates anything: the scenario
(each field parses exactly or is refused with file:line, field and fix), the
command-line overrides, the --output and --junit paths (their folder must
exist and be writable: a temporary file is created and removed there), for
the sim the phases it models, and, for the real engine, each mode's
programs and (as root) the kernel choice: which kernel runs which mode, the
host's probes made in a throwaway namespace. Run's root check is reported as
a note. Exit 2 on any problem, as run.`,
		Example: `  proxybench validate scenarios/10k-services.yaml
  proxybench validate my.yaml --services 20000`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sc, err := loadScenario(cmd, args[0], f)
			if err != nil {
				return err
			}
			if os.Geteuid() != 0 && sc.Engine != "sim" && sc.Engine != scenarios.EngineCluster {
				// Everything else run checks is checked; root is run's own.
				f.geteuid = func() int { return 0 }
				defer fmt.Fprintln(os.Stderr, "note: run needs root (the real engine creates network namespaces); the other checks passed")
			}
			_, _, checked, err := checkRun(sc, f)
			if err != nil {
				return err
			}
			if sc.Engine != "sim" && sc.Engine != scenarios.EngineCluster && os.Geteuid() == 0 {
				// Where the modes would run, as run decides it (the host's
				// probes run in a throwaway namespace and leave nothing).
				plan, err := runner.PlanKernels(cmd.Context(), sc, "")
				if err != nil {
					if runner.IsInput(err) {
						return badInput(err)
					}
					return &exitError{1, err}
				}
				defer fmt.Fprintf(os.Stderr, "kernel: %s (%s)\n", strings.Join(plan.Names(), ", "), plan.Why)
			}
			printWarnings(checked)
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
	cmd.Flags().IntVar(&f.count, "count", 0, "runs of the whole measurement, as run --count")
	cmd.Flags().Int64Var(&f.seed, "seed", 0, "random seed")
	cmd.Flags().StringVar(&f.kernel, "kernel", "", "where modes would run, as run --kernel")
	cmd.Flags().StringVar(&f.engine, "engine", "", "real, sim or cluster, as run --engine")
	cmd.Flags().StringVar(&f.output, "output", "", "result path run would write: its folder must exist and be writable")
	cmd.Flags().StringVar(&f.junit, "junit", "", "JUnit path run would write: its folder must exist and be writable")
	addImplementationFlags(cmd, f)
	return cmd
}

func newCleanupCmd() *cobra.Command {
	var runID, engine string
	var cf clusterFlags
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Remove every leftover namespace (and with it every link, route and rule) of earlier runs",
		Long: `cleanup deletes the network namespaces named pb-<runid>-* that earlier runs,
killed or crashed, left behind. Links, routes and proxy rules live inside
them and go with them; the root namespace is never touched. A run that is
still going (a process holds one of its namespaces) is left alone. It kills
the etcd, kube-apiserver and kube-proxy processes of killed runs (they carry
PROXYBENCH_CHILD_OF_RUN=<runid>) and removes their temporary folders. It also
kills the user-mode-linux guests of killed runs (every host process of the
guest: the kernel, its helpers, the processes of the guest's programs) and
removes their work folders (` + os.TempDir() + `/proxybench-uml-<runid>-*),
first saving the modes the guest had finished to the run's result path. A
guest's run is going while its proxybench holds the work folder (a lock
that dies with it); such a guest is left alone and named, with its
proxybench's pid.`,
		Example: "  proxybench cleanup\n  proxybench cleanup --run 3fa9c1\n  proxybench cleanup --engine cluster --kubeconfig ~/.kube/config",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("run") && (runID == "" || topology.RunIDOf("pb-"+runID+"-x") != runID) {
				return badInput(fmt.Errorf("--run %q: not a run ID (6 hex digits, e.g. 3fa9c1); fix: give the ID the run printed, or leave out --run to clean up every killed run", runID))
			}
			switch engine {
			case scenarios.EngineCluster:
				return cleanupCluster(&cf, runID)
			case "", "real":
			default:
				return badInput(fmt.Errorf("--engine %q: cleanup knows real (this machine's namespaces, the default) and cluster; fix: --engine cluster", engine))
			}
			if os.Geteuid() != 0 {
				return badInput(fmt.Errorf("cleanup needs root to delete network namespaces; fix: run it as root"))
			}
			done, skipped, err := topology.Cleanup(runID)
			for _, n := range done {
				switch {
				case strings.HasPrefix(n, "process "):
					fmt.Println("killed orphaned", n)
				case strings.HasPrefix(n, "folder "):
					fmt.Println("removed", strings.TrimPrefix(n, "folder "))
				default:
					fmt.Println("removed netns", n)
				}
			}
			for _, n := range skipped {
				fmt.Println("kept netns", n, "(its run is still going)")
			}
			g, gerr := uml.CleanupOrphans(runID, runner.KeepGuestCheckpoint)
			for _, k := range g.Killed {
				fmt.Println("killed orphaned user-mode-linux guest process", k)
			}
			for _, s := range g.Saved {
				fmt.Printf("saved what the killed run's guest had finished: %s ('proxybench report %s' renders it)\n", s, s)
			}
			for _, d := range g.Removed {
				fmt.Println("removed", d)
			}
			for _, k := range g.Kept {
				fmt.Println("kept user-mode-linux guest of", k+": its run is still going")
			}
			if err = errors.Join(err, gerr); err != nil {
				return &exitError{1, err}
			}
			if len(done)+len(g.Killed)+len(g.Removed) == 0 {
				fmt.Println("nothing to clean up")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&runID, "run", "", "only this run ID")
	cmd.Flags().StringVar(&engine, "engine", "", "cluster: delete what cluster-engine runs left on the cluster of --kubeconfig/--context (namespaces proxybench-<runid>, by label) instead of this machine's leftovers")
	addClusterFlags(cmd, &cf, false)
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

// printWarnings prints the checks' warnings (a metric name an alert
// reads that no row exports, a network prefix overlapping the host's
// addresses) on stderr, before anything is built.
func printWarnings(c *runner.Checked) {
	if c == nil {
		return
	}
	for _, w := range c.Warnings {
		fmt.Fprintln(os.Stderr, "warning: "+w)
	}
}
