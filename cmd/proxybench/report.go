package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/proxybench/proxybench/internal/runner"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/topology"
)

func newReportCmd() *cobra.Command {
	var format, output string
	b := reports.DefaultBudgets
	cmd := &cobra.Command{
		Use:   "report RESULT.json|STREAM.jsonl",
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

A soak's stream (<result>/soak/<row>.jsonl, one line per interval, written
as measured) renders on its own: give the stream, the artifact folder, or
the result path of a run that was killed before writing its result (its
folder's streams are rendered). A stream cut by a kill or crash is read up
to its last whole line and marked cut ("stream ends at 00:12:40 of 1h: the
run was killed or crashed").

For a sweep, --budget-p99 and --budget-sync set the capacity question: the
largest service count whose fitted p99 lookup latency (position last) and
full sync time stay within them.`,
		Example: `  proxybench report results/10k-services-20250101T000000Z.json --format html --output report.html
  proxybench report sweep.json --format md --budget-p99 1ms --budget-sync 2s
  proxybench report old.json --format gobench > old.txt
  proxybench report r.json --format openmetrics > r.prom
  proxybench report results/soak-20250101T000000Z/soak/iptables.jsonl --format html --output soak.html`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(reports.Formats, format) {
				return badInput(fmt.Errorf("--format %q: use one of %s", format, strings.Join(reports.Formats, ", ")))
			}
			if b.P99 <= 0 || b.Sync <= 0 {
				return badInput(fmt.Errorf("--budget-p99 and --budget-sync must be positive durations such as 2ms and 5s"))
			}
			r, note, err := readForReport(args[0])
			if err != nil {
				return badInput(err)
			}
			if note != "" {
				fmt.Fprintln(os.Stderr, "note: "+note)
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

// readForReport reads what report renders at path: a result, a soak
// stream (reports.IsSoakStream), a run's artifact folder holding soak
// streams, or the result path of a run killed before it wrote its
// result whose artifact folder (the path without .json) holds soak
// streams. note says what was rendered instead of a result.
func readForReport(path string) (*reports.Result, string, error) {
	streams := func(paths []string) (*reports.Result, error) {
		var srs []*reports.SoakResult
		for _, p := range paths {
			sr, err := reports.ReadSoakStream(p)
			if err != nil {
				return nil, err
			}
			sr.Live = sr.End == nil && runLive(sr.Header.RunID)
			srs = append(srs, sr)
		}
		return reports.ResultFromSoakStreams(srs)
	}
	if reports.IsSoakStream(path) {
		r, err := streams([]string{path})
		return r, "", err
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		ps := reports.SoakStreams(path)
		if len(ps) == 0 {
			return nil, "", fmt.Errorf("%s is a folder without soak streams; fix: give a result file, a soak stream, or a run's artifact folder with soak/*.jsonl or slicechurn/*.jsonl", path)
		}
		r, err := streams(ps)
		return r, "rendering the soak streams of " + path + ": " + strings.Join(ps, ", "), err
	}
	r, err := reports.Read(path)
	if errors.Is(err, fs.ErrNotExist) {
		dir := strings.TrimSuffix(path, ".json")
		if ps := reports.SoakStreams(dir); len(ps) > 0 && dir != path {
			r, err := streams(ps)
			return r, fmt.Sprintf("no result at %s (the run did not finish): rendering its soak streams %s", path, strings.Join(ps, ", ")), err
		}
	}
	return r, "", err
}

// runLive reports whether run id is still going: a namespace of its
// testbed is in use (topology.LiveRuns).
func runLive(id string) bool {
	names, _ := topology.Leftovers()
	var mine []string
	for _, n := range names {
		if topology.RunIDOf(n) == id {
			mine = append(mine, n)
		}
	}
	return len(mine) > 0 && topology.LiveRuns(mine)[id]
}
