//go:build linux

package runner

import (
	"context"
	"fmt"
	"math/rand"
	"net/netip"
	"slices"

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
	if a := sc.Topology.Addresses(); a > 1 {
		spec.ClientAddresses, spec.ClientCIDR = a, sc.ClientPrefix()
	}
	if sc.Topology.PodModel() == "isolated" {
		for _, s := range services {
			for _, e := range s.Endpoints {
				spec.IsolatedPods = append(spec.IsolatedPods, e.IP)
			}
		}
	}
	return spec
}

// startEcho starts the echo server in the backend host, or in every
// isolated pod.
func startEcho(tb *topology.Testbed, services []workload.Service) (*traffic.EchoServer, error) {
	if tb.Backend == nil {
		return traffic.StartEchoIn(tb.Pods, workload.TargetPorts(services))
	}
	return traffic.StartEcho(tb.Backend, workload.TargetPorts(services))
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
// conntrack tables.
func stopNodes(ctx context.Context, tb *topology.Testbed, ps []proxymodes.Proxier) error {
	var first error
	for i, p := range ps {
		if err := p.Cleanup(context.WithoutCancel(ctx)); err != nil && first == nil {
			first = fmt.Errorf("node%d: cleanup: %w", i+1, err)
		}
		_ = flushConntrack(tb.Nodes[i+1])
	}
	return first
}

// runFairness is the fairness phase of one mode: every node's proxier
// (proxiers[n] on tb.Nodes[n]) is cleaned up and synced fresh with its
// endpoint order; the first client of each node makes one connection to
// every service (the first picks); DriveFairness makes traffic.perService
// connections per service from every client pod and source address; with
// traffic.longLived, every node is synced fresh again and
// HoldConnections counts the active connections per endpoint. Figures
// come from reports.FairnessRun.Analyze.
func runFairness(ctx context.Context, sc *scenarios.Scenario, tb *topology.Testbed, proxiers []proxymodes.Proxier, services []workload.Service, mode string, o Options) (*reports.FairnessRun, error) {
	resync := func() error {
		for n, p := range proxiers {
			if err := p.Cleanup(ctx); err != nil {
				return fmt.Errorf("node%d: cleanup: %w", n, err)
			}
			_ = flushConntrack(tb.Nodes[n])
			if _, err := p.Sync(ctx, nodeServices(sc, services, n)); err != nil {
				return fmt.Errorf("node%d: sync: %w", n, err)
			}
		}
		return nil
	}
	if err := resync(); err != nil {
		return nil, err
	}
	flat := workload.FlatTargets(services)
	r := &reports.FairnessRun{
		Mode: mode, Affinity: sc.Services.SessionAffinity == "ClientIP",
		Nodes: len(tb.Nodes), Order: sc.Topology.Order(), Pods: sc.Topology.PodModel(),
		PodCount: len(tb.Pods), PodBuild: tb.PodBuild, PodMemBytes: tb.PodMemBytes,
	}
	if mode == "ipvs" {
		r.Scheduler = sc.IPVS.Scheduler
	}
	r.Expect = reports.ExpectationFor(mode, r.Scheduler, r.Affinity)

	// First picks: the first client pod of each node, all at once.
	var firstClients []*topology.Netns
	var firstSrc []netip.Addr
	firstNode := map[int]int{} // index in firstClients -> node
	for n := range tb.Nodes {
		for c, cn := range tb.ClientNode {
			if cn == n {
				firstNode[len(firstClients)] = n
				firstClients = append(firstClients, tb.Clients[c])
				firstSrc = append(firstSrc, tb.ClientSources[c][0])
				break
			}
		}
	}
	o.Progress.Start(fmt.Sprintf("%s%s: fairness, first picks on %d nodes, then %d connections × %d services", mode, schedSuffix(r.Scheduler), len(firstClients), sc.Traffic.PerService, len(flat)), 1)
	picks, err := traffic.FirstPicks(ctx, firstClients, firstSrc, services, sc.Traffic.Timeout.Duration)
	if err != nil {
		o.Progress.Done()
		return nil, err
	}
	fr, err := traffic.DriveFairness(ctx, traffic.FairnessSpec{
		Clients: tb.Clients, Sources: tb.ClientSources, Services: services,
		PerService: sc.Traffic.PerService, Concurrency: sc.Traffic.Concurrency, Timeout: sc.Traffic.Timeout.Duration,
	})
	o.Progress.Done()
	if err != nil {
		return nil, err
	}
	r.Errors, r.Misses, r.ErrorText = fr.Errors, fr.Misses, fr.ErrorSamples

	// Sources of the run, in client order; each node's rows are its clients' sources.
	srcIndex := map[[2]int]int{}
	nodeSources := make([][]int, len(tb.Nodes))
	for c, srcs := range tb.ClientSources {
		for s, a := range srcs {
			srcIndex[[2]int{c, s}] = len(r.Sources)
			nodeSources[tb.ClientNode[c]] = append(nodeSources[tb.ClientNode[c]], len(r.Sources))
			r.Sources = append(r.Sources, a.String())
		}
	}
	type cell struct{ node, t int }
	obs := map[cell]*reports.ServiceObs{}
	epIndex := make([]map[netip.Addr]int, len(flat))
	for t, tg := range flat {
		svc := &services[tg.Service]
		epIndex[t] = map[netip.Addr]int{}
		var eps []string
		var ws []float64
		for k, e := range svc.Endpoints {
			epIndex[t][e.IP] = k
			eps = append(eps, e.IP.String())
			w := float64(e.Weight)
			if !e.Ready {
				w = 0
			}
			ws = append(ws, w)
		}
		for n := range tb.Nodes {
			if len(nodeSources[n]) == 0 {
				continue
			}
			so := &reports.ServiceObs{Node: n, Service: svc.PortName(svc.Ports[tg.Port]), Endpoints: eps, Weights: ws,
				Sources: nodeSources[n], FirstPick: -1}
			so.Counts = make([][]int, len(nodeSources[n]))
			for i := range so.Counts {
				so.Counts[i] = make([]int, len(eps))
			}
			obs[cell{n, t}] = so
		}
	}
	for i, row := range picks {
		n := firstNode[i]
		for t, a := range row {
			if k, ok := epIndex[t][a]; ok && a.IsValid() {
				obs[cell{n, t}].FirstPick = k
			}
		}
	}
	tIndex := map[workload.Target]int{}
	for t, tg := range flat {
		tIndex[tg] = t
	}
	rowOf := func(n, global int) int { return slices.Index(nodeSources[n], global) }
	for k, v := range fr.Hits {
		n := tb.ClientNode[k.Client]
		t := tIndex[k.Target]
		so := obs[cell{n, t}]
		ep, ok := epIndex[t][k.Endpoint]
		if so == nil || !ok {
			continue
		}
		so.Counts[rowOf(n, srcIndex[[2]int{k.Client, k.Source}])][ep] += v
	}

	if ll := sc.Traffic.LongLived; ll.Connections > 0 {
		if err := resync(); err != nil {
			return nil, err
		}
		o.Progress.Start(fmt.Sprintf("%s%s: long-lived, %d connections × %d services held %s", mode, schedSuffix(r.Scheduler), ll.Connections, len(flat), ll.HoldFor()), 1)
		hr, err := traffic.HoldConnections(ctx, traffic.HoldSpec{Clients: tb.Clients, Sources: tb.ClientSources, Services: services,
			PerService: ll.Connections, Hold: ll.HoldFor(), Timeout: sc.Traffic.Timeout.Duration})
		o.Progress.Done()
		if err != nil {
			return nil, err
		}
		r.Errors += hr.Errors
		r.Misses += hr.Misses
		for t := range flat {
			// Active counts are cluster-wide: they ride on the first node's row.
			for n := range tb.Nodes {
				if so := obs[cell{n, t}]; so != nil {
					so.Active = make([]int, len(so.Endpoints))
					for a, c := range hr.Active[t] {
						if k, ok := epIndex[t][a]; ok {
							so.Active[k] = c
						}
					}
					break
				}
			}
		}
	}
	for t := range flat {
		for n := range tb.Nodes {
			if so := obs[cell{n, t}]; so != nil {
				r.Obs = append(r.Obs, *so)
			}
		}
	}
	r.Analyze()
	return r, nil
}

func schedSuffix(s string) string {
	if s == "" {
		return ""
	}
	return "/" + s
}

// modeVariants returns the scenarios mode runs under: one per IPVS
// scheduler of sweep.schedulers for mode ipvs, else sc alone.
func modeVariants(sc *scenarios.Scenario, mode string) []*scenarios.Scenario {
	if mode != "ipvs" || len(sc.Sweep.Schedulers) == 0 {
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

// modeLabel names a mode in messages: "ipvs/wrr" for ipvs, else the mode.
func modeLabel(mode string, sc *scenarios.Scenario) string {
	if mode != "ipvs" {
		return mode
	}
	return mode + schedSuffix(sc.IPVS.Scheduler)
}
