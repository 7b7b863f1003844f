//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// flowServices returns n services of the restart fault, fault-flow-<i>:
// ClusterIPs after the highest of services, two fresh endpoints each
// (alloc), ServicePorts http 80/TCP and dns 53/UDP to target.
func flowServices(sc *scenarios.Scenario, services []workload.Service, n int, target uint16, alloc *podAlloc) ([]workload.Service, error) {
	svcNet, _, _, _ := sc.Prefixes()
	vip := svcNet.Addr()
	for _, s := range services {
		if s.ClusterIP.Compare(vip) > 0 {
			vip = s.ClusterIP
		}
	}
	var out []workload.Service
	for i := range n {
		vip = vip.Next()
		if !svcNet.Contains(vip) {
			return nil, fmt.Errorf("no room for the restart fault's services in serviceCIDR %s", svcNet)
		}
		s := workload.Service{Namespace: workload.Namespace, Name: fmt.Sprintf("fault-flow-%d", i), ClusterIP: vip,
			Ports: []workload.ServicePort{{Name: "http", Port: 80, TargetPort: target, Protocol: "TCP"},
				{Name: "dns", Port: 53, TargetPort: target, Protocol: "UDP"}}}
		for range 2 {
			ip, err := alloc.take()
			if err != nil {
				return nil, err
			}
			s.Endpoints = append(s.Endpoints, workload.NewEndpoint(ip))
		}
		out = append(out, s)
	}
	return out, nil
}

// restartPhase runs faults.restart: next to the row's services, flow
// services of its own (flowServices), each with one held TCP connection
// (80) and one UDP client from a fixed source port (53); for each case,
// the proxy is stopped (kube-proxy: SIGTERM, Halt; builtin: its proxier
// is no longer called, as a process that ended), stays down for the
// gap, and starts again with the same configuration (kube-proxy:
// Resume; builtin: a new proxier of the mode, whose first sync is full).
// Case changes replaces, while it is down, the endpoint each UDP flow
// used. The flows are followed for observe after the first sync. At the
// end the row's proxier programs the row's services again (full sync).
func restartPhase(ctx context.Context, r *Row) (out []reports.RestartCase, err error) {
	spec := r.Sc.Faults.Restart
	e, prog := r.Env, r.Progress()
	target := uint16(5353)
	for slices.Contains(workload.TargetPorts(r.Services), target) {
		target++
	}
	alloc := newPodAlloc(r.Sc, r.Services)
	flows, err := flowServices(r.Sc, r.Services, spec.Services, target, alloc)
	if err != nil {
		return nil, err
	}
	stopTCP, err := e.listen([]uint16{target})
	if err != nil {
		return nil, err
	}
	defer stopTCP()
	stopUDP, err := e.listenUDP([]uint16{target})
	if err != nil {
		return nil, err
	}
	defer stopUDP()
	stamps := false
	if e.stampConntrack != nil {
		if undo, serr := e.stampConntrack(); serr == nil {
			stamps = true
			defer func() { err = errors.Join(err, undo()) }()
		} else {
			r.Faults.add("faults.restart: nf_conntrack_timestamp not set in node0 (%v): conntrack entries deleted not measured", serr)
		}
	}
	prog.Start(fmt.Sprintf("%s: restarts under %d UDP and TCP flows (%v)", r.Mode.Name, len(flows), spec.Cases), len(spec.Cases))
	defer prog.Done()
	p := r.Proxier
	defer func() {
		if fs, ok := p.(proxymodes.FullSyncer); ok {
			fs.ForceFullSync()
		}
		if _, serr := p.Sync(context.WithoutCancel(ctx), r.Services); serr != nil {
			err = errors.Join(err, fmt.Errorf("sync back after the restarts: %w", serr))
		}
	}()
	for _, name := range spec.Cases {
		if fs, ok := p.(proxymodes.FullSyncer); ok {
			fs.ForceFullSync()
		}
		if _, err := p.Sync(ctx, append(slices.Clip(r.Services), flows...)); err != nil {
			return out, fmt.Errorf("sync of the flow services: %w", err)
		}
		if err := e.flush(0); err != nil {
			return out, err
		}
		c, next, err := restartCase(ctx, r, name, flows, alloc)
		c.EntryStamps = stamps
		out = append(out, c)
		if err != nil {
			return out, fmt.Errorf("restart %s: %w", name, err)
		}
		flows = next
		prog.Add(1)
	}
	return out, nil
}

// flowClient is one flow service's UDP client and held connection.
type flowClient struct {
	svc    workload.Service
	src    uint16
	conn   udpConn
	sender *udpSender
	fd     int
}

// restartCase is one restart (restartPhase); it returns the flow
// services as the proxy holds them after it.
func restartCase(ctx context.Context, r *Row, name string, flows []workload.Service, alloc *podAlloc) (c reports.RestartCase, after []workload.Service, err error) {
	spec := r.Sc.Faults.Restart
	e := r.Env
	c = reports.RestartCase{Case: name}
	var clients []*flowClient
	defer func() {
		for _, fc := range clients {
			if fc.sender != nil {
				select {
				case <-fc.sender.done:
				default:
					fc.sender.close()
				}
			}
			fc.conn.Close()
			if fc.fd >= 0 {
				e.closeConn(fc.fd)
			}
		}
	}()
	for i, s := range flows {
		fc := &flowClient{svc: s, src: uint16(spec.SourcePort + i), fd: -1}
		if fc.conn, err = e.udpClient(fc.src, netip.AddrPortFrom(s.ClusterIP, 53)); err != nil {
			return c, flows, fmt.Errorf("UDP client of %s: %w", s.Name, err)
		}
		clients = append(clients, fc)
		fd, _, _, oerr := e.open(s.ClusterIP, 80, 2*time.Second)
		if oerr != nil {
			return c, flows, fmt.Errorf("held connection to %s: %w", s.Name, oerr)
		}
		fc.fd = fd
		fc.sender = startSender(fc.conn, spec.Interval.Duration, spec.Timeout.Duration)
	}
	t00 := time.Now()
	before := make([]netip.Addr, len(clients))
	for i, fc := range clients {
		if before[i] = fc.sender.waitAnswer(t00, 5*time.Second); !before[i].IsValid() {
			return c, flows, fmt.Errorf("no UDP answer through %s before the restart", fc.svc.Name)
		}
	}
	time.Sleep(2 * spec.Interval.Duration)
	entries0 := flowEntries(e, clients)
	if e.conntrackCount != nil {
		c.ConntrackBefore, _ = e.conntrackCount(0)
	}
	// The endpoint each flow used last before the stop.
	for i, fc := range clients {
		if a := lastAnswer(fc.sender.records()); a.IsValid() {
			before[i] = a
		}
	}
	after = flows
	var removed []netip.Addr
	if name == "changes" {
		after = slices.Clone(flows)
		for i := range after {
			eps := slices.Clone(after[i].Endpoints)
			for j := range eps {
				if eps[j].IP == before[i] {
					ip, err := alloc.take()
					if err != nil {
						return c, flows, err
					}
					removed = append(removed, eps[j].IP)
					eps[j] = workload.NewEndpoint(ip)
				}
			}
			after[i].Endpoints = eps
		}
	}
	desired := append(slices.Clip(r.Services), after...)
	// Stop.
	tStop := time.Now()
	api, restarter := r.Proxier.(faultAPI)
	if restarter {
		if err := api.Halt(ctx, false); err != nil {
			return c, flows, err
		}
		if name == "changes" {
			for _, s := range after {
				if err := api.WriteChange(ctx, workload.Change{Kind: workload.EndpointRemove}, s, time.Now()); err != nil {
					return c, flows, fmt.Errorf("API write while kube-proxy is down: %w", err)
				}
			}
		}
	}
	if err := sleepCtx(ctx, time.Until(tStop.Add(spec.Gap.Duration))); err != nil {
		return c, flows, err
	}
	c.GapNs = int64(time.Since(tStop))
	// Start.
	var st proxymodes.SyncStats
	if restarter {
		st, err = api.Resume(ctx)
		if err != nil {
			return c, after, err
		}
		c.SyncNs, c.KubeProxySyncNs = int64(st.Wall), int64(st.Phases["kube-proxy.metric"])
	} else {
		q, err := e.newProxier(r.Sc, r.Mode)
		if err != nil {
			return c, flows, err
		}
		t := time.Now()
		if st, err = q.Sync(ctx, desired); err != nil {
			return c, after, fmt.Errorf("first sync of the new proxier: %w", err)
		}
		c.SyncNs = int64(time.Since(t))
	}
	synced := time.Now()
	if err := sleepCtx(ctx, spec.Observe.Duration); err != nil {
		return c, after, err
	}
	if e.conntrackCount != nil {
		c.ConntrackAfter, _ = e.conntrackCount(0)
	}
	entries1 := flowEntries(e, clients)
	for i, fc := range clients {
		recs := fc.sender.close()
		f := reports.RestartFlow{Service: fc.svc.Name, Before: addrText(before[i])}
		last := lastAnswer(recs)
		f.After = addrText(last)
		f.Moved = last.IsValid() && last != before[i]
		f.Sent, f.Lost, f.BlackholedNs = blackholes(recs, tStop)
		for _, x := range recs {
			if x.sent.After(synced) && slices.Contains(removed, x.from) {
				f.ToRemoved++
			}
		}
		if old, ok := entries0[fc.src]; ok && old.Start != 0 {
			now, ok := entries1[fc.src]
			f.EntryDeleted = !ok || now.Start != old.Start
		}
		f.HeldBroken = !e.alive(fc.fd)
		c.Flows = append(c.Flows, f)
	}
	return c, after, nil
}

// flowEntries are the conntrack entries of the clients' flows by source
// port (nil without udpEntries or on a read error).
func flowEntries(e *env, clients []*flowClient) map[uint16]udpEntry {
	if e.udpEntries == nil {
		return nil
	}
	all, err := e.udpEntries()
	if err != nil {
		return nil
	}
	out := map[uint16]udpEntry{}
	for _, fc := range clients {
		for _, x := range all {
			if x.SrcPort == fc.src && x.Dst.Addr() == fc.svc.ClusterIP {
				out[fc.src] = x
			}
		}
	}
	return out
}

// lastAnswer is the endpoint that answered the last answered exchange.
func lastAnswer(recs []exchange) netip.Addr {
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].from.IsValid() {
			return recs[i].from
		}
	}
	return netip.Addr{}
}

// blackholes counts the exchanges sent from t0 on and the unanswered
// ones, and returns the longest run without an answer: from the first
// unanswered exchange's send to the send of the next answered one (or
// to the last exchange's answer time when none came).
func blackholes(recs []exchange, t0 time.Time) (sent, lost int, longest int64) {
	var holeStart time.Time
	for _, x := range recs {
		if x.sent.Before(t0) {
			continue
		}
		sent++
		if !x.from.IsValid() {
			lost++
			if holeStart.IsZero() {
				holeStart = x.sent
			}
			continue
		}
		if !holeStart.IsZero() {
			longest = max(longest, int64(x.sent.Sub(holeStart)))
			holeStart = time.Time{}
		}
	}
	if !holeStart.IsZero() && len(recs) > 0 {
		longest = max(longest, int64(recs[len(recs)-1].answered.Sub(holeStart)))
	}
	return sent, lost, longest
}

func addrText(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// restartPhaseV is the restart-under-flows fault as a Phase.
var restartPhaseV = Phase{
	PhaseRule: faultPhaseRule("restart", "faults.restart", func(f *scenarios.FaultsSpec) bool { return f.Restart != nil }),
	Report:    reports.RestartReport,
	Run: func(ctx context.Context, r *Row) (err error) {
		if r.Result.Restart, err = restartPhase(ctx, r); err != nil {
			return fmt.Errorf("faults.restart: %w", err)
		}
		return nil
	},
}
