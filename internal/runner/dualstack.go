//go:build linux

package runner

import (
	"context"
	"fmt"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// dualStackConnections is the dualStack phase's connections per position
// per family: the scenario's traffic.connections, at most this many (the
// phase measures twice, once per family).
const dualStackConnections = 1000

// dualStackPhaseV is the dualStack phase (a dual-stack scenario:
// services.ipFamilyPolicy PreferDualStack or RequireDualStack over
// network.ipFamilies [IPv4, IPv6]) as a Phase: the row's IPv6 proxier
// (Mode.New over the scenario's IPv6 view, Scenario.ForFamily, as
// kube-proxy runs one proxier per family) synced from empty
// `repetitions` times with the IPv6 twins of the services
// (workload.Twin6), then the connect time per position through each
// family's ClusterIPs, IPv4 and IPv6 back to back. A family that fails to
// sync is recorded as such and the other family is still measured.
//
// A kube-proxy row runs one kube-proxy for both families over a
// dual-stack control plane (kubeproxy.ProxierSpec.IPv6): its IPv6 sync is
// the first Sync's IPv6 side (kubeproxy.Proxier.FamilySync: from the API
// objects created to the IPv6 probes answering, with kube-proxy's own
// IPv6 full-sync metric beside it), measured once as its IPv4 sync.full.
var dualStackPhaseV = Phase{
	PhaseRule: scenarios.PhaseRule{Name: "dualStack", Field: "services.ipFamilyPolicy", Scope: scenarios.ScopeRow, TCP: true,
		Wants: func(s *scenarios.Scenario) bool { return s.DualStack() }},
	Report: reports.DualStackReport,
	Run: func(ctx context.Context, r *Row) error {
		ds, err := dualStackPhase(ctx, r)
		r.Result.DualStack = ds
		return err
	},
}

// dualStackPhase measures r's row per family (dualStackPhaseV). Its error
// is a cancelled run's or a failed cleanup's; sync and traffic failures
// of one family are recorded in the result.
func dualStackPhase(ctx context.Context, r *Row) (*reports.DualStack, error) {
	sc := r.Sc
	p := sc.IPv6Prefix()
	ds := &reports.DualStack{Connections: min(sc.Traffic.Connections, dualStackConnections), IPv6Prefix: p.String()}
	v4 := reports.FamilyResult{Family: scenarios.IPv4, Synced: true}
	for _, st := range r.Result.SyncFull {
		if !r.Mode.Direct {
			v4.Sync = append(v4.Sync, syncSample(st))
		}
	}
	v6 := reports.FamilyResult{Family: scenarios.IPv6}
	svcs6 := workload.Twin6(p, r.Services)
	fs, oneProcess := r.Proxier.(familySyncer)
	switch {
	case r.Mode.Direct:
		v6.Synced = true // no rules: the baseline dials the IPv6 pods
	case oneProcess:
		// kube-proxy: both families from one process and one first sync.
		st, err := fs.FamilySync(scenarios.IPv6)
		if err != nil {
			v6.SyncError = err.Error()
		} else {
			v6.Synced = true
			v6.Sync = []reports.SyncSample{syncSample(st)}
		}
		v4.Shared, v6.Shared = true, true
	default:
		px, err := r.Mode.New(sc.ForFamily(scenarios.IPv6), r.Testbed.Node)
		if err != nil {
			v6.SyncError = err.Error()
		} else {
			r.Defer(func() error { return px.Cleanup(context.Background()) })
			v6.Synced = true
			for i := 0; i < max(sc.Repetitions, 1); i++ {
				if i > 0 {
					if err := px.Cleanup(ctx); err != nil {
						return ds, fmt.Errorf("dualStack: IPv6 cleanup before sync %d: %w", i+1, err)
					}
				}
				st, err := px.Sync(ctx, svcs6)
				if err != nil {
					v6.Synced, v6.SyncError = false, err.Error()
					break
				}
				v6.Sync = append(v6.Sync, syncSample(st))
			}
		}
	}
	ds.Families = []reports.FamilyResult{v4, v6}
	if err := ctx.Err(); err != nil {
		return ds, err
	}
	// Traffic per family, the same plan for both: no kernel timer (its
	// BPF programs follow IPv4 packets only).
	tsc := *sc
	tsc.Traffic.Connections = ds.Connections
	tsc.Traffic.Warmup = min(sc.Traffic.Warmup, ds.Connections)
	off := false
	tsc.Traffic.KernelTime = &off
	for i, svcs := range [][]workload.Service{r.Services, svcs6} {
		f := &ds.Families[i]
		if !f.Synced {
			f.LookupError = "not run: the family did not sync"
			continue
		}
		out, err := trafficPhase(ctx, &tsc, r.Env, r.Testbed.Clients, svcs, r.Mode.Direct, r.Mode.Name+" "+f.Family, r.Progress(), nil)
		if err != nil {
			if ctx.Err() != nil {
				return ds, ctx.Err()
			}
			f.LookupError = err.Error()
			continue
		}
		f.Lookup = out.lookup
	}
	return ds, nil
}

// familySyncer is a proxier that programs both families itself and
// measured its IPv6 side in its first Sync (kubeproxy.Proxier).
type familySyncer interface {
	FamilySync(fam string) (measure.SyncStats, error)
}

// syncSample is st's figures for a reports.SyncSample (KubeProxyNs:
// st's "kube-proxy.metric" phase, a kube-proxy row's own sync metric).
func syncSample(st measure.SyncStats) reports.SyncSample {
	return reports.SyncSample{WallNs: st.Wall.Nanoseconds(), CPUNs: st.CPU.Nanoseconds(), Objects: st.Objects, KubeProxyNs: st.Phases["kube-proxy.metric"].Nanoseconds()}
}
