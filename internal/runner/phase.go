//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/proxybench/proxybench/internal/monitoring"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
)

// Phase is one phase of a run, as one value: its rule (name, scenario
// field, scope, when a scenario wants it, what it needs: the part validate
// and the sim read, scenarios.PhaseRule), how it runs, and the report
// section it returns. Phases lists them all, in run order: adding a phase
// is its own file plus one line there (docs/architecture.md, "Adding a
// phase").
type Phase struct {
	scenarios.PhaseRule
	// Run runs a row-scoped phase over one row (ScopeRow). It fills the
	// row's typed figures (Row.Result) and may add sections
	// (Row.AddSection). On an error the row keeps what the phase and the
	// phases before it measured; fate decides what becomes of the row and
	// the run.
	Run func(ctx context.Context, r *Row) error
	// RunAll runs a run-scoped phase once, after every row (ScopeRun): it
	// spans rows (a mode switch goes from one mode to another) and adds
	// its sections to the result (RunState.AddSection).
	RunAll func(ctx context.Context, s *RunState) error
	// Report builds the phase's report sections from a row's typed
	// figures (nil: the phase adds its sections in Run, or it is Core).
	// The runner calls it after Run, also after a failed Run, so a
	// partial row's figures show too.
	Report func(label string, mr *reports.ModeResult) []reports.Section
	// ReportRun builds a run-scoped phase's sections from the result's
	// typed figures (its field on reports.Result), after RunAll, also
	// after a failed one.
	ReportRun func(res *reports.Result) []reports.Section
	// Final: the phase runs after the row's other phases, also when one
	// of them stopped the row (an evaluation over what the row did, such
	// as the alerts phase's read-back of the row's Prometheus), before
	// the row's cleanups; not when the run was cancelled. Its error
	// becomes the row's when the row had none.
	Final bool
	// Core: the phase's figures are the result's core tables (sync.full,
	// sync.incremental, lookup, fairness, churn), which every format
	// renders from ModeResult's own fields, not a Section.
	Core bool
}

// Phases is every phase, in the order a row runs them (row-scoped), then
// the run-scoped ones after every row. One list, as proxymodes/modes.All
// is for modes: validate (Catalog.Phases), the sim (which refuses the
// phases it does not model) and every report format read it.
var Phases = []Phase{
	syncFullPhaseV,
	syncIncrementalPhaseV,
	nodesPhaseV,
	trafficPhaseV,
	nodePortLookupPhaseV,
	fairnessPhaseV,
	dualStackPhaseV,
	churnPhaseV,
	syncDisruptionPhaseV,
	connReusePhaseV,
	lifecyclePhaseV,
	transitionsPhaseV,
	soakPhaseV,
	kubeProxySweepPhaseV,
	apiOutagePhaseV,
	restartPhaseV,
	crashPhaseV,
	outOfBandPhaseV,
	sliceChurnPhaseV,
	alertsPhaseV,
	modeSwitchPhase,
	serviceTypesPhase,
}

// PhaseRules are the rules of Phases, for scenarios.Catalog.Phases and
// sim.Options.Phases.
func PhaseRules() []scenarios.PhaseRule {
	out := make([]scenarios.PhaseRule, 0, len(Phases))
	for _, p := range Phases {
		out = append(out, p.PhaseRule)
	}
	return out
}

// Where is where a run executes: on the host kernel or inside a
// user-mode-linux guest. The runner is told (Options.Where) and tells
// modes and phases; nothing below it reads the ambient uml.InGuest().
type Where string

const (
	WhereHost  Where = "host"
	WhereGuest Where = "uml"
)

// Row is one row's phase input and output: what every row-scoped
// phase's Run gets instead of loose parameters.
type Row struct {
	Sc *scenarios.Scenario
	O  Options
	// Testbed and Env are the testbed the row runs on and the phases'
	// seam over it (fakes in unit tests).
	Testbed *topology.Testbed
	Env     *env
	// Mode is the row's mode (kube-proxy rows: Base set), Proxier node0's
	// proxier, Proxiers every node's (node0 first; the nodes phase adds
	// the others).
	Mode     proxymodes.Mode
	Proxier  proxymodes.Proxier
	Proxiers []proxymodes.Proxier
	Services []workload.Service
	// Result is the row's figures, filled phase by phase; Faults what
	// went wrong without stopping a phase.
	Result *reports.ModeResult
	Faults *faults
	// Sections are the report sections the row's phases added.
	Sections []reports.Section
	// Live is the row's live metrics, updated as the phases measure
	// (nil when the scenario is not monitored: every method is a no-op).
	Live *monitoring.RowMetrics
	// prom is a builtin row's Prometheus (nil: not monitored, or a
	// kube-proxy row, whose Proxier holds its own).
	prom *rowPrometheus
	// cleanups run when the row ends, last added first (the nodes
	// phase's other proxiers).
	cleanups []func() error
	// sweep, for a kube-proxy row of sweep.services, carries its
	// proxier from one size to the next (nil otherwise).
	sweep *sweepCarry
	// later names the phases that run on the row after the running one
	// (not the final ones), for a phase that leaves the proxier
	// reconfigured (the churn sweep's kube-proxy restarts).
	later []string
}

// Progress is the row's progress sink.
func (r *Row) Progress() Progress { return r.O.Progress }

// AddSection adds a report section of the row.
func (r *Row) AddSection(s ...reports.Section) { r.Sections = append(r.Sections, s...) }

// Defer registers fn to run when the row ends (after its last phase, on
// success and on error), last registered first; its error becomes the
// row's when the row had none.
func (r *Row) Defer(fn func() error) { r.cleanups = append(r.cleanups, fn) }

// RunState is a run-scoped phase's input: the run's testbed and services
// and the result so far (every row finished).
type RunState struct {
	Sc       *scenarios.Scenario
	O        Options
	Testbed  *topology.Testbed
	Env      *env
	Services []workload.Service
	Result   *reports.Result
	// Checked is the run's check of its kube-proxy binaries (kube-proxy
	// rows of a run-scoped phase start their own kube-proxy).
	Checked *Checked
}

// AddSection adds a run-scoped section to the result.
func (s *RunState) AddSection(sec ...reports.Section) {
	for _, x := range sec {
		s.Result.MergeSection(x)
	}
}

// applies says whether phase ph runs for row r: the scenario wants it
// and, when it needs proxy rules, the mode has them.
func (ph Phase) applies(sc *scenarios.Scenario, m proxymodes.Mode) bool {
	if ph.Scope != scenarios.ScopeRow || ph.Run == nil {
		return false
	}
	if ph.Rules && m.Direct {
		return false
	}
	return ph.Wanted(sc)
}

// Fate is what becomes of a row, and of the run, after a row's error.
type Fate int

const (
	// Keep: the row finished; the run goes on.
	Keep Fate = iota
	// Partial: the row is kept with what it measured, marked partial
	// with the cause (ModeResult.Partial); its later phases are not run;
	// the run goes on and ends without error (a kube-proxy whose first
	// sync outlasted its bound, proxymodes.Unfinished; a sync kube-proxy
	// reported failed, proxymodes.SyncFailed).
	Partial
	// Failed: the row's proxy program exited on its own
	// (proxymodes.Failed): the row is kept, marked failed
	// (ModeResult.Failed); the run goes on and ends with RowsFailed
	// (exit 1).
	Failed
	// Stop: any other error, or the run was cancelled: the row is kept,
	// marked partial, and the run stops with the error, its result
	// marked partial (Result.Partial).
	Stop
)

// FateOf is fate for the runner's callers: what Execute's error means
// for the run (Keep: the result is whole; Failed: whole, rows marked
// failed, exit 1; Stop: the result, when not nil, is partial).
func FateOf(ctx context.Context, err error) Fate { return fate(ctx, err) }

func (f Fate) String() string {
	return [...]string{"keep", "partial", "failed", "stop"}[f]
}

// fate maps a row's error to the row's and the run's fate: the one place
// that reads the error kinds of proxymodes (Unfinished, SyncFailed,
// Failed). A cancelled run (ctx done) stops, whatever the error says,
// but for a program that exited on its own. The error of a whole run
// (Run, RunInUML, Execute) maps the same way: nil is Keep, a *RowsFailed
// (rows failed, the run went on; its result is whole) Failed, any other
// Stop (its result, when there is one, is partial).
func fate(ctx context.Context, err error) Fate {
	if err == nil {
		return Keep
	}
	if rf := (*RowsFailed)(nil); errors.As(err, &rf) {
		return Failed
	}
	var fl *proxymodes.Failed
	if errors.As(err, &fl) {
		if ctx.Err() != nil {
			return Stop
		}
		return Failed
	}
	if ctx.Err() != nil {
		return Stop
	}
	var u *proxymodes.Unfinished
	var sf *proxymodes.SyncFailed
	if errors.As(err, &u) || errors.As(err, &sf) {
		return Partial
	}
	return Stop
}

// partialText is what a partial row says of err: an unfinished first
// sync's own message, else the error.
func partialText(err error) string {
	var u *proxymodes.Unfinished
	if errors.As(err, &u) {
		return u.Msg
	}
	return err.Error()
}

// phaseErr names the phase in an error that does not already carry its
// own context (the phases' errors name their step).
func phaseErr(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", name, err)
}

// runScoped runs every run-scoped phase sc wants, in list order, after
// every row; a failed phase keeps what it added and stops the run
// (Stop: its error).
func runScoped(ctx context.Context, sc *scenarios.Scenario, o Options, tb *topology.Testbed, e *env, services []workload.Service, res *reports.Result, checked *Checked) error {
	s := &RunState{Sc: sc, O: o, Testbed: tb, Env: e, Services: services, Result: res, Checked: checked}
	for _, ph := range Phases {
		if ph.Scope != scenarios.ScopeRun || ph.RunAll == nil || !ph.Wanted(sc) {
			continue
		}
		err := ph.RunAll(ctx, s)
		if ph.ReportRun != nil {
			s.AddSection(ph.ReportRun(res)...)
		}
		checkpoint(res, o.Checkpoint)
		if err != nil {
			return phaseErr(ph.Name, err)
		}
	}
	return nil
}

// Catalog is the build's scenario catalog: the modes' (modes.Catalog)
// and the phases' rules (PhaseRules), so validate checks what each
// phase a scenario wants needs.
func Catalog() scenarios.Catalog {
	c := modes.Catalog()
	c.Phases = PhaseRules()
	c.MemAvailable = topology.MemAvailable
	return c
}
