//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/proxybench/proxybench/internal/monitoring"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/iptables"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/traffic"
)

// The phases' unit tests: every phase on a fake proxier and a fake data
// plane (fakeEnv), no root, no namespace.

// fakeProxier keeps the services of its last successful Sync as the
// "kernel" state the fake data plane answers from.
type fakeProxier struct {
	mu       sync.Mutex
	fresh    bool // the next Sync is full
	state    []workload.Service
	syncs    int
	cleanups int
	failAt   int // the failAt-th Sync (1-based) fails; 0: none
}

func newFakeProxier() *fakeProxier { return &fakeProxier{fresh: true} }

func (p *fakeProxier) Mode() string { return "fake" }

func (p *fakeProxier) Sync(_ context.Context, services []workload.Service) (proxymodes.SyncStats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.syncs++
	if p.syncs == p.failAt {
		p.fresh = true
		return proxymodes.SyncStats{}, errors.New("fake sync failure")
	}
	kind := "incremental"
	if p.fresh {
		kind = "full"
	}
	p.fresh = false
	p.state = services
	return proxymodes.SyncStats{Kind: kind, Wall: time.Duration(p.syncs) * time.Millisecond, Objects: len(services)}, nil
}

func (p *fakeProxier) Cleanup(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cleanups++
	p.fresh, p.state = true, nil
	return nil
}

func (p *fakeProxier) Info() map[string]string { return map[string]string{"backend": "fake"} }

// lookup answers a connection to vip:port as the synced state would: a
// ready endpoint drawn by rng (ok false: no such service or none ready).
func (p *fakeProxier) lookup(vip netip.Addr, port uint16, rng *rand.Rand) (netip.AddrPort, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.state {
		if s.ClusterIP != vip {
			continue
		}
		for _, sp := range s.Ports {
			if sp.Port != port {
				continue
			}
			var ready []netip.Addr
			for _, e := range s.Endpoints {
				if e.Ready {
					ready = append(ready, e.IP)
				}
			}
			if len(ready) == 0 {
				return netip.AddrPort{}, false
			}
			return netip.AddrPortFrom(ready[rng.Intn(len(ready))], sp.TargetPort), true
		}
	}
	return netip.AddrPort{}, false
}

// fakePool runs workers as plain goroutines.
type fakePool struct{ n int }

func (f fakePool) Each(fn func(int)) {
	var wg sync.WaitGroup
	for w := 0; w < f.n; w++ {
		wg.Add(1)
		go func(w int) { defer wg.Done(); fn(w) }(w)
	}
	wg.Wait()
}
func (fakePool) Close() {}

// fakeEnv is an env over one fake proxier's state, with flush failures
// on demand and a record of the driver's calls.
type fakeEnv struct {
	env
	p        *fakeProxier
	flushErr error
	mu       sync.Mutex
	flushes  []int
	drives   []traffic.DriveSpec
	downed   []netip.Addr
	undone   bool
	rr       map[string]int // per position: connections so far (round robin)
}

func newFakeEnv(p *fakeProxier) *fakeEnv {
	f := &fakeEnv{p: p, rr: map[string]int{}}
	rngMu := sync.Mutex{}
	rng := rand.New(rand.NewSource(1))
	f.env = env{
		flush: func(n int) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.flushes = append(f.flushes, n)
			return f.flushErr
		},
		scratchSync: func(_ context.Context, _ *scenarios.Scenario, _ proxymodes.Mode, rep int, services []workload.Service) (proxymodes.SyncStats, error) {
			return proxymodes.SyncStats{Kind: "full", Wall: time.Duration(100+rep) * time.Millisecond, Objects: len(services)}, nil
		},
		drive: func(_ context.Context, spec traffic.DriveSpec) (*traffic.DriveResult, error) {
			f.mu.Lock()
			f.drives = append(f.drives, spec)
			rr := f.rr[spec.Position]
			f.rr[spec.Position] += spec.Connections
			f.mu.Unlock()
			flat := workload.FlatTargets(spec.Services)
			res := &traffic.DriveResult{Position: spec.Position, Hits: map[int]map[netip.Addr]int{}, Elapsed: time.Duration(spec.Connections) * time.Millisecond}
			if spec.Position != workload.PosRandom {
				res.Target, _ = workload.PositionTarget(flat, spec.Position)
			}
			svc := spec.Services[res.Target.Service]
			res.Hits[res.Target.Service] = map[netip.Addr]int{}
			bp := &traffic.PortSamples{}
			for i := 0; i < spec.Connections; i++ {
				e := svc.Endpoints[(rr+i)%len(svc.Endpoints)]
				res.Hits[res.Target.Service][e.IP]++
				res.LatenciesNs = append(res.LatenciesNs, int64(1000+i))
				res.TTFBNs = append(res.TTFBNs, int64(2000+i))
				bp.LatenciesNs = append(bp.LatenciesNs, int64(1000+i))
			}
			res.ByPort = map[int]*traffic.PortSamples{res.Target.Port: bp}
			return res, nil
		},
		probes: func(n int) (workerPool, error) { return fakePool{n}, nil },
		dial: func(dst netip.Addr, port uint16, _ time.Duration) (netip.AddrPort, time.Time, error) {
			start := time.Now()
			rngMu.Lock()
			landed, ok := f.p.lookup(dst, port, rng)
			rngMu.Unlock()
			time.Sleep(100 * time.Microsecond)
			if !ok {
				return landed, start, fmt.Errorf("connect %s:%d: connection refused", dst, port)
			}
			return landed, start, nil
		},
		down: func(_ context.Context, ips []netip.Addr, how string) (func() error, error) {
			f.downed = ips
			return func() error { f.undone = true; return nil }, nil
		},
	}
	return f
}

type recProgress struct{ steps []string }

func (r *recProgress) Start(s string, _ int) { r.steps = append(r.steps, s) }
func (r *recProgress) Add(int)               {}
func (r *recProgress) Done()                 {}

// phaseScenario is a small scenario; extra adds keys, traffic adds to
// the traffic section.
func phaseScenario(t *testing.T, traffic, extra string) (*scenarios.Scenario, []workload.Service) {
	t.Helper()
	sc, err := scenarios.Parse([]byte(`
seed: 4
repetitions: 3
modes: [iptables]
services: {count: 20, endpoints: {count: 4}}
traffic: {connections: 600, warmup: 10, positions: [first, middle, last]`+traffic+`}
`+extra), "phases.yaml")
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := workload.Services(sc)
	if err != nil {
		t.Fatal(err)
	}
	return sc, svcs
}

func fakeMode() proxymodes.Mode {
	return proxymodes.Mode{Name: "fake", New: func(*scenarios.Scenario, proxymodes.Node) (proxymodes.Proxier, error) { return newFakeProxier(), nil }}
}

// TestSyncFullPhase: the first repetitions sync in scratch namespaces,
// the last on the node after a conntrack flush; a failed flush is a fault,
// not an error.
func TestSyncFullPhase(t *testing.T) {
	sc, svcs := phaseScenario(t, "", "")
	p := newFakeProxier()
	e := newFakeEnv(p)
	var f faults
	stats, sum, err := syncFullPhase(context.Background(), sc, &e.env, fakeMode(), p, svcs, &recProgress{}, &f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 3 || stats[0].Wall != 100*time.Millisecond || stats[1].Wall != 101*time.Millisecond || stats[2].Kind != "full" || p.syncs != 1 {
		t.Fatalf("stats %+v, node syncs %d: want two scratch syncs then one full sync on the node", stats, p.syncs)
	}
	if sum.Count != 3 || sum.Min > int64(2*time.Millisecond) || sum.Max < int64(100*time.Millisecond) {
		t.Errorf("summary %+v, want 3 samples from 1ms to 101ms", sum)
	}
	if len(e.flushes) != 1 || e.flushes[0] != 0 || len(f) != 0 {
		t.Errorf("flushes %v faults %v, want node0 flushed once, no fault", e.flushes, f)
	}
	e.flushErr = errors.New("netlink: no conntrack")
	if _, _, err := syncFullPhase(context.Background(), sc, &e.env, fakeMode(), newFakeProxier(), svcs, &recProgress{}, &f, nil); err != nil {
		t.Fatal(err)
	}
	if len(f) != 1 || !strings.Contains(f[0], "no conntrack") {
		t.Errorf("faults %v, want the failed flush recorded", f)
	}
	p2 := newFakeProxier()
	p2.failAt = 1
	if _, _, err := syncFullPhase(context.Background(), sc, &e.env, fakeMode(), p2, svcs, &recProgress{}, &f, nil); err == nil {
		t.Error("a failed sync did not fail the phase")
	}
}

// TestSyncIncrementalPhase: every repetition is one recorded incremental
// sync of a moved endpoint and an unrecorded sync back; both are
// observed live.
func TestSyncIncrementalPhase(t *testing.T) {
	_, svcs := phaseScenario(t, "", "")
	p := newFakeProxier()
	if _, err := p.Sync(context.Background(), svcs); err != nil {
		t.Fatal(err)
	}
	live := monitoring.NewLive().BeginRow(monitoring.RowLabels{Mode: "fake"})
	stats, sum, err := syncIncrementalPhase(context.Background(), p, svcs, 3, live)
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 3 || sum.Count != 3 || p.syncs != 7 {
		t.Fatalf("%d stats, %d summarized, %d syncs; want 3, 3, 1+2*3", len(stats), sum.Count, p.syncs)
	}
	if n, f := liveSum(t, live, monitoring.MetricSyncDuration+"_count", "kind", "incremental"), liveSum(t, live, monitoring.MetricSyncDuration+"_count", "kind", "full"); n != 6 || f != 0 {
		t.Errorf("live: %v incremental and %v full syncs, want 6 (3 and 3 back) and 0", n, f)
	}
	for _, s := range stats {
		if s.Kind != "incremental" {
			t.Errorf("recorded a %s sync", s.Kind)
		}
	}
	// The state is back to services after the phase.
	if fmt.Sprint(p.state) != fmt.Sprint(svcs) {
		t.Error("the proxier does not hold the services after the phase")
	}
	moved := moveOneEndpoint(svcs, 0)
	diff := 0
	for i := range svcs {
		for k := range svcs[i].Endpoints {
			if svcs[i].Endpoints[k] != moved[i].Endpoints[k] {
				diff++
			}
		}
	}
	if diff != 1 {
		t.Errorf("moveOneEndpoint changed %d endpoints, want 1 (and left services as they were)", diff)
	}
}

// TestTrafficPlan: every position gets exactly its connections and one
// warmup per repetition; the order rotates, so no position is always
// first; seeds never repeat.
func TestTrafficPlan(t *testing.T) {
	tr := scenarios.TrafficSpec{Connections: 600, Warmup: 10, Positions: []string{"first", "middle", "last"}}
	plan := TrafficPlan(tr, 2, 7)
	conns, warm, firsts := map[string]int{}, map[string]int{}, map[string]int{}
	seeds := map[int64]bool{}
	for i, st := range plan {
		if st.Connections > trafficChunk || st.Connections < 1 {
			t.Fatalf("step %d: %d connections", i, st.Connections)
		}
		conns[st.Position] += st.Connections
		warm[st.Position] += st.Warmup
		if i%3 == 0 {
			firsts[st.Position]++
		}
		if seeds[st.Seed] {
			t.Fatalf("seed %d used twice", st.Seed)
		}
		seeds[st.Seed] = true
	}
	for _, pos := range tr.Positions {
		if conns[pos] != 2*600 || warm[pos] != 2*10 {
			t.Errorf("%s: %d connections, %d warmup; want 1200 and 20", pos, conns[pos], warm[pos])
		}
	}
	if len(firsts) < 2 {
		t.Errorf("the same position leads every round: %v", firsts)
	}
	if len(plan) != 2*3*3 {
		t.Errorf("%d steps, want 2 repetitions × 3 chunks × 3 positions", len(plan))
	}
}

// TestTrafficPhase aggregates the fake driver's results per position:
// samples, hits per live endpoint, fairness and connection counts; the
// row's live series counted every connection by position and its
// connect time.
func TestTrafficPhase(t *testing.T) {
	sc, svcs := phaseScenario(t, "", "failure: {downEndpointsPerService: 1}\n")
	e := newFakeEnv(newFakeProxier())
	live := monitoring.NewLive().BeginRow(monitoring.RowLabels{Mode: "fake", Implementation: "builtin", Kernel: "host", Row: "fake"})
	to, err := trafficPhase(context.Background(), sc, &e.env, nil, svcs, false, "fake", &recProgress{}, live)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range to.lookup {
		answered := liveSum(t, live, monitoring.MetricLookupConnections, "position", l.Position, "outcome", monitoring.OutcomeOK)
		all := liveSum(t, live, monitoring.MetricLookupConnections, "position", l.Position)
		if answered != float64(len(l.SamplesNs)) || all != float64(len(l.SamplesNs)+l.Errors+l.Misses) ||
			liveSum(t, live, monitoring.MetricLookupConnect+"_count", "position", l.Position) != answered {
			t.Errorf("live %s: %v answered of %v, want %d of %d", l.Position, answered, all, len(l.SamplesNs), len(l.SamplesNs)+l.Errors+l.Misses)
		}
	}
	lookup, fair, conns := to.lookup, to.fair, to.conns
	if to.ports != nil {
		t.Errorf("one TCP port per service: per-port rows %+v, want none", to.ports)
	}
	if conns != 3*3*600 || len(e.drives) != 3*3*3 {
		t.Fatalf("%d connections in %d drives, want %d in %d", conns, len(e.drives), 3*3*600, 27)
	}
	if len(lookup) != 3 {
		t.Fatalf("%d positions", len(lookup))
	}
	wantIndex := map[string]int{"first": 0, "middle": 10, "last": 19}
	for _, pr := range lookup {
		if pr.Index != wantIndex[pr.Position] || pr.Latency.Count != 1800 || pr.TTFB.Count != 1800 || pr.CPS <= 0 {
			t.Errorf("%s: index %d, %d samples, %d ttfb, cps %.0f", pr.Position, pr.Index, pr.Latency.Count, pr.TTFB.Count, pr.CPS)
		}
		// The first endpoint is down: only the other three count.
		if len(pr.Hits) != 3 || pr.Fairness == nil {
			t.Errorf("%s: hits %v, want the 3 live endpoints", pr.Position, pr.Hits)
		}
		for _, n := range pr.Hits {
			if n != 450 {
				t.Errorf("%s: hits %v, want 450 each (1800 round robin over 4)", pr.Position, pr.Hits)
				break
			}
		}
	}
	if fair.Services != 3 {
		t.Errorf("pooled fairness over %d services, want 3", fair.Services)
	}
	e.drive = func(context.Context, traffic.DriveSpec) (*traffic.DriveResult, error) {
		return nil, errors.New("drive: enter client netns: bad handle")
	}
	if _, err := trafficPhase(context.Background(), sc, &e.env, nil, svcs, false, "fake", &recProgress{}, nil); err == nil || !strings.Contains(err.Error(), "enter client netns") {
		t.Errorf("err %v, want the driver's setup failure", err)
	}
}

// TestTrafficPhaseByPort: with named ports (dns-tcp, dns) the traffic
// phase gives one row per ServicePort, with that port's samples and the
// fairness of the fixed positions that are that port.
func TestTrafficPhaseByPort(t *testing.T) {
	sc, err := scenarios.Parse([]byte(`
repetitions: 1
modes: [iptables]
services:
  count: 20
  endpoints: {count: 4}
  ports:
  - {name: dns-tcp, port: 53}
  - {name: dns, port: 53, protocol: UDP}
traffic: {connections: 200, positions: [first, middle, last], concurrency: 2, udp: {sourcePort: 5300, sourcePorts: 2}}
`), "ports.yaml")
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := workload.Services(sc)
	if err != nil {
		t.Fatal(err)
	}
	e := newFakeEnv(newFakeProxier())
	to, err := trafficPhase(context.Background(), sc, &e.env, nil, svcs, false, "fake", &recProgress{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(to.ports) != 2 {
		t.Fatalf("per-port rows %+v, want dns-tcp and dns", to.ports)
	}
	// first is svc 0 port 0 (dns-tcp), middle flat index 20 = svc 10 port 0, last svc 19 port 1 (dns).
	tcp, udp := to.ports[0], to.ports[1]
	if tcp.Name != "dns-tcp" || tcp.Protocol != "TCP" || tcp.Port != 53 || tcp.Latency.Count != 400 || !slices.Equal(tcp.Positions, []string{"first", "middle"}) || tcp.SourcePorts != "" {
		t.Errorf("dns-tcp row %+v", tcp)
	}
	if udp.Name != "dns" || udp.Protocol != "UDP" || udp.Latency.Count != 200 || !slices.Equal(udp.Positions, []string{"last"}) || udp.SourcePorts != "5300-5301" {
		t.Errorf("dns row %+v", udp)
	}
	if tcp.Fairness == nil || tcp.Fairness.Services != 2 || udp.Fairness == nil || udp.Fairness.Services != 1 {
		t.Errorf("fairness per port: %+v, %+v", tcp.Fairness, udp.Fairness)
	}
	for _, d := range e.drives {
		if d.UDPSourcePort != 5300 || d.UDPSourcePorts != 2 {
			t.Fatalf("drive spec UDP source %d+%d, want 5300+2", d.UDPSourcePort, d.UDPSourcePorts)
		}
	}
}

// TestFailurePhase kills the first n endpoints of every service and
// revives them on undo; without failure it does nothing.
func TestFailurePhase(t *testing.T) {
	sc, svcs := phaseScenario(t, "", "failure: {downEndpointsPerService: 2, mode: drop}\n")
	e := newFakeEnv(newFakeProxier())
	undo, err := failurePhase(context.Background(), sc, &e.env, svcs)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.downed) != 2*20 || e.downed[0] != svcs[0].Endpoints[0].IP || e.downed[1] != svcs[0].Endpoints[1].IP {
		t.Fatalf("downed %d addresses starting %v, want the first 2 of each of 20 services", len(e.downed), e.downed[:2])
	}
	if err := undo(); err != nil || !e.undone {
		t.Error("undo did not revive the endpoints")
	}
	sc.Failure.DownEndpointsPerService = 0
	e2 := newFakeEnv(newFakeProxier())
	if _, err := failurePhase(context.Background(), sc, &e2.env, svcs); err != nil || e2.downed != nil {
		t.Error("failure injection ran without failure configured")
	}
	if got := downAddresses(svcs[:1], 9); len(got) != 4 {
		t.Errorf("downAddresses of more than a service has: %d addresses, want its 4", len(got))
	}
}

// TestChurnPhaseOnFake: on a fake data plane that answers from the fake
// proxier's last sync, the churn phase observes every change with a
// positive latency, and the sync loop syncs incrementally; the row's
// live series counted every change applied and observed, its
// programming latency and every sync as the result has them.
func TestChurnPhaseOnFake(t *testing.T) {
	sc, svcs := phaseScenario(t, "", "churn: {rate: 40, duration: 1s, grace: 5s, probes: 4}\n")
	p := newFakeProxier()
	if _, err := p.Sync(context.Background(), svcs); err != nil {
		t.Fatal(err)
	}
	e := newFakeEnv(p)
	live := monitoring.NewLive().BeginRow(monitoring.RowLabels{Mode: "fake", Implementation: "builtin", Kernel: "host", Row: "fake"})
	res, err := churnPhase(context.Background(), sc, &e.env, p, svcs, 20*time.Millisecond, time.Hour, &recProgress{}, live)
	if err != nil {
		t.Fatal(err)
	}
	if res.Changes < 10 || res.Observed != res.Changes || res.Unobserved != 0 {
		t.Fatalf("%d changes, %d observed, %d unobserved", res.Changes, res.Observed, res.Unobserved)
	}
	if a, o, n := liveSum(t, live, monitoring.MetricChurnApplied), liveSum(t, live, monitoring.MetricChurnObserved), liveSum(t, live, monitoring.MetricProgramming+"_count"); a != float64(res.Changes) || o != float64(res.Observed) || n != o {
		t.Errorf("live: %v applied, %v observed, %v programming observations; want %d, %d, %d", a, o, n, res.Changes, res.Observed, res.Observed)
	}
	if n := liveSum(t, live, monitoring.MetricSyncDuration+"_count"); n != float64(len(res.Syncs)) {
		t.Errorf("live: %v syncs, want the loop's %d", n, len(res.Syncs))
	}
	for _, s := range res.Samples {
		if s.LatencyNs <= 0 || s.LatencyNs > int64(6*time.Second) {
			t.Errorf("%s: latency %v", s.Kind, time.Duration(s.LatencyNs))
		}
	}
	if res.SyncSummary["incremental"].Count == 0 || len(res.Syncs) > res.Changes+1 {
		t.Errorf("%d syncs (%v) for %d changes", len(res.Syncs), res.SyncSummary, res.Changes)
	}
	if res.Latency.Count != res.Observed {
		t.Errorf("latency summary over %d, want %d", res.Latency.Count, res.Observed)
	}
}

// TestChurnPhaseFaults: probes that cannot enter their namespace fail the
// phase before any change; a failed sync does not: it is recorded with its
// recovery (the next sync full) and the phase goes on.
func TestChurnPhaseFaults(t *testing.T) {
	sc, svcs := phaseScenario(t, "", "churn: {rate: 40, duration: 300ms, grace: 1s, probes: 2}\n")
	p := newFakeProxier()
	if _, err := p.Sync(context.Background(), svcs); err != nil {
		t.Fatal(err)
	}
	e := newFakeEnv(p)
	e.probes = func(int) (workerPool, error) { return nil, errors.New(`enter netns "pb-x-c0": bad file descriptor`) }
	if res, err := churnPhase(context.Background(), sc, &e.env, p, svcs, 20*time.Millisecond, time.Hour, &recProgress{}, nil); err == nil || res != nil || p.syncs != 1 {
		t.Fatalf("res %v err %v syncs %d: want the probes' failure before any sync", res, err, p.syncs)
	}
	e = newFakeEnv(p)
	p.failAt = p.syncs + 1
	res, err := churnPhase(context.Background(), sc, &e.env, p, svcs, 20*time.Millisecond, time.Hour, &recProgress{}, nil)
	if err != nil || res == nil || res.Syncs[0].Err == "" || res.FailedSyncs != 1 || len(res.Failures) != 1 {
		t.Fatalf("err %v, res %+v: want the failed sync recorded and the phase going on", err, res)
	}
	f := res.Failures[0]
	if len(res.Syncs) < 2 || f.Index != 0 || f.RecoveredNs <= 0 || f.RecoveryKind != res.Syncs[1].Kind || res.Observed != res.Changes {
		t.Errorf("failure %+v, %d syncs, %d of %d changes observed: want a recovery by the next sync", f, len(res.Syncs), res.Observed, res.Changes)
	}
}

// TestFairnessPhaseOnFake lays out the fairness counts per node, source
// and endpoint from the fake driver's answers, and records a failed
// conntrack flush as a fault.
func TestFairnessPhaseOnFake(t *testing.T) {
	sc, svcs := phaseScenario(t, ", perService: 8, longLived: {connections: 4}", "")
	svcs = svcs[:2]
	src := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	tb := &topology.Testbed{
		Nodes:         make([]*topology.Netns, 2),
		Clients:       make([]*topology.Netns, 3),
		ClientNode:    []int{0, 1, 0},
		ClientSources: [][]netip.Addr{{src("198.19.0.1"), src("198.19.0.2")}, {src("198.19.0.5")}, {src("198.19.0.9")}},
	}
	p0, p1 := newFakeProxier(), newFakeProxier()
	e := newFakeEnv(p0)
	e.flushErr = errors.New("flush failed")
	ep := func(s, k int) netip.Addr { return svcs[s].Endpoints[k].IP }
	e.firstPicks = func(_ context.Context, clients []*topology.Netns, sources []netip.Addr, _ []workload.Service, _ time.Duration) ([][]netip.Addr, error) {
		if len(clients) != 2 || sources[0] != src("198.19.0.1") || sources[1] != src("198.19.0.5") {
			t.Errorf("first picks from %d clients %v, want the first client of each node", len(clients), sources)
		}
		return [][]netip.Addr{{ep(0, 1), ep(1, 2)}, {ep(0, 3), {}}}, nil
	}
	e.driveFairness = func(_ context.Context, spec traffic.FairnessSpec) (*traffic.FairnessResult, error) {
		h := map[traffic.HitKey]int{
			{Client: 0, Source: 1, Target: workload.Target{Service: 0}, Endpoint: ep(0, 2)}:       5,
			{Client: 2, Source: 0, Target: workload.Target{Service: 1}, Endpoint: ep(1, 0)}:       3,
			{Client: 1, Source: 0, Target: workload.Target{Service: 0}, Endpoint: src("1.2.3.4")}: 9, // not an endpoint
		}
		return &traffic.FairnessResult{Hits: h, Errors: 1}, nil
	}
	e.hold = func(context.Context, traffic.HoldSpec) (*traffic.HoldResult, error) {
		return &traffic.HoldResult{Active: []map[netip.Addr]int{{ep(0, 0): 4}, {ep(1, 3): 2}}, Misses: 2}, nil
	}
	var f faults
	r, err := fairnessPhase(context.Background(), sc, &e.env, tb, []proxymodes.Proxier{p0, p1}, svcs, iptables.Mode, &recProgress{}, &f)
	if err != nil {
		t.Fatal(err)
	}
	if p0.cleanups != 2 || p1.cleanups != 2 || p0.syncs != 2 || p1.syncs != 2 {
		t.Errorf("cleanups %d/%d syncs %d/%d: every node resyncs before the fairness and long-lived parts", p0.cleanups, p1.cleanups, p0.syncs, p1.syncs)
	}
	if len(f) != 4 {
		t.Errorf("faults %v, want one per failed flush (2 nodes × 2 resyncs)", f)
	}
	if r.Errors != 1 || r.Misses != 2 || len(r.Sources) != 4 || len(r.Obs) != 4 {
		t.Fatalf("errors %d misses %d sources %v obs %d", r.Errors, r.Misses, r.Sources, len(r.Obs))
	}
	// Obs: service 0 node 0, service 0 node 1, service 1 node 0, service 1 node 1.
	o := r.Obs
	if o[0].Node != 0 || o[1].Node != 1 || o[0].FirstPick != 1 || o[1].FirstPick != 3 || o[2].FirstPick != 2 || o[3].FirstPick != -1 {
		t.Errorf("first picks %d %d %d %d, want 1 3 2 -1", o[0].FirstPick, o[1].FirstPick, o[2].FirstPick, o[3].FirstPick)
	}
	// Node 0's rows: client 0's two sources, then client 2's.
	if fmt.Sprint(o[0].Sources) != "[0 1 3]" || o[0].Counts[1][2] != 5 || o[2].Counts[2][0] != 3 {
		t.Errorf("node 0 rows %v, counts %v / %v", o[0].Sources, o[0].Counts, o[2].Counts)
	}
	for _, c := range o[1].Counts {
		for _, n := range c {
			if n != 0 {
				t.Errorf("a hit on a non-endpoint was counted: %v", o[1].Counts)
			}
		}
	}
	if o[0].Active == nil || o[0].Active[0] != 4 || o[1].Active != nil || o[2].Active[3] != 2 {
		t.Errorf("active counts %v %v %v: cluster-wide, on the first node's row", o[0].Active, o[1].Active, o[2].Active)
	}
}

// TestRunModeOnFake composes the phases of one mode on the fakes: every
// figure group is filled, the proxier is cleaned up, faults are kept.
func TestRunModeOnFake(t *testing.T) {
	sc, svcs := phaseScenario(t, ", perService: 4", "churn: {rate: 20, duration: 300ms, grace: 3s, probes: 2}\niptables: {minSyncPeriod: 20ms}\n")
	p := newFakeProxier()
	// The fake mode's churn runs with the iptables block's sync periods
	// (a mode without SyncPeriods has no churn phase).
	m := proxymodes.Mode{Name: "fake", New: func(*scenarios.Scenario, proxymodes.Node) (proxymodes.Proxier, error) { return p, nil },
		SyncPeriods: iptables.Mode.SyncPeriods}
	e := newFakeEnv(p)
	e.firstPicks = func(_ context.Context, clients []*topology.Netns, _ []netip.Addr, _ []workload.Service, _ time.Duration) ([][]netip.Addr, error) {
		return make([][]netip.Addr, len(clients)), nil
	}
	e.driveFairness = func(context.Context, traffic.FairnessSpec) (*traffic.FairnessResult, error) {
		return &traffic.FairnessResult{}, nil
	}
	e.flushErr = errors.New("no ctnetlink")
	tb := &topology.Testbed{Nodes: make([]*topology.Netns, 1), Clients: make([]*topology.Netns, 1), ClientNode: []int{0},
		ClientSources: [][]netip.Addr{{netip.MustParseAddr("198.19.0.1")}}}
	mr, err := runMode(context.Background(), sc, Options{Progress: &recProgress{}}, tb, &e.env, svcs, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(mr.SyncFull) != 3 || len(mr.SyncIncremental) != 3 || len(mr.Lookup) != 3 || mr.FairnessRun == nil || len(mr.Churn) != 1 {
		t.Fatalf("sync.full %d, incremental %d, lookup %d, fairness %v, churn %d", len(mr.SyncFull), len(mr.SyncIncremental), len(mr.Lookup), mr.FairnessRun != nil, len(mr.Churn))
	}
	if e.p.state != nil || e.p.cleanups < 2 {
		t.Errorf("the mode was not cleaned up (%d cleanups)", e.p.cleanups)
	}
	// Flushes: before the last full sync, the fairness resync, after the mode.
	if len(mr.Faults) != 3 {
		t.Errorf("faults %q, want the 3 failed flushes", mr.Faults)
	}
	if mr.Churn[0].Observed != mr.Churn[0].Changes {
		t.Errorf("churn: %d of %d changes observed", mr.Churn[0].Observed, mr.Churn[0].Changes)
	}
}

// TestTopologySpec: the build phase asks for the scenario's nodes, client
// pods and source addresses, and with pods: isolated for one namespace per
// endpoint of the largest service set.
func TestTopologySpec(t *testing.T) {
	sc, svcs := phaseScenario(t, "", "topology: {clientPods: 4, nodes: 2, clientAddresses: 3, pods: isolated}\n")
	spec := topologySpec(sc, "abc123", svcs)
	if spec.RunID != "abc123" || spec.Nodes != 2 || spec.ClientPods != 4 || spec.ClientAddresses != 3 || !spec.ClientCIDR.IsValid() {
		t.Errorf("spec %+v", spec)
	}
	if len(spec.IsolatedPods) != 20*4 || spec.IsolatedPods[0] != svcs[0].Endpoints[0].IP || spec.IsolatedPods[79] != svcs[19].Endpoints[3].IP {
		t.Errorf("%d isolated pods, want every endpoint in order", len(spec.IsolatedPods))
	}
	svcNet, podNet, nodeNet, _ := sc.Prefixes()
	if spec.ServiceCIDR != svcNet || spec.PodCIDR != podNet || spec.NodeCIDR != nodeNet {
		t.Errorf("prefixes %v %v %v, want the scenario's", spec.ServiceCIDR, spec.PodCIDR, spec.NodeCIDR)
	}
	sc2, _ := phaseScenario(t, "", "")
	if s := topologySpec(sc2, "abc123", svcs); s.IsolatedPods != nil || s.ClientAddresses != 0 {
		t.Errorf("shared backend, one address: spec %+v", s)
	}
}

// countProgress records each step's line and total.
type countProgress struct {
	steps  []string
	totals []int
}

func (c *countProgress) Start(s string, n int) {
	c.steps, c.totals = append(c.steps, s), append(c.totals, n)
}
func (c *countProgress) Add(int) {}
func (c *countProgress) Done()   {}

// TestSyncFullPhaseSingleProgress: a mode measured once (kube-proxy rows,
// SingleFullSync) says "sync.full × 1" in the progress, not the
// scenario's repetitions it does not run.
func TestSyncFullPhaseSingleProgress(t *testing.T) {
	sc, svcs := phaseScenario(t, "", "")
	p := newFakeProxier()
	e := newFakeEnv(p)
	m := fakeMode()
	m.SingleFullSync = true
	var f faults
	var prog countProgress
	stats, _, err := syncFullPhase(context.Background(), sc, &e.env, m, p, svcs, &prog, &f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 1 || len(prog.steps) != 1 {
		t.Fatalf("stats %d, steps %v: want one sync and one progress step", len(stats), prog.steps)
	}
	if !strings.Contains(prog.steps[0], "sync.full × 1 ") || prog.totals[0] != 1 {
		t.Errorf("progress %q (total %d), want sync.full × 1 with a total of 1 for a mode measured once", prog.steps[0], prog.totals[0])
	}
}

// liveSum sums the samples of family name (a histogram's "_count" reads
// its sample counts) in r's registry whose labels match kv (name,
// value, ...).
func liveSum(t *testing.T, r *monitoring.RowMetrics, name string, kv ...string) float64 {
	t.Helper()
	fams, err := r.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	base, count := strings.CutSuffix(name, "_count")
	sum := 0.0
	for _, f := range fams {
		if f.GetName() != name && !(count && f.GetName() == base) {
			continue
		}
	metric:
		for _, m := range f.Metric {
			for i := 0; i+1 < len(kv); i += 2 {
				if !slices.ContainsFunc(m.Label, func(l *dto.LabelPair) bool { return l.GetName() == kv[i] && l.GetValue() == kv[i+1] }) {
					continue metric
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return sum
}
