//go:build linux

package runner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// growingProxier is a fake kube-proxy row's proxier for a sweep: Grow
// takes the next size (counted apart from Sync), Resources reports CPU
// that grows by a second per call, and it keeps a kube-proxy record.
type growingProxier struct {
	*fakeProxier
	grows []int // the service count of each Grow
	cpu   time.Duration
}

func (g *growingProxier) Grow(ctx context.Context, services []workload.Service) (kubeproxy.Growth, error) {
	from := len(g.state)
	st, err := g.Sync(ctx, services)
	g.grows = append(g.grows, len(services))
	st.Wall, st.Phases = 30*time.Millisecond, map[string]time.Duration{"setup.api": 20 * time.Millisecond, "kube-proxy.lastSync": 5 * time.Millisecond}
	return kubeproxy.Growth{From: from, To: len(services), Created: len(services) - from, Stats: st,
		Syncs: make([]kubeproxy.LoggedSync, 3), Metric: kubeproxy.Histogram{Count: 3, Sum: 0.012}}, err
}

func (g *growingProxier) Resources(context.Context) (kubeproxy.Resources, error) {
	g.cpu += time.Second
	return kubeproxy.Resources{CPU: g.cpu, ChildCPU: g.cpu / 2, RSS: int64(len(g.state)) << 20}, nil
}

func (g *growingProxier) KubeProxyRecord(context.Context) *measure.KubeProxy {
	return &measure.KubeProxy{Version: "v0.0.0-fake", PeakRSSBytes: 64 << 20}
}

// TestSweepCarriesKubeProxyRow: a kube-proxy row of sweep.services runs
// its sizes on one proxier (made once, cleaned up once, after the last
// size): the first size's sync.full is its first Sync, each later size's
// the Grow from the size before, and each size records its point (from,
// created, the step's figures, kube-proxy's CPU over that size alone);
// the sweep section has one row per size.
func TestSweepCarriesKubeProxyRow(t *testing.T) {
	sc, svcs, _, e, tb := fakeRowSetup(t)
	sc.Sweep.Services = []int{5, 10, 20}
	sc.Churn = scenarios.ChurnSpec{}
	sc.Traffic.PerService = 0 // no fairness phase: its fresh resync is a Cleanup
	sc.Repetitions = 1
	g := &growingProxier{fakeProxier: e.p}
	made := 0
	sc.Implementation = []string{scenarios.ImplKubeProxy}
	m := proxymodes.Mode{Name: "fake (kube-proxy)", Base: "fake", Implementation: scenarios.ImplKubeProxy, SingleFullSync: true,
		New: func(*scenarios.Scenario, proxymodes.Node) (proxymodes.Proxier, error) { made++; return g, nil }}
	if !sweepsKubeProxy(sc, m) {
		t.Fatal("a kube-proxy row of a 3-size sweep does not sweep")
	}
	carry := &sweepCarry{}
	var points []*reports.KubeProxySweepPoint
	var rows []reports.SectionRow
	for j, n := range sc.Sweep.Services {
		carry.last = j == len(sc.Sweep.Services)-1
		mr, secs, err := runRow(context.Background(), Phases, sc.AtSize(n), Options{Progress: &recProgress{}}, tb, &e.env, svcs[:n], m, carry)
		if err != nil {
			t.Fatalf("size %d: %v", n, err)
		}
		if mr.Partial != "" || mr.KubeProxySweep == nil {
			t.Fatalf("size %d: partial %q, point %+v", n, mr.Partial, mr.KubeProxySweep)
		}
		if (carry.p == nil) != carry.last {
			t.Errorf("size %d: carried proxier %v, last %v", n, carry.p, carry.last)
		}
		points = append(points, mr.KubeProxySweep)
		for _, s := range secs {
			if s.Phase == reports.PhaseKubeProxySweep {
				rows = append(rows, s.Rows...)
			}
		}
		carry.from = n
	}
	if made != 1 || g.cleanups != 1 {
		t.Errorf("proxier made %d times, cleaned up %d times; want once each", made, g.cleanups)
	}
	if len(g.grows) != 2 || g.grows[0] != 10 || g.grows[1] != 20 {
		t.Errorf("grows %v, want [10 20]", g.grows)
	}
	first, second := points[0], points[1]
	if first.From != 0 || first.Created != 5 || first.KubeProxySyncs != 1 {
		t.Errorf("first size %+v, want its first sync of 5 created", first)
	}
	if second.From != 5 || second.Created != 5 || second.SyncNs != int64(30*time.Millisecond) || second.WritesNs != int64(20*time.Millisecond) ||
		second.KubeProxySyncs != 3 || second.KubeProxySyncSumNs != int64(12*time.Millisecond) || second.LastSyncNs != int64(5*time.Millisecond) {
		t.Errorf("second size %+v, want the growth from 5: 5 created, its figures", second)
	}
	for i, p := range points {
		if p.CPUNs != int64(time.Second) || p.ChildCPUNs != int64(time.Second/2) || p.PeakRSSBytes != 64<<20 {
			t.Errorf("size %d: CPU %v + %v, peak %d: want the second of its own size", p.Services, time.Duration(p.CPUNs), time.Duration(p.ChildCPUNs), p.PeakRSSBytes)
		}
		if p.RSSBytes != int64(sc.Sweep.Services[i])<<20 {
			t.Errorf("size %d: RSS %d at its end", p.Services, p.RSSBytes)
		}
	}
	if len(rows) != 3 || rows[2].Cells[0].Text != "20" || !strings.Contains(rows[1].Cells[5].Text, "0.030") {
		t.Errorf("sweep section rows %+v", rows)
	}
}

// TestKubeProxyRefusalsGone: validate accepts failure.syncErrors and
// sweep.services with kube-proxy rows, which it refused before.
func TestKubeProxyRefusalsGone(t *testing.T) {
	cat := scenarios.Catalog{Modes: []string{"none", "iptables", "nftables"}, Phases: PhaseRules()}
	base := "modes: [iptables, nftables]\nimplementation: [builtin, kube-proxy]\nservices: {count: 10}\n"
	for _, y := range []string{
		"churn: {rate: 5}\nfailure: {syncErrors: {every: 4}}\n",
		"sweep: {services: [10, 20, 5]}\n",
	} {
		if _, err := cat.Parse([]byte(base+y), "k.yaml"); err != nil {
			t.Errorf("%q with kube-proxy rows refused: %v", y, err)
		}
	}
}
