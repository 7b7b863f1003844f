package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/proxybench/proxybench/internal/dump/fidelity"
	"github.com/proxybench/proxybench/internal/runner"
	"github.com/proxybench/proxybench/internal/uml"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
)

type dumpFlags struct {
	mode, impl, kernel, kubeProxy string
	diff, normalise, verbose      bool
	// json is where a guest run writes its readings, runID the run ID,
	// guest that this dump runs inside the guest dumpInGuest booted (all
	// hidden).
	json, runID string
	guest       bool
}

// dumpModes are the modes dump reads back: the kernel rulesets kube-proxy
// programs.
var dumpModes = scenarios.KubeProxyModes

// dumpTools are the programs dump reads the kernel with, per mode: every
// mode's iptables and nft readers, and the mode's own read-back commands
// that must be there (proxymodes.Mode.ReadBack; ipvs: ipvsadm, ipset).
func dumpTools(mode string) []string {
	t := []string{"iptables-legacy-save", "iptables-nft-save", "ip6tables-legacy-save", "ip6tables-nft-save", "nft"}
	if m, err := modes.Lookup(mode); err == nil {
		for _, c := range m.ReadBack {
			if !c.Optional {
				t = append(t, c.Name)
			}
		}
	}
	return t
}

func newDumpCmd() *cobra.Command {
	f := &dumpFlags{}
	cmd := &cobra.Command{
		Use:   "dump SCENARIO --mode MODE",
		Short: "Print what a mode installs in the kernel for a scenario's services (iptables-save, nft, ipvsadm -Sn, ipset save)",
		Long: `dump builds a one-node testbed, makes MODE program the scenario's services
in the node's network namespace, reads the kernel's state back with the
kernel's own tools run inside that namespace, prints it, and tears
everything down. What it prints is what a user sees on a node:

  iptables   iptables-<backend>-save (and ip6tables-<backend>-save when
             the implementation programs IPv6)
  nftables   nft list table ip kube-proxy (and ip6 kube-proxy)
  ipvs       ipvsadm -Sn, ipset save, iptables-<backend>-save and the
             addresses of kube-ipvs0

--implementation builtin (default) is proxybench's own proxier;
kube-proxy runs the real kube-proxy (bin/kube-proxy, or --kube-proxy) with
a control plane of its own, started and stopped by dump; its iptables back
end is the scenario's iptables.backend. --diff does both and prints the
comparison instead, normalised for what must differ (hashed chain names,
counters, the order the kernel does not care about; see docs/modes.md,
"Fidelity"), each changed line marked with the documented difference it
is; it exits 1 when a difference is not documented. --normalise prints one
implementation's reading in that normalised form.

A mode the host kernel cannot run (ipvs without IP_VS) runs in a
user-mode-linux guest, as run does (--kernel). Needs root.`,
		Example: `  proxybench dump 1k-services --mode iptables --services 3
  proxybench dump my.yaml --mode nftables --implementation kube-proxy
  proxybench dump my.yaml --mode iptables --diff`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDump(cmd, args[0], f)
		},
	}
	cmd.Flags().StringVar(&f.mode, "mode", "", "the mode to dump: iptables, ipvs or nftables (required)")
	cmd.Flags().StringVar(&f.impl, "implementation", fidelity.Builtin, "builtin (proxybench's own proxier), kube-proxy (the real kube-proxy with a control plane), or both as builtin,kube-proxy (as run --implementation): one reading after the other")
	cmd.Flags().StringVar(&f.kubeProxy, "kube-proxy", "", "the kube-proxy binary for --implementation kube-proxy and --diff (default the scenario's first kubeProxy.binaries, else kube-proxy in $PROXYBENCH_KUBE_BIN, else beside proxybench, else in ./bin)")
	cmd.Flags().StringVar(&f.kernel, "kernel", "", "the kernel to run on instead of the scenario's (host, uml, uml:6.12, ...; default auto: the host when it can run the mode)")
	cmd.Flags().BoolVar(&f.diff, "diff", false, "run builtin and kube-proxy and print their normalised difference (exit 1 when a difference is not documented)")
	cmd.Flags().BoolVar(&f.normalise, "normalise", false, "print the reading normalised (one fact per line, as --diff compares it)")
	cmd.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "with a user-mode-linux guest: show its console")
	cmd.Flags().IntVar(&dumpServices, "services", 0, "number of services instead of the scenario's services.count")
	cmd.Flags().StringVar(&f.json, "json", "", "write the readings as JSON to this file (- for stdout) instead of printing them")
	_ = cmd.Flags().MarkHidden("json")
	cmd.Flags().StringVar(&kubeBinFlag, "kube-bin", "", "the folder holding kube-apiserver and etcd (default $PROXYBENCH_KUBE_BIN, else beside proxybench, else ./bin)")
	_ = cmd.Flags().MarkHidden("kube-bin")
	cmd.Flags().StringVar(&f.runID, "run-id", "", "run ID (6 hex characters; default random)")
	_ = cmd.Flags().MarkHidden("run-id")
	cmd.Flags().BoolVar(&f.guest, "guest", false, "this dump runs inside the user-mode-linux guest a dump on the host booted")
	_ = cmd.Flags().MarkHidden("guest")
	return cmd
}

// dumpServices is dump's --services, kubeBinFlag its hidden --kube-bin
// (the folder of kube-apiserver and etcd, passed to a guest).
var (
	dumpServices int
	kubeBinFlag  string
)

// kubeBinaries finds kube-proxy (flag, else the folder), kube-apiserver
// and etcd in the folder --kube-bin names (a guest's), else the one
// runner.FindKubeBin finds ($PROXYBENCH_KUBE_BIN, else beside
// proxybench, else ./bin). A missing one is bad input naming the fix.
func kubeBinaries(kubeProxyFlag string) (fidelity.KubeBinaries, error) {
	var b fidelity.KubeBinaries
	if kubeProxyFlag != "" {
		// The binary named is checked first: its error names the flag.
		if !isExecutableFile(kubeProxyFlag) {
			return b, fmt.Errorf("%s is not an executable file; fix: --kube-proxy: pass a kube-proxy binary, or build bin/kube-proxy with make kube", kubeProxyFlag)
		}
		b.KubeProxy, _ = filepath.Abs(kubeProxyFlag)
	}
	names := []string{"kube-apiserver", "etcd"}
	if kubeProxyFlag == "" {
		names = append([]string{"kube-proxy"}, names...)
	}
	dir := kubeBinFlag
	if dir == "" {
		var err error
		if dir, err = runner.FindKubeBin(names...); err != nil {
			return b, fmt.Errorf("--implementation kube-proxy runs %s, and no folder looked in holds them: %v; fix: run make kube in the checkout (it builds them into its bin/, where its bin/proxybench finds them from any folder), or set %s to the folder holding them",
				strings.Join(names, ", "), err, runner.KubeBinEnv)
		}
	}
	for _, n := range names {
		if p := filepath.Join(dir, n); !isExecutableFile(p) {
			return b, fmt.Errorf("%s is not an executable file; fix: build bin/%s with make kube (or set %s to the folder holding it)", p, n, runner.KubeBinEnv)
		}
	}
	dir, _ = filepath.Abs(dir)
	b.APIServer, b.Etcd = filepath.Join(dir, "kube-apiserver"), filepath.Join(dir, "etcd")
	if b.KubeProxy == "" {
		b.KubeProxy = filepath.Join(dir, "kube-proxy")
	}
	return b, nil
}

// isExecutableFile says whether p (symlinks followed) is a file with an
// execute bit.
func isExecutableFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// checkDump validates dump's input before anything is created: the mode,
// the implementation, root, the tools, the kube-proxy binaries. Every
// failure is bad input naming the flag and the fix.
func checkDump(cmd *cobra.Command, sc *scenarios.Scenario, f *dumpFlags) (fidelity.KubeBinaries, error) {
	var kb fidelity.KubeBinaries
	if f.mode == "" {
		return kb, fmt.Errorf("--mode is required; fix: --mode iptables, --mode ipvs or --mode nftables")
	}
	if !slices.Contains(dumpModes, f.mode) {
		return kb, fmt.Errorf("--mode %q: dump reads back the kernel rulesets of %s; fix: use one of them", f.mode, strings.Join(dumpModes, ", "))
	}
	for _, impl := range strings.Split(f.impl, ",") {
		if !slices.Contains(fidelity.Implementations, impl) {
			return kb, fmt.Errorf("--implementation %q: want builtin, kube-proxy or builtin,kube-proxy; fix: --implementation builtin (proxybench's own) or --implementation kube-proxy", f.impl)
		}
	}
	kubeProxy := slices.Contains(strings.Split(f.impl, ","), fidelity.KubeProxy)
	if f.diff && cmd.Flags().Changed("implementation") && !(kubeProxy && slices.Contains(strings.Split(f.impl, ","), fidelity.Builtin)) {
		return kb, fmt.Errorf("--diff compares both implementations, --implementation %q names one; fix: drop --implementation, or give builtin,kube-proxy", f.impl)
	}
	if f.diff && f.normalise {
		return kb, fmt.Errorf("--diff already prints the normalised comparison; fix: drop --normalise")
	}
	if cmd.Flags().Changed("kube-proxy") && !f.diff && !kubeProxy {
		return kb, fmt.Errorf("--kube-proxy is for --implementation kube-proxy or --diff; fix: add one of them, or drop --kube-proxy")
	}
	if os.Geteuid() != 0 {
		return kb, fmt.Errorf("dump needs root: it creates network namespaces and programs their rules; fix: run it as root")
	}
	m, _ := modes.Lookup(f.mode)
	need := dumpTools(f.mode)
	if m.Binaries != nil {
		need = append(need, m.Binaries(sc)...)
	}
	for _, b := range need {
		if _, err := exec.LookPath(b); err != nil {
			return kb, fmt.Errorf("--mode %s needs %s, which is not on PATH; fix: run make setup", f.mode, b)
		}
	}
	if f.diff || kubeProxy {
		if _, err := kubeproxy.PassFromScenario(sc, f.mode); err != nil {
			return kb, fmt.Errorf("kubeProxy.config: %w", err)
		}
		bin := f.kubeProxy
		if bin == "" && len(sc.KubeProxy.Binaries) > 0 {
			bin, _ = runner.ResolveKubeProxy(sc.KubeProxy.Binaries[0]) // the scenario's first kube-proxy
		}
		var err error
		if kb, err = kubeBinaries(bin); err != nil {
			return kb, err
		}
		v, err := kubeproxy.Version(cmd.Context(), kb.KubeProxy)
		if err != nil {
			return kb, fmt.Errorf("--kube-proxy: %w", err)
		}
		// kube-proxy's own check of the configuration, as run's.
		var ce *kubeproxy.ConfigError
		if err := kubeproxy.DryRun(cmd.Context(), kb.KubeProxy, f.mode, sc); errors.As(err, &ce) {
			return kb, sc.At(ce.Field, fmt.Sprintf("kube-proxy %s (%s) refuses it in mode %s: %s", v, kb.KubeProxy, f.mode, ce.Reason),
				"correct or remove that kubeProxy.config field for this kube-proxy version (its --help lists the feature gates it knows)")
		} else if err != nil {
			return kb, fmt.Errorf("--kube-proxy: %w", err)
		}
	}
	return kb, nil
}

func runDump(cmd *cobra.Command, arg string, f *dumpFlags) error {
	sc, err := runner.Catalog().Load(arg)
	if err != nil {
		return badInput(err)
	}
	if cmd.Flags().Changed("services") {
		sc.Services.Count = dumpServices
	}
	if cmd.Flags().Changed("kernel") {
		sc.Kernel = f.kernel
	}
	if f.mode != "" {
		// The flag is the culprit, not the scenario's modes line.
		if !slices.Contains(modes.Names(), f.mode) {
			return badInput(fmt.Errorf("--mode %q: unknown mode; fix: use one of %s", f.mode, strings.Join(modes.Names(), ", ")))
		}
		if slices.Contains(strings.Split(f.impl, ","), fidelity.KubeProxy) && !slices.Contains(scenarios.KubeProxyModes, f.mode) {
			return badInput(fmt.Errorf("--mode %s: kube-proxy has no mode %s (it has %s); fix: --mode one of those, or --implementation builtin",
				f.mode, f.mode, strings.Join(scenarios.KubeProxyModes, ", ")))
		}
		sc.Modes = []string{f.mode}
	}
	sc.Fallback = "" // dump shows the mode asked for, never a fallback
	// The implementations dumped are the scenario's for this command
	// (its kubeProxy block then applies to kube-proxy's).
	for _, impl := range strings.Split(f.impl, ",") {
		if !slices.Contains(fidelity.Implementations, impl) {
			return badInput(fmt.Errorf("--implementation %q: want builtin, kube-proxy or builtin,kube-proxy; fix: --implementation builtin (proxybench's own) or --implementation kube-proxy", f.impl))
		}
	}
	if f.diff {
		sc.Implementation = append([]string{}, fidelity.Implementations...)
	} else if f.impl != "" {
		sc.Implementation = strings.Split(f.impl, ",")
	}
	if err := sc.ValidateWith(runner.Catalog()); err != nil {
		return badInput(fmt.Errorf("after command-line overrides: %w", err))
	}
	kb, err := checkDump(cmd, sc, f)
	if err != nil {
		return badInput(err)
	}
	impls := slices.Compact(strings.Split(f.impl, ","))
	if f.diff {
		impls = fidelity.Implementations
	}
	ctx, _, stop := runSignals(cmd.Context())
	defer stop()
	runID := f.runID
	if runID == "" {
		runID = topology.NewRunID()
	}
	plan := runner.Plan{Targets: []runner.Target{{Name: "host", Modes: sc.Modes}}} // the guest dumpInGuest booted
	if !f.guest {
		if plan, err = runner.PlanKernels(ctx, sc, runID); err != nil {
			if runner.IsInput(err) {
				return badInput(err)
			}
			return &exitError{1, err}
		}
	}
	var target *runner.Target
	for i, t := range plan.Targets {
		if slices.Contains(t.Modes, f.mode) {
			target = &plan.Targets[i]
			break
		}
	}
	if target == nil {
		return badInput(fmt.Errorf("no kernel here runs mode %s (%s); fix: --kernel uml (make kernels builds one)", f.mode, plan.Why))
	}
	var readings []fidelity.Reading
	if target.UML != nil {
		readings, err = dumpInGuest(ctx, sc, f, target.UML, impls, kb, runID)
	} else {
		for _, impl := range impls {
			var r fidelity.Reading
			r, err = fidelity.Install(ctx, fidelity.Spec{RunID: runID, Scenario: sc, Mode: f.mode, Implementation: impl, Kube: kb, Guest: f.guest})
			if err != nil {
				err = fmt.Errorf("%s %s: %w", impl, f.mode, err)
				break
			}
			r.Implementation = impl
			readings = append(readings, r)
		}
	}
	if err != nil {
		code := 1
		if ctx.Err() != nil {
			code = 130
		}
		return &exitError{code, err}
	}
	for _, r := range readings {
		for _, n := range r.Notes {
			fmt.Fprintf(os.Stderr, "note: %s\n", n)
		}
	}
	if f.json != "" {
		b, err := json.Marshal(readings)
		if err != nil {
			return &exitError{1, err}
		}
		if f.json == "-" {
			_, err = os.Stdout.Write(b)
		} else {
			err = os.WriteFile(f.json, b, 0o644)
		}
		if err != nil {
			return &exitError{1, err}
		}
		return nil
	}
	return printDump(os.Stdout, f, target.Name, readings)
}

// printDump prints the readings (or, with --diff, their comparison).
func printDump(w io.Writer, f *dumpFlags, kernel string, readings []fidelity.Reading) error {
	if !f.diff {
		for _, r := range readings {
			fmt.Fprintf(w, "# proxybench dump: mode %s, implementation %s, kernel %s\n", r.Mode, r.Implementation, kernel)
			if f.normalise {
				r = fidelity.Normalise(r)
			}
			fmt.Fprint(w, r.String())
		}
		return nil
	}
	if len(readings) != 2 {
		return &exitError{1, fmt.Errorf("dump --diff: got %d readings, want builtin and kube-proxy", len(readings))}
	}
	b, k := readings[0], readings[1]
	fmt.Fprintf(w, "# proxybench dump --diff: mode %s, kernel %s; - builtin, + kube-proxy (normalised: docs/modes.md, \"Fidelity\")\n", b.Mode, kernel)
	fmt.Fprint(w, fidelity.Unified(b, k, fidelity.KnownDifferences))
	diffs := fidelity.Diff(b, k)
	unexplained, _ := fidelity.Explain(fidelity.KnownDifferences, b.Mode, diffs)
	fmt.Fprintf(w, "\n# %d differing lines", len(diffs))
	if len(diffs) > 0 {
		fmt.Fprintf(w, ": %s", strings.Join(fidelity.Summary(diffs), "; "))
	}
	fmt.Fprintln(w)
	if len(unexplained) > 0 {
		return &exitError{1, fmt.Errorf("%d differing lines are not documented differences (marked NOT DOCUMENTED above)", len(unexplained))}
	}
	return nil
}

// dumpInGuest runs this binary's dump (every implementation of impls, in
// one guest) in a user-mode-linux guest on kernel k and returns its
// readings (runner.RunCommandInUML; the guest prints them as JSON).
func dumpInGuest(ctx context.Context, sc *scenarios.Scenario, f *dumpFlags, k *uml.Kernel, impls []string, kb fidelity.KubeBinaries, runID string) ([]fidelity.Reading, error) {
	wd, err := uml.NewWorkDir(runID)
	if err != nil {
		return nil, err
	}
	defer wd.Remove()
	dir := wd.Path
	y, err := sc.YAML()
	if err != nil {
		return nil, err
	}
	scPath := filepath.Join(dir, "scenario.yaml")
	if err := os.WriteFile(scPath, y, 0o644); err != nil {
		return nil, err
	}
	args := []string{"dump", scPath, "--mode", f.mode, "--kernel", "host", "--guest", "--run-id", runID, "--json", "-"}
	mem := sc.UML.MemoryMiB
	if f.diff {
		args = append(args, "--diff")
	} else {
		args = append(args, "--implementation", strings.Join(impls, ","))
	}
	if slices.Contains(impls, fidelity.KubeProxy) {
		args = append(args, "--kube-proxy", kb.KubeProxy, "--kube-bin", filepath.Dir(kb.APIServer))
		mem = max(mem, 3072) // etcd, kube-apiserver and kube-proxy
	}
	var console io.Writer
	if f.verbose {
		console = os.Stderr
	}
	out, err := runner.RunCommandInUML(ctx, runner.GuestCommand{RunID: runID, Kernel: k, Args: args,
		Modules: runner.GuestModules(sc), MemoryMiB: mem, Timeout: sc.UML.Timeout.Duration, Console: console})
	if err != nil {
		return nil, err
	}
	if out.ExitCode != 0 {
		return nil, fmt.Errorf("dump in the user-mode-linux guest %s failed (exit %d); its console:\n%s", k.Name, out.ExitCode, tailLines(out.Guest.Log, 25))
	}
	var rs []fidelity.Reading
	if err := json.Unmarshal(out.Stdout, &rs); err != nil {
		return nil, fmt.Errorf("guest dump: %w", err)
	}
	return rs, nil
}

func tailLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
