package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/sim"
)

type calibrateFlags struct {
	output      string
	kernel      string
	sizes       string
	modes       string
	connections int
	repetitions int
	backend     string
	keep        string
	impl        string
	from        string
	nodes       int
}

func newCalibrateCmd() *cobra.Command {
	f := &calibrateFlags{}
	cmd := &cobra.Command{
		Use:   "calibrate",
		Short: "Measure this machine's kernel costs for the sim engine and write a calibration file",
		Long: `calibrate runs small real scenarios on this machine (by executing this
binary's run command, so it needs root) at a few service counts, and fits,
with gonum's stat.LinearRegression, the costs the sim engine turns counts
into time with: connect latency per KUBE-SERVICES rule walked (iptables,
first to last service), the constant lookup overhead of each mode over mode
none (nftables map lookup, IPVS hash lookup, userspace accept and copy),
full sync time per object programmed (restored rule, nft object, netlink
object) and per byte, incremental sync time against the table size, and
mode none's connect-time distribution (the noise model). The file records
the machine, kernel and iptables back end. --kernel uml runs the guest
kernel, which has IP_VS, so ipvs can be calibrated (slowly).`,
		Example: `  proxybench calibrate --output calibration.json
  proxybench calibrate --kernel uml --modes none,iptables,ipvs --sizes 1000,3000 --output uml.json
  proxybench run 10k-services --engine sim --calibration calibration.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			sizes, err := parseSizes(f.sizes)
			if err != nil {
				return badInput(err)
			}
			switch f.impl {
			case scenarios.ImplBuiltin:
				if f.from != "" {
					return badInput(fmt.Errorf("--from: only with --implementation kube-proxy; fix: add --implementation kube-proxy, or drop --from"))
				}
			case scenarios.ImplKubeProxy:
				if !cmd.Flags().Changed("sizes") {
					sizes = []int{1000, 3000} // a 10k kube-proxy row takes minutes per sync size on 2 cores
				}
				return calibrateKubeProxy(cmd, f, sizes)
			default:
				return badInput(fmt.Errorf("--implementation %q: calibrate knows builtin and kube-proxy; fix: --implementation builtin or --implementation kube-proxy", f.impl))
			}
			if os.Geteuid() != 0 {
				return badInput(fmt.Errorf("calibrate needs root: it runs real scenarios (network namespaces); fix: run it as root"))
			}
			dir, removeDir, err := calibrationDir(f.keep)
			if err != nil {
				return &exitError{1, err}
			}
			defer removeDir()
			var results []*reports.Result
			for _, n := range sizes {
				r, err := realRun(cmd.Context(), dir, calibrationScenario(n, f), n, "")
				if err != nil {
					return &exitError{1, fmt.Errorf("calibrate at %d services: %w", n, err)}
				}
				results = append(results, r)
			}
			cal, err := sim.FitCalibration(results, modes.All)
			if err != nil {
				return &exitError{1, err}
			}
			sim.EstimateMissing(cal, modes.All)
			cal.Source = f.output
			if err := cal.Write(f.output); err != nil {
				return &exitError{1, fmt.Errorf("write calibration: %w", err)}
			}
			printCalibration(cal)
			fmt.Printf("calibration: %s\n", f.output)
			return nil
		},
	}
	cmd.Flags().StringVar(&f.output, "output", "calibration.json", "calibration file to write")
	cmd.Flags().StringVar(&f.kernel, "kernel", "host", "where to measure: host or uml (the guest kernel, with IP_VS)")
	cmd.Flags().StringVar(&f.sizes, "sizes", "1000,3000,10000", "service counts to measure at (--implementation kube-proxy: default 1000,3000)")
	cmd.Flags().StringVar(&f.modes, "modes", "none,iptables,nftables,userspace", "modes to calibrate (none is always added: it is the baseline)")
	cmd.Flags().IntVar(&f.connections, "connections", 1000, "connections per position and repetition")
	cmd.Flags().IntVar(&f.repetitions, "repetitions", 3, "repetitions of each sync and traffic phase")
	cmd.Flags().StringVar(&f.backend, "iptables-backend", "legacy", "iptables back end: legacy or nft")
	cmd.Flags().StringVar(&f.keep, "keep", "", "keep the scenarios and real results in this folder")
	cmd.Flags().StringVar(&f.impl, "implementation", scenarios.ImplBuiltin, "whose costs to measure: builtin (proxybench's proxiers) or kube-proxy (the real kube-proxy's own sync costs and watch delivery, added to --output's file under implementations)")
	cmd.Flags().StringVar(&f.from, "from", "", "with --implementation kube-proxy: fit from these saved results of kube-proxy rows (comma-separated files) instead of running them")
	cmd.Flags().IntVar(&f.nodes, "nodes", 3, "with --implementation kube-proxy: nodes of the run that measures the watch delivery (2..64)")
	return cmd
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--sizes: %q is not a positive service count; fix: write counts such as 1000,3000,10000", p)
		}
		out = append(out, n)
	}
	return out, nil
}

// calibrationScenario is the YAML of the real run at n services.
func calibrationScenario(n int, f *calibrateFlags) string {
	modes := strings.Split(f.modes, ",")
	if !contains(modes, scenarios.BaselineMode) {
		modes = append([]string{scenarios.BaselineMode}, modes...)
	}
	return fmt.Sprintf(`name: calibrate-%d
description: proxybench calibrate at %d services
seed: 1
repetitions: %d
modes: [%s]
kernel: %s
services:
  count: %d
  endpoints:
    count: 3
traffic:
  connections: %d
  concurrency: 4
  positions: [first, middle, last]
iptables:
  backend: %s
`, n, n, f.repetitions, strings.Join(modes, ", "), f.kernel, n, f.connections, f.backend)
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// realRun writes scenario (YAML, or empty to use scenarioArg) to dir and
// runs it for real by executing this binary's run command, with extra
// arguments; it returns the result. Progress goes to stderr.
func realRun(ctx context.Context, dir, scenario string, n int, scenarioArg string, extra ...string) (*reports.Result, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	arg := scenarioArg
	if scenario != "" {
		arg = filepath.Join(dir, fmt.Sprintf("calibrate-%d.yaml", n))
		if err := os.WriteFile(arg, []byte(scenario), 0o644); err != nil {
			return nil, err
		}
	}
	out := filepath.Join(dir, fmt.Sprintf("real-%d.json", n))
	args := append([]string{"run", arg, "--quiet", "--output", out}, extra...)
	fmt.Fprintf(os.Stderr, "real run: proxybench %s\n", strings.Join(args, " "))
	c := exec.CommandContext(ctx, self, args...)
	c.Stdout, c.Stderr = nil, os.Stderr
	if err := c.Run(); err != nil {
		return nil, fmt.Errorf("proxybench %s: %w", strings.Join(args, " "), err)
	}
	return reports.Read(out)
}

func printCalibration(c *sim.Calibration) {
	fmt.Printf("machine %s, kernel %s (%s), iptables back end %s, sizes %v\n", c.Machine, c.Kernel, c.KernelWhere, c.IPTablesBackend, c.Sizes)
	fmt.Printf("mode none connect time: p50 %.1f µs, p99 %.1f µs\n", c.BaseQuantilesNs[50]/1e3, c.BaseQuantilesNs[len(sim.QuantileProbs)-8]/1e3)
	for _, md := range modes.All {
		m := md.Name
		mc, ok := c.Modes[m]
		if !ok || md.Direct {
			continue
		}
		fmt.Printf("%-9s lookup +%.1f µs, %.2f ns/rule walked, %.3f ns/service; full sync %s a=%.3g b=%.3g (rms %.1f%%), %.1f ns/byte; incremental a=%.3g b=%.3g; %.1f objects/change\n",
			m, mc.LookupOverheadNs/1e3, mc.PerRuleNs, mc.PerServiceNs, mc.Full.Form, mc.Full.A, mc.Full.B, 100*mc.Full.RMSRel, mc.PerByteNs,
			mc.Incremental.A, mc.Incremental.B, mc.ObjectsPerChange)
	}
}

// calibrationDir is the folder calibrate's runs write their results and
// logs to: keep (created if missing) when set, else a new temporary
// folder that remove deletes; remove does nothing for keep.
func calibrationDir(keep string) (dir string, remove func(), err error) {
	if keep != "" {
		return keep, func() {}, os.MkdirAll(keep, 0o755)
	}
	if dir, err = os.MkdirTemp("", "proxybench-calibrate"); err != nil {
		return "", nil, err
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}
