//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/proxymodes/leftovers"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// modeSwitchPhase is the mode switch under traffic (issue 23, point 6;
// docs/modes.md "Mode switch"): run-scoped, after every row, on node0,
// once per pair of modeSwitch.pairs the kernel runs and per
// implementation (builtin, and each kube-proxy binary when both modes
// run with kube-proxy).
var modeSwitchPhase = Phase{
	PhaseRule: scenarios.PhaseRule{Name: "modeSwitch", Field: "modeSwitch", Scope: scenarios.ScopeRun, Rules: true, TCP: true,
		Wants:                 func(s *scenarios.Scenario) bool { return s.ModeSwitch != nil },
		NotWithKubeProxyNodes: "the switch restarts node-0's proxy only"},
	RunAll:    runModeSwitch,
	ReportRun: func(res *reports.Result) []reports.Section { return reports.ModeSwitchSections(res.ModeSwitch) },
}

// runModeSwitch measures every switch of sc's modeSwitch.pairs whose two
// modes this run has (sc.Modes: a run on one kernel of several has that
// kernel's), builtin and kube-proxy, and appends each to
// Result.ModeSwitch (ReportRun makes the sections from them). A switch
// that fails is kept with its error and the next one runs; only a
// cancelled run stops the phase.
func runModeSwitch(ctx context.Context, s *RunState) error {
	sc := s.Sc
	in := switchInput{sc: sc, env: s.Env, sw: newSwitchEnv(s.Testbed), services: s.Services, prog: s.O.Progress, kernel: string(s.O.Where)}
	for _, pair := range sc.ModeSwitch.Pairs {
		if !slices.Contains(sc.Modes, pair.From) || !slices.Contains(sc.Modes, pair.To) {
			var out []string
			for _, m := range []string{pair.From, pair.To} {
				if !slices.Contains(sc.Modes, m) && !slices.Contains(out, m) {
					out = append(out, m)
				}
			}
			where := "on this kernel"
			switch s.O.Where {
			case WhereHost:
				where = "on the host kernel"
			case WhereGuest:
				where = "in the user-mode-linux guest"
			}
			s.Result.Skipped = append(s.Result.Skipped, fmt.Sprintf("modeSwitch %s: %s not among the modes run %s (%s): left out of modes (or by --modes), or run on another kernel of this run",
				pair, strings.Join(out, " and "), where, strings.Join(sc.Modes, ", ")))
			continue
		}
		from, err := modes.Lookup(pair.From)
		if err != nil {
			return err
		}
		to, err := modes.Lookup(pair.To)
		if err != nil {
			return err
		}
		var sws []switcher
		for _, impl := range sc.Implementations(pair.From) {
			if impl == scenarios.ImplBuiltin {
				sws = append(sws, &builtinSwitch{sc: sc, node: s.Testbed.Node, from: from, to: to, lookup: modes.Lookup})
				continue
			}
			if !sc.KubeProxyRuns(pair.To) || s.Checked == nil {
				continue
			}
			for _, kb := range s.Checked.kubeProxies {
				label := fmt.Sprintf("switch %s to %s (kube-proxy %s)", pair.From, pair.To, kb.Version)
				v := kubeproxy.Variant(from, kubeproxy.VariantSpec{Binary: kb.Path, Version: kb.Version, Label: label,
					Dir: filepath.Join(s.O.ArtifactDir, rowDir("switch-"+pair.From+"-"+pair.To+" (kube-proxy "+kb.Version+")")), Bin: s.Checked.bin})
				sws = append(sws, &kubeSwitch{sc: sc, node: s.Testbed.Node, variant: v, to: to, version: kb.Version, backend: sc.IPTables.Backend})
			}
		}
		for _, sw := range sws {
			s.Result.ModeSwitch = append(s.Result.ModeSwitch, measureSwitch(ctx, in, pair, from, to, sw))
			checkpoint(s.Result, s.O.Checkpoint)
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// switchInput is what measureSwitch needs of the run.
type switchInput struct {
	sc       *scenarios.Scenario
	env      *env
	sw       switchEnv
	services []workload.Service
	prog     Progress
	kernel   string
}

// switcher is one implementation's side of a switch: the proxies.
type switcher interface {
	// implementation and version name it in the result.
	implementation() (impl, version string)
	// start makes the from mode program the services (its first sync).
	start(ctx context.Context, services []workload.Service) error
	// switchTo stops the from mode's proxy without removing its rules and
	// starts the to mode's, which cleans up at start as kube-proxy v1.37
	// does, and returns when its first full sync is done.
	switchTo(ctx context.Context, services []workload.Service) (switchTimes, error)
	// halt stops the to mode's proxy (its rules stay) and runs the
	// recovery cleanup (kube-proxy --cleanup; builtin: every mode's
	// CleanupLeftovers); resume starts the to mode's proxy again.
	halt(ctx context.Context) (what string, took time.Duration, cleanupErr, err error)
	resume(ctx context.Context, services []workload.Service) (time.Duration, error)
	// cleanup removes every proxy and its rules (the end of the switch).
	cleanup(ctx context.Context) error
}

// switchTimes are what a switchTo measured.
type switchTimes struct {
	stopped, newStart time.Time
	firstSync         time.Duration
	proxyMetric       time.Duration
	startupCleanup    string
	startupCleanupDur time.Duration
	notes             []string
}

// switchWorkers is the number of probe workers of a switch.
const switchWorkers = 2

// measureSwitch runs one switch on node0 with probes running and fills a
// reports.ModeSwitch (see its fields): the from mode programs the
// services; the node's kernel state is read (Before); probes start,
// modeSwitch.established connections are opened through the old rules;
// after a one-second baseline the switch starts (Start); once the new
// mode's first sync is done the probes go on until every probed service
// has answered again, or modeSwitch.settle passes; the held connections
// are checked; the kernel is read again (Leftovers: of Before, what the
// new mode does not own); then the recovery step (stop, cleanup, read
// the kernel: AfterCleanup; start again) under the same probes. At the
// end every proxy's rules are removed and node0's conntrack table
// flushed. A step that fails ends the switch there with Error set; what
// was measured is kept. The node is reset first (every proxy object
// removed).
func measureSwitch(ctx context.Context, in switchInput, pair scenarios.ModeSwitchPair, from, to proxymodes.Mode, sw switcher) (out reports.ModeSwitch) {
	ms := in.sc.ModeSwitch
	impl, version := sw.implementation()
	out = reports.ModeSwitch{From: pair.From, To: pair.To, Implementation: impl, Version: version, Kernel: in.kernel, FirstSyncNs: -1}
	in.prog.Start(fmt.Sprintf("mode switch %s under probes", out.Label()), 1)
	defer in.prog.Done()
	fail := func(step string, err error) reports.ModeSwitch {
		if out.Error == "" {
			out.Error = fmt.Sprintf("%s: %v", step, err)
		}
		return out
	}
	defer func() {
		if r, ok := sw.(interface {
			record(ctx context.Context) *measure.KubeProxy
		}); ok {
			out.KubeProxy = r.record(context.WithoutCancel(ctx))
		}
		if err := sw.cleanup(context.WithoutCancel(ctx)); err != nil {
			out.Notes = append(out.Notes, "cleanup after the switch: "+err.Error())
		}
		if err := in.env.flush(0); err != nil {
			out.Notes = append(out.Notes, "conntrack flush of node0 after the switch: "+err.Error())
		}
	}()
	if err := in.env.flush(0); err != nil {
		return fail("conntrack flush before the switch", err)
	}
	// A clean node: an earlier row or switch may have left what no
	// cleanup removes (kube-proxy's KUBE-FIREWALL, the userspace portals).
	// What a reset could not remove is nobody's leftover here: it is left
	// out of every reading below.
	if in.sw.reset != nil {
		if err := in.sw.reset(ctx); err != nil {
			out.Notes = append(out.Notes, "reset of the node before the switch: "+err.Error())
		}
	}
	base, err := in.sw.read(ctx)
	if err != nil {
		return fail("read the node's rules before the switch", err)
	}
	if len(base) > 0 {
		out.Notes = append(out.Notes, "on the node before the "+pair.From+" mode started, left out of the readings: "+reports.LeftoverText(groups(base)))
	}
	if err := sw.start(ctx, in.services); err != nil {
		return fail("the "+pair.From+" mode's first sync", err)
	}
	before, err := in.sw.read(ctx)
	if err != nil {
		return fail("read the node's rules before the switch", err)
	}
	before = before.Without(base)
	out.Before = groups(before)

	targets := probeTargets(in.services, ms.Services)
	pool, err := in.env.probes(switchWorkers)
	if err != nil {
		return fail("probes", err)
	}
	defer pool.Close()
	// The held connections first: the probe loop keeps every worker of
	// the pool busy until it stops.
	held, herr := openHeld(in, pool, targets, ms.Established)
	defer func() {
		for _, h := range held {
			in.sw.close(h.fd)
		}
	}()
	if herr != nil {
		out.Notes = append(out.Notes, fmt.Sprintf("established connections: %d of %d opened through the old rules (%v)", len(held), ms.Established, herr))
	}
	out.Established = len(held)
	pr := newProber(targets)
	loop := startProbeLoop(in.env, pool, pr, in.services, ms.Timeout.Duration, ms.Interval.Duration)
	stopProbes := loop.stop
	defer stopProbes()
	time.Sleep(time.Second) // baseline: every service answers through the old rules

	t0 := time.Now()
	out.Start = t0
	pr.epoch.Store(t0.UnixNano())
	st, err := sw.switchTo(ctx, in.services)
	out.Notes = append(out.Notes, st.notes...)
	out.StartupCleanup, out.StartupCleanupNs = st.startupCleanup, int64(st.startupCleanupDur)
	if !st.stopped.IsZero() {
		out.StoppedNs = int64(st.stopped.Sub(t0))
	}
	if !st.newStart.IsZero() {
		out.NewStartNs = int64(st.newStart.Sub(t0))
	}
	synced := time.Now()
	if err == nil {
		out.FirstSyncNs, out.ProxyMetricNs = int64(st.firstSync), int64(st.proxyMetric)
		forgetFailed(in, targets, &out)
		settle(pr, synced, ms.Settle.Duration)
	}
	// The window ends here; the connections started in it finish before
	// anything else changes the node (the recovery step).
	switchEnd := time.Now()
	time.Sleep(ms.Timeout.Duration)
	// The held connections, after the switch.
	for _, h := range held {
		if cerr := in.sw.carries(h.fd, ms.Timeout.Duration); cerr != nil {
			if len(out.BrokenHow) < 3 {
				out.BrokenHow = append(out.BrokenHow, cerr.Error())
			}
			continue
		}
		out.Survived++
	}
	if err != nil {
		all := stopProbes()
		out.Window = switchWindow(all, t0, switchEnd, ms.Slow.Duration)
		out.Services = outages(in.services, targets, all, t0, switchEnd)
		return fail("switch to "+pair.To, err)
	}
	after, err := in.sw.read(ctx)
	if err != nil {
		return fail("read the node's rules after the switch", err)
	}
	out.Leftovers = groups(leftovers.Left(before, after, to.Owns))

	// The recovery step, under the same probes.
	recStart := time.Now()
	pr.epoch.Store(recStart.UnixNano())
	what, took, cerr, err := sw.halt(ctx)
	out.Cleanup, out.CleanupNs = what, int64(took)
	if cerr != nil {
		out.CleanupError = cerr.Error()
	}
	if err != nil {
		all := stopProbes()
		out.Window = switchWindow(all, t0, switchEnd, ms.Slow.Duration)
		out.Services = outages(in.services, targets, all, t0, switchEnd)
		return fail("halt for the cleanup", err)
	}
	cleaned, rerr := in.sw.read(ctx)
	if rerr != nil {
		out.Notes = append(out.Notes, "read the node's rules after the cleanup: "+rerr.Error())
	}
	out.AfterCleanup = groups(cleaned.Without(base))
	first, err := sw.resume(ctx, in.services)
	resumed := time.Now()
	if err == nil {
		out.RecoveryFirstSyncNs = int64(first)
		forgetFailed(in, targets, &out)
		settle(pr, resumed, ms.Settle.Duration)
	}
	recEnd := time.Now()
	time.Sleep(ms.Timeout.Duration)
	all := stopProbes()
	out.Window = switchWindow(all, t0, switchEnd, ms.Slow.Duration)
	out.Services = outages(in.services, targets, all, t0, switchEnd)
	rw := switchWindow(all, recStart, recEnd, ms.Slow.Duration)
	out.Recovery = &rw
	for _, s := range outages(in.services, targets, all, recStart, recEnd) {
		if s.OutageNs < 0 {
			out.RecoveryOutageNs = -1
			break
		}
		out.RecoveryOutageNs = max(out.RecoveryOutageNs, s.OutageNs)
	}
	if err != nil {
		return fail("restart after the cleanup", err)
	}
	return out
}

// settle waits until every probed service has answered since from, or
// for d.
func settle(pr *prober, from time.Time, d time.Duration) {
	pr.epoch.Store(from.UnixNano())
	for end := from.Add(d); !pr.allAnswered() && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
}

// forgetFailed removes the untranslated conntrack entries the probes
// that failed during the switch left in the node (dropUntranslated): a
// later probe reusing one of their 4-tuples would fail though the new
// rules are there, lengthening the outage measured.
func forgetFailed(in switchInput, targets []workload.Target, out *reports.ModeSwitch) {
	if in.env.forgetUntranslated == nil {
		return
	}
	dsts := make([]netip.AddrPort, 0, len(targets))
	for _, t := range targets {
		s := &in.services[t.Service]
		dsts = append(dsts, netip.AddrPortFrom(s.ClusterIP, s.Ports[0].Port))
	}
	if _, err := in.env.forgetUntranslated(dsts); err != nil {
		out.Notes = append(out.Notes, "remove untranslated conntrack entries of failed probes: "+err.Error())
	}
}

// heldSwitchConn is one established connection held across a switch.
type heldSwitchConn struct {
	fd     int
	target int
}

// openHeld opens n connections through the probed services in turn, on
// a probe worker of pool (a client namespace), one at a time.
func openHeld(in switchInput, pool workerPool, targets []workload.Target, n int) ([]heldSwitchConn, error) {
	if n <= 0 || len(targets) == 0 {
		return nil, nil
	}
	var out []heldSwitchConn
	var first error
	var once sync.Once
	pool.Each(func(w int) {
		once.Do(func() { // one worker opens them all
			for i := 0; i < n; i++ {
				s := in.services[targets[i%len(targets)].Service]
				fd, err := in.sw.open(s.ClusterIP, s.Ports[0].Port, in.sc.ModeSwitch.Timeout.Duration)
				if err != nil {
					if first == nil {
						first = err
					}
					continue
				}
				out = append(out, heldSwitchConn{fd: fd, target: i % len(targets)})
			}
		})
	})
	return out, first
}

// switchWindow counts the probes started in [from, to) (window: failed,
// slow, connect times; the second before from as its baseline).
func switchWindow(recs []probeRec, from, to time.Time, slow time.Duration) reports.SyncWindow {
	w := reports.SyncWindow{Kind: "mode switch", SlowAbove: slow}
	window(&w, recs, from, to, slow)
	return w
}

// outages is, per probed service, its outage in [from, to) (see
// reports.SwitchService): the longest run of its failed probes started
// at or after from, from the answer of the success before the run (a
// probe of the second before from counts) to the answer of the first
// success after it; 0 without a failure; -1 when no success followed the
// last run. A run, not the span from the first failure to the last: on a
// loaded machine a connection may time out now and then, and two such
// far apart are no outage between them.
func outages(services []workload.Service, targets []workload.Target, recs []probeRec, from, to time.Time) []reports.SwitchService {
	by := make([][]probeRec, len(targets))
	for _, r := range recs {
		if r.target >= 0 && r.target < len(targets) && !r.start.Before(from.Add(-time.Second)) && r.start.Before(to) {
			by[r.target] = append(by[r.target], r)
		}
	}
	out := make([]reports.SwitchService, len(targets))
	for i, t := range targets {
		s := services[t.Service]
		ss := reports.SwitchService{Service: s.Name, ClusterIP: s.ClusterIP.String(), FirstNewNs: -1}
		rs := by[i]
		sort.Slice(rs, func(a, b int) bool { return rs[a].start.Before(rs[b].start) })
		var lastOK time.Time // answer of the last success so far
		inRun := false       // failures since lastOK (of probes from from on)
		for _, r := range rs {
			if !r.start.Before(from) {
				ss.Attempts++
			}
			if r.err != nil {
				if !r.start.Before(from) {
					ss.Failed++
					inRun = true
				}
				continue
			}
			at := r.start.Add(r.lat)
			if inRun {
				start := from
				if !lastOK.IsZero() {
					start = lastOK
				}
				if d := int64(at.Sub(start)); d > ss.OutageNs {
					ss.OutageNs, ss.FirstNewNs = d, int64(at.Sub(from))
					ss.LastOldNs = nil
					if !lastOK.IsZero() {
						ss.LastOldNs = nsPtr(lastOK.Sub(from))
					}
				}
				inRun = false
			}
			lastOK = at
		}
		if inRun { // the last run never ended
			ss.OutageNs, ss.FirstNewNs = -1, -1
			ss.LastOldNs = nil
			if !lastOK.IsZero() {
				ss.LastOldNs = nsPtr(lastOK.Sub(from))
			}
		}
		out[i] = ss
	}
	return out
}

// groups turns an inventory into the report's leftover groups.
func groups(inv leftovers.Inventory) []reports.Leftover {
	gs := leftovers.Groups(inv)
	out := make([]reports.Leftover, 0, len(gs))
	for _, g := range gs {
		out = append(out, reports.Leftover{Kind: g.Kind, Where: g.Where, Name: g.Name, Count: g.Count, Rules: g.Rules})
	}
	return out
}

// stopper is a proxier whose proxy can stop without removing its rules
// (ipvs: its graceful-termination check and sockets; userspace: its
// listeners), as its process exiting would.
type stopper interface{ Stop() }

// builtinSwitch is a switch between two builtin modes.
type builtinSwitch struct {
	sc       *scenarios.Scenario
	node     proxymodes.Node
	from, to proxymodes.Mode
	lookup   func(string) (proxymodes.Mode, error)
	p, q     proxymodes.Proxier
}

func (b *builtinSwitch) implementation() (string, string) { return scenarios.ImplBuiltin, "" }

func (b *builtinSwitch) start(ctx context.Context, services []workload.Service) (err error) {
	if b.p, err = b.from.New(b.sc, b.node); err != nil {
		return err
	}
	_, err = b.p.Sync(ctx, services)
	return err
}

// startupCleanup runs the CleanupLeftovers of the modes m cleans at
// start (Mode.CleansAtStart), as kube-proxy v1.37's platformCleanup,
// and says which ran; their errors are notes (kube-proxy logs them and
// starts anyway).
func (b *builtinSwitch) startupCleanup(ctx context.Context, m proxymodes.Mode) (what string, notes []string) {
	var ran []string
	for _, name := range m.CleansAtStart {
		c, err := b.lookup(name)
		if err != nil || c.CleanupLeftovers == nil {
			continue
		}
		ran = append(ran, name)
		if err := c.CleanupLeftovers(ctx, b.sc, b.node); err != nil {
			notes = append(notes, fmt.Sprintf("%s's start-up cleanup of %s: %v", m.Name, name, err))
		}
	}
	if len(ran) == 0 {
		return "none", notes
	}
	return "CleanupLeftovers of " + joinWords(ran), notes
}

// fresh starts a new proxier of b.to: its start-up cleanup, then its
// first Sync.
func (b *builtinSwitch) fresh(ctx context.Context, services []workload.Service) (what string, cleanup, total time.Duration, notes []string, err error) {
	t0 := time.Now()
	what, notes = b.startupCleanup(ctx, b.to)
	cleanup = time.Since(t0)
	if b.q, err = b.to.New(b.sc, b.node); err != nil {
		return what, cleanup, 0, notes, err
	}
	_, err = b.q.Sync(ctx, services)
	return what, cleanup, time.Since(t0), notes, err
}

func (b *builtinSwitch) switchTo(ctx context.Context, services []workload.Service) (st switchTimes, err error) {
	if s, ok := b.p.(stopper); ok {
		s.Stop()
	}
	st.stopped = time.Now()
	st.newStart = st.stopped
	st.startupCleanup, st.startupCleanupDur, st.firstSync, st.notes, err = b.fresh(ctx, services)
	return st, err
}

func (b *builtinSwitch) halt(ctx context.Context) (string, time.Duration, error, error) {
	if s, ok := b.q.(stopper); ok {
		s.Stop()
	}
	t0 := time.Now()
	var ran []string
	var errs []error
	// kube-proxy --cleanup in v1.37: platformCleanup with cleanupAndExit,
	// every mode's CleanupLeftovers (iptables, ipvs, then nftables).
	for _, name := range scenarios.KubeProxyModes {
		m, err := b.lookup(name)
		if err != nil || m.CleanupLeftovers == nil {
			continue
		}
		ran = append(ran, name)
		errs = append(errs, m.CleanupLeftovers(ctx, b.sc, b.node))
	}
	return "builtin: CleanupLeftovers of " + joinWords(ran) + " (kube-proxy --cleanup)", time.Since(t0), errors.Join(errs...), nil
}

func (b *builtinSwitch) resume(ctx context.Context, services []workload.Service) (time.Duration, error) {
	_, _, total, _, err := b.fresh(ctx, services)
	return total, err
}

// cleanup removes both proxiers' rules. One mode's Cleanup can fail on
// the other's rules (the iptables mode deletes every KUBE-* chain, and
// the userspace mode's portal chains are still jumped to until its own
// Cleanup ran): a second pass then succeeds.
func (b *builtinSwitch) cleanup(ctx context.Context) error {
	var err error
	for pass := 0; pass < 2; pass++ {
		var errs []error
		for _, p := range []proxymodes.Proxier{b.p, b.q} {
			if p != nil {
				errs = append(errs, p.Cleanup(ctx))
			}
		}
		if err = errors.Join(errs...); err == nil {
			return nil
		}
	}
	return err
}

// kubeModeSwitcher is what a kube-proxy switch needs of a
// kubeproxy.Proxier.
type kubeModeSwitcher interface {
	proxymodes.Proxier
	UseIPTablesBackend(be string)
	SwitchMode(ctx context.Context, mode string, pass map[string]any) (time.Time, proxymodes.SyncStats, error)
	HaltCleanup(ctx context.Context) (time.Duration, error, error)
	Resume(ctx context.Context) (proxymodes.SyncStats, error)
}

// kubeSwitch is a switch of the real kube-proxy: its own control plane,
// a kube-proxy in the from mode, then a new one in the to mode over the
// same control plane (the DaemonSet rollout).
type kubeSwitch struct {
	sc      *scenarios.Scenario
	node    proxymodes.Node
	variant proxymodes.Mode // kube-proxy in the from mode
	to      proxymodes.Mode
	version string
	backend string
	p       kubeModeSwitcher
}

func (k *kubeSwitch) implementation() (string, string) { return scenarios.ImplKubeProxy, k.version }

func (k *kubeSwitch) start(ctx context.Context, services []workload.Service) error {
	p, err := k.variant.New(k.sc, k.node)
	if err != nil {
		return err
	}
	kp, ok := p.(kubeModeSwitcher)
	if !ok {
		return fmt.Errorf("kube-proxy switch: proxier %T cannot switch mode", p)
	}
	k.p = kp
	k.p.UseIPTablesBackend(k.backend) // one iptables alternative on the node, whatever the mode
	_, err = k.p.Sync(ctx, services)
	return err
}

func (k *kubeSwitch) switchTo(ctx context.Context, _ []workload.Service) (st switchTimes, err error) {
	pass, err := kubeproxy.PassFromScenario(k.sc, k.to.Name)
	if err != nil {
		return st, err
	}
	stopped, ss, err := k.p.SwitchMode(ctx, k.to.Name, pass)
	st.stopped, st.newStart, st.firstSync = stopped, ss.Start, ss.Wall
	st.proxyMetric = ss.Phases["kube-proxy.metric"]
	st.startupCleanup = "kube-proxy's own (platformCleanup)"
	return st, err
}

func (k *kubeSwitch) halt(ctx context.Context) (string, time.Duration, error, error) {
	took, cerr, err := k.p.HaltCleanup(ctx)
	return "kube-proxy --cleanup", took, cerr, err
}

func (k *kubeSwitch) resume(ctx context.Context, _ []workload.Service) (time.Duration, error) {
	st, err := k.p.Resume(ctx)
	return st.Wall, err
}

// record is what the result keeps of the switch's kube-proxy processes.
func (k *kubeSwitch) record(ctx context.Context) *measure.KubeProxy {
	if r, ok := k.p.(kubeProxyRecorder); ok && k.p != nil {
		return r.KubeProxyRecord(ctx)
	}
	return nil
}

func (k *kubeSwitch) cleanup(ctx context.Context) error {
	if k.p == nil {
		return nil
	}
	return k.p.Cleanup(ctx)
}

// joinWords is "a, b and c".
func joinWords(ws []string) string {
	switch len(ws) {
	case 0:
		return ""
	case 1:
		return ws[0]
	}
	out := ws[0]
	for _, w := range ws[1 : len(ws)-1] {
		out += ", " + w
	}
	return out + " and " + ws[len(ws)-1]
}

// nsPtr is d in ns, as a pointer (a figure that may be unknown, and
// negative when known).
func nsPtr(d time.Duration) *int64 {
	v := int64(d)
	return &v
}
