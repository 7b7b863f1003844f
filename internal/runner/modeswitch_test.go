//go:build linux

package runner

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/leftovers"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// TestSwitchOutages pins the outage of one probed service: from the
// answer of its last success before its first failure to the answer of
// its first success after its last failure; 0 without a failure; -1
// when none followed.
func TestSwitchOutages(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	fail := errors.New("refused")
	services := []workload.Service{{Name: "s0", ClusterIP: netip.MustParseAddr("198.18.0.1")}, {Name: "s1"}, {Name: "s2"}}
	targets := []workload.Target{{Service: 0}, {Service: 1}, {Service: 2}}
	recs := []probeRec{
		{target: 0, start: at(-500), lat: time.Millisecond},           // baseline success
		{target: 0, start: at(100), lat: time.Millisecond, err: fail}, // a first run
		{target: 0, start: at(300), lat: time.Millisecond},            // a success between the runs
		{target: 0, start: at(400), lat: time.Millisecond, err: fail}, // the second run
		{target: 0, start: at(700), lat: 2 * time.Millisecond},        // first through the new rules
		{target: 1, start: at(50), lat: time.Millisecond},
		{target: 1, start: at(600), lat: time.Millisecond},
		{target: 2, start: at(10), lat: time.Millisecond},
		{target: 2, start: at(200), lat: time.Millisecond, err: fail},
	}
	got := outages(services, targets, recs, t0, at(2000))
	// Two runs of failures with a success between: the longer one, from
	// the baseline success (-499 ms) to the one at 301 ms (the other,
	// 301 to 702 ms, is shorter).
	if s := got[0]; s.Attempts != 4 || s.Failed != 2 || s.LastOldNs == nil || *s.LastOldNs != int64(-499*time.Millisecond) || s.FirstNewNs != int64(301*time.Millisecond) || s.OutageNs != int64(800*time.Millisecond) {
		t.Errorf("service 0: %+v", s)
	}
	if s := got[1]; s.OutageNs != 0 || s.Failed != 0 || s.Attempts != 2 {
		t.Errorf("service 1 (no failure): %+v", s)
	}
	if s := got[2]; s.OutageNs != -1 || s.LastOldNs == nil || *s.LastOldNs != int64(11*time.Millisecond) {
		t.Errorf("service 2 (never back): %+v", s)
	}
}

// switchState is what the fake data plane answers: the old rules, none
// (the switch's gap), the new rules.
type switchState int32

const (
	stateOld switchState = iota
	stateGap
	stateNew
)

// fakeSwitcher moves the fake data plane through a switch and its
// recovery, with gaps of gap each.
type fakeSwitcher struct {
	state *atomic.Int32
	gap   time.Duration
	calls []string
}

func (f *fakeSwitcher) implementation() (string, string) { return "builtin", "" }
func (f *fakeSwitcher) start(context.Context, []workload.Service) error {
	f.calls = append(f.calls, "start")
	f.state.Store(int32(stateOld))
	return nil
}
func (f *fakeSwitcher) switchTo(context.Context, []workload.Service) (switchTimes, error) {
	f.calls = append(f.calls, "switch")
	st := switchTimes{stopped: time.Now(), startupCleanup: "fake"}
	f.state.Store(int32(stateGap))
	time.Sleep(f.gap)
	st.newStart = time.Now()
	f.state.Store(int32(stateNew))
	st.firstSync = time.Millisecond
	return st, nil
}
func (f *fakeSwitcher) halt(context.Context) (string, time.Duration, error, error) {
	f.calls = append(f.calls, "halt")
	f.state.Store(int32(stateGap))
	return "fake cleanup", time.Millisecond, errors.New("one step failed"), nil
}
func (f *fakeSwitcher) resume(context.Context, []workload.Service) (time.Duration, error) {
	f.calls = append(f.calls, "resume")
	time.Sleep(f.gap)
	f.state.Store(int32(stateNew))
	return 2 * time.Millisecond, nil
}
func (f *fakeSwitcher) cleanup(context.Context) error {
	f.calls = append(f.calls, "cleanup")
	return nil
}

func switchScenario(t *testing.T) (*scenarios.Scenario, []workload.Service) {
	t.Helper()
	sc, err := scenarios.Parse([]byte(`
seed: 4
modes: [iptables, nftables]
services: {count: 20, endpoints: {count: 3}}
modeSwitch:
  pairs: [{from: iptables, to: nftables}]
  services: 4
  interval: 1ms
  timeout: 20ms
  settle: 2s
  established: 3
`), "switch.yaml")
	if err != nil {
		t.Fatal(err)
	}
	services, err := workload.Services(sc)
	if err != nil {
		t.Fatal(err)
	}
	return sc, services
}

// TestMeasureSwitchOnFakes runs a switch over a fake data plane that
// refuses connections for 150 ms: every probed service has an outage of
// at least that, held connections opened under the old rules are checked,
// leftovers are the old mode's objects the new mode does not own, the
// cleanup's failure and every object after it are kept, the recovery's
// gap is measured, and the proxies are cleaned up at the end.
func TestMeasureSwitchOnFakes(t *testing.T) {
	sc, services := switchScenario(t)
	var state atomic.Int32
	fe := newFakeEnv(newFakeProxier())
	fe.env.dial = func(dst netip.Addr, port uint16, timeout time.Duration) (netip.AddrPort, time.Time, error) {
		start := time.Now()
		time.Sleep(100 * time.Microsecond)
		if switchState(state.Load()) == stateGap {
			return netip.AddrPort{}, start, errors.New("connection refused")
		}
		return netip.AddrPortFrom(dst, port), start, nil
	}
	old := leftovers.Inventory{
		{Kind: leftovers.KindChain, Where: "iptables-legacy ip nat", Table: "nat", Name: "KUBE-SVC-AAA", Rules: 3},
		{Kind: leftovers.KindChain, Where: "iptables-legacy ip nat", Table: "nat", Name: "KUBE-SERVICES", Rules: 4},
	}
	reads := 0
	var opened, closed []int
	se := switchEnv{
		read: func(context.Context) (leftovers.Inventory, error) {
			reads++
			switch reads {
			case 1: // before the from mode: an earlier row's chain
				return leftovers.Inventory{{Kind: leftovers.KindChain, Where: "iptables-legacy ip filter", Table: "filter", Name: "KUBE-FIREWALL"}}, nil
			case 2:
				return append(slices.Clone(old), leftovers.Object{Kind: leftovers.KindChain, Where: "iptables-legacy ip filter", Table: "filter", Name: "KUBE-FIREWALL"}), nil
			case 3: // after the switch: the old chains and the new table
				return append(slices.Clone(old), leftovers.Object{Kind: leftovers.KindNFT, Where: "nft", Table: "ip", Name: "ip kube-proxy", Rules: 10}), nil
			}
			return leftovers.Inventory{old[1], {Kind: leftovers.KindChain, Where: "iptables-legacy ip filter", Table: "filter", Name: "KUBE-FIREWALL"}}, nil // after the cleanup
		},
		open: func(netip.Addr, uint16, time.Duration) (int, error) {
			opened = append(opened, 100+len(opened))
			return opened[len(opened)-1], nil
		},
		close: func(fd int) { closed = append(closed, fd) },
		carries: func(fd int, _ time.Duration) error {
			if fd == 100 {
				return errors.New("reset after the byte was sent")
			}
			return nil
		},
	}
	sw := &fakeSwitcher{state: &state, gap: 150 * time.Millisecond}
	owns := func(kind, table, name string) bool { return kind == leftovers.KindNFT || name == "KUBE-SERVICES" }
	in := switchInput{sc: sc, env: &fe.env, sw: se, services: services, prog: &recProgress{}, kernel: "host"}
	out := measureSwitch(context.Background(), in, sc.ModeSwitch.Pairs[0], proxymodes.Mode{Name: "iptables"}, proxymodes.Mode{Name: "nftables", Owns: owns}, sw)
	if out.Error != "" {
		t.Fatalf("error: %s", out.Error)
	}
	if strings.Join(sw.calls, ",") != "start,switch,halt,resume,cleanup" {
		t.Errorf("calls %v", sw.calls)
	}
	if len(out.Services) != 4 {
		t.Fatalf("%d services probed, want 4", len(out.Services))
	}
	for _, s := range out.Services {
		if s.Failed == 0 || s.OutageNs < int64(150*time.Millisecond) || s.OutageNs > int64(2*time.Second) {
			t.Errorf("service %s: %+v, want an outage of at least the 150 ms gap", s.Service, s)
		}
	}
	if out.Window.Failed == 0 || out.Window.Attempts <= out.Window.Failed {
		t.Errorf("window %+v", out.Window)
	}
	if out.Established != 3 || out.Survived != 2 || len(out.BrokenHow) != 1 || len(closed) != 3 {
		t.Errorf("established %d survived %d broken %v closed %v", out.Established, out.Survived, out.BrokenHow, closed)
	}
	if got := reports.LeftoverText(out.Leftovers); got != "iptables-legacy ip nat KUBE-SVC-* (3 rules)" {
		t.Errorf("leftovers %q", got)
	}
	if got := reports.LeftoverText(out.AfterCleanup); got != "iptables-legacy ip nat KUBE-SERVICES (4 rules)" || out.CleanupError != "one step failed" || out.Cleanup != "fake cleanup" {
		t.Errorf("after cleanup %q, cleanup %q error %q", got, out.Cleanup, out.CleanupError)
	}
	if out.Recovery == nil || out.Recovery.Failed == 0 || out.RecoveryOutageNs < int64(150*time.Millisecond) || out.RecoveryFirstSyncNs != int64(2*time.Millisecond) {
		t.Errorf("recovery %+v outage %v first sync %v", out.Recovery, out.RecoveryOutageNs, out.RecoveryFirstSyncNs)
	}
	if out.FirstSyncNs != int64(time.Millisecond) || out.StartupCleanup != "fake" {
		t.Errorf("first sync %v startup cleanup %q", out.FirstSyncNs, out.StartupCleanup)
	}
	secs := reports.ModeSwitchSections([]reports.ModeSwitch{out})
	if len(secs) != 2 || len(secs[0].Rows) != 1 || len(secs[1].Rows) != 4 || secs[0].Rows[0].Fail != "" {
		t.Errorf("sections %+v", secs)
	}
	for _, s := range secs {
		for _, r := range s.Rows {
			if len(r.Cells) != len(s.Columns) {
				t.Errorf("section %q row %q: %d cells for %d columns", s.Title, r.Row, len(r.Cells), len(s.Columns))
			}
		}
	}
}

// A switch whose new mode never syncs keeps what it measured, says why,
// and still cleans up.
func TestMeasureSwitchFails(t *testing.T) {
	sc, services := switchScenario(t)
	fe := newFakeEnv(newFakeProxier())
	se := switchEnv{read: func(context.Context) (leftovers.Inventory, error) { return nil, nil },
		open: func(netip.Addr, uint16, time.Duration) (int, error) { return 1, nil }, close: func(int) {},
		carries: func(int, time.Duration) error { return nil }}
	sw := &failingSwitcher{}
	in := switchInput{sc: sc, env: &fe.env, sw: se, services: services, prog: &recProgress{}}
	out := measureSwitch(context.Background(), in, sc.ModeSwitch.Pairs[0], proxymodes.Mode{Name: "iptables"}, proxymodes.Mode{Name: "nftables"}, sw)
	if !strings.Contains(out.Error, "switch to nftables: no sync") || !sw.cleaned || out.FirstSyncNs != -1 || len(out.Services) != 4 {
		t.Errorf("error %q cleaned %v first sync %d services %d", out.Error, sw.cleaned, out.FirstSyncNs, len(out.Services))
	}
	if secs := reports.ModeSwitchSections([]reports.ModeSwitch{out}); secs[0].Rows[0].Fail == "" {
		t.Error("a failed switch's row must say so (junit)")
	}
}

type failingSwitcher struct{ cleaned bool }

func (f *failingSwitcher) implementation() (string, string)                { return "builtin", "" }
func (f *failingSwitcher) start(context.Context, []workload.Service) error { return nil }
func (f *failingSwitcher) switchTo(context.Context, []workload.Service) (switchTimes, error) {
	return switchTimes{stopped: time.Now()}, errors.New("no sync")
}
func (f *failingSwitcher) halt(context.Context) (string, time.Duration, error, error) {
	return "", 0, nil, nil
}
func (f *failingSwitcher) resume(context.Context, []workload.Service) (time.Duration, error) {
	return 0, nil
}
func (f *failingSwitcher) cleanup(context.Context) error { f.cleaned = true; return nil }

// stoppingProxier is a fake proxier that records Stop.
type stoppingProxier struct {
	*fakeProxier
	stopped bool
}

func (s *stoppingProxier) Stop() { s.stopped = true }

// TestBuiltinSwitch checks the builtin side: the old proxier is stopped,
// not cleaned up; the new mode's start runs the CleanupLeftovers of the
// modes it cleans at start (CleansAtStart) before its first Sync; the
// recovery runs every kube-proxy mode's CleanupLeftovers (kube-proxy
// --cleanup); the end cleans both proxiers up.
func TestBuiltinSwitch(t *testing.T) {
	sc, services := switchScenario(t)
	var log []string
	old := &stoppingProxier{fakeProxier: newFakeProxier()}
	nw := newFakeProxier()
	cleaner := func(name string) proxymodes.Mode {
		return proxymodes.Mode{Name: name, CleanupLeftovers: func(context.Context, *scenarios.Scenario, proxymodes.Node) error {
			log = append(log, "cleanup "+name)
			return nil
		}}
	}
	from := proxymodes.Mode{Name: "iptables", New: func(*scenarios.Scenario, proxymodes.Node) (proxymodes.Proxier, error) { return old, nil }}
	to := proxymodes.Mode{Name: "nftables", CleansAtStart: []string{"iptables", "ipvs"},
		New: func(*scenarios.Scenario, proxymodes.Node) (proxymodes.Proxier, error) {
			log = append(log, "new nftables")
			return nw, nil
		}}
	b := &builtinSwitch{sc: sc, from: from, to: to, lookup: func(n string) (proxymodes.Mode, error) { return cleaner(n), nil }}
	ctx := context.Background()
	if err := b.start(ctx, services); err != nil {
		t.Fatal(err)
	}
	st, err := b.switchTo(ctx, services)
	if err != nil {
		t.Fatal(err)
	}
	if !old.stopped || old.cleanups != 0 {
		t.Errorf("old proxier: stopped %v, cleanups %d; want stopped, not cleaned up", old.stopped, old.cleanups)
	}
	if got := strings.Join(log, ","); got != "cleanup iptables,cleanup ipvs,new nftables" {
		t.Errorf("start of the new mode: %s", got)
	}
	if st.startupCleanup != "CleanupLeftovers of iptables and ipvs" || st.firstSync <= 0 {
		t.Errorf("switch times %+v", st)
	}
	log = nil
	what, _, cerr, err := b.halt(ctx)
	if err != nil || cerr != nil || what != "builtin: CleanupLeftovers of iptables, ipvs and nftables (kube-proxy --cleanup)" {
		t.Errorf("halt %q %v %v", what, cerr, err)
	}
	if got := strings.Join(log, ","); got != "cleanup iptables,cleanup ipvs,cleanup nftables" {
		t.Errorf("recovery cleanup: %s", got)
	}
	if err := b.cleanup(ctx); err != nil || old.cleanups != 1 || nw.cleanups != 1 {
		t.Errorf("cleanup: %v, old %d new %d", err, old.cleanups, nw.cleanups)
	}
}

// planModeSwitch keeps auto's usual choice when every pair runs on the
// host, or when no guest kernel runs the others.
func TestPlanModeSwitchFallsBack(t *testing.T) {
	sc, _ := switchScenario(t)
	st := []ModeStatus{{Mode: "iptables", Available: true}, {Mode: "nftables", Available: true}}
	if _, ok := planModeSwitch(sc, st, nil); ok {
		t.Error("every pair runs on the host: want auto's usual plan")
	}
	st[1].Available = false
	if _, ok := planModeSwitch(sc, st, nil); ok {
		t.Error("no guest kernel: want auto's usual plan")
	}
}
