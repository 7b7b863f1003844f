package scenarios

import (
	"fmt"
	"math"
	"time"
)

// SoakSpec configures the soak phase: for a long time (Duration), churn
// at Churn changes/s and TCP connections at a fixed open-loop Rate, with
// one sample of the row every Interval streamed to disk as it is
// measured. Before the churn, Idle intervals run with churn off (the
// baseline the CPU verdict compares with), and after it Quiet intervals
// with churn off again (the quiet tail); traffic runs through all of
// them. A row's soak lasts (Idle+Quiet)×Interval + Duration.
type SoakSpec struct {
	// Duration is how long the churn runs (default 1h); at least two
	// intervals, at most 168h.
	Duration Duration `yaml:"duration" json:"duration"`
	// Interval is the time between two samples (default 10s): 100ms..1h.
	Interval Duration `yaml:"interval" json:"interval"`
	// Rate is the open-loop connection rate, in new TCP connections per
	// second to random services' first ServicePort (default 20):
	// (0, 5000]. Every connection scheduled is counted: a success, or an
	// error with its cause.
	Rate float64 `yaml:"rate" json:"rate"`
	// Churn is the change rate, in changes per second (default 10; 0: no
	// churn): [0, 1000]. Changes arrive as a Poisson process and are
	// endpoint additions, removals and readiness flips in equal shares
	// (the churn phase's generator, workload.Cluster.Next).
	Churn float64 `yaml:"churn" json:"churn"`
	// Idle and Quiet are the intervals before and after the churn, with
	// churn off (default 3 each): 0..10000.
	Idle  int `yaml:"idle" json:"idle"`
	Quiet int `yaml:"quiet" json:"quiet"`
	// Probes is the number of probe workers timing each change's
	// programming latency (default 2): 1..64.
	Probes int `yaml:"probes" json:"probes"`
	// FlatBound is the bound of the memory verdict, in MiB/h (default 5):
	// the memory is "flat" only when the 95% confidence interval of the
	// RSS slope lies within ±FlatBound. (0, 10000].
	FlatBound float64 `yaml:"flatBound" json:"flatBound"`
}

// Total is the soak's length: (Idle+Quiet)×Interval + Duration.
func (s *SoakSpec) Total() time.Duration {
	return time.Duration(s.Idle+s.Quiet)*s.Interval.Duration + s.Duration.Duration
}

// Intervals is how many samples a whole soak takes: Total over
// Interval, rounded up.
func (s *SoakSpec) Intervals() int {
	if s.Interval.Duration <= 0 {
		return 0
	}
	return int((s.Total() + s.Interval.Duration - 1) / s.Interval.Duration)
}

// setSoakDefaults fills soak's unset fields (SetDefaults).
func (s *Scenario) setSoakDefaults() { s.soakDefaults("soak", s.Soak, time.Hour) }

// soakDefaults fills the unset fields of sk, the block at path (soak,
// faults.sliceChurn), with duration as its default Duration.
func (s *Scenario) soakDefaults(path string, sk *SoakSpec, duration time.Duration) {
	if sk == nil {
		return
	}
	for _, d := range []struct {
		path string
		p    *Duration
		v    time.Duration
	}{{path + ".duration", &sk.Duration, duration}, {path + ".interval", &sk.Interval, 10 * time.Second}} {
		if d.p.Duration == 0 && !s.has(d.path) {
			d.p.Duration = d.v
		}
	}
	for _, f := range []struct {
		path string
		p    *float64
		v    float64
	}{{path + ".rate", &sk.Rate, 20}, {path + ".churn", &sk.Churn, 10}, {path + ".flatBound", &sk.FlatBound, 5}} {
		if *f.p == 0 && !s.has(f.path) {
			*f.p = f.v
		}
	}
	for _, n := range []struct {
		path string
		p    *int
		v    int
	}{{path + ".idle", &sk.Idle, 3}, {path + ".quiet", &sk.Quiet, 3}, {path + ".probes", &sk.Probes, 2}} {
		if *n.p == 0 && !s.has(n.path) {
			*n.p = n.v
		}
	}
}

// SoakProblems checks the soak block (Validate): the interval is
// positive and within 100ms..1h, the duration covers at least two
// intervals (and at most 168h), the rates and counts are in range.
func SoakProblems(s *Scenario) []*FieldError { return soakProblems("soak", s.Soak) }

// soakProblems checks sk, the block at path (soak, faults.sliceChurn),
// as SoakProblems does.
func soakProblems(path string, sk *SoakSpec) []*FieldError {
	if sk == nil {
		return nil
	}
	var out []*FieldError
	add := func(field, msg, fix string) {
		out = append(out, &FieldError{Field: path + "." + field, Msg: msg, Fix: fix})
	}
	iv, d := sk.Interval.Duration, sk.Duration.Duration
	intervalOK := false
	switch {
	case iv <= 0:
		add("interval", fmt.Sprintf("%s is not positive", iv), `use a sample interval such as "10s"`)
	case iv < 100*time.Millisecond || iv > time.Hour:
		add("interval", fmt.Sprintf("%s is out of range", iv), "use 100ms..1h, such as 10s")
	default:
		intervalOK = true
	}
	switch {
	case d <= 0:
		add("duration", fmt.Sprintf("%s is not positive", d), `use a duration such as "1h"`)
	case d > 168*time.Hour:
		add("duration", fmt.Sprintf("%s is longer than a week", d), "use at most 168h")
	case intervalOK && d < 2*iv:
		add("duration", fmt.Sprintf("%s is shorter than two intervals of %s: a soak needs at least two samples of churn", d, iv),
			fmt.Sprintf("use a duration of at least %s, or a shorter %s.interval", 2*iv, path))
	}
	if !(sk.Rate > 0 && sk.Rate <= 5000) {
		add("rate", fmt.Sprintf("%v is not in (0, 5000] connections per second", sk.Rate), "use an open-loop rate such as 20")
	}
	if !(sk.Churn >= 0 && sk.Churn <= 1000) {
		add("churn", fmt.Sprintf("%v is not in [0, 1000] changes per second", sk.Churn), "use a change rate such as 10 (0: no churn)")
	}
	if !(sk.FlatBound > 0 && sk.FlatBound <= 10000) || math.IsNaN(sk.FlatBound) {
		add("flatBound", fmt.Sprintf("%v is not in (0, 10000] MiB/h", sk.FlatBound), "use a bound such as 5 (MiB/h)")
	}
	for _, n := range []struct {
		field  string
		v      int
		lo, hi int
	}{{"idle", sk.Idle, 0, 10000}, {"quiet", sk.Quiet, 0, 10000}, {"probes", sk.Probes, 1, 64}} {
		if n.v < n.lo || n.v > n.hi {
			add(n.field, fmt.Sprintf("%d is out of range", n.v), fmt.Sprintf("use %d..%d", n.lo, n.hi))
		}
	}
	return out
}

// soak checks the soak block (SoakProblems).
func (c *checker) soak() {
	for _, e := range SoakProblems(c.s) {
		c.add(e.Field, e.Msg, e.Fix)
	}
}
