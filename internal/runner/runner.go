//go:build linux

// Package runner carries one scenario through the data flow of
// ARCHITECTURE.md: services from the scenario, a testbed, and for each mode
// a proxier's full syncs and the traffic driver's phases, into a
// reports.Result. The CLI only wires flags and output to it.
package runner

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/proxybench/proxybench/internal/uml"
	"github.com/proxybench/proxybench/proxymodes"
	// Each mode registers itself with proxymodes at init.
	_ "github.com/proxybench/proxybench/proxymodes/iptables"
	_ "github.com/proxybench/proxybench/proxymodes/none"
	"github.com/proxybench/proxybench/proxymodes/userspace"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/traffic"
)

// InputError is bad input or an unusable machine, found before anything is
// created: the CLI prints it as one line and exits 2.
type InputError struct{ Field, Msg, Fix string }

func (e *InputError) Error() string {
	s := e.Msg
	if e.Field != "" {
		s = e.Field + ": " + s
	}
	if e.Fix != "" {
		s += "; fix: " + e.Fix
	}
	return s
}

// Progress reports long steps; the CLI draws bars or plain lines.
type Progress interface {
	// Start begins a step of total units; Add advances it; Done ends it.
	Start(step string, total int)
	Add(n int)
	Done()
}

type noProgress struct{}

func (noProgress) Start(string, int) {}
func (noProgress) Add(int)           {}
func (noProgress) Done()             {}

// Options configure Run.
type Options struct {
	RunID    string // empty: a new one
	Version  string
	Progress Progress
	// LookPath and Geteuid are os/exec.LookPath and os.Geteuid, replaceable in tests.
	LookPath func(string) (string, error)
	Geteuid  func() int
}

func (o *Options) defaults() {
	if o.RunID == "" {
		o.RunID = topology.NewRunID()
	}
	if o.Progress == nil {
		o.Progress = noProgress{}
	}
	if o.LookPath == nil {
		o.LookPath = exec.LookPath
	}
	if o.Geteuid == nil {
		o.Geteuid = os.Geteuid
	}
}

// Preflight checks, before anything is created, that the scenario can run
// here: root privileges, the network namespace directory, and each mode's
// programs. Failures are *InputError.
func Preflight(sc *scenarios.Scenario, o Options) error {
	o.defaults()
	if o.Geteuid() != 0 {
		return &InputError{Msg: "proxybench run needs root: it creates network namespaces and programs their rules", Fix: "run it as root (sudo bin/proxybench run ...)"}
	}
	if sc.Services.Protocol != "TCP" {
		return &InputError{Field: "services.protocol", Msg: fmt.Sprintf("%s services render, but the traffic driver only drives TCP in this version", sc.Services.Protocol), Fix: "use protocol: TCP"}
	}
	for _, m := range sc.Modes {
		mode, err := proxymodes.Lookup(m)
		if err != nil {
			return &InputError{Field: "modes", Msg: err.Error(), Fix: "use one of " + strings.Join(proxymodes.Names(), ", ")}
		}
		if mode.Binaries == nil {
			continue
		}
		for _, b := range mode.Binaries(sc) {
			if _, err := o.LookPath(b); err != nil {
				return &InputError{Field: "modes", Msg: fmt.Sprintf("mode %s needs %s, which is not on PATH", m, b), Fix: "run make setup (installs Debian's iptables package) or drop the mode"}
			}
		}
	}
	return nil
}

// Run executes sc: Preflight, build the testbed, then for each mode
// Repetitions full syncs (each from empty) and Repetitions rounds of
// traffic at every position, then teardown. The testbed is torn down on
// success, on error and on ctx cancellation (SIGINT/SIGTERM in the CLI).
//
// With a sweep (sc.Sweep.Services), every mode runs once per size, and the
// result holds one ModeResult per (size, mode), in that order.
func Run(ctx context.Context, sc *scenarios.Scenario, o Options) (res *reports.Result, err error) {
	o.defaults()
	if err := Preflight(sc, o); err != nil {
		return nil, err
	}
	sizes := sc.Sizes()
	perSize := make([][]workload.Service, len(sizes))
	for i, n := range sizes {
		if perSize[i], err = workload.Services(sc.AtSize(n)); err != nil {
			return nil, &InputError{Field: "services", Msg: err.Error()}
		}
		applyWeights(sc.AtSize(n), perSize[i])
	}
	res = &reports.Result{
		SchemaVersion: reports.SchemaVersion, Tool: "proxybench " + o.Version, RunID: o.RunID,
		Engine: "real", Started: time.Now(), Machine: MachineInfo(), Scenario: sc,
	}
	o.Progress.Start("building testbed "+o.RunID, 1)
	tb, err := topology.Build(ctx, topologySpec(sc, o.RunID, perSize[len(perSize)-1]))
	o.Progress.Done()
	if err != nil {
		return nil, fmt.Errorf("build testbed: %w", err)
	}
	defer func() {
		if terr := tb.Teardown(); terr != nil && err == nil {
			err = fmt.Errorf("teardown: %w", terr)
		}
	}()
	echo, err := startEcho(tb, perSize[0])
	if err != nil {
		return nil, err
	}
	defer echo.Close()
	if n := sc.Failure.DownEndpointsPerService; n > 0 {
		var down []netip.Addr
		for _, s := range perSize[len(perSize)-1] {
			for _, e := range s.Endpoints[:min(n, len(s.Endpoints))] {
				down = append(down, e.IP)
			}
		}
		undo, err := userspace.DownEndpoints(ctx, tb.Backend, down, sc.Failure.Mode)
		if err != nil {
			return nil, fmt.Errorf("failure injection: %w", err)
		}
		defer undo()
	}
	for i, n := range sizes {
		for _, mode := range sc.Modes {
			for _, vsc := range modeVariants(sc.AtSize(n), mode) {
				mr, err := runMode(ctx, vsc, o, tb, perSize[i], mode)
				if err != nil {
					return nil, fmt.Errorf("mode %s at %d services: %w", modeLabel(mode, vsc), n, err)
				}
				mr.Services = n
				res.Modes = append(res.Modes, *mr)
			}
		}
	}
	res.Finished = time.Now()
	return res, nil
}

func runMode(ctx context.Context, sc *scenarios.Scenario, o Options, tb *topology.Testbed, services []workload.Service, mode string) (mr *reports.ModeResult, err error) {
	m, err := proxymodes.Lookup(mode)
	if err != nil {
		return nil, &InputError{Field: "modes", Msg: err.Error()}
	}
	p, err := m.New(sc, tb.Node)
	if err != nil {
		return nil, err
	}
	mr = &reports.ModeResult{Mode: mode, Info: p.Info(), Kernel: "host"}
	if uml.InGuest() {
		mr.Kernel = "uml"
	}
	defer func() {
		if cerr := p.Cleanup(context.WithoutCancel(ctx)); cerr != nil && err == nil {
			err = fmt.Errorf("cleanup: %w", cerr)
		}
		_ = flushConntrack(tb.Node)
	}()
	o.Progress.Start(fmt.Sprintf("%s: sync.full × %d (%d services)", mode, sc.Repetitions, len(services)), sc.Repetitions)
	var walls []int64
	// Every repetition programs a kernel namespace that has never held this
	// mode's state: the first ones a fresh scratch namespace each (a
	// proxier's Cleanup leaves kernel state behind that slows a re-sync,
	// e.g. IPVS keeps deleted real servers in its trash list for minutes),
	// the last one the node itself, which then carries the traffic.
	for rep := 0; rep < sc.Repetitions; rep++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var st proxymodes.SyncStats
		if rep < sc.Repetitions-1 {
			st, err = scratchSync(ctx, sc, m, topology.NetnsName(tb.RunID, fmt.Sprintf("sync%d", rep)), services)
		} else {
			_ = flushConntrack(tb.Node)
			st, err = p.Sync(ctx, services)
		}
		if err != nil {
			return nil, fmt.Errorf("sync: %w", err)
		}
		mr.SyncFull = append(mr.SyncFull, st)
		walls = append(walls, int64(st.Wall))
		o.Progress.Add(1)
	}
	o.Progress.Done()
	mr.SyncFullSummary = reports.Summarize(walls)

	// sync.incremental: one endpoint moves to a fresh pod IP, Sync, and
	// back (the way back is not recorded).
	if !m.Direct {
		var incs []int64
		for rep := 0; rep < sc.Repetitions; rep++ {
			st, err := p.Sync(ctx, moveOneEndpoint(services, rep))
			if err != nil {
				return nil, fmt.Errorf("incremental sync: %w", err)
			}
			mr.SyncIncremental = append(mr.SyncIncremental, st)
			incs = append(incs, int64(st.Wall))
			if _, err := p.Sync(ctx, services); err != nil {
				return nil, fmt.Errorf("sync back after the incremental sync: %w", err)
			}
		}
		mr.SyncIncrementalSummary = reports.Summarize(incs)
	}
	// Every other node runs its own proxier over the same services.
	nodeProxiers := []proxymodes.Proxier{p}
	if !m.Direct && len(tb.Nodes) > 1 {
		extra, serr := startNodes(ctx, m, sc, tb, services)
		defer func() {
			if cerr := stopNodes(ctx, tb, extra); cerr != nil && err == nil {
				err = cerr
			}
		}()
		if serr != nil {
			return nil, serr
		}
		nodeProxiers = append(nodeProxiers, extra...)
	}

	flat := workload.FlatTargets(services)
	pos := map[string]*reports.PositionResult{}
	hits := map[string]map[netip.Addr]int{}
	var elapsed = map[string]time.Duration{}
	cpu0 := proxymodes.CPUTime()
	o.Progress.Start(fmt.Sprintf("%s: traffic, %d positions × %d repetitions × %d connections", mode, len(sc.Traffic.Positions), sc.Repetitions, sc.Traffic.Connections), len(sc.Traffic.Positions)*sc.Repetitions*((sc.Traffic.Connections+trafficChunk-1)/trafficChunk))
	// Positions are interleaved in chunks of at most trafficChunk
	// connections, in an order rotated every chunk, so that slow drifts of
	// the machine (a guest warming up, a neighbour's load) fall on every
	// position alike and position differences are the data plane's.
	chunks := (sc.Traffic.Connections + trafficChunk - 1) / trafficChunk
	np := len(sc.Traffic.Positions)
	for rep := 0; rep < sc.Repetitions; rep++ {
		for k := 0; k < chunks*np; k++ {
			chunk := k / np
			i := (k + rep + chunk) % np
			position := sc.Traffic.Positions[i]
			n := min(trafficChunk, sc.Traffic.Connections-chunk*trafficChunk)
			warm := 0
			if chunk == 0 {
				warm = sc.Traffic.Warmup
			}
			dr, err := traffic.Drive(ctx, traffic.DriveSpec{
				Clients: tb.Clients, Services: services, Direct: m.Direct, Position: position,
				Connections: n, Warmup: warm, Concurrency: sc.Traffic.Concurrency,
				Timeout: sc.Traffic.Timeout.Duration, Seed: sc.Seed + int64(rep*100000+chunk*100+i),
			})
			if err != nil {
				return nil, fmt.Errorf("traffic at %s: %w", position, err)
			}
			pr := pos[position]
			if pr == nil {
				pr = &reports.PositionResult{Position: position, Index: -1}
				if position != workload.PosRandom {
					t := dr.Target
					svc := &services[t.Service]
					pr.Service = svc.PortName(svc.Ports[t.Port])
					pr.Index = flatIndex(flat, t)
					hits[position] = map[netip.Addr]int{}
				}
				pos[position] = pr
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
			elapsed[position] += dr.Elapsed
			mr.TrafficConns += len(dr.LatenciesNs) + dr.Errors + dr.Misses
			if h := hits[position]; h != nil {
				for _, m := range dr.Hits {
					for a, n := range m {
						h[a] += n
					}
				}
			}
			o.Progress.Add(1)
		}
	}
	o.Progress.Done()
	mr.TrafficCPUNs = int64(proxymodes.CPUTime() - cpu0)
	if u, ok := p.(proxymodes.Usager); ok {
		_, mr.ProxyRSSBytes = u.Usage()
	}
	var fs []reports.Fairness
	for _, position := range sc.Traffic.Positions {
		pr := pos[position]
		pr.Latency = reports.Summarize(pr.SamplesNs)
		pr.TTFB = reports.Summarize(pr.TTFBSamplesNs)
		if d := elapsed[position]; d > 0 {
			pr.CPS = float64(len(pr.SamplesNs)) / d.Seconds()
		}
		if h := hits[position]; h != nil {
			t, _ := workload.PositionTarget(flat, position)
			svc := &services[t.Service]
			pr.Hits = map[string]int{}
			var obs, w []float64
			for k, e := range svc.Endpoints {
				if !e.Ready || k < sc.Failure.DownEndpointsPerService {
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
		mr.Lookup = append(mr.Lookup, *pr)
	}
	mr.Fairness = reports.PoolFairness(fs)
	if sc.Traffic.PerService > 0 && !m.Direct {
		fr, ferr := runFairness(ctx, sc, tb, nodeProxiers, services, mode, o)
		if ferr != nil {
			return nil, fmt.Errorf("fairness: %w", ferr)
		}
		mr.FairnessRun = fr
	}

	if sc.Churn.Rate > 0 && !m.Direct {
		values, period := sc.ChurnSyncPeriods(mode)
		for _, ms := range values {
			if _, err := p.Sync(ctx, services); err != nil {
				return nil, fmt.Errorf("sync before churn: %w", err)
			}
			cr, err := runChurn(ctx, sc, tb, p, services, ms, period, o.Progress)
			if err != nil {
				return nil, err
			}
			mr.Churn = append(mr.Churn, *cr)
		}
	}
	return mr, nil
}

// scratchSync measures one full sync of services by a new proxier of mode
// m in a fresh namespace called name, then cleans up and deletes it.
func scratchSync(ctx context.Context, sc *scenarios.Scenario, m proxymodes.Mode, name string, services []workload.Service) (st proxymodes.SyncStats, err error) {
	ns, err := topology.CreateNetns(name)
	if err != nil {
		return st, err
	}
	defer func() {
		ns.Close()
		if derr := topology.DeleteNetns(name); derr != nil && err == nil {
			err = derr
		}
	}()
	p, err := m.New(sc, ns)
	if err != nil {
		return st, err
	}
	st, err = p.Sync(ctx, services)
	if cerr := p.Cleanup(context.WithoutCancel(ctx)); cerr != nil && err == nil {
		err = fmt.Errorf("cleanup of %s: %w", name, cerr)
	}
	return st, err
}

// trafficChunk is the most connections driven at one position before the
// traffic phase moves to the next.
const trafficChunk = 250

// moveOneEndpoint returns services with the first endpoint of one service
// (chosen by rep, spread over the list) moved to a pod IP no service uses.
func moveOneEndpoint(services []workload.Service, rep int) []workload.Service {
	out := append([]workload.Service(nil), services...)
	i := (rep*7919 + len(services)/2) % len(services)
	var maxIP netip.Addr
	for _, s := range services {
		for _, e := range s.Endpoints {
			if !maxIP.IsValid() || maxIP.Less(e.IP) {
				maxIP = e.IP
			}
		}
	}
	if len(out[i].Endpoints) == 0 || !maxIP.IsValid() {
		return out
	}
	eps := append([]workload.Endpoint(nil), out[i].Endpoints...)
	eps[0].IP = maxIP.Next()
	out[i].Endpoints = eps
	return out
}

func flatIndex(flat []workload.Target, t workload.Target) int {
	for i, x := range flat {
		if x == t {
			return i
		}
	}
	return -1
}

// flushConntrack empties the node namespace's conntrack table (like
// `conntrack -F` there), so no mode inherits another's NAT decisions.
func flushConntrack(node *topology.Netns) error {
	h, err := node.Netlink()
	if err != nil {
		return err
	}
	defer h.Close()
	return h.ConntrackTableFlush(netlink.ConntrackTable)
}

// MachineInfo describes this machine for the result.
func MachineInfo() reports.Machine {
	m := reports.Machine{KernelWhere: "host", CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	m.Hostname, _ = os.Hostname()
	m.Kernel = kernelRelease()
	m.CPUModel, m.MemoryBytes = cpuAndMemory()
	return m
}

// IsInput reports whether err is bad input (exit code 2).
func IsInput(err error) bool {
	var ie *InputError
	return errors.As(err, &ie)
}
