//go:build linux

package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/uml"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
)

// TestGuestPlanRoundTrip: a plan written for the guest reads back as the
// same scenario (overrides, kube-proxy rows and modes included) and the
// same options, where: the guest; a plan with an unknown field or no
// output is bad input.
func TestGuestPlanRoundTrip(t *testing.T) {
	sc, err := Catalog().Load("1k-services")
	if err != nil {
		t.Fatal(err)
	}
	sc.Services.Count, sc.Seed, sc.Runs = 123, 7, 3
	sc.Modes = []string{"none", "iptables"}
	sc.Implementation = []string{scenarios.ImplBuiltin, scenarios.ImplKubeProxy}
	sc.KubeProxy.Binaries = []string{"/opt/kube-proxy-v1.36.3"}
	sc.Kernel = "uml:6.12"
	if err := sc.ValidateWith(Catalog()); err != nil {
		t.Fatal(err)
	}
	o := Options{RunID: "3fa9c1", Version: "v9", Where: WhereGuest, Checkpoint: "/mnt/pb/checkpoint.json", ArtifactDir: "/mnt/pb/result", ServiceTypesModes: []string{"ipvs"}}
	p, err := NewGuestPlan(sc, o, "/opt/kube/bin", "/mnt/pb/result.json")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := p.Write(path); err != nil {
		t.Fatal(err)
	}
	back, err := ReadGuestPlan(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.KubeBin != "/opt/kube/bin" || back.Output != "/mnt/pb/result.json" || !slices.Equal(back.Modes, sc.Modes) {
		t.Errorf("plan read back: %+v", back)
	}
	got, gotO, err := back.Load()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(sc)
	if b, _ := json.Marshal(got); string(b) != string(want) {
		t.Errorf("scenario read back:\n%s\nwant:\n%s", b, want)
	}
	if gotO.RunID != o.RunID || gotO.Version != o.Version || gotO.Where != WhereGuest || gotO.Checkpoint != o.Checkpoint || gotO.ArtifactDir != o.ArtifactDir ||
		!slices.Equal(gotO.ServiceTypesModes, o.ServiceTypesModes) {
		t.Errorf("options read back %+v, want %+v", gotO, o)
	}

	// The plan's modes are the target's: they override the scenario's.
	back.Modes = []string{"iptables"}
	if got, _, err := back.Load(); err != nil || !slices.Equal(got.Modes, back.Modes) {
		t.Errorf("modes %v (%v), want the plan's %v", got.Modes, err, back.Modes)
	}

	for name, body := range map[string]string{
		"unknown field": `{"scenario": "modes: [none]\n", "runID": "3fa9c1", "output": "/x", "shell": "rm"}`,
		"no output":     `{"scenario": "modes: [none]\n", "runID": "3fa9c1"}`,
	} {
		bad := filepath.Join(t.TempDir(), "plan.json")
		if err := os.WriteFile(bad, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadGuestPlan(bad); !IsInput(err) {
			t.Errorf("%s: err %v, want bad input", name, err)
		}
	}
}

// fakeTargets is a targetFunc that measures nothing: each call returns a
// result with one row per mode, a section row per mode, and fail's
// error when fail says so for (run ID order, target).
type fakeTargets struct {
	calls []Options
	runs  []string // run IDs in order of first use
	fail  func(run int, t Target, r *reports.Result) error
}

func (f *fakeTargets) run(ctx context.Context, sc *scenarios.Scenario, o Options, console io.Writer, t Target) (*reports.Result, error) {
	f.calls = append(f.calls, o)
	if !slices.Contains(f.runs, o.RunID) {
		f.runs = append(f.runs, o.RunID)
	}
	k := slices.Index(f.runs, o.RunID)
	now := time.Now()
	r := &reports.Result{RunID: o.RunID, Started: now, Finished: now, Machine: reports.Machine{Kernel: "6.18", CPUs: 2}, Scenario: sc}
	sec := reports.Section{Phase: "fake", Title: "fake phase"}
	for _, m := range sc.Modes {
		r.Modes = append(r.Modes, reports.ModeResult{Mode: m, Kernel: string(o.Where)})
		sec.Rows = append(sec.Rows, reports.SectionRow{Row: m})
	}
	r.Sections = []reports.Section{sec}
	if f.fail != nil {
		if err := f.fail(k, t, r); err != nil {
			return r, err
		}
	}
	return r, nil
}

func (f *fakeTargets) fn() targetFunc { return f.run }

// splitPlan is a plan of two targets: the host and a guest kernel.
func splitPlan() Plan {
	return Plan{Why: "test", Targets: []Target{
		{Name: "host", Modes: []string{"none", "iptables"}},
		{Name: "uml:6.12", UML: &uml.Kernel{Name: "uml:6.12", Source: "make kernels"}, Modes: []string{"none", "ipvs"}},
	}}
}

// TestExecuteBuildsMoreRuns: with runs: 3, Execute runs the plan three
// times, each with its own run ID and artifact folder, and builds one
// result: run 1's rows (every target's, named by kernel) and merged
// sections, runs 2 and 3 in MoreRuns with theirs.
func TestExecuteBuildsMoreRuns(t *testing.T) {
	sc := &scenarios.Scenario{Modes: []string{"none", "iptables", "ipvs"}, Runs: 3}
	f := &fakeTargets{}
	var console strings.Builder
	res, err := execute(context.Background(), sc, splitPlan(), Options{RunID: "aaaaaa", ArtifactDir: "/tmp/r"}, &console, f.fn())
	if err != nil {
		t.Fatal(err)
	}
	if len(f.runs) != 3 || f.runs[0] != "aaaaaa" || f.runs[1] == f.runs[0] || f.runs[2] == f.runs[1] {
		t.Errorf("run IDs %v, want aaaaaa then two new ones", f.runs)
	}
	var dirs []string
	for _, o := range f.calls {
		dirs = append(dirs, o.ArtifactDir)
	}
	if want := []string{"/tmp/r", "/tmp/r", "/tmp/r-run2", "/tmp/r-run2", "/tmp/r-run3", "/tmp/r-run3"}; !slices.Equal(dirs, want) {
		t.Errorf("artifact folders %v, want %v", dirs, want)
	}
	rows := func(ms []reports.ModeResult) string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Mode+"@"+m.Kernel)
		}
		return strings.Join(out, " ")
	}
	const want = "none@host iptables@host none@uml:6.12 ipvs@uml:6.12"
	if got := rows(res.Modes); got != want || res.RunID != "aaaaaa" || res.Partial != "" || res.Scenario != sc {
		t.Errorf("run 1: rows %s, run %s, partial %q; want %s", got, res.RunID, res.Partial, want)
	}
	if len(res.Sections) != 1 || len(res.Sections[0].Rows) != 4 {
		t.Errorf("run 1 sections %+v, want one with both targets' 4 rows", res.Sections)
	}
	if len(res.Kernels) != 2 || res.Kernels[1].Where != "uml" || res.Machine.KernelWhere != "host+uml:6.12" {
		t.Errorf("kernels %+v (%s), want host and uml:6.12", res.Kernels, res.Machine.KernelWhere)
	}
	if len(res.MoreRuns) != 2 {
		t.Fatalf("more runs %d, want 2", len(res.MoreRuns))
	}
	for i, r := range res.MoreRuns {
		if r.RunID != f.runs[i+1] || rows(r.Modes) != want || len(r.Sections) != 1 || len(r.Sections[0].Rows) != 4 {
			t.Errorf("run %d: %s rows %s, sections %+v", i+2, r.RunID, rows(r.Modes), r.Sections)
		}
	}
	if !strings.Contains(console.String(), "run 3 of 3 ("+f.runs[2]+")") {
		t.Errorf("console %q does not name the runs", console.String())
	}
}

// TestExecuteMergesServiceTypes: in a split run the guest target
// measures the serviceTypes cells of its own modes only (not the bridge
// and baseline the host measured), and the result holds both targets'
// cells, health answers and errors, each marked with its kernel, the
// guest's rows labelled with it in the report.
func TestExecuteMergesServiceTypes(t *testing.T) {
	sc := &scenarios.Scenario{Modes: []string{"none", "iptables", "nftables", "ipvs"}}
	plan := Plan{Why: "test", Targets: []Target{
		{Name: "host", Modes: []string{"none", "iptables", "nftables"}},
		{Name: "uml:6.12", UML: &uml.Kernel{Name: "uml:6.12"}, Modes: []string{"none", "iptables", "ipvs"}, Bridge: "iptables", Baseline: "none"},
	}}
	f := &fakeTargets{}
	f.fail = func(run int, tg Target, r *reports.Result) error {
		st := &reports.ServiceTypes{}
		for _, m := range r.Scenario.Modes {
			o := f.calls[len(f.calls)-1]
			if m == "none" || (o.ServiceTypesModes != nil && !slices.Contains(o.ServiceTypesModes, m)) {
				continue
			}
			row := m + " (builtin)"
			st.Cells = append(st.Cells, reports.ServiceCell{Row: row, Path: "nodePort", Attempts: 1, OK: 1, Expected: reports.Expected{Reachable: true, Why: "w"}})
			st.Health = append(st.Health, reports.HealthAnswer{Row: row, Status: 200, WantStatus: 200})
		}
		if tg.UML != nil {
			st.Errors = []reports.ServiceTypesError{{Row: "ipvs (kube-proxy v1.37.2)", Err: "no"}}
		}
		r.ServiceTypes = st
		return nil
	}
	res, err := execute(context.Background(), sc, plan, Options{}, nil, f.fn())
	if err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 2 || f.calls[0].ServiceTypesModes != nil || !slices.Equal(f.calls[1].ServiceTypesModes, []string{"ipvs"}) {
		t.Fatalf("serviceTypes modes per target: %v, %v; want every mode on the host, ipvs in the guest", f.calls[0].ServiceTypesModes, f.calls[1].ServiceTypesModes)
	}
	st := res.ServiceTypes
	var got []string
	for _, c := range st.Cells {
		got = append(got, c.Row+"@"+c.Kernel)
	}
	if want := "iptables (builtin)@host nftables (builtin)@host ipvs (builtin)@uml:6.12"; strings.Join(got, " ") != want {
		t.Errorf("cells %v, want %s", got, want)
	}
	if len(st.Health) != 3 || st.Health[2].Kernel != "uml:6.12" || len(st.Errors) != 1 || st.Errors[0].Kernel != "uml:6.12" {
		t.Errorf("health %+v errors %+v, want 3 answers and the guest's error, marked uml:6.12", st.Health, st.Errors)
	}
	secs := reports.ServiceTypesSections(st)
	if len(secs) != 3 || secs[0].Rows[2].Row != "ipvs (builtin) on uml:6.12" || secs[0].Rows[0].Row != "iptables (builtin)" ||
		!strings.Contains(strings.Join(secs[0].Notes, " "), "ipvs (kube-proxy v1.37.2) on uml:6.12: error") {
		t.Errorf("report rows %q, %q; notes %q", secs[0].Rows[0].Row, secs[0].Rows[2].Row, secs[0].Notes)
	}
}

// TestServiceTypesModes: the modes a target measures serviceTypes cells
// of: every mode (nil) on the host and in a guest running alone; a guest
// beside the host leaves its bridge and baseline out, and keeps to a
// wanted list.
func TestServiceTypesModes(t *testing.T) {
	k := &uml.Kernel{Name: "uml:6.12"}
	for _, tc := range []struct {
		name string
		want []string
		t    Target
		out  []string
	}{
		{"host", nil, Target{Name: "host", Modes: []string{"none", "iptables"}}, nil},
		{"guest alone", nil, Target{Name: "uml:6.12", UML: k, Modes: []string{"none", "iptables", "ipvs"}}, nil},
		{"guest beside the host", nil, Target{UML: k, Modes: []string{"none", "iptables", "ipvs"}, Bridge: "iptables", Baseline: "none"}, []string{"ipvs"}},
		{"wanted list", []string{"iptables"}, Target{UML: k, Modes: []string{"none", "iptables", "ipvs"}, Bridge: "iptables", Baseline: "none"}, []string{}},
	} {
		got := serviceTypesModes(tc.want, tc.t)
		if !slices.Equal(got, tc.out) || (got == nil) != (tc.out == nil) {
			t.Errorf("%s: %#v, want %#v", tc.name, got, tc.out)
		}
	}
}

// TestExecuteFates: Execute reads each target's error through fate: rows
// that failed keep the run going (a whole result, a *RowsFailed with
// every failed row, fate Failed); a kernel that stops keeps the rows
// before it, the result marked partial naming the kernel; a later run
// that stops keeps the runs made, marked partial naming the run.
func TestExecuteFates(t *testing.T) {
	sc := &scenarios.Scenario{Modes: []string{"none", "iptables", "ipvs"}, Runs: 2}
	ctx := context.Background()
	rowsFailed := func(run int, t Target, r *reports.Result) error {
		if t.UML != nil {
			// As Run does: the row kept, marked failed, the run goes on.
			err := fmt.Errorf("mode ipvs in run %d: exited", run+1)
			r.Modes[1].Failed = err.Error()
			return &RowsFailed{Errs: []error{err}}
		}
		return nil
	}
	f := &fakeTargets{fail: rowsFailed}
	res, err := execute(ctx, sc, splitPlan(), Options{}, nil, f.fn())
	var rf *RowsFailed
	if FateOf(ctx, err) != Failed || !errors.As(err, &rf) || len(rf.Errs) != 2 || res == nil || res.Partial != "" || len(res.MoreRuns) != 1 || len(res.Modes) != 4 ||
		!strings.Contains(err.Error(), "mode ipvs in run 1: exited; mode ipvs in run 2: exited") || res.Modes[3].Failed == "" || res.Modes[3].Kernel != "uml:6.12" {
		t.Errorf("rows failed in both runs: err %v (fate %s), result partial %q, %d more runs; want a whole result of 2 runs and both rows' errors", err, FateOf(ctx, err), res.Partial, len(res.MoreRuns))
	}

	f = &fakeTargets{fail: func(run int, t Target, _ *reports.Result) error {
		if t.UML != nil && run == 0 {
			return errors.New("guest crashed")
		}
		return nil
	}}
	res, err = execute(ctx, sc, splitPlan(), Options{}, nil, f.fn())
	if FateOf(ctx, err) != Stop || res == nil || len(res.Modes) != 4 || len(res.MoreRuns) != 0 || len(f.runs) != 1 ||
		!strings.Contains(res.Partial, "kernel uml:6.12 failed: guest crashed; kept the modes finished on host, uml:6.12") {
		t.Errorf("a kernel stopped: err %v, partial %q, %d rows, %d runs", err, res.Partial, len(res.Modes), len(f.runs))
	}

	f = &fakeTargets{fail: func(run int, _ Target, _ *reports.Result) error {
		if run == 1 {
			return errors.New("testbed broke")
		}
		return nil
	}}
	cctx, cancel := context.WithCancelCause(ctx)
	cancel(errors.New("interrupted by SIGINT"))
	res, err = execute(cctx, &scenarios.Scenario{Modes: []string{"none"}, Runs: 3}, Plan{Targets: []Target{{Name: "host", Modes: []string{"none"}}}}, Options{}, nil, f.fn())
	if FateOf(cctx, err) != Stop || res == nil || len(res.Modes) != 1 || len(res.MoreRuns) != 0 ||
		res.Partial != "interrupted by SIGINT: run 2 of 3 failed: testbed broke; kept the 1 runs made" {
		t.Errorf("run 2 stopped: err %v, partial %q, more runs %d", err, res.Partial, len(res.MoreRuns))
	}
}
