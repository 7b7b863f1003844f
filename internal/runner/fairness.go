//go:build linux

package runner

import (
	"context"
	"fmt"
	"math/rand"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/traffic"
)

// topologySpec is the testbed sc asks for: nodes, client pods and their
// source addresses, and with pods: isolated one namespace per endpoint
// address of the largest service set (services).
func topologySpec(sc *scenarios.Scenario, runID string, services []workload.Service) topology.Spec {
	svcNet, podNet, nodeNet, _ := sc.Prefixes()
	spec := topology.Spec{RunID: runID, ClientPods: sc.Topology.ClientPods,
		ServiceCIDR: svcNet, PodCIDR: podNet, NodeCIDR: nodeNet, Nodes: sc.Topology.NodeCount()}
	if sc.DualStack() {
		spec.IPv6 = sc.IPv6Prefix()
	}
	// nodePortLookup dials each client's node primary IP (nodePortAddrs).
	spec.ClientNodeRoutes = sc.Traffic.NodePorts
	if a := sc.Topology.Addresses(); a > 1 {
		spec.ClientAddresses, spec.ClientCIDR = a, sc.ClientPrefix()
	}
	isolated := sc.Topology.PodModel() == "isolated"
	if isolated {
		placed := false
		for _, s := range services {
			for _, e := range s.Endpoints {
				spec.IsolatedPods = append(spec.IsolatedPods, e.IP)
				n, _ := nodeIndex(e.Node)
				spec.PodNodes = append(spec.PodNodes, n)
				placed = placed || e.Node != ""
			}
		}
		if !placed {
			spec.PodNodes = nil
		}
	}
	if sc.Topology.ExternalClient {
		spec.ExternalCIDR = sc.ExternalClientPrefix()
		lb := netip.MustParsePrefix(sc.LoadBalancerPrefixString())
		spec.ExternalVia = []netip.Prefix{lb}
		for _, s := range services {
			for _, ip := range s.ExternalIPs {
				if p := netip.PrefixFrom(ip, 32); !slices.Contains(spec.ExternalVia, p) && !lb.Contains(ip) {
					spec.ExternalVia = append(spec.ExternalVia, p)
				}
			}
		}
		spec.NodeVia = slices.Clone(spec.ExternalVia)
		if isolated {
			spec.NodeVia = append(spec.NodeVia, svcNet)
		}
	}
	return spec
}

// nodeIndex is the index of node name ("node-1": 1; scenarios.NodeName),
// 0 and false for any other name.
func nodeIndex(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "node-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0
}

// startEcho starts the echo server in the backend host, or in every
// isolated pod.
func startEcho(tb *topology.Testbed, services []workload.Service) (*traffic.EchoServer, error) {
	nss := tb.Pods
	if tb.Backend != nil {
		nss = []*topology.Netns{tb.Backend}
	}
	echo, err := traffic.StartEchoIn(nss, workload.TargetPorts(services))
	if err != nil {
		return nil, err
	}
	if err := echo.AddUDP(nss, workload.UDPTargetPorts(services)); err != nil {
		echo.Close()
		return nil, err
	}
	if tb.IPv6.IsValid() {
		if err := echo.AddIPv6(nss, workload.TargetPorts(services)); err != nil {
			echo.Close()
			return nil, err
		}
	}
	return echo, nil
}

// applyWeights sets every endpoint's Weight from
// services.endpoints.weights (scenarios.EndpointWeights); services must
// come from workload.Services(sc).
func applyWeights(sc *scenarios.Scenario, services []workload.Service) {
	if !sc.Services.Endpoints.Weights.Set() {
		return
	}
	ws := sc.EndpointWeights()
	for i := range services {
		eps := slices.Clone(services[i].Endpoints)
		for k := range eps {
			if i < len(ws) && k < len(ws[i]) {
				eps[k].Weight = ws[i][k]
			}
		}
		services[i].Endpoints = eps
	}
}

// nodeServices returns services with each service's endpoints in the order
// node n's proxier is given: as listed (sorted, as the API returns them)
// or, with endpointOrder shuffled, a permutation seeded by the scenario
// seed, the node and the service.
func nodeServices(sc *scenarios.Scenario, services []workload.Service, n int) []workload.Service {
	if sc.Topology.Order() != "shuffled" {
		return services
	}
	out := slices.Clone(services)
	for i := range out {
		eps := slices.Clone(out[i].Endpoints)
		rng := rand.New(rand.NewSource(sc.Seed*1_000_003 + int64(n)*7919 + int64(i)))
		rng.Shuffle(len(eps), func(a, b int) { eps[a], eps[b] = eps[b], eps[a] })
		out[i].Endpoints = eps
	}
	return out
}

// startNodes creates and syncs a proxier of mode m on every node but the
// first (each with its node's endpoint order), as every node's kube-proxy
// programs the same services. The caller cleans them up with stopNodes.
func startNodes(ctx context.Context, m proxymodes.Mode, sc *scenarios.Scenario, tb *topology.Testbed, services []workload.Service) ([]proxymodes.Proxier, error) {
	var ps []proxymodes.Proxier
	for n := 1; n < len(tb.Nodes); n++ {
		p, err := m.New(sc, tb.Nodes[n])
		if err != nil {
			return ps, fmt.Errorf("node%d: %w", n, err)
		}
		ps = append(ps, p)
		if _, err := p.Sync(ctx, nodeServices(sc, services, n)); err != nil {
			return ps, fmt.Errorf("node%d: sync: %w", n, err)
		}
	}
	return ps, nil
}

// stopNodes cleans up the proxiers of startNodes and flushes their nodes'
// conntrack tables; a failed flush is a fault (the next mode could follow
// this one's NAT entries on that node).
func stopNodes(ctx context.Context, e *env, ps []proxymodes.Proxier, f *faults) error {
	var first error
	for i, p := range ps {
		if err := p.Cleanup(context.WithoutCancel(ctx)); err != nil && first == nil {
			first = fmt.Errorf("node%d: cleanup: %w", i+1, err)
		}
		if err := e.flush(i + 1); err != nil {
			f.add("conntrack flush of node%d after the mode failed (the next mode may follow its NAT entries): %v", i+1, err)
		}
	}
	return first
}

// fairnessResync cleans up every node's proxier (proxiers[n] on node n),
// flushes the node's conntrack table and syncs it fresh with its endpoint
// order, so first picks and schedulers start from a fresh state. A failed
// flush is a fault (first picks could follow old NAT entries).
func fairnessResync(ctx context.Context, sc *scenarios.Scenario, e *env, proxiers []proxymodes.Proxier, services []workload.Service, f *faults) error {
	for n, p := range proxiers {
		if err := p.Cleanup(ctx); err != nil {
			return fmt.Errorf("node%d: cleanup: %w", n, err)
		}
		if err := e.flush(n); err != nil {
			f.add("fairness: conntrack flush of node%d before a fresh sync failed (first picks may follow old NAT entries): %v", n, err)
		}
		if _, err := p.Sync(ctx, nodeServices(sc, services, n)); err != nil {
			return fmt.Errorf("node%d: sync: %w", n, err)
		}
	}
	return nil
}

// firstClients picks the first client pod of each node (in node order,
// nodes without clients skipped): the clients, their first source
// addresses, and each one's node.
func firstClients(tb *topology.Testbed) (clients []*topology.Netns, sources []netip.Addr, node []int) {
	for n := range tb.Nodes {
		for c, cn := range tb.ClientNode {
			if cn == n {
				node = append(node, n)
				clients = append(clients, tb.Clients[c])
				sources = append(sources, tb.ClientSources[c][0])
				break
			}
		}
	}
	return clients, sources, node
}

// fairnessTally arranges the fairness phase's raw counts into
// reports.ServiceObs cells: one per node and ServicePort, with a row per
// source address of the node's clients and a column per endpoint.
type fairnessTally struct {
	flat        []workload.Target
	tIndex      map[workload.Target]int
	clientNode  []int
	srcIndex    map[[2]int]int // (client, source) -> index in sources
	nodeSources [][]int        // per node: its rows, as indexes in sources
	sources     []string
	epIndex     []map[netip.Addr]int // per ServicePort: endpoint -> column
	cells       map[[2]int]*reports.ServiceObs
	nodes       int
}

// newFairnessTally lays out the cells for services on nodes nodes whose
// client c sits on node clientNode[c] with source addresses
// clientSources[c]. An endpoint's weight is its Weight, 0 when not ready.
func newFairnessTally(services []workload.Service, nodes int, clientNode []int, clientSources [][]netip.Addr) *fairnessTally {
	t := &fairnessTally{flat: workload.FlatTargets(services), tIndex: map[workload.Target]int{}, clientNode: clientNode,
		srcIndex: map[[2]int]int{}, nodeSources: make([][]int, nodes), cells: map[[2]int]*reports.ServiceObs{}, nodes: nodes}
	// Sources of the run, in client order; each node's rows are its clients' sources.
	for c, srcs := range clientSources {
		for s, a := range srcs {
			t.srcIndex[[2]int{c, s}] = len(t.sources)
			t.nodeSources[clientNode[c]] = append(t.nodeSources[clientNode[c]], len(t.sources))
			t.sources = append(t.sources, a.String())
		}
	}
	t.epIndex = make([]map[netip.Addr]int, len(t.flat))
	for ti, tg := range t.flat {
		t.tIndex[tg] = ti
		svc := &services[tg.Service]
		t.epIndex[ti] = map[netip.Addr]int{}
		var eps []string
		var ws []float64
		for k, e := range svc.Endpoints {
			t.epIndex[ti][e.IP] = k
			eps = append(eps, e.IP.String())
			w := float64(e.Weight)
			if !e.Ready {
				w = 0
			}
			ws = append(ws, w)
		}
		for n := 0; n < nodes; n++ {
			if len(t.nodeSources[n]) == 0 {
				continue
			}
			so := &reports.ServiceObs{Node: n, Service: svc.PortName(svc.Ports[tg.Port]), Endpoints: eps, Weights: ws,
				Sources: t.nodeSources[n], FirstPick: -1}
			so.Counts = make([][]int, len(t.nodeSources[n]))
			for i := range so.Counts {
				so.Counts[i] = make([]int, len(eps))
			}
			t.cells[[2]int{n, ti}] = so
		}
	}
	return t
}

// firstPicks records picks[i][t], the endpoint the first connection of
// node node[i] to ServicePort t landed on (invalid: failed).
func (t *fairnessTally) firstPicks(picks [][]netip.Addr, node []int) {
	for i, row := range picks {
		n := node[i]
		for ti, a := range row {
			if k, ok := t.epIndex[ti][a]; ok && a.IsValid() {
				t.cells[[2]int{n, ti}].FirstPick = k
			}
		}
	}
}

// hits adds the fairness connections' counts; hits on an address that is
// not an endpoint of the service are not counted (the driver counted them
// as misses).
func (t *fairnessTally) hits(hits map[traffic.HitKey]int) {
	for k, v := range hits {
		n := t.clientNode[k.Client]
		ti := t.tIndex[k.Target]
		so := t.cells[[2]int{n, ti}]
		ep, ok := t.epIndex[ti][k.Endpoint]
		if so == nil || !ok {
			continue
		}
		so.Counts[slices.Index(t.nodeSources[n], t.srcIndex[[2]int{k.Client, k.Source}])][ep] += v
	}
}

// active records the long-lived connections still open per endpoint
// (active[t][endpoint]); the counts are cluster-wide and ride on the first
// node's cell of each ServicePort.
func (t *fairnessTally) active(active []map[netip.Addr]int) {
	for ti := range t.flat {
		for n := 0; n < t.nodes; n++ {
			if so := t.cells[[2]int{n, ti}]; so != nil {
				so.Active = make([]int, len(so.Endpoints))
				for a, c := range active[ti] {
					if k, ok := t.epIndex[ti][a]; ok {
						so.Active[k] = c
					}
				}
				break
			}
		}
	}
}

// obs returns the cells, ServicePort by ServicePort, node by node.
func (t *fairnessTally) obs() []reports.ServiceObs {
	var out []reports.ServiceObs
	for ti := range t.flat {
		for n := 0; n < t.nodes; n++ {
			if so := t.cells[[2]int{n, ti}]; so != nil {
				out = append(out, *so)
			}
		}
	}
	return out
}

// fairnessPhase is the fairness phase of one mode: every node's proxier
// (proxiers[n] on tb.Nodes[n]) is cleaned up and synced fresh with its
// endpoint order; the first client of each node makes one connection to
// every service (the first picks); DriveFairness makes traffic.perService
// connections per service from every client pod and source address; with
// traffic.longLived, every node is synced fresh again and
// HoldConnections counts the active connections per endpoint. Figures
// come from reports.FairnessRun.Analyze.
func fairnessPhase(ctx context.Context, sc *scenarios.Scenario, e *env, tb *topology.Testbed, proxiers []proxymodes.Proxier,
	services []workload.Service, md proxymodes.Mode, prog Progress, f *faults) (*reports.FairnessRun, error) {
	mode := md.Name
	if err := fairnessResync(ctx, sc, e, proxiers, services, f); err != nil {
		return nil, err
	}
	r := &reports.FairnessRun{
		Mode: mode, Affinity: sc.Services.SessionAffinity == "ClientIP",
		Nodes: len(tb.Nodes), Order: sc.Topology.Order(), Pods: sc.Topology.PodModel(),
		PodCount: len(tb.Pods), PodBuild: tb.PodBuild, PodMemBytes: tb.PodMemBytes,
	}
	if md.HasScheduler() {
		r.Scheduler = sc.IPVS.SchedulerLabel()
	}
	r.Expect = md.Expectation(sc)
	tally := newFairnessTally(services, len(tb.Nodes), tb.ClientNode, tb.ClientSources)

	// First picks: the first client pod of each node, all at once.
	clients, sources, node := firstClients(tb)
	prog.Start(fmt.Sprintf("%s%s: fairness, first picks on %d nodes, then %d connections × %d services", mode, schedSuffix(r.Scheduler), len(clients), sc.Traffic.PerService, len(tally.flat)), 1)
	picks, err := e.firstPicks(ctx, clients, sources, services, sc.Traffic.Timeout.Duration)
	if err != nil {
		prog.Done()
		return nil, err
	}
	fr, err := e.driveFairness(ctx, traffic.FairnessSpec{
		Clients: tb.Clients, Sources: tb.ClientSources, Services: services,
		PerService: sc.Traffic.PerService, Concurrency: sc.Traffic.Concurrency, Timeout: sc.Traffic.Timeout.Duration,
	})
	prog.Done()
	if err != nil {
		return nil, err
	}
	r.Errors, r.Misses, r.ErrorText = fr.Errors, fr.Misses, fr.ErrorSamples
	r.Sources = tally.sources
	tally.firstPicks(picks, node)
	tally.hits(fr.Hits)

	if ll := sc.Traffic.LongLived; ll.Connections > 0 {
		if err := fairnessResync(ctx, sc, e, proxiers, services, f); err != nil {
			return nil, err
		}
		prog.Start(fmt.Sprintf("%s%s: long-lived, %d connections × %d services held %s", mode, schedSuffix(r.Scheduler), ll.Connections, len(tally.flat), ll.HoldFor()), 1)
		hr, err := e.hold(ctx, traffic.HoldSpec{Clients: tb.Clients, Sources: tb.ClientSources, Services: services,
			PerService: ll.Connections, Hold: ll.HoldFor(), Timeout: sc.Traffic.Timeout.Duration})
		prog.Done()
		if err != nil {
			return nil, err
		}
		r.Errors += hr.Errors
		r.Misses += hr.Misses
		tally.active(hr.Active)
	}
	r.Obs = tally.obs()
	r.Analyze()
	return r, nil
}

func schedSuffix(s string) string {
	if s == "" {
		return ""
	}
	return "/" + s
}

// modeVariants returns the scenarios m runs under: one per IPVS
// scheduler of sweep.schedulers for a mode with a scheduler
// (Mode.HasScheduler: ipvs), else sc alone.
func modeVariants(sc *scenarios.Scenario, m proxymodes.Mode) []*scenarios.Scenario {
	if !m.HasScheduler() || len(sc.Sweep.Schedulers) == 0 {
		return []*scenarios.Scenario{sc}
	}
	var out []*scenarios.Scenario
	for _, s := range sc.Sweep.Schedulers {
		c := *sc
		c.IPVS.Scheduler = s
		out = append(out, &c)
	}
	return out
}

// modeLabel names a mode in messages: with its scheduler for a mode
// that has one ("ipvs/wrr"), else its name.
func modeLabel(m proxymodes.Mode, sc *scenarios.Scenario) string {
	if !m.HasScheduler() {
		return m.Name
	}
	return m.Name + schedSuffix(sc.IPVS.Scheduler)
}

// fairnessPhaseV is the fairness phase (traffic.perService > 0) as a Phase.
var fairnessPhaseV = Phase{
	PhaseRule: scenarios.PhaseRule{Name: "fairness", Field: "traffic.perService", Scope: scenarios.ScopeRow, Rules: true,
		Wants: func(s *scenarios.Scenario) bool { return s.Traffic.PerService > 0 }},
	Core: true,
	Run: func(ctx context.Context, r *Row) (err error) {
		if r.Result.FairnessRun, err = fairnessPhase(ctx, r.Sc, r.Env, r.Testbed, r.Proxiers, r.Services, r.Mode, r.Progress(), r.Faults); err != nil {
			return fmt.Errorf("fairness: %w", err)
		}
		return nil
	},
}
