package scenarios

import (
	"fmt"
	"slices"
	"time"
)

// FaultComponents are the control-plane components faults.apiOutage can
// stop (topology/controlplane).
var FaultComponents = []string{"kube-apiserver", "etcd"}

// APIOutageSpec configures the API outage fault: for each component of
// Components in turn, the component is stopped for Duration while the
// endpoints of Services services change (one endpoint of each replaced by
// a new pod address, at the start of the outage); the EndpointSlice
// writes are retried until the API takes them, as the EndpointSlice
// controller retries; then the component starts again, and the rules
// read back and probes through them are followed until they match the
// API (or Settle passes).
type APIOutageSpec struct {
	// Components are the cases, in order (default [kube-apiserver,
	// etcd]): each of FaultComponents at most once.
	Components []string `yaml:"components" json:"components"`
	// Duration is how long the component is down (default 10s): 1s..10m.
	Duration Duration `yaml:"duration" json:"duration"`
	// Services is how many services change during the outage, spread
	// over the service list (default 20, or services.count when fewer):
	// 1..1000, at most services.count.
	Services int `yaml:"services" json:"services"`
	// Probes is the number of probe workers (default 4): 1..64.
	Probes int `yaml:"probes" json:"probes"`
	// Sample is how often the rules are read back (default 500ms):
	// 100ms..10s.
	Sample Duration `yaml:"sample" json:"sample"`
	// Settle bounds the wait for convergence after the component is
	// back (default 2m): 1s..30m.
	Settle Duration `yaml:"settle" json:"settle"`
}

// RestartSpec configures the restart-under-flows fault: Services
// services of their own (fault-flow-<i>, 80/TCP and 53/UDP to one echo
// port, two endpoints each) get one held TCP connection and one UDP
// client from a fixed source port each; the proxy is stopped, stays down
// for Gap, and starts again with the same configuration. Each case of
// Cases runs once: "plain" (nothing changes while it is down) and
// "changes" (the endpoint each flow uses is replaced while it is down).
type RestartSpec struct {
	// Cases are the restarts, in order (default [plain, changes]).
	Cases []string `yaml:"cases" json:"cases"`
	// Services is the number of flow services (default 10): 1..200.
	Services int `yaml:"services" json:"services"`
	// Gap is how long the proxy is down (default 2s): 0..5m.
	Gap Duration `yaml:"gap" json:"gap"`
	// SourcePort is the first UDP client's fixed source port (default
	// 5400; client i uses SourcePort+i): 1024..65000.
	SourcePort int `yaml:"sourcePort" json:"sourcePort"`
	// Interval is the time between two datagrams of a UDP client (default
	// 20ms): 1ms..1s; Timeout the wait for each answer (default 200ms):
	// 10ms..5s.
	Interval Duration `yaml:"interval" json:"interval"`
	Timeout  Duration `yaml:"timeout" json:"timeout"`
	// Observe is how long the flows are followed after the proxy's first
	// sync (default 5s): 1s..10m.
	Observe Duration `yaml:"observe" json:"observe"`
}

// RestartCases are the cases faults.restart.cases accepts.
var RestartCases = []string{"plain", "changes"}

// CrashSpec configures the crash fault: the proxy is killed with SIGKILL
// Crashes times in a row; before each restart it stays down for the
// kubelet's CrashLoopBackOff back-off (Backoff, doubled after each
// crash, capped at MaxBackoff: kubelet's 10 s initial and 300 s maximum
// container back-off); right after each kill one endpoint of each of
// Services services is replaced, so the restarted proxy has changes to
// program. Per crash: the outage from the kill until probes reach the
// new endpoints, and the restarted proxy's first sync.
type CrashSpec struct {
	// Crashes is the number of kills (default 3): 1..10.
	Crashes int `yaml:"crashes" json:"crashes"`
	// Backoff is the first back-off (default 10s): 0..5m; MaxBackoff its
	// cap (default 5m): at least Backoff, at most 1h.
	Backoff    Duration `yaml:"backoff" json:"backoff"`
	MaxBackoff Duration `yaml:"maxBackoff" json:"maxBackoff"`
	// Services, Probes and Settle as in APIOutageSpec (defaults 20, 4,
	// 2m).
	Services int      `yaml:"services" json:"services"`
	Probes   int      `yaml:"probes" json:"probes"`
	Settle   Duration `yaml:"settle" json:"settle"`
}

// Backoffs are the back-offs of the crashes, in order: Backoff doubled
// after each crash, capped at MaxBackoff (kubelet's CrashLoopBackOff:
// flowcontrol.Backoff with the initial and maximum container back-off).
func (c *CrashSpec) Backoffs() []time.Duration {
	out := make([]time.Duration, 0, c.Crashes)
	d := c.Backoff.Duration
	for range c.Crashes {
		out = append(out, min(d, c.MaxBackoff.Duration))
		d *= 2
	}
	return out
}

// setProcessFaultsDefaults fills the faults block's unset fields (SetDefaults).
func (s *Scenario) setProcessFaultsDefaults() {
	f := s.Faults
	if f == nil {
		return
	}
	dur := func(path string, p *Duration, v time.Duration) {
		if p.Duration == 0 && !s.has(path) {
			p.Duration = v
		}
	}
	num := func(path string, p *int, v int) {
		if *p == 0 && !s.has(path) {
			*p = v
		}
	}
	if a := f.APIOutage; a != nil {
		if a.Components == nil && !s.has("faults.apiOutage.components") {
			a.Components = slices.Clone(FaultComponents)
		}
		dur("faults.apiOutage.duration", &a.Duration, 10*time.Second)
		num("faults.apiOutage.services", &a.Services, min(20, max(s.Services.Count, 1)))
		num("faults.apiOutage.probes", &a.Probes, 4)
		dur("faults.apiOutage.sample", &a.Sample, 500*time.Millisecond)
		dur("faults.apiOutage.settle", &a.Settle, 2*time.Minute)
	}
	if r := f.Restart; r != nil {
		if r.Cases == nil && !s.has("faults.restart.cases") {
			r.Cases = slices.Clone(RestartCases)
		}
		num("faults.restart.services", &r.Services, 10)
		dur("faults.restart.gap", &r.Gap, 2*time.Second)
		num("faults.restart.sourcePort", &r.SourcePort, 5400)
		dur("faults.restart.interval", &r.Interval, 20*time.Millisecond)
		dur("faults.restart.timeout", &r.Timeout, 200*time.Millisecond)
		dur("faults.restart.observe", &r.Observe, 5*time.Second)
	}
	if c := f.Crash; c != nil {
		num("faults.crash.crashes", &c.Crashes, 3)
		dur("faults.crash.backoff", &c.Backoff, 10*time.Second)
		dur("faults.crash.maxBackoff", &c.MaxBackoff, 5*time.Minute)
		num("faults.crash.services", &c.Services, min(20, max(s.Services.Count, 1)))
		num("faults.crash.probes", &c.Probes, 4)
		dur("faults.crash.settle", &c.Settle, 2*time.Minute)
	}
}

// builtinRows reports whether some mode of s with proxy rules runs with
// implementation builtin (every mode but none).
func (s *Scenario) builtinRows() []string {
	var out []string
	for _, m := range s.Modes {
		if m != BaselineMode && slices.Contains(s.Implementations(m), ImplBuiltin) {
			out = append(out, m)
		}
	}
	return out
}

// ProcessFaultsProblems checks the faults block (Validate): every count,
// duration and list in range, and an API outage only where every row
// has an API (kube-proxy rows: builtin has no API watch).
func ProcessFaultsProblems(s *Scenario) []*FieldError {
	f := s.Faults
	if f == nil {
		return nil
	}
	var out []*FieldError
	add := func(field, msg, fix string) { out = append(out, &FieldError{Field: field, Msg: msg, Fix: fix}) }
	durIn := func(field string, d Duration, lo, hi time.Duration) {
		if d.Duration < lo || d.Duration > hi {
			add(field, fmt.Sprintf("%s is out of range", d.Duration), fmt.Sprintf("use %s..%s", lo, hi))
		}
	}
	numIn := func(field string, v, lo, hi int) {
		if v < lo || v > hi {
			add(field, fmt.Sprintf("%d is out of range", v), fmt.Sprintf("use %d..%d", lo, hi))
		}
	}
	cases := func(field string, list, allowed []string) {
		if len(list) == 0 {
			add(field, "is empty", fmt.Sprintf("list at least one of %v", allowed))
		}
		for i, c := range list {
			if !slices.Contains(allowed, c) {
				add(fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf("unknown %q", c), fmt.Sprintf("use one of %v", allowed))
			} else if slices.Index(list, c) != i {
				add(fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf("%q is listed twice", c), "list each once")
			}
		}
	}
	services := func(field string, v int) {
		numIn(field, v, 1, 1000)
		if v > s.Services.Count && v <= 1000 {
			add(field, fmt.Sprintf("%d is more than services.count (%d)", v, s.Services.Count), fmt.Sprintf("use at most %d", s.Services.Count))
		}
	}
	for _, x := range []struct {
		field string
		set   bool
	}{{"faults.apiOutage", f.APIOutage != nil}, {"faults.restart", f.Restart != nil}, {"faults.crash", f.Crash != nil}} {
		for _, m := range s.Modes {
			if x.set && m != BaselineMode && !slices.Contains(KubeProxyModes, m) {
				add(x.field, fmt.Sprintf("mode %s has no process fault here: the fault phases restart, kill or cut off a proxy that programs the kernel (%v), and %s's data path runs inside proxybench", m, KubeProxyModes, m),
					fmt.Sprintf("run %s with modes among %v in a scenario of its own", x.field, KubeProxyModes))
			}
		}
	}
	if a := f.APIOutage; a != nil {
		cases("faults.apiOutage.components", a.Components, FaultComponents)
		durIn("faults.apiOutage.duration", a.Duration, time.Second, 10*time.Minute)
		services("faults.apiOutage.services", a.Services)
		numIn("faults.apiOutage.probes", a.Probes, 1, 64)
		durIn("faults.apiOutage.sample", a.Sample, 100*time.Millisecond, 10*time.Second)
		durIn("faults.apiOutage.settle", a.Settle, time.Second, 30*time.Minute)
		if b := s.builtinRows(); len(b) > 0 {
			add("faults.apiOutage", fmt.Sprintf("the %v rows run with implementation builtin, which has no API server: proxybench hands it the services directly (no watch to lose, nothing to relist), so an API outage does not apply to it", b),
				"run the API outage with implementation: [kube-proxy] (and kubeProxy.modes covering every mode but none), as scenarios/api-outage.yaml does")
		}
	}
	if r := f.Restart; r != nil {
		cases("faults.restart.cases", r.Cases, RestartCases)
		numIn("faults.restart.services", r.Services, 1, 200)
		durIn("faults.restart.gap", r.Gap, 0, 5*time.Minute)
		numIn("faults.restart.sourcePort", r.SourcePort, 1024, 65000-r.Services)
		durIn("faults.restart.interval", r.Interval, time.Millisecond, time.Second)
		durIn("faults.restart.timeout", r.Timeout, 10*time.Millisecond, 5*time.Second)
		durIn("faults.restart.observe", r.Observe, time.Second, 10*time.Minute)
	}
	if c := f.Crash; c != nil {
		numIn("faults.crash.crashes", c.Crashes, 1, 10)
		durIn("faults.crash.backoff", c.Backoff, 0, 5*time.Minute)
		durIn("faults.crash.maxBackoff", c.MaxBackoff, max(c.Backoff.Duration, 0), time.Hour)
		services("faults.crash.services", c.Services)
		numIn("faults.crash.probes", c.Probes, 1, 64)
		durIn("faults.crash.settle", c.Settle, time.Second, 30*time.Minute)
	}
	return out
}

// processFaults checks the faults block's process faults (ProcessFaultsProblems).
func (c *checker) processFaults() {
	for _, e := range ProcessFaultsProblems(c.s) {
		c.add(e.Field, e.Msg, e.Fix)
	}
}
