//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/proxybench/proxybench/internal/lib/kerneltime"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/traffic"
)

// fakeTimer is a kernelTimer whose Drain returns what the test's driver
// queued: per recorded connection a SYN and an ACK to the dialled
// address, a warmup SYN before the recorded window, and the backend's
// answer (not to a service).
type fakeTimer struct {
	mu       sync.Mutex
	queued   []kerneltime.Sample
	closed   int
	drainErr error
}

func (f *fakeTimer) Drain() ([]kerneltime.Sample, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queued
	f.queued = nil
	return q, f.drainErr
}
func (f *fakeTimer) Lost() (uint64, error) { return 3, nil }
func (f *fakeTimer) Kind() string          { return kerneltime.KindBTF }
func (f *fakeTimer) Close() error          { f.closed++; return nil }

// withFakeTimer makes e's driver queue kernel samples in ft for each
// connection it fakes: SYN time 1000+index ns for the first position,
// 5000+index for last, and other packets 300 ns.
func withFakeTimer(e *fakeEnv, ft *fakeTimer, now *int64) {
	drive := e.drive
	e.drive = func(ctx context.Context, spec traffic.DriveSpec) (*traffic.DriveResult, error) {
		dr, err := drive(ctx, spec)
		if err != nil {
			return dr, err
		}
		flat := workload.FlatTargets(spec.Services)
		t, _ := workload.PositionTarget(flat, spec.Position)
		svc := spec.Services[t.Service]
		vip := netip.AddrPortFrom(svc.ClusterIP, svc.Ports[t.Port].Port)
		ft.mu.Lock()
		defer ft.mu.Unlock()
		*now += 10
		ft.queued = append(ft.queued, kerneltime.Sample{StartNs: *now, Ns: 99999, Dst: vip, Flags: kerneltime.FlagSYN}) // warmup
		*now += 10
		dr.RecordStartMonoNs = *now
		base := int64(1000)
		if spec.Position == "last" {
			base = 5000
		}
		for i := 0; i < spec.Connections; i++ {
			*now++
			ft.queued = append(ft.queued,
				kerneltime.Sample{StartNs: *now, Ns: base + int64(i%10), Dst: vip, Flags: kerneltime.FlagSYN},
				kerneltime.Sample{StartNs: *now, Ns: 300, Dst: vip, Flags: kerneltime.FlagACK},
				kerneltime.Sample{StartNs: *now, Ns: 200, Src: netip.AddrPortFrom(svc.Endpoints[0].IP, 8080), Dst: netip.MustParseAddrPort("198.19.255.6:40000"), Flags: kerneltime.FlagSYN | kerneltime.FlagACK})
		}
		return dr, nil
	}
}

// TestTrafficPhaseKernelTime: the timer's packets are sorted into
// positions by destination and recorded window (the warmup's SYN and the
// backend's answers are left out), SYNs apart from other packets, with
// the lost and unmatched counts, and the timer is closed.
func TestTrafficPhaseKernelTime(t *testing.T) {
	sc, svcs := phaseScenario(t, "", "")
	e := newFakeEnv(newFakeProxier())
	ft := &fakeTimer{}
	var now int64 = 1e9
	e.env.kernelTimer = func() (kernelTimer, error) { return ft, nil }
	withFakeTimer(e, ft, &now)
	defer func(f func() int64) { kernelClock = f }(kernelClock)
	kernelClock = func() int64 { return now + 1 }
	to, err := trafficPhase(context.Background(), sc, &e.env, nil, svcs, false, "fake", &recProgress{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if to.kernel == nil || to.kernel.Absent != "" || to.kernel.Bracket != kerneltime.Bracket || to.kernel.Lost != 3 || to.kernel.Programs != kerneltime.KindBTF {
		t.Fatalf("KernelTime %+v, want measured with the bracket and 3 lost", to.kernel)
	}
	// 3 positions × 3 repetitions × 3 chunks of 200: a warmup SYN per
	// drive and a backend answer per connection are unmatched.
	if want := 27 + 3*3*600; to.kernel.Unmatched != want {
		t.Errorf("unmatched %d, want %d", to.kernel.Unmatched, want)
	}
	for _, p := range to.lookup {
		if p.Kernel.Count != 1800 || len(p.KernelSamplesNs) != 1800 || p.KernelOther.Count != 1800 || p.KernelOther.P50 != 300 {
			t.Errorf("%s: %d SYNs (%d samples), %d others at p50 %d; want 1800, 1800 at 300 ns", p.Position, p.Kernel.Count, len(p.KernelSamplesNs), p.KernelOther.Count, p.KernelOther.P50)
		}
		want := int64(1000)
		if p.Position == "last" {
			want = 5000
		}
		if lo, hi := slices.Min(p.KernelSamplesNs), slices.Max(p.KernelSamplesNs); lo != want || hi != want+9 {
			t.Errorf("%s: lookup.kernel samples %d..%d ns, want %d..%d (the warmup's 99999 left out)", p.Position, lo, hi, want, want+9)
		}
	}
	if ft.closed == 0 {
		t.Error("the timer was not closed")
	}
}

// TestKernelTimeAbsentSaysWhy: a timer that cannot start, a scenario that
// turns it off, and a ring buffer that fails part-way each leave the
// figure absent with the reason in words; the run goes on.
func TestKernelTimeAbsentSaysWhy(t *testing.T) {
	sc, svcs := phaseScenario(t, "", "")
	e := newFakeEnv(newFakeProxier())
	e.env.kernelTimer = func() (kernelTimer, error) {
		return nil, &kerneltime.UnavailableError{Reason: "not root: BPF programs need CAP_BPF and CAP_PERFMON (uid 1000)"}
	}
	to, err := trafficPhase(context.Background(), sc, &e.env, nil, svcs, false, "fake", &recProgress{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if to.kernel == nil || !strings.HasPrefix(to.kernel.Absent, "not root") || to.lookup[0].Latency.Count == 0 || to.lookup[0].Kernel.Count != 0 {
		t.Errorf("KernelTime %+v, lookup %d samples, kernel %d; want absent saying not root, lookup.latency measured", to.kernel, to.lookup[0].Latency.Count, to.lookup[0].Kernel.Count)
	}

	off, svcs := phaseScenario(t, ", kernelTime: false", "")
	started := false
	e.env.kernelTimer = func() (kernelTimer, error) { started = true; return &fakeTimer{}, nil }
	to, err = trafficPhase(context.Background(), off, &e.env, nil, svcs, false, "fake", &recProgress{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if started || to.kernel == nil || to.kernel.Absent != "turned off (traffic.kernelTime: false)" {
		t.Errorf("kernelTime: false: started %v, KernelTime %+v", started, to.kernel)
	}

	ft := &fakeTimer{drainErr: errors.New("ring buffer: bad fd")}
	e.env.kernelTimer = func() (kernelTimer, error) { return ft, nil }
	to, err = trafficPhase(context.Background(), sc, &e.env, nil, svcs, false, "fake", &recProgress{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if to.kernel == nil || !strings.Contains(to.kernel.Absent, "bad fd") || !strings.Contains(to.kernelFault, "bad fd") || ft.closed == 0 {
		t.Errorf("a failing drain: KernelTime %+v, fault %q, closed %d", to.kernel, to.kernelFault, ft.closed)
	}

	// No seam (the other phases' fakes): no figure and nothing said.
	e.env.kernelTimer = nil
	if to, _ = trafficPhase(context.Background(), sc, &e.env, nil, svcs, false, "fake", &recProgress{}, nil); to.kernel != nil {
		t.Errorf("without a timer seam KernelTime %+v, want nil", to.kernel)
	}
}

// TestAttributeKernel: a sample counts when it started inside the
// recorded window and went to one of the position's destinations; SYNs
// apart from other packets.
func TestAttributeKernel(t *testing.T) {
	vip := netip.MustParseAddrPort("198.18.0.1:80")
	other := netip.MustParseAddrPort("198.18.0.2:80")
	tg := map[netip.AddrPort]bool{vip: true}
	ss := []kerneltime.Sample{
		{StartNs: 100, Ns: 1, Dst: vip, Flags: kerneltime.FlagSYN},                      // in: SYN
		{StartNs: 150, Ns: 2, Dst: vip, Flags: kerneltime.FlagACK},                      // in: other
		{StartNs: 99, Ns: 3, Dst: vip, Flags: kerneltime.FlagSYN},                       // before the window
		{StartNs: 201, Ns: 4, Dst: vip, Flags: kerneltime.FlagSYN},                      // after it
		{StartNs: 120, Ns: 5, Dst: other, Flags: kerneltime.FlagSYN},                    // another service
		{StartNs: 130, Ns: 6, Dst: vip, Flags: kerneltime.FlagSYN | kerneltime.FlagACK}, // a SYN-ACK is not a new connection
	}
	syn, oth, un := attributeKernel(ss, 100, 200, tg)
	if fmt.Sprint(syn, oth, un) != "[1] [2 6] 3" {
		t.Errorf("attributeKernel = %v %v %d; want [1] [2 6] 3", syn, oth, un)
	}
	if syn, oth, un := attributeKernel(ss, 0, 200, tg); len(syn)+len(oth) != 0 || un != len(ss) {
		t.Errorf("no recorded window: %v %v %d, want everything unmatched", syn, oth, un)
	}
}

// TestPositionTargets: a fixed position dials its ServicePort's
// ClusterIP, random every one, and a direct mode the endpoints at the
// target port.
func TestPositionTargets(t *testing.T) {
	_, svcs := phaseScenario(t, "", "")
	first, err := positionTargets(svcs, "first", false)
	if err != nil || len(first) != 1 || !first[netip.AddrPortFrom(svcs[0].ClusterIP, svcs[0].Ports[0].Port)] {
		t.Errorf("first: %v, %v", first, err)
	}
	all, _ := positionTargets(svcs, workload.PosRandom, false)
	if len(all) != len(svcs) {
		t.Errorf("random: %d destinations, want %d", len(all), len(svcs))
	}
	direct, _ := positionTargets(svcs, "last", true)
	last := svcs[len(svcs)-1]
	if len(direct) != len(last.Endpoints) || !direct[netip.AddrPortFrom(last.Endpoints[0].IP, last.Ports[0].TargetPort)] {
		t.Errorf("last, direct: %v", direct)
	}
}
