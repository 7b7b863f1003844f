//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// oobKernel is what the outOfBand phase does to node0's kernel
// (env.oob): nodeOOB on a testbed, a fake in the unit tests.
type oobKernel interface {
	// make makes change t out of band, saving in t what putBack needs and
	// naming the object (t.object).
	make(ctx context.Context, t *oobTarget) error
	// repaired reports whether the proxy has undone t: a deleted object
	// is back as it was written, an added virtual server is gone (for
	// excludedVirtualServer: its witness is gone).
	repaired(ctx context.Context, t *oobTarget) (bool, error)
	// present reports whether t's added virtual server is still there.
	present(ctx context.Context, t *oobTarget) (bool, error)
	// putBack undoes what is left of t: a deletion re-created as saved,
	// added virtual servers removed.
	putBack(ctx context.Context, t *oobTarget) error
}

// oobTarget is one change on one service.
type oobTarget struct {
	change scenarios.OOBChange
	svc    workload.Service
	// vip is the service's ClusterIP and first ServicePort, proto its
	// protocol.
	vip   netip.AddrPort
	proto string
	// added is the virtual server an addition adds, witness the one
	// inside the service CIDR excludedVirtualServer adds beside it.
	added, witness netip.AddrPort
	// Filled by make: the object as the tools name it, what putBack needs,
	// and for realServer the real server deleted.
	object   string
	saved    any
	endpoint netip.AddrPort
}

// Resync configurations the phase states (OutOfBandResult.Config).
// Sources: k8s.io/kubernetes v1.37.2 pkg/proxy/{iptables,nftables,ipvs}/proxier.go
// (NewBoundedFrequencyRunner(minSyncPeriod, retry syncPeriod, max
// FullSyncPeriod 1 h for iptables and nftables, syncPeriod for ipvs)),
// pkg/util/iptables Monitor (the canary, polled every syncPeriod in the
// mangle table), pkg/proxy/apis/config/v1alpha1/defaults.go (syncPeriod
// 30 s for every mode).
const oobBuiltinConfig = "builtin: proxybench's sync loop (proxymodes/syncloop) runs kube-proxy's runner: with nothing changed iptables and nftables sync only after FullSyncPeriod (1 h), ipvs every syncPeriod; a failed sync is retried after syncPeriod, full; a sync is partial (iptables: KUBE-SERVICES rewritten whole, only changed services' chains; nftables: a diff against what it wrote; ipvs: a dump of the kernel's virtual servers against the desired ones, real servers read back only for changed services, and for every service once per syncPeriod, as every kube-proxy IPVS sync reads them), full once an hour or after a failed sync"

// oobConfig is the resync configuration text of a row.
func oobConfig(mode, impl string, minSync, period time.Duration) string {
	text := oobBuiltinConfig
	if impl == scenarios.ImplKubeProxy {
		if m, err := modes.Lookup(mode); err == nil {
			text = m.KubeProxyResync
		}
	}
	return fmt.Sprintf("minSyncPeriod %s, syncPeriod %s. %s.", minSync, period, text)
}

// oobServices picks the service of each of n changes: spread over the
// list, away from its ends, distinct.
func oobServices(services []workload.Service, n int) []workload.Service {
	out := make([]workload.Service, 0, n)
	for i := range n {
		out = append(out, services[(i+1)*len(services)/(n+1)])
	}
	return out
}

// unusedServiceAddr is the highest address of cidr below its broadcast
// that no service holds (a virtual server the proxy must remove), with
// port.
func unusedServiceAddr(cidr netip.Prefix, services []workload.Service, port uint16, skip ...netip.Addr) (netip.AddrPort, error) {
	used := map[netip.Addr]bool{}
	for _, s := range services {
		used[s.ClusterIP] = true
	}
	for _, a := range skip {
		used[a] = true
	}
	last := cidr.Masked().Addr()
	for i := 0; i < 32-cidr.Bits(); i++ {
		b := last.As4()
		b[3-i/8] |= 1 << (i % 8)
		last = netip.AddrFrom4(b)
	}
	for a := last.Prev(); a.IsValid() && cidr.Contains(a); a = a.Prev() {
		if !used[a] {
			return netip.AddrPortFrom(a, port), nil
		}
	}
	return netip.AddrPort{}, fmt.Errorf("no unused address in %s", cidr)
}

// excludedAddr is an address inside the first of the scenario's
// ipvs.excludeCIDRs (its second host address).
func excludedAddr(sc *scenarios.Scenario, port uint16) (netip.AddrPort, error) {
	p, err := netip.ParsePrefix(sc.IPVS.ExcludeCIDRs[0])
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("ipvs.excludeCIDRs[0]: %w", err)
	}
	return netip.AddrPortFrom(p.Masked().Addr().Next().Next(), port), nil
}

// oobRun is one row's outOfBand phase, its inputs.
type oobRun struct {
	spec     *scenarios.OutOfBandSpec
	sc       *scenarios.Scenario
	e        *env
	k        oobKernel
	mode     string
	impl     string
	services []workload.Service
	prog     Progress
}

// outOfBand makes each change of run.spec the row has, one after
// another, and waits for the proxy's repair (see OutOfBandSpec). The
// proxy must be in sync and resyncing on its own (a builtin row's sync
// loop started by the caller). A change that cannot be made is recorded
// (Err) and the next one goes on; a probe worker that cannot start, or
// the run's end, stops the phase with what it measured.
func outOfBand(ctx context.Context, run oobRun) ([]reports.OutOfBandChange, error) {
	var changes []scenarios.OOBChange
	for _, c := range scenarios.OOBChanges {
		if run.spec.Wants(c, run.mode, run.impl) {
			changes = append(changes, c)
		}
	}
	if len(changes) == 0 {
		return nil, nil
	}
	cidr, err := netip.ParsePrefix(run.sc.Network.ServiceCIDR)
	if err != nil {
		return nil, fmt.Errorf("network.serviceCIDR: %w", err)
	}
	pool, err := run.e.probes(1)
	if err != nil {
		return nil, fmt.Errorf("out-of-band probes: %w", err)
	}
	defer pool.Close()
	timeout, poll := run.spec.Timeout.Duration, run.spec.Poll.Duration
	dialTimeout := min(run.sc.Traffic.Timeout.Duration, poll*5)
	if dialTimeout <= 0 {
		dialTimeout = time.Second
	}
	svcs := oobServices(run.services, len(changes))
	var out []reports.OutOfBandChange
	run.prog.Start(fmt.Sprintf("out-of-band changes: %d, each waited for up to %s", len(changes), timeout), len(changes))
	defer run.prog.Done()
	for i, c := range changes {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		s := svcs[i]
		t := &oobTarget{change: c, svc: s, vip: netip.AddrPortFrom(s.ClusterIP, s.Ports[0].Port), proto: s.Ports[0].Protocol}
		if c.Name == scenarios.OOBVirtualServer || c.Name == scenarios.OOBExcludedVirtualServer {
			if t.witness, err = unusedServiceAddr(cidr, run.services, 80); err != nil {
				return out, err
			}
			t.added = t.witness
			if c.Name == scenarios.OOBExcludedVirtualServer {
				if t.added, err = excludedAddr(run.sc, 80); err != nil {
					return out, err
				}
			} else {
				t.witness = netip.AddrPort{}
			}
		}
		res := oobOne(ctx, run, pool, t, timeout, poll, dialTimeout)
		out = append(out, res)
		run.prog.Add(1)
	}
	return out, ctx.Err()
}

// oobOne makes one change and waits for its repair.
func oobOne(ctx context.Context, run oobRun, pool workerPool, t *oobTarget, timeout, poll, dialTimeout time.Duration) reports.OutOfBandChange {
	res := reports.OutOfBandChange{Change: t.change.Name, What: t.change.What, Service: t.svc.Namespace + "/" + t.svc.Name, TimeoutNs: int64(timeout)}
	bg := context.WithoutCancel(ctx)
	if err := run.k.make(bg, t); err != nil {
		res.Err, res.Object = err.Error(), t.object
		// What was changed before the error, if anything, goes back.
		if t.saved != nil || t.added.IsValid() {
			if perr := run.k.putBack(bg, t); perr != nil {
				res.PutBackErr = perr.Error()
			}
		}
		return res
	}
	t0 := time.Now()
	res.Object = t.object
	deadline := t0.Add(timeout)

	// Probes: one connection each poll to the service, from a client pod.
	probeDone := make(chan struct{})
	stopProbes := make(chan struct{})
	probing := t.change.Name != scenarios.OOBVirtualServer && t.change.Name != scenarios.OOBExcludedVirtualServer
	var mu sync.Mutex // guards lastFail, goodAt and res's probe counts
	var lastFail, goodAt time.Time
	seen := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return !goodAt.IsZero()
	}
	go func() {
		defer close(probeDone)
		if !probing {
			return
		}
		pool.Each(func(w int) {
			if w != 0 {
				return
			}
			for {
				select {
				case <-stopProbes:
					return
				default:
				}
				landed, start, err := run.e.dial(t.vip.Addr(), t.vip.Port(), dialTimeout)
				mu.Lock()
				res.Probes++
				good := err == nil
				if t.change.Name == scenarios.OOBRealServer {
					good = err == nil && landed == t.endpoint
				}
				if err != nil {
					res.Failed++
					lastFail = start
					goodAt = time.Time{}
				} else if good && goodAt.IsZero() {
					goodAt = start
				}
				mu.Unlock()
				select {
				case <-stopProbes:
					return
				case <-time.After(time.Until(start.Add(poll))):
				}
			}
		})
	}()

	for {
		ok, err := run.k.repaired(bg, t)
		res.Polls++
		if err == nil && ok {
			res.Repaired, res.RepairNs = true, int64(time.Since(t0))
			break
		}
		if ctx.Err() != nil || !time.Now().Add(poll).Before(deadline) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(poll):
		}
	}
	if t.change.Name == scenarios.OOBExcludedVirtualServer {
		there, err := run.k.present(bg, t)
		if err == nil {
			res.LeftAlone = &there
		}
	}
	if res.Repaired && probing {
		// Let the data plane show the repair: a few polls more at most.
		wait := time.Now().Add(10 * poll)
		for time.Now().Before(wait) {
			time.Sleep(poll)
			if seen() {
				break
			}
		}
	}
	close(stopProbes)
	<-probeDone
	if !goodAt.IsZero() && goodAt.After(lastFail) {
		res.ProbeNs = int64(goodAt.Sub(t0))
	}
	if !res.Repaired || t.change.Name == scenarios.OOBExcludedVirtualServer {
		res.PutBack = !res.Repaired
		if err := run.k.putBack(bg, t); err != nil {
			res.PutBackErr = err.Error()
		}
	}
	return res
}

// outOfBandPhaseV is the outOfBand phase (scenario block
// faults.outOfBand) as a Phase: builtin rows resync through the mode's
// sync loop, started here with the mode's minSyncPeriod and syncPeriod
// and nothing changing; kube-proxy rows resync on their own.
var outOfBandPhaseV = Phase{
	PhaseRule: scenarios.PhaseRule{Name: reports.PhaseOutOfBand, Field: "faults.outOfBand", Scope: scenarios.ScopeRow, Rules: true, TCP: true,
		Wants: func(s *scenarios.Scenario) bool { return s.Faults != nil && s.Faults.OutOfBand != nil }},
	Report: reports.OutOfBandReport,
	Run: func(ctx context.Context, r *Row) error {
		spec := r.Sc.Faults.OutOfBand
		run := oobRun{spec: spec, sc: r.Sc, e: r.Env, k: r.Env.oob, mode: r.Mode.BaseName(), impl: r.Mode.Implementation, services: r.Services, prog: r.Progress()}
		if run.impl == "" {
			run.impl = scenarios.ImplBuiltin
		}
		wants := false
		for _, c := range scenarios.OOBChanges {
			wants = wants || spec.Wants(c, run.mode, run.impl)
		}
		if !wants {
			return nil
		}
		if run.k == nil {
			return errors.New("out-of-band: no kernel to change (env.oob)")
		}
		if _, err := r.Proxier.Sync(ctx, r.Services); err != nil {
			return fmt.Errorf("sync before the out-of-band changes: %w", err)
		}
		ob := &reports.OutOfBandResult{Syncs: -1}
		var loop *syncLoop
		proc, _ := r.Proxier.(soakProcess)
		var syncs0 uint64
		if api, viaAPI := r.Proxier.(churnAPI); viaAPI {
			minSync, period := api.SyncPeriods()
			ob.MinSyncPeriodNs, ob.SyncPeriodNs = int64(minSync), int64(period)
			if proc != nil {
				if res, err := proc.Resources(ctx); err == nil {
					syncs0 = res.Syncs
				}
			}
		} else {
			if r.Mode.SyncPeriods == nil {
				return fmt.Errorf("out-of-band: mode %s runs no sync loop", r.Mode.Name)
			}
			minSync, period := r.Mode.SyncPeriods(r.Sc)
			ob.MinSyncPeriodNs, ob.SyncPeriodNs = int64(minSync), int64(period)
			loop = startSyncLoop(ctx, r.Proxier, minSync, period, time.Now(), r.Live, func() []workload.Service { return r.Services })
		}
		ob.Config = oobConfig(run.mode, run.impl, time.Duration(ob.MinSyncPeriodNs), time.Duration(ob.SyncPeriodNs))
		changes, err := outOfBand(ctx, run)
		ob.Changes = changes
		if loop != nil {
			syncs, _ := loop.stop()
			ob.Syncs = len(syncs)
			ob.Resyncs = loop.resyncCount()
			for _, s := range syncs {
				if s.Kind == "full" {
					ob.Full++
				}
			}
		} else if proc != nil {
			if res, rerr := proc.Resources(context.WithoutCancel(ctx)); rerr == nil {
				ob.KubeProxySyncs = int(res.Syncs - syncs0)
			}
		}
		r.Result.OutOfBand = ob
		return err
	},
}
