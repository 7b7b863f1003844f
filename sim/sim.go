// Package sim is proxybench's sim engine: it carries a scenario past what
// one machine can host (50k services, 5,000 nodes) without root, network
// namespaces or a kernel, and produces a reports.Result of the same schema
// as a real run, with Engine "sim".
//
// Data plane: each mode comes from the caller's list (Options.Modes,
// proxymodes/modes.All) as a proxymodes.Mode. Its Render renders the
// services with the configuration the real run's proxier gets from the
// same scenario, and packets are evaluated against that rendering as its
// Sim model says: a linear walk (iptables' nat KUBE-SERVICES rule by rule,
// iptables.Walker; userspace's KUBE-PORTALS-CONTAINER) or one lookup
// (nftables' verdict map, the IPVS service table). Rules walked turn into
// connect time with a Calibration measured on a real kernel (`proxybench
// calibrate`), on top of mode none's measured connect-time distribution
// (the noise model). Endpoint choices are exact: iptables' statistic
// random rules, nftables' numgen random, the userspace round robin
// (userspace/balance.Balancer), every IPVS scheduler (NewScheduler), and
// ClientIP session affinity over any of them.
//
// Control plane: a discrete-event simulation of N nodes, each running
// kube-proxy's sync loop (proxymodes/syncloop.State, the same state
// machine the real runner drives) under the scenario's churn
// (workload.Arrivals and Cluster.Next), with sync costs from the
// calibration (SimulateCluster).
//
// The package links no kernel package (netlink, netns, go-iptables,
// knftables, moby/ipvs, topology, workload/traffic, internal/runner,
// internal/uml, any mode's kernel side); deps_test.go checks the full
// dependency list (docs/architecture.md, "Layers").
package sim

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// Options configure Run.
type Options struct {
	// Modes is the build's mode list (proxymodes/modes.All): the sim
	// renders each scenario mode with its Mode.Render and models its data
	// plane after its Mode.Sim. Required; the sim imports no mode itself,
	// so it links no kernel library.
	Modes []proxymodes.Mode
	// Phases is the build's phase list's rules (internal/runner's
	// PhaseRules): Run refuses a scenario that wants a phase the sim does
	// not model (Modelled) instead of ignoring its block. Nil: not
	// checked.
	Phases  []scenarios.PhaseRule
	RunID   string // empty: "sim-" + a number from the clock
	Version string
	// Calibration to use; nil loads sc.Sim.Calibration (empty: the
	// shipped default).
	Calibration *Calibration
	// Progress, when set, receives one line per step.
	Progress func(step string)
}

// Run simulates sc: per size of the sweep and per mode, Repetitions full
// and incremental syncs, Repetitions rounds of Traffic.Connections
// connections (after Warmup) at each position, and, with churn, the
// control-plane simulation over Sim.Nodes nodes. Errors: an unknown mode,
// a calibration that cannot be read or lacks a mode, a render failure.
func Run(ctx context.Context, sc *scenarios.Scenario, o Options) (*reports.Result, error) {
	if err := scenarios.RefuseUnmodelled(sc, o.Phases, Modelled, "sim"); err != nil {
		return nil, err
	}
	byName := map[string]proxymodes.Mode{}
	for _, m := range o.Modes {
		byName[m.Name] = m
	}
	var known []string
	for _, m := range o.Modes {
		known = append(known, m.Name)
	}
	for _, name := range sc.Modes {
		if _, ok := byName[name]; !ok {
			return nil, fmt.Errorf("sim: unknown mode %q (Options.Modes: %v)", name, known)
		}
	}
	cal := o.Calibration
	if cal == nil {
		var err error
		if cal, err = LoadCalibration(sc.Sim.Calibration); err != nil {
			return nil, err
		}
	}
	if o.RunID == "" {
		o.RunID = "sim-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	}
	progress := o.Progress
	if progress == nil {
		progress = func(string) {}
	}
	host, _ := os.Hostname()
	why := fmt.Sprintf("sim engine, calibration %s measured on %s, kernel %s (%s)", cal.Source, cal.Machine, cal.Kernel, cal.KernelWhere)
	if cal.Default {
		why = "sim engine, DEFAULT calibration (shipped in the binary) measured on " + cal.Machine + ", kernel " + cal.Kernel + " (" + cal.KernelWhere + "); run proxybench calibrate for this machine"
	}
	res := &reports.Result{
		SchemaVersion: reports.SchemaVersion, Tool: "proxybench " + o.Version, RunID: o.RunID, Engine: "sim",
		Started: time.Now(), Scenario: sc,
		Machine: reports.Machine{Hostname: host, Kernel: cal.Kernel, KernelWhere: "sim", KernelWhy: why,
			CPUModel: "sim of " + cal.Machine, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()},
	}
	for _, n := range sc.Sizes() {
		at := sc.AtSize(n)
		services, err := workload.Services(at)
		if err != nil {
			return nil, err
		}
		for _, mode := range sc.Modes {
			for _, impl := range sc.Implementations(mode) {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				progress(fmt.Sprintf("sim %s (%s) at %d services", mode, impl, n))
				mr, err := runMode(ctx, at, cal, services, byName[mode], impl)
				if err != nil {
					return nil, fmt.Errorf("sim: mode %s (%s) at %d services: %w", mode, impl, n, err)
				}
				mr.Services = n
				res.Modes = append(res.Modes, *mr)
			}
		}
	}
	res.Finished = time.Now()
	return res, nil
}

// Modelled are the phases the sim models (scenarios.PhaseRule names):
// full and incremental syncs, lookup traffic, and churn over Sim.Nodes
// nodes. Every other phase a scenario wants is refused (Run's error, a
// *scenarios.FieldError naming the phase's field).
var Modelled = []string{"sync.full", "sync.incremental", "traffic", "churn"}

// model is one mode's rendered state at one size.
type model struct {
	mode   string
	md     proxymodes.Mode
	direct bool
	cal    *Calibration
	// cost is the row's sync costs (builtin's, or its implementation's:
	// kpCost), look its lookup costs (builtin's: kube-proxy programs the
	// same kind of rules); costX is what the sync curves are evaluated at
	// (the objects rendered, or the service count: ModeCost.Against);
	// stretch multiplies every sync's wall time (sim.sharedCores).
	cost, look *ModeCost
	kp         *ImplementationCost
	costX      float64
	stretch    [2]float64 // partial, full
	objects    int
	bytes      int
	r          *proxymodes.Rendering
	services   []workload.Service
	flat       []workload.Target
	sc         *scenarios.Scenario
}

// ModeCost returns c's costs for md: its own entry, or, for a direct mode
// (no rules, no sync cost) without one, empty costs marked not measured,
// since its connect times are the calibration's baseline. Other modes
// without an entry are an error naming the fix.
func (c *Calibration) ModeCost(md proxymodes.Mode) (*ModeCost, error) {
	cost, err := c.Mode(md.Name)
	if err != nil && md.Sim.Lookup == proxymodes.LookupDirect {
		return &ModeCost{Note: "a direct mode: the baseline's connect times, no rules"}, nil
	}
	return cost, err
}

// newModel renders services with the mode's Render (the configuration
// the real run's proxier gets from the same scenario) and counts what a
// full sync programs. It fails on a lookup or choice model the sim does
// not know.
func newModel(sc *scenarios.Scenario, cal *Calibration, services []workload.Service, md proxymodes.Mode, impl string) (*model, error) {
	look, err := cal.ModeCost(md)
	if err != nil {
		return nil, err
	}
	cost := look
	var kp *ImplementationCost
	if impl == scenarios.ImplKubeProxy {
		if cost, kp, err = cal.Implementation(impl, md.Name); err != nil {
			return nil, err
		}
	}
	if md.Render == nil {
		return nil, fmt.Errorf("mode %s has no Render: the sim engine cannot model it", md.Name)
	}
	r, err := md.Render(sc, services)
	if err != nil {
		return nil, err
	}
	if md.Sim.Choice == proxymodes.ChoiceScheduler && len(r.SchedulerFlags) > 0 {
		return nil, fmt.Errorf("sim: ipvs.schedulerFlags %v are not modelled (the sim's sh and mh hash the source address only); run with --engine real", r.SchedulerFlags)
	}
	m := &model{mode: md.Name, md: md, cal: cal, cost: cost, look: look, kp: kp, services: services, flat: workload.FlatTargets(services), sc: sc,
		r: r, objects: r.Objects, bytes: r.Bytes, costX: float64(r.Objects)}
	if cost.Against == AgainstServices {
		m.costX = float64(len(services))
	}
	nodes := max(sc.Sim.Nodes, 1)
	m.stretch[0] = SharedStretch(nodes, sc.Sim.SharedCores, cmp.Or(cost.PartialContention, cost.CPUPerWall))
	m.stretch[1] = SharedStretch(nodes, sc.Sim.SharedCores, cmp.Or(cost.FullContention, cost.CPUPerWall))
	switch md.Sim.Lookup {
	case proxymodes.LookupDirect:
		m.direct = true
	case proxymodes.LookupLinear:
		if r.Walk == nil {
			return nil, fmt.Errorf("mode %s: linear lookup without Rendering.Walk", md.Name)
		}
	case proxymodes.LookupHash:
	default:
		return nil, fmt.Errorf("the sim engine has no lookup model %q (mode %s)", md.Sim.Lookup, md.Name)
	}
	if !m.direct {
		switch md.Sim.Choice {
		case proxymodes.ChoiceStatistic, proxymodes.ChoiceNumgen, proxymodes.ChoiceScheduler, proxymodes.ChoiceRoundRobin:
		default:
			return nil, fmt.Errorf("the sim engine has no endpoint choice model %q (mode %s)", md.Sim.Choice, md.Name)
		}
	}
	return m, nil
}

// syncCost draws one sync's wall time: the calibrated curve at the
// ruleset's objects, times lognormal noise of the calibrated spread.
func (m *model) syncCost(full bool, changed int, rng *rand.Rand) (wall, cpu time.Duration) {
	if m.direct {
		return 0, 0
	}
	var ns float64
	if full {
		ns = m.cost.Full.At(m.costX)
	} else {
		ns = m.cost.Incremental.At(m.costX)
		if changed > 1 {
			ns += m.cost.PerChangedObjectNs * m.cost.ObjectsPerChange * float64(changed-1)
		}
	}
	stretch := m.stretch[0]
	switch {
	case full && m.cost.Against == AgainstServices:
		// One first sync per real run: its spread is not measured.
		stretch = m.stretch[1]
	case full:
		stretch = m.stretch[1]
		ns *= noise(m.cost.SyncCV, rng)
	case m.cost.Against == AgainstServices:
		ns *= noiseMedian(m.cost.SyncCV, rng)
	default:
		ns *= noise(m.cost.SyncCV, rng)
	}
	return time.Duration(ns * stretch), time.Duration(ns * m.cost.CPUPerWall)
}

// SharedStretch is the factor by which a sync stretches when nodes
// kube-proxies share cores CPUs (sim.sharedCores: a testbed's nodes on
// one machine) and sync at about the same time (with churn they see the
// same changes and run the same minSyncPeriod; at start every one runs
// its first sync): 1 + (nodes-1)·contention/cores. Under the kernel's
// fair scheduler, with other runnable threads beside one sync (a loaded
// machine: other >= cores-1), a sync gets cores/(other+1) of a CPU alone
// and cores/(other+nodes) with nodes syncs at once, a stretch of
// (other+nodes)/(other+1): linear in nodes, with contention =
// cores/(other+1), which a sync alone at CPU/wall c has as c. cores 0
// (the default) or contention 0: every node is a machine of its own,
// factor 1.
func SharedStretch(nodes, cores int, contention float64) float64 {
	if cores <= 0 || contention <= 0 || nodes <= 1 {
		return 1
	}
	return 1 + float64(nodes-1)*contention/float64(cores)
}

// noise is a lognormal factor of mean 1 and coefficient of variation cv.
func noise(cv float64, rng *rand.Rand) float64 {
	if cv <= 0 {
		return 1
	}
	s2 := math.Log(1 + cv*cv)
	return math.Exp(rng.NormFloat64()*math.Sqrt(s2) - s2/2)
}

// noiseMedian is a lognormal factor of median 1 and coefficient of
// variation cv: for costs fitted through medians (FitCurve's Points) with
// a wide spread, where noise's mean-1 factor would put the sim's median
// below the measured one (by 1/sqrt(1+cv²): 14% at kube-proxy's cv of
// 0.6, 1% at builtin's 0.15).
func noiseMedian(cv float64, rng *rand.Rand) float64 {
	if cv <= 0 {
		return 1
	}
	return math.Exp(rng.NormFloat64() * math.Sqrt(math.Log(1+cv*cv)))
}

func seedOf(sc *scenarios.Scenario, mode string, extra int64) int64 {
	h := fnv.New64a()
	h.Write([]byte(mode))
	return sc.Seed ^ int64(h.Sum64()>>1) ^ extra
}

func runMode(ctx context.Context, sc *scenarios.Scenario, cal *Calibration, services []workload.Service, md proxymodes.Mode, impl string) (*reports.ModeResult, error) {
	mode := md.Name
	m, err := newModel(sc, cal, services, md, impl)
	if err != nil {
		return nil, err
	}
	mr := &reports.ModeResult{Mode: mode, Traits: md.Traits, Info: map[string]string{
		"engine": "sim", "calibration": cal.Source, "calibration.default": strconv.FormatBool(cal.Default),
		"calibration.machine": cal.Machine, "calibration.kernel": cal.Kernel + " (" + cal.KernelWhere + ")",
		"calibration.measured": strconv.FormatBool(m.cost.Measured),
	}}
	mr.Info["backend"] = mode
	for k, v := range m.r.Info {
		mr.Info[k] = v
	}
	if md.Sim.Choice == proxymodes.ChoiceStatistic {
		// The iptables data-plane model: per-rule costs were measured
		// with the calibration's iptables back end.
		mr.Info["calibration.iptablesBackend"] = cal.IPTablesBackend
	}
	if m.cost.Note != "" {
		mr.Info["calibration.note"] = m.cost.Note
	}
	if m.kp != nil {
		kubeProxyRow(mr, m)
	}
	if sc.Sim.SharedCores > 0 {
		mr.Info["sim.sharedCores"] = strconv.Itoa(sc.Sim.SharedCores)
		mr.Info["sim.syncStretch"] = fmt.Sprintf("partial %.2f, full %.2f (sim.SharedStretch)", m.stretch[0], m.stretch[1])
	}
	rng := rand.New(rand.NewSource(seedOf(sc, mode, 1)))
	var walls, incs []int64
	for rep := 0; rep < sc.Repetitions; rep++ {
		w, c := m.syncCost(true, 0, rng)
		st := proxymodes.SyncStats{Kind: "full", Wall: w, CPU: c, Objects: m.objects, Bytes: m.bytes}
		if m.direct {
			st.Objects, st.Bytes = 0, 0
		}
		mr.SyncFull = append(mr.SyncFull, st)
		walls = append(walls, int64(w))
	}
	mr.SyncFullSummary = reports.Summarize(walls)
	if !m.direct {
		for rep := 0; rep < sc.Repetitions; rep++ {
			w, c := m.syncCost(false, 1, rng)
			mr.SyncIncremental = append(mr.SyncIncremental, proxymodes.SyncStats{Kind: "incremental", Wall: w, CPU: c, Objects: int(math.Round(m.cost.ObjectsPerChange))})
			incs = append(incs, int64(w))
		}
		mr.SyncIncrementalSummary = reports.Summarize(incs)
	}

	var fs []reports.Fairness
	var trafficNs float64
	for i, position := range sc.Traffic.Positions {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pr, f, busy, err := m.lookup(position, i)
		if err != nil {
			return nil, err
		}
		trafficNs += busy
		mr.TrafficConns += len(pr.SamplesNs) + pr.Errors
		if f != nil {
			fs = append(fs, *f)
		}
		mr.Lookup = append(mr.Lookup, *pr)
	}
	mr.Fairness = reports.PoolFairness(fs)

	if sc.Churn.Rate > 0 && !m.direct {
		values, period, err := md.ChurnSyncPeriods(sc)
		if err != nil {
			return nil, err
		}
		for _, ms := range values {
			cr, per := m.churn(ms, period)
			mr.Churn = append(mr.Churn, *cr)
			nodes := max(sc.Sim.Nodes, 1)
			mr.Info["sim.nodes"] = strconv.Itoa(nodes)
			mr.Info["sim.rulesPerNode"] = strconv.Itoa(m.objects)
			mr.Info["sim.syncCpuPerNode.p50"] = time.Duration(per.P50).String()
			mr.Info["sim.syncCpuPerNode.p99"] = time.Duration(per.P99).String()
			mr.Info["sim.syncCpuPerNode.max"] = time.Duration(per.Max).String()
		}
	}
	return mr, nil
}

// latencyNs draws one connect time to target t.
func (m *model) latencyNs(t workload.Target, rng *rand.Rand) float64 {
	cal := m.look
	v := m.baseAt(rng.Float64())
	if m.direct {
		return v
	}
	v += cal.LookupOverheadNs + cal.PerServiceNs*float64(len(m.services))
	if m.r.Walk != nil {
		// A linear lookup: the rules walked before the service's own
		// (iptables' KUBE-SERVICES, userspace's KUBE-PORTALS-CONTAINER).
		v += cal.PerRuleNs * float64(m.r.Walk(t))
	}
	return v
}

// baseAt is the calibration's base (mode none) connect time at u.
func (m *model) baseAt(u float64) float64 { return m.cal.baseAt(u) }

// readyOf returns the endpoints the modes program (the ready ones, or the
// serving terminating ones of a service without any ready).
func readyOf(s *workload.Service) []workload.Endpoint {
	var out []workload.Endpoint
	fb := s.ServingFallback()
	for _, e := range s.Endpoints {
		if e.Programmed(fb) {
			out = append(out, e)
		}
	}
	return out
}

// lookup simulates the traffic phases at one position: Repetitions ×
// (Warmup + Connections) closed-loop connections at Concurrency, from
// the client pod's address. It returns the position's result, its
// fairness (fixed positions) and the simulated busy time in ns.
func (m *model) lookup(position string, idx int) (*reports.PositionResult, *reports.Fairness, float64, error) {
	sc := m.sc
	pr := &reports.PositionResult{Position: position, Index: -1}
	fixed := position != workload.PosRandom
	var target workload.Target
	var ch chooser
	var eps []workload.Endpoint
	if fixed {
		t, err := workload.PositionTarget(m.flat, position)
		if err != nil {
			return nil, nil, 0, err
		}
		target = t
		s := &m.services[t.Service]
		pr.Service = s.PortName(s.Ports[t.Port])
		for i, x := range m.flat {
			if x == t {
				pr.Index = i
				break
			}
		}
		eps = readyOf(s)
	}
	_, _, nodeNet, _ := sc.Prefixes()
	client := nodeNet.Addr().Next().Next() // the first client pod's address (its /30 link)
	hits := make([]int, len(eps))
	var elapsed float64
	for rep := 0; rep < sc.Repetitions; rep++ {
		rng := rand.New(rand.NewSource(seedOf(sc, m.mode, int64(rep*100+idx)+7)))
		if fixed && !m.direct {
			var err error
			if ch, err = m.newChooser(eps, m.services[target.Service].Ports[target.Port], rng); err != nil {
				return nil, nil, 0, err
			}
		}
		// Closed loop: Concurrency slots, each starting its next
		// connection when the previous one ends.
		slots := make([]float64, sc.Traffic.Concurrency)
		slotEp := make([]int, len(slots))
		for i := range slotEp {
			slotEp[i] = -1
		}
		total := sc.Traffic.Warmup + sc.Traffic.Connections
		start := 0.0
		for k := 0; k < total; k++ {
			j := 0
			for x := range slots {
				if slots[x] < slots[j] {
					j = x
				}
			}
			now := slots[j]
			if ch != nil && slotEp[j] >= 0 {
				ch.done(slotEp[j], time.Duration(now))
			}
			if k == sc.Traffic.Warmup {
				start = now
			}
			t := target
			if !fixed {
				t = m.flat[rng.Intn(len(m.flat))]
			}
			lat := m.latencyNs(t, rng)
			ep := -1
			if fixed {
				var err error
				if m.direct {
					if len(eps) > 0 {
						ep = rng.Intn(len(eps))
					} else {
						err = fmt.Errorf("no ready endpoint")
					}
				} else {
					ep, err = ch.choose(Conn{Src: client, Dst: m.services[t.Service].ClusterIP, SrcPort: uint16(32768 + k%28232),
						DstPort: m.services[t.Service].Ports[t.Port].Port}, time.Duration(now))
				}
				if err != nil {
					if k >= sc.Traffic.Warmup {
						pr.Errors++
						if len(pr.ErrorText) < 5 {
							pr.ErrorText = append(pr.ErrorText, err.Error())
						}
					}
					slots[j] = now + lat + m.cal.ConnCycleNs
					continue
				}
			}
			slotEp[j] = ep
			slots[j] = now + lat + m.cal.ConnCycleNs
			if k >= sc.Traffic.Warmup {
				pr.SamplesNs = append(pr.SamplesNs, int64(lat))
				if ep >= 0 {
					hits[ep]++
				}
			}
		}
		end := 0.0
		for _, s := range slots {
			end = math.Max(end, s)
		}
		elapsed += end - start
	}
	pr.Latency = reports.Summarize(pr.SamplesNs)
	if elapsed > 0 {
		pr.CPS = float64(len(pr.SamplesNs)) / (elapsed / 1e9)
	}
	if !fixed {
		return pr, nil, elapsed, nil
	}
	pr.Hits = map[string]int{}
	var obs, w []float64
	for k, e := range eps {
		pr.Hits[e.IP.String()] = hits[k]
		obs = append(obs, float64(hits[k]))
		w = append(w, float64(e.Weight))
	}
	f := reports.ComputeFairness(obs, w)
	pr.Fairness = &f
	return pr, &f, elapsed, nil
}

// newChooser returns the mode's endpoint chooser for one service port
// (Mode.Sim.Choice), pinning clients under ClientIP session affinity.
func (m *model) newChooser(eps []workload.Endpoint, port workload.ServicePort, rng *rand.Rand) (chooser, error) {
	var ch chooser
	switch m.md.Sim.Choice {
	case proxymodes.ChoiceStatistic:
		ch = &randomChooser{n: len(eps), rng: rng}
	case proxymodes.ChoiceNumgen:
		ch = &randomChooser{n: len(eps), rng: rng, nft: true}
	case proxymodes.ChoiceScheduler:
		c, err := newIPVSChooser(m.r.Scheduler, eps, port.TargetPort)
		if err != nil {
			return nil, err
		}
		ch = c
	case proxymodes.ChoiceRoundRobin:
		ch = newUserspaceChooser(eps, port.TargetPort, rng)
	default:
		return nil, fmt.Errorf("the sim engine has no endpoint choice model %q (mode %s)", m.md.Sim.Choice, m.mode)
	}
	if m.r.AffinityTimeout > 0 {
		ch = newAffinityChooser(ch, m.r.AffinityTimeout)
	}
	return ch, nil
}

// churn runs the control-plane simulation of the scenario's churn at
// minSync: the arrivals and changes the real churn phase would make
// (same seed), applied to every node, and returns the ChurnResult (node
// 0's samples and syncs; latency, buckets and sync summaries pooled over
// every node) and the per-node sync CPU summary.
func (m *model) churn(minSync, period time.Duration) (*reports.ChurnResult, reports.Summary) {
	sc := m.sc
	c := sc.Churn
	rng := rand.New(rand.NewSource(sc.Seed))
	arrivals := workload.Arrivals(c.Rate, c.Duration.Duration, c.Arrival, rng)
	cluster := workload.NewCluster(sc, m.services)
	res := &reports.ChurnResult{MinSyncPeriodNs: int64(minSync), SyncPeriodNs: int64(period), Rate: c.Rate,
		DurationNs: int64(c.Duration.Duration), Arrival: c.Arrival, ByKind: map[string]int{}}
	// A changed service is held (not changed again) until node 0 could
	// have programmed it: minSyncPeriod plus a full sync.
	hold := minSync + time.Duration(m.cost.Full.At(m.costX)*m.stretch[1])
	type held struct {
		until time.Duration
		svc   int
	}
	var busy []held
	var times []time.Duration
	var kinds []string
	for _, at := range arrivals {
		for len(busy) > 0 && busy[0].until <= at {
			cluster.Release(busy[0].svc)
			busy = busy[1:]
		}
		ch, ok := cluster.Next(rng, c.Mix)
		if !ok {
			res.Skipped++
			continue
		}
		res.ByKind[ch.Kind]++
		times = append(times, at)
		kinds = append(kinds, ch.Kind)
		busy = append(busy, held{at + hold, ch.Service})
	}
	cr := SimulateCluster(ClusterSpec{
		Nodes: max(sc.Sim.Nodes, 1), MinSyncPeriod: minSync, SyncPeriod: period, Arrivals: times,
		End: c.Duration.Duration + c.Grace.Duration, Cost: m.syncCost, WatchDelay: m.watchDelay(), Delay: m.delivery(), MinFromEnd: m.kp != nil,
		Phase: true, Seed: sc.Seed,
	})
	res.Changes = len(times)
	for i, l := range cr.Node0 {
		res.Samples = append(res.Samples, reports.ChurnSample{Kind: kinds[i], AtNs: int64(times[i]), LatencyNs: l})
	}
	nodes := max(sc.Sim.Nodes, 1)
	res.Unobserved = (cr.Unprogrammed + nodes - 1) / nodes
	res.Observed = res.Changes - res.Unobserved
	res.Latency = cr.Latency
	res.LatencyBuckets = cr.Buckets
	for _, s := range cr.Node0Syncs {
		kind := "incremental"
		if s.Full {
			kind = "full"
		}
		res.Syncs = append(res.Syncs, reports.SyncRecord{AtNs: int64(s.At), SyncStats: proxymodes.SyncStats{Kind: kind, Wall: s.Wall, CPU: s.CPU, Objects: m.objects}})
	}
	res.SyncSummary, res.SyncBuckets = cr.SyncWall, cr.SyncBuckets
	res.SyncCPUNs = int64(cr.SyncCPUPerNode.Mean)
	res.CPUNs = res.SyncCPUNs
	if m.kp != nil {
		res.KubeProxy = kubeProxyChurn(m, cr)
	}
	return res, cr.SyncCPUPerNode
}
