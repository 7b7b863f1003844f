//go:build linux

package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"k8s.io/client-go/rest"

	"github.com/proxybench/proxybench/cluster/agent"
	"github.com/proxybench/proxybench/internal/runner"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/apiobjects"
)

// DefaultChanges is how many EndpointSlice changes the black-box
// programming-latency measurement makes.
const DefaultChanges = 5

// Execute runs scenario sc on the cluster of o (cfg, when not nil, is
// used instead of the kubeconfig: a test's API server): connect, check
// RBAC, read the facts, create the run (Cluster.Start), drive the
// scenario's lookup traffic from every node's agent (runner.TrafficPlan,
// each node in turn, summed with runner.TrafficAgg: the namespace
// engine's plan and aggregation), measure programming latency black-box
// per node (changes EndpointSlice writes, each seen by every agent), and
// delete the run. It returns the result (Engine "cluster") with what was
// measured also on error; an Unusable error (exit 2) comes before
// anything was measured and after what was created is deleted.
func Execute(ctx context.Context, sc *scenarios.Scenario, o Options, cfg *rest.Config) (res *reports.Result, err error) {
	o.defaults()
	start := time.Now()
	res = &reports.Result{SchemaVersion: reports.SchemaVersion, Tool: "proxybench " + o.Version, RunID: o.RunID,
		Engine: reports.EngineCluster, Started: start, Scenario: sc, Machine: runner.MachineInfo()}
	defer func() { res.Finished = time.Now() }()
	c, err := Connect(ctx, o, cfg)
	if err != nil {
		return res, err
	}
	if err := c.Access(ctx, o.RunID); err != nil {
		return res, err
	}
	cr := &reports.ClusterRun{Server: c.Host, Context: c.Context, Namespace: Namespace(o.RunID), Image: o.Image}
	if v, verr := c.Client.Discovery().ServerVersion(); verr == nil {
		cr.ServerVersion = v.GitVersion
	}
	if cr.KubeProxy, err = c.KubeProxy(ctx); err != nil {
		return res, err
	}
	services, err := workload.Services(sc)
	if err != nil {
		return res, &Unusable{Cause: "services", Err: err}
	}
	eps := 1
	for _, s := range services {
		eps = max(eps, len(s.Endpoints))
	}
	pool := o.PoolSize
	if pool == 0 {
		pool = 2 * eps // two disjoint endpoint sets: the programming probes swap between them
	}
	r, err := c.Start(ctx, services, pool)
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := r.Close(context.WithoutCancel(ctx)); cerr != nil && err == nil {
			err = cerr
		}
	}()
	res.Cluster = cr
	for _, p := range r.Pool {
		cr.Pool = append(cr.Pool, p.String())
	}
	for _, n := range r.Nodes {
		cr.Nodes = append(cr.Nodes, reports.ClusterNode{Name: n, Agent: r.Agents[n]})
	}
	if err := c.Facts(ctx, cr.Nodes); err != nil {
		return res, err
	}
	mode := cr.KubeProxy.Mode
	if mode == "" {
		mode = "unknown"
	}
	row := reports.ModeResult{Mode: kubeproxy.RowLabel(mode, cr.KubeProxy.Version, false), Implementation: scenarios.ImplKubeProxy,
		BaseMode: mode, Kernel: "cluster", Services: len(r.Services)}
	base := reports.ModeResult{Mode: scenarios.BaselineMode, Kernel: "cluster", Services: len(r.Services)}
	all, direct := runner.NewTrafficAgg(r.Services), runner.NewTrafficAgg(r.Services)
	t := sc.Traffic
	for i := range cr.Nodes {
		n := &cr.Nodes[i]
		o.logf("cluster: lookups from %s (%s)", n.Name, n.Agent)
		ag := r.Agent(n.Name)
		agg, dagg := runner.NewTrafficAgg(r.Services), runner.NewTrafficAgg(r.Services)
		for k, st := range runner.TrafficPlan(t, sc.Repetitions, sc.Seed) {
			for _, d := range []bool{false, true} {
				dr, err := lookup(ctx, ag, agent.LookupRequest{ID: fmt.Sprintf("l%d-%t", k, d), Services: r.Services, Position: st.Position,
					Direct: d, Connections: st.Connections, Warmup: st.Warmup, Concurrency: t.Concurrency, Timeout: t.Timeout.Duration, Seed: st.Seed})
				if err != nil {
					res.Partial = err.Error()
					return res, err
				}
				if d {
					dagg.Add(st.Position, dr.Result)
					direct.Add(st.Position, dr.Result)
				} else {
					agg.Add(st.Position, dr.Result)
					all.Add(st.Position, dr.Result)
				}
			}
		}
		n.Lookup, _ = agg.Results(t.Positions, 0)
		n.Direct, _ = dagg.Results(t.Positions, 0)
	}
	row.Lookup, row.Fairness = all.Results(t.Positions, 0)
	base.Lookup, base.Fairness = direct.Results(t.Positions, 0)
	res.Modes = []reports.ModeResult{base, row}
	if err := r.programming(ctx, cr, DefaultChanges); err != nil {
		res.Partial = err.Error()
		return res, err
	}
	res.Sections = reports.ClusterSections(cr, row.Mode)
	return res, nil
}

// lookup runs one lookup job on an agent and forgets it once read.
func lookup(ctx context.Context, ag agent.Client, req agent.LookupRequest) (agent.LookupStatus, error) {
	if err := ag.StartLookup(ctx, req); err != nil {
		return agent.LookupStatus{}, err
	}
	st, err := ag.WaitLookup(ctx, req.ID)
	if err == nil && st.Result == nil {
		err = fmt.Errorf("agent: lookup %s: done without samples", req.ID)
	}
	_ = ag.Forget(ctx, "lookups", req.ID)
	return st, err
}

// programming measures black-box programming latency per node: changes
// times, the last service's endpoints are swapped between the pool's two
// halves with one EndpointSlice write (stamped with
// endpoints.kubernetes.io/last-change-trigger-time, as churn's API
// writes are: apiobjects.ReplaceSlice), while every node's agent probes
// the service until a connection lands in the new half; the latency is
// from the write to the agent's first such connection (the agent's
// clock against the operator's: the same clock on a local cluster).
func (r *Run) programming(ctx context.Context, cr *reports.ClusterRun, changes int) error {
	if len(r.Pool) < 2 || len(r.Services) == 0 {
		return nil
	}
	half := len(r.Pool) / 2
	sets := [2][]netip.Addr{r.Pool[:half], r.Pool[half:]}
	s := r.Services[len(r.Services)-1]
	for k := 0; k < changes; k++ {
		next := sets[(k+1)%2]
		if k == 0 {
			next = sets[0]
			if slices.Contains(next, s.Endpoints[0].IP) {
				next = sets[1]
			}
		}
		ids := map[string]string{}
		for _, n := range cr.Nodes {
			id := fmt.Sprintf("p%d", k)
			if err := r.Agent(n.Name).StartProbe(ctx, agent.ProbeRequest{ID: id, Service: s, Want: next, Interval: 2 * time.Millisecond,
				Timeout: 500 * time.Millisecond, Deadline: r.c.opts.ProbeDeadline}); err != nil {
				return err
			}
			ids[n.Name] = id
		}
		eps := make([]workload.Endpoint, len(next))
		for i, ip := range next {
			eps[i] = workload.NewEndpoint(ip)
		}
		s.Endpoints = eps
		t0 := time.Now()
		if err := apiobjects.ReplaceSlice(ctx, r.c.Client, s, t0); err != nil {
			return err
		}
		for i := range cr.Nodes {
			n := &cr.Nodes[i]
			st, err := r.Agent(n.Name).WaitProbe(ctx, ids[n.Name])
			if err != nil {
				return fmt.Errorf("programming latency on %s: %w", n.Name, err)
			}
			n.ProgrammingNs = append(n.ProgrammingNs, st.FirstSuccess.Sub(t0).Nanoseconds())
			_ = r.Agent(n.Name).Forget(ctx, "probes", ids[n.Name])
		}
	}
	r.Services[len(r.Services)-1] = s
	return nil
}
