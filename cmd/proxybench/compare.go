package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/proxybench/proxybench/reports"
)

func newCompareCmd() *cobra.Command {
	var tolerance, kernels string
	var failOnRegression, force bool
	var seed uint64
	cmd := &cobra.Command{
		Use:   "compare BASE.json NEW.json | compare RUN.json --kernels A,B",
		Short: "Compare two saved results, or two kernels of one result, figure by figure, with confidence intervals",
		Long: `compare matches every figure of NEW to BASE (by mode, size and position) and
prints the change of lookup.latency.p50, lookup.latency.p99 and sync.full
with a 95% percentile-bootstrap confidence interval computed from the raw
samples. A change is flagged only when it is both larger than --tolerance
and significant (the interval excludes no change). sync.full needs at least
5 repetitions per run to be judged.

Runs from different machines or kernels (hostname, kernel release, host or
uml, CPU model) are refused unless --force.

--kernels compares kernels instead of runs (the kernel-upgrade question):
with one result, --kernels A,B compares its modes on kernel A (base) with
the same modes on kernel B (new), e.g. --kernels uml:6.1,uml:6.12; with
two results, --kernels A,B takes kernel A of BASE and kernel B of NEW, and
--kernels A kernel A of both. Absolute guest figures are not host figures
(syscalls cost ~25x more in a guest): compare a host kernel with a guest
kernel through each report's ratios to none, not here.

Exit codes: 0 no flagged regression (or --fail-on-regression not given),
1 a regression with --fail-on-regression, 2 bad input or refused runs.`,
		Example: `  proxybench compare results/base.json results/new.json
  proxybench compare base.json new.json --tolerance 5% --fail-on-regression
  proxybench compare results/kernel-upgrade.json --kernels uml:6.1,uml:6.12`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			tol, err := parsePercent(tolerance)
			if err != nil {
				return badInput(fmt.Errorf("--tolerance: %w", err))
			}
			base, err := reports.Read(args[0])
			if err != nil {
				return badInput(err)
			}
			cur := base
			if len(args) == 2 {
				if cur, err = reports.Read(args[1]); err != nil {
					return badInput(err)
				}
			}
			oneRun := len(args) == 1
			if kernels != "" {
				ks := strings.Split(kernels, ",")
				if len(ks) > 2 || (oneRun && len(ks) != 2) {
					return badInput(fmt.Errorf("--kernels %q: give two kernels A,B (one result), or one or two (two results)", kernels))
				}
				a, b := strings.TrimSpace(ks[0]), strings.TrimSpace(ks[len(ks)-1])
				if base, err = reports.KernelSide(base, a); err != nil {
					return badInput(fmt.Errorf("--kernels: %w", err))
				}
				if cur, err = reports.KernelSide(cur, b); err != nil {
					return badInput(fmt.Errorf("--kernels: %w", err))
				}
				fmt.Fprintf(os.Stdout, "base: kernel %s (%s), new: kernel %s (%s)\n\n", a, base.Machine.Kernel, b, cur.Machine.Kernel)
				if (a == "host") != (b == "host") {
					fmt.Fprintln(os.Stderr, "note: one side ran on the host and one in a user-mode-linux guest; absolute figures differ by the guest's syscall cost, compare the reports' ratios to none instead")
				}
			} else if oneRun {
				return badInput(fmt.Errorf("compare needs two results, or one result and --kernels A,B"))
			}
			// Two kernels of one run share the machine by construction.
			if err := reports.SameMachine(base, cur); err != nil && !oneRun {
				if !force {
					return badInput(fmt.Errorf("%w; fix: compare runs of one machine, or pass --force to compare anyway", err))
				}
				fmt.Fprintf(os.Stderr, "warning (--force): %v\n", err)
			}
			opt := reports.CompareOptions{Tolerance: tol, Seed: seed}
			cs := reports.Compare(base, cur, opt)
			if len(cs) == 0 {
				return badInput(fmt.Errorf("no figure is present in both runs (different modes, sizes or positions)"))
			}
			if err := reports.WriteComparison(os.Stdout, cs, opt); err != nil {
				return &exitError{1, err}
			}
			if failOnRegression {
				for _, c := range cs {
					if c.Regression() {
						return &exitError{1, fmt.Errorf("regression: %s of %s at %d services %s changed %+.1f%%", c.Figure, c.Mode, c.Services, c.Position, (c.Ratio-1)*100)}
					}
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&tolerance, "tolerance", "10%", "smallest relative change that is flagged (10% or 0.1)")
	cmd.Flags().BoolVar(&failOnRegression, "fail-on-regression", false, "exit 1 when a regression is flagged")
	cmd.Flags().BoolVar(&force, "force", false, "compare runs from different machines or kernels")
	cmd.Flags().StringVar(&kernels, "kernels", "", "compare kernels: A,B of one result (e.g. uml:6.1,uml:6.12), or of BASE and NEW")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "bootstrap resampling seed")
	return cmd
}

// parsePercent reads "10%" or "0.1" as 0.1.
func parsePercent(s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(t, "%"), 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a percentage such as 10%%", s)
	}
	if pct {
		v /= 100
	}
	if v < 0 || v >= 10 {
		return 0, fmt.Errorf("%q is out of range; use 0%%..1000%%", s)
	}
	return v, nil
}
