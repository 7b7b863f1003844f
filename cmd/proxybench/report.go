package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/proxybench/proxybench/internal/runner"
	"github.com/proxybench/proxybench/reports"
)

func newReportCmd() *cobra.Command {
	var format, output string
	b := reports.DefaultBudgets
	cmd := &cobra.Command{
		Use:   "report RESULT.json",
		Short: "Render a saved result as md, html, csv, junit, gobench or openmetrics",
		Long: `report renders a result written by 'proxybench run' without rerunning
anything; every figure is recomputed from the raw samples in the file.

  md       the run's Markdown tables, one finding per mode and, for a sweep,
           the capacity plan
  html     one self-contained page with inline SVG plots (gonum/plot): findings,
           capacity fits and answer, lookup latency per position, CDFs, sync
           phases, endpoint shares, programming latency when measured
  csv      one row per figure: mode,services,position,figure,value,unit,n
  junit    JUnit XML, one testcase per figure
  gobench  Go benchmark lines (one per repetition) for benchstat old.txt new.txt
  openmetrics
           OpenMetrics text exposition (Prometheus): proxybench's sync and
           programming histograms in kube-proxy's buckets
           (proxybench_sync_full_duration_seconds, ...), a kube-proxy row's
           own scraped metrics (proxybench_kubeproxy_scraped_*), connect
           time histograms, and one gauge per figure (proxybench_*)

For a sweep, --budget-p99 and --budget-sync set the capacity question: the
largest service count whose fitted p99 lookup latency (position last) and
full sync time stay within them.`,
		Example: `  proxybench report results/10k-services-20250101T000000Z.json --format html --output report.html
  proxybench report sweep.json --format md --budget-p99 1ms --budget-sync 2s
  proxybench report old.json --format gobench > old.txt
  proxybench report r.json --format openmetrics > r.prom`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(reports.Formats, format) {
				return badInput(fmt.Errorf("--format %q: use one of %s", format, strings.Join(reports.Formats, ", ")))
			}
			if b.P99 <= 0 || b.Sync <= 0 {
				return badInput(fmt.Errorf("--budget-p99 and --budget-sync must be positive durations such as 2ms and 5s"))
			}
			r, err := reports.Read(args[0])
			if err != nil {
				return badInput(err)
			}
			runner.FillTraits(r) // a result written before rows recorded their mode's traits
			return writeTo(output, func(w io.Writer) error {
				return reports.WriteFormat(w, r, format, reports.ReportOptions{Budgets: b})
			})
		},
	}
	cmd.Flags().StringVarP(&format, "format", "f", "md", "md, html, csv, junit, gobench or openmetrics")
	cmd.Flags().StringVarP(&output, "output", "o", "", "write to this file instead of stdout")
	cmd.Flags().DurationVar(&b.P99, "budget-p99", b.P99, "capacity budget for p99 lookup latency at position last")
	cmd.Flags().DurationVar(&b.Sync, "budget-sync", b.Sync, "capacity budget for full sync wall time")
	return cmd
}

// writeTo runs fn on path (created or truncated) or, when path is empty,
// on stdout. Failures are exit 1.
func writeTo(path string, fn func(io.Writer) error) error {
	if path == "" {
		w := bufio.NewWriter(os.Stdout)
		if err := fn(w); err != nil {
			return &exitError{1, err}
		}
		if err := w.Flush(); err != nil {
			return &exitError{1, err}
		}
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return &exitError{1, err}
	}
	w := bufio.NewWriter(f)
	err = fn(w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return &exitError{1, fmt.Errorf("write %s: %w", path, err)}
	}
	return nil
}
