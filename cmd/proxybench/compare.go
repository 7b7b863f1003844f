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
	var tolerance string
	var failOnRegression, force bool
	var seed uint64
	cmd := &cobra.Command{
		Use:   "compare BASE.json NEW.json",
		Short: "Compare two saved results figure by figure, with confidence intervals",
		Long: `compare matches every figure of NEW to BASE (by mode, size and position) and
prints the change of lookup.latency.p50, lookup.latency.p99 and sync.full
with a 95% percentile-bootstrap confidence interval computed from the raw
samples. A change is flagged only when it is both larger than --tolerance
and significant (the interval excludes no change). sync.full needs at least
5 repetitions per run to be judged.

Runs from different machines or kernels (hostname, kernel release, host or
uml, CPU model) are refused unless --force.

Exit codes: 0 no flagged regression (or --fail-on-regression not given),
1 a regression with --fail-on-regression, 2 bad input or refused runs.`,
		Example: `  proxybench compare results/base.json results/new.json
  proxybench compare base.json new.json --tolerance 5% --fail-on-regression`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			tol, err := parsePercent(tolerance)
			if err != nil {
				return badInput(fmt.Errorf("--tolerance: %w", err))
			}
			base, err := reports.Read(args[0])
			if err != nil {
				return badInput(err)
			}
			cur, err := reports.Read(args[1])
			if err != nil {
				return badInput(err)
			}
			if err := reports.SameMachine(base, cur); err != nil {
				if !force {
					return badInput(fmt.Errorf("%w; fix: compare runs of one machine, or pass --force to compare anyway", err))
				}
				fmt.Fprintf(os.Stderr, "warning (--force): %v\n", err)
			}
			for i, r := range []*reports.Result{base, cur} {
				if note := reports.PartialNote(r); note != "" {
					// Figures it holds are compared; missing ones are not.
					fmt.Fprintf(os.Stdout, "note: %s is a partial result: %s\n\n", args[i], strings.TrimPrefix(note, "PARTIAL RESULT: "))
				}
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
