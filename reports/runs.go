package reports

import "time"

// Run is one repetition of the whole measurement of a `run --count N`
// result after the first: every mode measured again (the runner
// interleaves the modes run by run, so drift hits them alike).
type Run struct {
	// RunID is this run's own ID (its testbed objects carry it).
	RunID    string       `json:"runID"`
	Started  time.Time    `json:"started"`
	Finished time.Time    `json:"finished"`
	Modes    []ModeResult `json:"modes"`
	// Sections are this run's phase sections (Result.Sections).
	Sections []Section `json:"sections,omitempty"`
}

// Runs splits r into its runs: r itself (run 1, Result.Modes) followed
// by one Result per entry of Result.MoreRuns, each sharing r's machine
// and scenario. A result of one run gives []*Result{r}. Renderers other
// than compare show run 1; compare judges every figure across runs.
func (r *Result) Runs() []*Result {
	if len(r.MoreRuns) == 0 {
		return []*Result{r}
	}
	first := *r
	first.MoreRuns = nil
	out := []*Result{&first}
	for _, x := range r.MoreRuns {
		c := *r
		c.MoreRuns = nil
		c.Started, c.Finished, c.Modes, c.Sections = x.Started, x.Finished, x.Modes, x.Sections
		if x.RunID != "" {
			c.RunID = x.RunID
		}
		out = append(out, &c)
	}
	return out
}

// SplitRuns flattens results (each holding one or more runs) into single
// runs, in order.
func SplitRuns(rs []*Result) []*Result {
	var out []*Result
	for _, r := range rs {
		out = append(out, r.Runs()...)
	}
	return out
}
