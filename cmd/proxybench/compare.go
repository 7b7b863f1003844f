package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
)

// compareFormats are compare's --format values.
var compareFormats = []string{"text", "benchstat", "junit", "json"}

func newCompareCmd() *cobra.Command {
	var tolerance, format, output, gateFlag, kernels, rowsFlag string
	var alpha float64
	var failOnRegression, force, anySize, selfCheck bool
	cmd := &cobra.Command{
		Use:   "compare BASE.json... -- NEW.json...  |  compare BASE.json NEW.json  |  compare RUN.json --kernels A,B  |  compare RUN.json --rows A,B",
		Short: "Compare runs figure by figure across runs, with a rank test and a noise floor",
		Long: `compare judges every gate figure of the NEW runs against the BASE runs
across runs: each run gives one value per figure (lookup.latency.p50 and .p99,
lookup.vsnone.p50 and .p99, lookup.kernel.p50/.p90/.p99 and
lookup.kernel.other.p50/.p99, sync.full, sync.full.vsraw, sync.incremental,
cpu.perconn, cpu.vsnone, the churn and kube-proxy figures: the full list is
--gate's error on an unknown name; each computed from that run's own raw
samples), and the values of
the two sides are compared with the two-sided Mann-Whitney U test
(golang.org/x/perf/benchmath, as benchstat). A result may hold several runs
('run --count N'); several files per side are pooled. A change is flagged only
when p <= --alpha and it is larger than --tolerance. With fewer runs than the
test needs (4 per side at alpha 0.05) the verdict is "too few runs: need >= N
per side", never a guess. Each figure carries its noise floor: the smallest
change the spread between the base runs lets the test resolve.

--gate picks the figures whose regression fails the gate (exit 1 with
--fail-on-regression, failing JUnit testcases): all (default), ratios (the
figures measured against a baseline in the same run, which a noisy neighbour
moves least; docs/gates.md) or a list. The others are still shown.

--self-check reads the two sides as an A/A experiment (the same build measured
twice, e.g. 'make aa'): every flagged figure is a false alarm, and it prints
the false-alarm rate and the noise floor per figure.

Runs from different machines or kernels (hostname, kernel release, host or
uml, CPU model) are refused unless --force.

--kernels compares kernels instead of builds (the kernel-upgrade question):
with one result, --kernels A,B compares its modes on kernel A (base) with the
same modes on kernel B (new), e.g. --kernels uml:6.1,uml:6.12 (run it with
--count N for the rank test to judge); with two sides, --kernels A,B takes
kernel A of BASE and kernel B of NEW, and --kernels A kernel A of both.
Absolute guest figures are not host figures (syscalls cost ~25x more in a
guest): between the host and a guest kernel, read the vsnone figures.

--rows compares two rows of one run instead of builds (implementations and
kube-proxy versions): with one result, --rows A,B compares row A (base) with
row B (new), e.g. --rows "nftables (kube-proxy v1.36.3)","nftables (kube-proxy
v1.37.2)" or --rows nftables,"nftables (kube-proxy)" (builtin against
kube-proxy); with two sides, row A of BASE and row B of NEW. Both rows keep
their run's mode none as the baseline of the vsnone figures.

Exit codes: 0 no flagged regression (or --fail-on-regression not given),
1 a flagged regression of a gated figure with --fail-on-regression, 2 bad
input or refused runs.`,
		Example: `  proxybench run 1k-services --count 5 --output base.json   # before the change
  proxybench run 1k-services --count 5 --output new.json    # after
  proxybench compare base.json new.json --tolerance 5% --fail-on-regression
  proxybench compare --format benchstat base-*.json -- new-*.json   # flags before --
  proxybench compare base.json new.json --format junit --output compare.xml
  proxybench compare --self-check aa/a-*.json -- aa/b-*.json
  proxybench compare results/kernel-upgrade.json --kernels uml:6.1,uml:6.12
  proxybench compare results/kp.json --rows "nftables (kube-proxy v1.36.3)","nftables (kube-proxy v1.37.2)"`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(compareFormats, format) {
				return badInput(fmt.Errorf("--format %q: use one of %s", format, strings.Join(compareFormats, ", ")))
			}
			tol, err := parsePercent(tolerance)
			if err != nil {
				return badInput(fmt.Errorf("--tolerance: %w", err))
			}
			if alpha <= 0 || alpha >= 1 {
				return badInput(fmt.Errorf("--alpha %g: use a level in (0, 1) such as 0.05", alpha))
			}
			basePaths, newPaths := args, []string(nil)
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				basePaths, newPaths = args[:dash], args[dash:]
			} else if len(args) == 2 {
				basePaths, newPaths = args[:1], args[1:]
			}
			if kernels != "" && rowsFlag != "" {
				return badInput(fmt.Errorf("--kernels and --rows: give one of them"))
			}
			oneFile := len(args) == 1 && (kernels != "" || rowsFlag != "")
			if oneFile {
				newPaths = args // the same run, the other kernel
			}
			if len(basePaths) == 0 || len(newPaths) == 0 {
				return badInput(fmt.Errorf("give the base results, then --, then the new results (or exactly two results, or one result and --kernels A,B)"))
			}
			read := func(paths []string) ([]*reports.Result, error) {
				var rs []*reports.Result
				for _, p := range paths {
					r, err := reports.Read(p)
					if err != nil {
						return nil, err
					}
					if note := reports.PartialNote(r); note != "" {
						// Figures it holds are compared; missing ones are not.
						fmt.Fprintf(os.Stderr, "note: %s is a partial result: %s\n", p, strings.TrimPrefix(note, "PARTIAL RESULT: "))
					}
					rs = append(rs, r)
				}
				return reports.SplitRuns(rs), nil
			}
			base, err := read(basePaths)
			if err != nil {
				return badInput(err)
			}
			cur, err := read(newPaths)
			if err != nil {
				return badInput(err)
			}
			if kernels != "" {
				ks := strings.Split(kernels, ",")
				if len(ks) > 2 || (oneFile && len(ks) != 2) {
					return badInput(fmt.Errorf("--kernels %q: give two kernels A,B (one result), or one or two (two sides)", kernels))
				}
				a, b := strings.TrimSpace(ks[0]), strings.TrimSpace(ks[len(ks)-1])
				side := func(rs []*reports.Result, k string) ([]*reports.Result, error) {
					var out []*reports.Result
					for _, r := range rs {
						s, err := reports.KernelSide(r, k)
						if err != nil {
							return nil, fmt.Errorf("--kernels: %w", err)
						}
						out = append(out, s)
					}
					return out, nil
				}
				if base, err = side(base, a); err != nil {
					return badInput(err)
				}
				if cur, err = side(cur, b); err != nil {
					return badInput(err)
				}
				fmt.Fprintf(os.Stderr, "base: kernel %s (%s), new: kernel %s (%s)\n", a, base[0].Machine.Kernel, b, cur[0].Machine.Kernel)
				if (a == "host") != (b == "host") {
					fmt.Fprintln(os.Stderr, "note: one side ran on the host and one in a user-mode-linux guest; absolute figures differ by the guest's syscall cost, read the vsnone figures")
				}
			}
			if rowsFlag != "" {
				rs, err := csv.NewReader(strings.NewReader(rowsFlag)).Read()
				if err != nil || len(rs) != 2 {
					return badInput(fmt.Errorf("--rows %q: give two rows A,B (quote a name with a comma)", rowsFlag))
				}
				a, b := strings.TrimSpace(rs[0]), strings.TrimSpace(rs[1])
				as := a + " → " + b
				side := func(in []*reports.Result, row string) ([]*reports.Result, error) {
					var out []*reports.Result
					for _, r := range in {
						s, err := reports.RowSide(r, row, as)
						if err != nil {
							return nil, fmt.Errorf("--rows: %w", err)
						}
						out = append(out, s)
					}
					return out, nil
				}
				if base, err = side(base, a); err != nil {
					return badInput(err)
				}
				if cur, err = side(cur, b); err != nil {
					return badInput(err)
				}
				fmt.Fprintf(os.Stderr, "base: row %s, new: row %s\n", a, b)
			}
			for _, r := range append(base[1:], cur...) {
				if oneFile {
					break // two kernels of the same runs: one machine by construction
				}
				if err := reports.SameMachine(base[0], r); err != nil {
					if !force {
						return badInput(fmt.Errorf("%w; fix: compare runs of one machine, or pass --force to compare anyway", err))
					}
					fmt.Fprintf(os.Stderr, "warning (--force): %v\n", err)
					break
				}
			}
			gate, err := reports.ParseGate(gateFlag)
			if err != nil {
				return badInput(fmt.Errorf("--gate: %w", err))
			}
			opt := reports.CompareOptions{Tolerance: tol, Alpha: alpha, AnySize: anySize, Gate: gate}
			cs := reports.CompareRuns(base, cur, opt)
			if rowsFlag != "" {
				// The run's mode none is both sides' baseline, not a row compared.
				cs = slices.DeleteFunc(cs, func(c reports.Change) bool { return c.Mode == scenarios.BaselineMode })
			}
			if !slices.ContainsFunc(cs, reports.Change.Judged) {
				return badInput(fmt.Errorf("no figure is present on both sides (different modes, sizes or positions; --any-size matches different sizes)"))
			}
			err = writeTo(output, func(w io.Writer) error {
				switch {
				case selfCheck:
					return reports.WriteSelfCheck(w, cs, opt)
				case format == "benchstat":
					return reports.WriteBenchstat(w, cs, basePaths, newPaths)
				case format == "junit":
					return reports.WriteComparisonJUnit(w, cs, opt)
				case format == "json":
					return reports.WriteComparisonJSON(w, cs)
				}
				return reports.WriteComparison(w, cs, opt)
			})
			if err != nil {
				return err
			}
			if failOnRegression {
				for _, c := range cs {
					if c.Fails() {
						return &exitError{1, fmt.Errorf("regression: %s", c)}
					}
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&tolerance, "tolerance", "10%", "smallest relative change that is flagged (10% or 0.1)")
	cmd.Flags().Float64Var(&alpha, "alpha", 0.05, "significance level of the rank test")
	cmd.Flags().BoolVar(&failOnRegression, "fail-on-regression", false, "exit 1 when a gated figure has a flagged regression")
	cmd.Flags().StringVar(&gateFlag, "gate", "all", "figures whose regression fails the gate: all, ratios (lookup.vsnone.p50/.p99, sync.full.vsraw, cpu.vsnone) or a comma-separated list")
	cmd.Flags().BoolVar(&force, "force", false, "compare runs from different machines or kernels")
	cmd.Flags().BoolVar(&anySize, "any-size", false, "match figures whatever their service count (each side one size)")
	cmd.Flags().BoolVar(&selfCheck, "self-check", false, "read the sides as an A/A experiment: print the false-alarm rate and the noise floor per figure")
	cmd.Flags().StringVarP(&format, "format", "f", "text", "text, benchstat (its table, ~ and p-values), junit (one testcase per gated figure) or json")
	cmd.Flags().StringVarP(&output, "output", "o", "", "write to this file instead of stdout")
	cmd.Flags().StringVar(&rowsFlag, "rows", "", "compare rows: A,B of one result (e.g. nftables,\"nftables (kube-proxy)\" or two kube-proxy versions), or row A of BASE with row B of NEW")
	cmd.Flags().StringVar(&kernels, "kernels", "", "compare kernels: A,B of one result (e.g. uml:6.1,uml:6.12), or kernel A of BASE with B of NEW")
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
