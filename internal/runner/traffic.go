//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/proxybench/proxybench/internal/monitoring"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/traffic"
)

// trafficChunk is the most connections driven at one position before the
// traffic phase moves to the next.
const trafficChunk = 250

// TrafficStep is one call of the driver in the traffic phase.
type TrafficStep struct {
	Position    string
	Connections int // recorded
	Warmup      int // unrecorded, made first
	Seed        int64
}

// TrafficPlan is the traffic phase's order of work: per repetition, every
// position gets its connections in chunks of at most trafficChunk, the
// positions interleaved chunk by chunk in an order rotated every chunk and
// every repetition, so that slow drifts of the machine (a guest warming
// up, a neighbour's load) fall on every position alike and position
// differences are the data plane's. The warmup goes with each position's
// first chunk. Seeds are distinct per repetition, chunk and position.
func TrafficPlan(t scenarios.TrafficSpec, reps int, seed int64) []TrafficStep {
	chunks := (t.Connections + trafficChunk - 1) / trafficChunk
	np := len(t.Positions)
	var out []TrafficStep
	for rep := 0; rep < reps; rep++ {
		for k := 0; k < chunks*np; k++ {
			chunk := k / np
			i := (k + rep + chunk) % np
			st := TrafficStep{Position: t.Positions[i], Connections: min(trafficChunk, t.Connections-chunk*trafficChunk),
				Seed: seed + int64(rep*100000+chunk*100+i)}
			if chunk == 0 {
				st.Warmup = t.Warmup
			}
			out = append(out, st)
		}
	}
	return out
}

// TrafficAgg sums the driver's results per position (the namespace
// engine's traffic phase and the cluster engine's per node).
type TrafficAgg struct {
	services []workload.Service
	flat     []workload.Target
	pos      map[string]*reports.PositionResult
	hits     map[string]map[netip.Addr]int // fixed positions: connections per endpoint
	elapsed  map[string]time.Duration
	conns    int // every connection made, recorded or failed
	byPort   map[int]*traffic.PortSamples
}

func NewTrafficAgg(services []workload.Service) *TrafficAgg {
	return &TrafficAgg{services: services, flat: workload.FlatTargets(services),
		pos: map[string]*reports.PositionResult{}, hits: map[string]map[netip.Addr]int{}, elapsed: map[string]time.Duration{},
		byPort: map[int]*traffic.PortSamples{}}
}

// Add folds one driver result for position in.
func (a *TrafficAgg) Add(position string, dr *traffic.DriveResult) {
	pr := a.pos[position]
	if pr == nil {
		pr = &reports.PositionResult{Position: position, Index: -1}
		if position != workload.PosRandom {
			t := dr.Target
			svc := &a.services[t.Service]
			pr.Service = svc.PortName(svc.Ports[t.Port])
			if p := svc.Ports[t.Port].Protocol; p != "TCP" {
				pr.Protocol = p
			}
			pr.Index = flatIndex(a.flat, t)
			a.hits[position] = map[netip.Addr]int{}
		}
		a.pos[position] = pr
	}
	pr.SamplesNs = append(pr.SamplesNs, dr.LatenciesNs...)
	pr.TTFBSamplesNs = append(pr.TTFBSamplesNs, dr.TTFBNs...)
	pr.Errors += dr.Errors
	pr.Misses += dr.Misses
	for _, e := range dr.ErrorSamples {
		if len(pr.ErrorText) < 5 {
			pr.ErrorText = append(pr.ErrorText, e)
		}
	}
	for k, ts := range dr.ErrorTimesNs {
		if pr.ErrorKinds == nil {
			pr.ErrorKinds = map[string]reports.ErrorKind{}
		}
		ek := pr.ErrorKinds[k]
		ek.Count += len(ts)
		ek.SamplesNs = append(ek.SamplesNs, ts...)
		pr.ErrorKinds[k] = ek
	}
	for j, ps := range dr.ByPort {
		bp := a.byPort[j]
		if bp == nil {
			bp = &traffic.PortSamples{ErrorKinds: map[string]int{}}
			a.byPort[j] = bp
		}
		bp.LatenciesNs = append(bp.LatenciesNs, ps.LatenciesNs...)
		bp.Errors += ps.Errors
		bp.Misses += ps.Misses
		for k, n := range ps.ErrorKinds {
			bp.ErrorKinds[k] += n
		}
	}
	a.elapsed[position] += dr.Elapsed
	a.conns += len(dr.LatenciesNs) + dr.Errors + dr.Misses
	if h := a.hits[position]; h != nil {
		for _, m := range dr.Hits {
			for ip, n := range m {
				h[ip] += n
			}
		}
	}
}

// Results summarizes every position of positions (each must have been
// added): latency and TTFB summaries, connection rate, and at the fixed
// positions the hits per live endpoint (ready, and not among the first
// down of the service, which failure injection killed) with their
// fairness, pooled over positions.
func (a *TrafficAgg) Results(positions []string, down int) ([]reports.PositionResult, reports.FairnessSummary) {
	var out []reports.PositionResult
	var fs []reports.Fairness
	for _, position := range positions {
		pr := a.pos[position]
		pr.Latency = reports.Summarize(pr.SamplesNs)
		pr.TTFB = reports.Summarize(pr.TTFBSamplesNs)
		for k, ek := range pr.ErrorKinds {
			ek.TimeToError = reports.Summarize(ek.SamplesNs)
			pr.ErrorKinds[k] = ek
		}
		if d := a.elapsed[position]; d > 0 {
			pr.CPS = float64(len(pr.SamplesNs)) / d.Seconds()
		}
		if h := a.hits[position]; h != nil {
			t, _ := workload.PositionTarget(a.flat, position)
			svc := &a.services[t.Service]
			pr.Hits = map[string]int{}
			var obs, w []float64
			for k, e := range svc.Endpoints {
				if !e.Ready || k < down {
					continue // fairness is over the live endpoints
				}
				pr.Hits[e.IP.String()] = h[e.IP]
				obs = append(obs, float64(h[e.IP]))
				w = append(w, float64(e.Weight))
			}
			f := reports.ComputeFairness(obs, w)
			pr.Fairness = &f
			fs = append(fs, f)
		}
		out = append(out, *pr)
	}
	return out, reports.PoolFairness(fs)
}

// portResults splits the traffic phase by ServicePort index (the ports
// of the service spec, the same for every service): latency and errors
// over every position, and the fairness of the fixed positions (from
// lookup, as results returns it) that are that port. udpSource labels the
// UDP source ports.
func (a *TrafficAgg) portResults(lookup []reports.PositionResult, udpSource string) []reports.PortResult {
	if len(a.services) == 0 {
		return nil
	}
	spec := a.services[0].Ports
	out := make([]reports.PortResult, len(spec))
	for j, p := range spec {
		pr := reports.PortResult{Name: p.Name, Protocol: p.Protocol, Port: int(p.Port)}
		if p.Protocol == "UDP" {
			pr.SourcePorts = udpSource
		}
		if bp := a.byPort[j]; bp != nil {
			pr.Latency = reports.Summarize(bp.LatenciesNs)
			pr.Errors, pr.Misses = bp.Errors, bp.Misses
			if len(bp.ErrorKinds) > 0 {
				pr.ErrorKinds = bp.ErrorKinds
			}
		}
		var fs []reports.Fairness
		for _, l := range lookup {
			if l.Position == workload.PosRandom || l.Fairness == nil || l.Index < 0 || l.Index >= len(a.flat) || a.flat[l.Index].Port != j {
				continue
			}
			fs = append(fs, *l.Fairness)
			pr.Positions = append(pr.Positions, l.Position)
		}
		if len(fs) > 0 {
			f := reports.PoolFairness(fs)
			pr.Fairness = &f
		}
		out[j] = pr
	}
	return out
}

// splitByPort says whether a mode's result carries per-ServicePort rows:
// when services have more than one port or any UDP port.
func splitByPort(sc *scenarios.Scenario) bool {
	ps := sc.Services.PortList()
	return len(ps) > 1 || slices.Contains(sc.Services.Protocols(), "UDP")
}

// trafficOut is what the traffic phase gives a mode's result.
type trafficOut struct {
	lookup []reports.PositionResult
	fair   reports.FairnessSummary
	ports  []reports.PortResult // splitByPort only
	conns  int
	// kernel says how lookup.kernel was measured (nil: no timer seam);
	// kernelFault is a failure part-way through it.
	kernel      *reports.KernelTime
	kernelFault string
}

// trafficPhase is the traffic phase of one mode: TrafficPlan's steps,
// driven from clients through the ClusterIPs (directly to endpoints when
// direct), summed per position. It returns the per-position results, the
// pooled fairness at the fixed positions, the per-ServicePort rows and
// the connection count. Each driver call's connections are counted and
// their connect times observed in live as it returns (nil: not
// monitored).
func trafficPhase(ctx context.Context, sc *scenarios.Scenario, e *env, clients []*topology.Netns, services []workload.Service,
	direct bool, label string, prog Progress, live *monitoring.RowMetrics) (trafficOut, error) {
	return trafficPhaseVia(ctx, sc, e, clients, services, direct, nil, label, prog, live)
}

// trafficPhaseVia is trafficPhase through node addresses at each
// ServicePort's node port when via is given (via[i] is the node address
// client i dials: the nodePortLookup phase), else through the ClusterIPs.
func trafficPhaseVia(ctx context.Context, sc *scenarios.Scenario, e *env, clients []*topology.Netns, services []workload.Service,
	direct bool, via []netip.Addr, label string, prog Progress, live *monitoring.RowMetrics) (trafficOut, error) {
	t := sc.Traffic
	plan := TrafficPlan(t, sc.Repetitions, sc.Seed)
	prog.Start(fmt.Sprintf("%s: traffic, %d positions × %d repetitions × %d connections", label, len(t.Positions), sc.Repetitions, t.Connections), len(plan))
	defer prog.Done()
	agg := NewTrafficAgg(services)
	kt := newKernelAgg(sc, e.kernelTimer)
	defer kt.close()
	for _, st := range plan {
		dr, err := e.drive(ctx, traffic.DriveSpec{
			Clients: clients, Services: services, Direct: direct, NodeAddrs: via, Position: st.Position,
			Connections: st.Connections, Warmup: st.Warmup, Concurrency: t.Concurrency,
			Timeout: t.Timeout.Duration, Seed: st.Seed,
			UDPSourcePort: uint16(t.UDP.SourcePort), UDPSourcePorts: t.UDP.SourcePorts,
		})
		if err != nil {
			return trafficOut{}, fmt.Errorf("traffic at %s: %w", st.Position, err)
		}
		agg.Add(st.Position, dr)
		kt.step(services, st.Position, direct, dr)
		observeLookup(live, st.Position, dr)
		prog.Add(1)
	}
	out := trafficOut{conns: agg.conns}
	out.lookup, out.fair = agg.Results(t.Positions, sc.Failure.DownEndpointsPerService)
	out.kernel, out.kernelFault = kt.finish(out.lookup)
	if splitByPort(sc) {
		out.ports = agg.portResults(out.lookup, t.UDP.SourcePortLabel())
	}
	return out, nil
}

// warmupConnections bounds the warm-up pass per position: one
// repetition of the traffic plan with at most this many connections a
// position (and the position's own warmup), not the whole plan, whose
// length a 10k-service guest run would pay again in minutes.
const warmupConnections = 500

// warmupSeed sets the warm-up pass's seeds apart from the rows'.
const warmupSeed = 1 << 40

// warmupPhase is the warm-up pass of a run on one kernel
// (reports.Warmup), in a guest kernel (Run calls it for WhereGuest
// only): before the first row, the scenario's traffic plan
// (TrafficPlan: every position and its per-position warmup) for one
// repetition and at most warmupConnections a position, from the clients directly to the endpoints as mode none
// dials them, nothing of it recorded but its summary. The first row is
// mode none, the baseline every other row's ratios divide by, and it
// otherwise met the kernel cold: in a fresh uml:6.12 guest none's
// traffic of 1k-services took 72.8 s at p50 302 µs where iptables'
// right after it took 28.6 s at 82 µs (2026-12-04), which made every
// ratio against none wrong. Bounded (session 16): the whole plan once
// made the default test suite exceed its 10 minutes and a large guest
// run pay its traffic phase twice. nil (no pass) when no row of sc runs
// the traffic phase (Phases) or it has no connections.
func warmupPhase(ctx context.Context, sc *scenarios.Scenario, e *env, clients []*topology.Netns, services []workload.Service, prog Progress) (*reports.Warmup, error) {
	t := sc.Traffic
	wanted := slices.ContainsFunc(Phases, func(p Phase) bool {
		return p.Name == trafficPhaseV.Name && p.Scope == scenarios.ScopeRow && p.Wanted(sc)
	})
	if !wanted || t.Connections <= 0 || len(t.Positions) == 0 || len(clients) == 0 || len(services) == 0 {
		return nil, nil
	}
	wt := t
	wt.Connections = min(t.Connections, warmupConnections)
	plan := TrafficPlan(wt, 1, sc.Seed+warmupSeed)
	prog.Start(fmt.Sprintf("warm-up: the traffic plan once, direct to the pods, not recorded (%d positions × %d connections)", len(t.Positions), wt.Connections), len(plan))
	defer prog.Done()
	w := &reports.Warmup{}
	var lat []int64
	start := time.Now()
	for _, st := range plan {
		dr, err := e.drive(ctx, traffic.DriveSpec{
			Clients: clients, Services: services, Direct: true, Position: st.Position,
			Connections: st.Connections, Warmup: st.Warmup, Concurrency: t.Concurrency,
			Timeout: t.Timeout.Duration, Seed: st.Seed,
			UDPSourcePort: uint16(t.UDP.SourcePort), UDPSourcePorts: t.UDP.SourcePorts,
		})
		if err != nil {
			return nil, fmt.Errorf("warm-up: traffic at %s: %w", st.Position, err)
		}
		lat = append(lat, dr.LatenciesNs...)
		w.Connections += st.Warmup + len(dr.LatenciesNs) + dr.Errors + dr.Misses
		w.Errors += dr.Errors + dr.Misses
		prog.Add(1)
	}
	w.Ns = time.Since(start).Nanoseconds()
	if q := len(lat) / 4; q > 0 {
		w.FirstP50Ns, w.LastP50Ns = reports.Summarize(lat[:q]).P50, reports.Summarize(lat[len(lat)-q:]).P50
	}
	return w, nil
}

func flatIndex(flat []workload.Target, t workload.Target) int {
	for i, x := range flat {
		if x == t {
			return i
		}
	}
	return -1
}

// trafficPhaseV is the traffic phase as a Phase: lookup latency per
// position (trafficPhase) with lookup.kernel beside it, the ICMP
// counters over it, the CPU it took and the proxy's memory after it.
var trafficPhaseV = Phase{
	PhaseRule: scenarios.PhaseRule{Name: "traffic", Field: "traffic", Scope: scenarios.ScopeRow},
	Core:      true,
	Run: func(ctx context.Context, r *Row) error {
		mr := r.Result
		cpu0 := proxymodes.CPUTime()
		readICMP := r.Env.icmp
		if readICMP == nil {
			readICMP = func() (reports.ICMPCounters, error) { return reports.ICMPCounters{}, errNoCounters }
		}
		icmp0, icmpErr := readICMP()
		to, err := trafficPhase(ctx, r.Sc, r.Env, r.Testbed.Clients, r.Services, r.Mode.Direct, r.Mode.Name, r.Progress(), r.Live)
		if err != nil {
			return err
		}
		mr.Lookup, mr.Fairness, mr.Ports, mr.TrafficConns = to.lookup, to.fair, to.ports, to.conns
		mr.KernelTime = to.kernel
		if to.kernelFault != "" {
			r.Faults.add("lookup.kernel: %s", to.kernelFault)
		}
		if icmp1, err1 := readICMP(); errors.Is(icmpErr, errNoCounters) {
			// a testbed without counters (unit tests' fakes)
		} else if icmpErr == nil && err1 == nil {
			mr.ICMP = &reports.ICMPCounters{
				DestUnreachSent: icmp1.DestUnreachSent - icmp0.DestUnreachSent, RateLimitedHost: icmp1.RateLimitedHost - icmp0.RateLimitedHost,
				RateLimitedGlobal: icmp1.RateLimitedGlobal - icmp0.RateLimitedGlobal, LockDropped: icmp1.LockDropped - icmp0.LockDropped,
				SynRetrans: icmp1.SynRetrans - icmp0.SynRetrans,
			}
		} else {
			r.Faults.add("ICMP counters not read: %v", errors.Join(icmpErr, err1))
		}
		mr.TrafficCPUNs = int64(proxymodes.CPUTime() - cpu0)
		if u, ok := r.Proxier.(proxymodes.Usager); ok {
			_, mr.ProxyRSSBytes = u.Usage()
		}
		return nil
	},
}
