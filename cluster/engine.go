//go:build linux

package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
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
	// Registered first, so it runs last: after the mode switch's restore
	// (a later defer), whose outcome the sections show.
	defer func() {
		res.Finished = time.Now()
		if res.Cluster != nil && len(res.Modes) > 1 {
			res.Sections = reports.ClusterSections(res.Cluster, res.Modes[1].Mode)
		}
	}()
	c, err := Connect(ctx, o, cfg)
	if err != nil {
		return res, err
	}
	if err := c.Access(ctx, o.RunID); err != nil {
		return res, err
	}
	if o.AllowModeSwitch {
		if err := c.AccessModeSwitch(ctx); err != nil {
			return res, err
		}
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
	// The run's ID once the cluster is known usable, just before the
	// first object is created: input refused earlier prints nothing.
	o.logf("cluster run %s on %s (context %s)", o.RunID, c.Host, c.Context)
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
	modes := []string{mode}
	if o.AllowModeSwitch {
		if cr.KubeProxy.Absent != "" {
			return res, &Unusable{Cause: "--allow-mode-switch: " + cr.KubeProxy.Absent, Fix: "run without --allow-mode-switch (the cluster's own proxy is measured)"}
		}
		modes = switchModes(mode, sc.Modes)
		cr.ModeSwitch = &reports.ClusterModeSwitch{Original: cr.KubeProxy.Config, OriginalMode: mode}
		if o.Notice != nil {
			fmt.Fprintf(o.Notice, "cluster: --allow-mode-switch: measuring kube-proxy modes %s; each switch edits ConfigMap kube-system/kube-proxy (mode) and rolls DaemonSet kube-system/kube-proxy; the original configuration (mode %s) is saved in the result and restored at the end, on SIGINT and on failure\n",
				strings.Join(modes, ", "), mode)
		}
		defer func() {
			if len(cr.ModeSwitch.Switches) == 0 {
				cr.ModeSwitch.Restored = true
				return
			}
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.SwitchWait+30*time.Second)
			defer cancel()
			if rerr := c.restore(rctx, cr, o.SwitchWait); rerr != nil && err == nil {
				err = rerr
			}
		}()
	}
	port := metricsPort(cr.KubeProxy.Config)
	base := reports.ModeResult{Mode: scenarios.BaselineMode, Kernel: "cluster", Services: len(r.Services)}
	for k, m := range modes {
		if k > 0 {
			o.logf("cluster: switching kube-proxy to %s", m)
			sw, serr := c.SwitchMode(ctx, modes[k-1], m, cr.KubeProxy.Config, nodeNames(cr.Nodes), o.SwitchWait)
			cr.ModeSwitch.Switches = append(cr.ModeSwitch.Switches, sw)
			if serr != nil {
				res.Partial = serr.Error()
				return res, serr
			}
		}
		nodes := make([]reports.ClusterNode, len(cr.Nodes))
		for i, n := range cr.Nodes {
			nodes[i] = reports.ClusterNode{Name: n.Name, Kernel: n.Kernel, OSImage: n.OSImage, ContainerRuntime: n.ContainerRuntime, Kubelet: n.Kubelet, Agent: n.Agent}
		}
		row := reports.ModeResult{Mode: kubeproxy.RowLabel(m, cr.KubeProxy.Version, false), Implementation: scenarios.ImplKubeProxy,
			BaseMode: m, Kernel: "cluster", Services: len(r.Services)}
		direct, merr := r.measure(ctx, o, sc, nodes, &row, k == 0, port, minSyncPeriod(cr.KubeProxy.Config, m))
		if k == 0 {
			// The lookups' aggregates are complete only when measure got
			// past them (direct not nil); what it measured before failing
			// stays in nodes.
			if direct != nil {
				base.Lookup, base.Fairness = direct.Results(sc.Traffic.Positions, 0)
			}
			res.Modes = []reports.ModeResult{base}
			cr.Nodes = nodes
		} else {
			cr.Modes = append(cr.Modes, reports.ClusterModeRun{Mode: m, Row: row.Mode, Nodes: nodes})
		}
		res.Modes = append(res.Modes, row)
		if merr != nil {
			res.Partial = merr.Error()
			return res, merr
		}
	}
	return res, nil
}

// switchModes are the kube-proxy modes a --allow-mode-switch run
// measures: the cluster's own first, then each of the scenario's modes
// that kube-proxy has (scenarios.KubeProxyModes), once.
func switchModes(own string, scModes []string) []string {
	out := []string{own}
	for _, m := range scModes {
		if slices.Contains(scenarios.KubeProxyModes, m) && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

func nodeNames(nodes []reports.ClusterNode) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}
	return out
}

// restore writes the original configuration back as it was (its text,
// not a re-encoding) and waits for every node to report the original
// mode (applyAndWait), recorded as the last switch;
// cr.ModeSwitch.Restored when it succeeded.
func (c *Cluster) restore(ctx context.Context, cr *reports.ClusterRun, wait time.Duration) error {
	ms := cr.ModeSwitch
	from := ms.Switches[len(ms.Switches)-1].To
	sw, err := c.applyAndWait(ctx, from, ms.OriginalMode, ms.Original, nodeNames(cr.Nodes), wait)
	sw.Restore = true
	if err != nil {
		ms.RestoreError = err.Error()
	} else {
		ms.Restored = true
	}
	ms.Switches = append(ms.Switches, sw)
	return err
}

// measure runs the scenario's lookups from every node's agent (through
// the service and, with withDirect, direct to the pods) and the
// black-box programming latency with kube-proxy's own histograms per
// node beside it (metrics port port, through the node proxy; changes
// paced by minSync, kube-proxy's minSyncPeriod), into nodes and row; it
// returns the direct lookups pooled, nil when it failed before every
// node's lookups were done (each node keeps what it measured).
func (r *Run) measure(ctx context.Context, o Options, sc *scenarios.Scenario, nodes []reports.ClusterNode, row *reports.ModeResult, withDirect bool, port int, minSync time.Duration) (*runner.TrafficAgg, error) {
	all, direct := runner.NewTrafficAgg(r.Services), runner.NewTrafficAgg(r.Services)
	t := sc.Traffic
	ds := []bool{false}
	if withDirect {
		ds = append(ds, true)
	}
	if err := r.waitProgrammed(ctx, nodes, row.BaseMode); err != nil {
		return nil, err
	}
	for i := range nodes {
		n := &nodes[i]
		o.logf("cluster: lookups from %s (%s), %s", n.Name, n.Agent, row.BaseMode)
		ag := r.Agent(n.Name)
		agg, dagg := runner.NewTrafficAgg(r.Services), runner.NewTrafficAgg(r.Services)
		for k, st := range runner.TrafficPlan(t, sc.Repetitions, sc.Seed) {
			for _, d := range ds {
				dr, err := lookup(ctx, ag, agent.LookupRequest{ID: fmt.Sprintf("l%s%d-%t", row.BaseMode, k, d), Services: r.Services, Position: st.Position,
					Direct: d, Connections: st.Connections, Warmup: st.Warmup, Concurrency: t.Concurrency, Timeout: t.Timeout.Duration, Seed: st.Seed})
				if err != nil {
					return nil, err
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
		if withDirect {
			n.Direct, _ = dagg.Results(t.Positions, 0)
		}
	}
	row.Lookup, row.Fairness = all.Results(t.Positions, 0)
	before, why := r.c.scrapeOwn(ctx, nodes, port)
	if err := r.programming(ctx, nodes, DefaultChanges, port, minSync); err != nil {
		return direct, err
	}
	after, why2 := r.c.scrapeOwn(ctx, nodes, port)
	for k, v := range why2 {
		why[k] = v
	}
	programmingOwn(nodes, before, after, why)
	return direct, nil
}

// waitProgrammed waits until the first and the last service answer from
// every node's agent (a connection reaching one of the service's
// endpoints), so the lookups start once kube-proxy has programmed every
// node (after the run's creates, and after a mode switch's restarts);
// a node where one does not answer within Options.ProgramWait is an
// error naming it.
func (r *Run) waitProgrammed(ctx context.Context, nodes []reports.ClusterNode, mode string) error {
	if len(r.Services) == 0 {
		return nil
	}
	picks := []workload.Service{r.Services[0]}
	if len(r.Services) > 1 {
		picks = append(picks, r.Services[len(r.Services)-1])
	}
	for _, n := range nodes {
		for k, s := range picks {
			want := make([]netip.Addr, len(s.Endpoints))
			for i, e := range s.Endpoints {
				want[i] = e.IP
			}
			id := fmt.Sprintf("ready-%s-%d-%d", mode, r.probes, k)
			ag := r.Agent(n.Name)
			if err := ag.StartProbe(ctx, agent.ProbeRequest{ID: id, Service: s, Want: want, Interval: 10 * time.Millisecond,
				Timeout: 500 * time.Millisecond, Deadline: r.c.opts.ProgramWait}); err != nil {
				return err
			}
			st, err := ag.WaitProbe(ctx, id)
			_ = ag.Forget(ctx, "probes", id)
			if err != nil {
				return fmt.Errorf("%s: service %s not answering from %s: %w", mode, s.Name, n.Name, err)
			}
			if !st.Met {
				return fmt.Errorf("%s: service %s not answering from %s within %s (%d attempts, %d failed; --program-wait waits longer)", mode, s.Name, n.Name, r.c.opts.ProgramWait, st.Attempts, st.Failures)
			}
		}
	}
	r.probes++
	return nil
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
// Each write waits until every node's kube-proxy is idle (Cluster.idleAt:
// minSync after its last sync ended, as the namespace engine's
// sync.incremental waits), so the figure is one change reaching an idle
// kube-proxy, not a change held for the rest of the minSyncPeriod the
// previous change's sync started.
func (r *Run) programming(ctx context.Context, nodes []reports.ClusterNode, changes, port int, minSync time.Duration) error {
	if len(r.Pool) < 2 || len(r.Services) == 0 {
		return nil
	}
	s := r.Services[len(r.Services)-1]
	cur := make([]netip.Addr, len(s.Endpoints))
	for i, e := range s.Endpoints {
		cur[i] = e.IP
	}
	warm, targets := programmingTargets(r.Pool, cur, changes)
	var seen time.Time // when the previous change had reached every node
	if warm != nil {
		// The service's endpoints straddle both halves: one write to the
		// first half, seen by every node and not measured, so each
		// measured change moves every endpoint.
		// Seen once a connection lands on an endpoint it adds (the
		// service's rules are rewritten as one, so the removed ones are
		// gone by then).
		want := slices.DeleteFunc(slices.Clone(warm), func(a netip.Addr) bool { return slices.Contains(cur, a) })
		strict := len(want) > 0
		if !strict {
			want = warm // only with a --pool whose half is inside the service: nothing new to wait for
		}
		if _, err := r.change(ctx, nodes, &s, warm, want, strict, fmt.Sprintf("w%d", r.probes)); err != nil {
			return err
		}
		seen = time.Now()
	}
	for k, next := range targets {
		if wait := time.Until(r.c.idleAt(ctx, nodes, port, minSync, seen)); wait > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
		lat, err := r.change(ctx, nodes, &s, next, next, true, fmt.Sprintf("p%d-%d", r.probes, k))
		if err != nil {
			return err
		}
		for i := range nodes {
			nodes[i].ProgrammingNs = append(nodes[i].ProgrammingNs, lat[i].Nanoseconds())
		}
		seen = time.Now()
	}
	r.Services[len(r.Services)-1] = s
	r.probes++
	return nil
}

// programmingTargets are the endpoint sets the programming probes move
// a service to, changes of them: the pool's two halves in turn, starting
// with the half none of the current endpoints cur is in, so every
// change moves every endpoint and a probe's first connection to the new
// set can only come once kube-proxy programmed the change. When cur
// straddles both halves, warm is the first half (an unmeasured change
// before them) and the targets start with the second.
func programmingTargets(pool, cur []netip.Addr, changes int) (warm []netip.Addr, targets [][]netip.Addr) {
	half := len(pool) / 2
	sets := [2][]netip.Addr{pool[:half], pool[half:]}
	in := func(set []netip.Addr) bool {
		return slices.ContainsFunc(cur, func(a netip.Addr) bool { return slices.Contains(set, a) })
	}
	idx := 0
	switch {
	case !in(sets[0]):
	case !in(sets[1]):
		idx = 1
	default:
		warm, idx = sets[0], 1
	}
	for k := 0; k < changes; k++ {
		targets = append(targets, sets[idx])
		idx = 1 - idx
	}
	return warm, targets
}

// change writes service s's EndpointSlice with endpoints next (stamped
// with its trigger time: apiobjects.ReplaceSlice) while every node's
// agent probes s (probe ID id) until a connection lands on want, and
// returns per node the time from the write to that connection's start.
// With strict, a first such connection before the write is an error:
// the write changed nothing that node could see.
func (r *Run) change(ctx context.Context, nodes []reports.ClusterNode, s *workload.Service, next, want []netip.Addr, strict bool, id string) ([]time.Duration, error) {
	for _, n := range nodes {
		if err := r.Agent(n.Name).StartProbe(ctx, agent.ProbeRequest{ID: id, Service: *s, Want: want, Interval: 2 * time.Millisecond,
			Timeout: 500 * time.Millisecond, Deadline: r.c.opts.ProbeDeadline}); err != nil {
			return nil, err
		}
	}
	eps := make([]workload.Endpoint, len(next))
	for i, ip := range next {
		eps[i] = workload.NewEndpoint(ip)
	}
	s.Endpoints = eps
	t0 := time.Now()
	if err := apiobjects.ReplaceSlice(ctx, r.c.Client, *s, t0); err != nil {
		return nil, err
	}
	out := make([]time.Duration, len(nodes))
	for i, n := range nodes {
		st, err := r.Agent(n.Name).WaitProbe(ctx, id)
		_ = r.Agent(n.Name).Forget(ctx, "probes", id)
		if err != nil {
			return nil, fmt.Errorf("programming latency on %s: %w", n.Name, err)
		}
		if out[i] = st.FirstSuccess.Sub(t0); out[i] < 0 && strict {
			return nil, fmt.Errorf("programming latency on %s: a connection reached %v %s before the write (the change moved nothing there)", n.Name, next, -out[i])
		}
	}
	return out, nil
}
