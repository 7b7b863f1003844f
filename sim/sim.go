// Package sim is proxybench's sim engine: it carries a scenario past what
// one machine can host (50k services, 5,000 nodes) without root, network
// namespaces or a kernel, and produces a reports.Result of the same schema
// as a real run, with Engine "sim".
//
// Data plane: each mode's ruleset is rendered by the mode's own pure
// render step (proxymodes/iptables.Render, nftables.Render, ipvs.Render,
// userspace.Render) and packets are evaluated against it as the kernel
// does: iptables walks nat KUBE-SERVICES rule by rule (IPTablesWalker),
// nftables does one verdict-map lookup, IPVS one hash lookup, userspace a
// listener lookup plus a copy. Rules walked turn into connect time with a
// Calibration measured on a real kernel (`proxybench calibrate`), on top
// of mode none's measured connect-time distribution (the noise model).
// Endpoint choices are exact: iptables' statistic random rules, nftables'
// numgen random, the userspace round robin (userspace.Balancer) and every
// IPVS scheduler (NewScheduler).
//
// Control plane: a discrete-event simulation of N nodes, each running
// kube-proxy's sync loop (proxymodes/syncloop.State, the same state
// machine the real runner drives) under the scenario's churn
// (workload.Arrivals and Cluster.Next), with sync costs from the
// calibration (SimulateCluster).
//
// The package imports no kernel package (netlink, netns, topology,
// internal/runner, internal/uml); imports_test.go checks it.
package sim

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand"
	"os"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/iptables"
	"github.com/proxybench/proxybench/proxymodes/ipvs"
	"github.com/proxybench/proxybench/proxymodes/nftables"
	"github.com/proxybench/proxybench/proxymodes/userspace"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// Modes are the modes the sim engine models.
var Modes = []string{"none", "iptables", "nftables", "ipvs", "userspace"}

// Options configure Run.
type Options struct {
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
	if len(sc.IPVS.SchedulerFlags) > 0 && slices.Contains(sc.Modes, "ipvs") {
		return nil, fmt.Errorf("sim: ipvs.schedulerFlags %v are not modelled (the sim's sh and mh hash the source address only); run with --engine real", sc.IPVS.SchedulerFlags)
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
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			progress(fmt.Sprintf("sim %s at %d services", mode, n))
			mr, err := runMode(ctx, at, cal, services, mode)
			if err != nil {
				return nil, fmt.Errorf("sim: mode %s at %d services: %w", mode, n, err)
			}
			mr.Services = n
			res.Modes = append(res.Modes, *mr)
		}
	}
	res.Finished = time.Now()
	return res, nil
}

// model is one mode's rendered state at one size.
type model struct {
	mode     string
	direct   bool
	cal      *Calibration
	cost     *ModeCost
	objects  int
	bytes    int
	walker   *IPTablesWalker
	portBase []int // first flat index of each service's ports (userspace portals)
	services []workload.Service
	flat     []workload.Target
	sc       *scenarios.Scenario
}

// newModel renders services with mode's render step and counts what a
// full sync programs, as the real proxier's SyncStats counts it.
func newModel(sc *scenarios.Scenario, cal *Calibration, services []workload.Service, mode string) (*model, error) {
	cost, err := cal.Mode(mode)
	if err != nil {
		return nil, err
	}
	_, _, _, cluster := sc.Prefixes()
	m := &model{mode: mode, cal: cal, cost: cost, services: services, flat: workload.FlatTargets(services), sc: sc}
	switch mode {
	case "none":
		m.direct = true
	case "iptables":
		rs, err := iptables.Render(iptables.Config{Backend: sc.IPTables.Backend, ClusterCIDR: cluster}, services)
		if err != nil {
			return nil, err
		}
		m.objects, m.bytes = rs.NatRules+rs.FilterRules, len(rs.Data)
		if m.walker, err = NewIPTablesWalker(rs); err != nil {
			return nil, err
		}
	case "nftables":
		rs, err := nftables.Render(nftables.Config{ClusterCIDR: cluster}, services)
		if err != nil {
			return nil, err
		}
		m.objects = rs.Counts().Objects()
		m.bytes = m.objects * 120 // nft's netlink messages: about 120 bytes per object
	case "ipvs":
		rs, err := ipvs.Render(ipvs.Config{Scheduler: sc.IPVS.Scheduler, ClusterCIDR: cluster}, services)
		if err != nil {
			return nil, err
		}
		m.objects = len(rs.Virtual) + rs.RealServers + len(rs.Addresses) + len(rs.SetEntries) + rs.NATRules
		m.bytes = len(rs.NAT) + 64*(m.objects-rs.NATRules)
	case "userspace":
		var portals []userspace.Portal
		pp := uint16(30000)
		for i := range services {
			s := &services[i]
			for _, p := range s.Ports {
				portals = append(portals, userspace.Portal{Name: s.PortName(p), ClusterIP: s.ClusterIP, Port: p.Port, Protocol: p.Protocol, ProxyPort: pp})
				pp++
				if pp == 0 {
					pp = 30000
				}
			}
		}
		rs, err := userspace.Render(portals)
		if err != nil {
			return nil, err
		}
		m.objects, m.bytes = len(portals)+rs.Rules, len(rs.Data)
		m.portBase = make([]int, len(services))
		k := 0
		for i := range services {
			m.portBase[i] = k
			k += len(services[i].Ports)
		}
	default:
		return nil, fmt.Errorf("the sim engine has no model of mode %q (models: %v)", mode, Modes)
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
		ns = m.cost.Full.At(float64(m.objects))
	} else {
		ns = m.cost.Incremental.At(float64(m.objects))
		if changed > 1 {
			ns += m.cost.PerChangedObjectNs * m.cost.ObjectsPerChange * float64(changed-1)
		}
	}
	ns *= noise(m.cost.SyncCV, rng)
	return time.Duration(ns), time.Duration(ns * m.cost.CPUPerWall)
}

// noise is a lognormal factor of mean 1 and coefficient of variation cv.
func noise(cv float64, rng *rand.Rand) float64 {
	if cv <= 0 {
		return 1
	}
	s2 := math.Log(1 + cv*cv)
	return math.Exp(rng.NormFloat64()*math.Sqrt(s2) - s2/2)
}

func seedOf(sc *scenarios.Scenario, mode string, extra int64) int64 {
	h := fnv.New64a()
	h.Write([]byte(mode))
	return sc.Seed ^ int64(h.Sum64()>>1) ^ extra
}

func runMode(ctx context.Context, sc *scenarios.Scenario, cal *Calibration, services []workload.Service, mode string) (*reports.ModeResult, error) {
	m, err := newModel(sc, cal, services, mode)
	if err != nil {
		return nil, err
	}
	mr := &reports.ModeResult{Mode: mode, Info: map[string]string{
		"engine": "sim", "calibration": cal.Source, "calibration.default": strconv.FormatBool(cal.Default),
		"calibration.machine": cal.Machine, "calibration.kernel": cal.Kernel + " (" + cal.KernelWhere + ")",
		"calibration.measured": strconv.FormatBool(m.cost.Measured),
	}}
	switch mode {
	case "iptables":
		mr.Info["backend"] = sc.IPTables.Backend
		mr.Info["calibration.iptablesBackend"] = cal.IPTablesBackend
	case "ipvs":
		mr.Info["scheduler"] = sc.IPVS.Scheduler
		mr.Info["backend"] = "ipvs"
	case "nftables":
		mr.Info["backend"] = "knftables"
	default:
		mr.Info["backend"] = mode
	}
	if m.cost.Note != "" {
		mr.Info["calibration.note"] = m.cost.Note
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
		values, period := sc.ChurnSyncPeriods(mode)
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
	cal := m.cost
	v := m.baseAt(rng.Float64())
	if m.direct {
		return v
	}
	v += cal.LookupOverheadNs + cal.PerServiceNs*float64(len(m.services))
	switch {
	case m.walker != nil:
		s := &m.services[t.Service]
		rules, _ := m.walker.RulesWalked(s.ClusterIP, s.Ports[t.Port].Port)
		v += cal.PerRuleNs * float64(rules)
	case m.mode == "userspace":
		// The portal rules of KUBE-PORTALS-CONTAINER are walked in render
		// order (one REDIRECT per ServicePort) before the proxy's listener.
		v += cal.PerRuleNs * float64(m.portIndex(t)+1)
	}
	return v
}

// portIndex is t's position in render order (its portal rule's index).
func (m *model) portIndex(t workload.Target) int { return m.portBase[t.Service] + t.Port }

// baseAt is the calibration's base (mode none) connect time at u.
func (m *model) baseAt(u float64) float64 { return m.cal.baseAt(u) }

func readyOf(s *workload.Service) []workload.Endpoint {
	var out []workload.Endpoint
	for _, e := range s.Endpoints {
		if e.Ready {
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
		if fixed {
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

// newChooser returns the mode's endpoint chooser for one service port.
func (m *model) newChooser(eps []workload.Endpoint, port workload.ServicePort, rng *rand.Rand) (chooser, error) {
	switch m.mode {
	case "iptables":
		return &randomChooser{n: len(eps), rng: rng}, nil
	case "nftables":
		return &randomChooser{n: len(eps), rng: rng, nft: true}, nil
	case "ipvs":
		return newIPVSChooser(m.sc.IPVS.Scheduler, eps, port.TargetPort)
	case "userspace":
		return newUserspaceChooser(eps, port.TargetPort, rng), nil
	}
	return nil, nil
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
	hold := minSync + time.Duration(m.cost.Full.At(float64(m.objects)))
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
		End: c.Duration.Duration + c.Grace.Duration, Cost: m.syncCost, WatchDelay: sc.Sim.WatchDelay.Duration,
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
	return res, cr.SyncCPUPerNode
}
