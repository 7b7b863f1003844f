//go:build linux

package runner

import (
	"context"
	"net/netip"
	"sync"
	"testing"

	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/traffic"
)

// TestWarmupPhase: the warm-up pass drives the scenario's whole traffic
// plan once (every step of TrafficPlan: positions, repetitions, chunks
// and the per-position warmup), direct to the endpoints as mode none
// dials them, with seeds apart from the rows'; it records only its
// summary: a kernel that is cold for the first half of the pass (300 µs,
// then 80 µs, as a fresh guest's none was against iptables) shows as
// p50 300 µs in the first quarter and 80 µs in the last. No connections:
// no pass.
func TestWarmupPhase(t *testing.T) {
	sc := &scenarios.Scenario{Services: scenarios.ServicesSpec{Count: 10}}
	sc.SetDefaults()
	sc.Repetitions = 2
	sc.Traffic.Connections, sc.Traffic.Warmup, sc.Traffic.Concurrency, sc.Traffic.Positions = 600, 5, 2, []string{"first", "last", "random"}
	services, err := workload.Services(sc)
	if err != nil {
		t.Fatal(err)
	}
	capped := sc.Traffic
	capped.Connections = warmupConnections // 600 asked: one repetition of at most 500 a position
	plan := TrafficPlan(capped, 1, sc.Seed+warmupSeed)
	total := 0
	for _, st := range plan {
		total += st.Connections
	}
	var mu sync.Mutex
	var drives []traffic.DriveSpec
	made := 0
	e := &env{drive: func(_ context.Context, spec traffic.DriveSpec) (*traffic.DriveResult, error) {
		mu.Lock()
		defer mu.Unlock()
		drives = append(drives, spec)
		dr := &traffic.DriveResult{Position: spec.Position, Hits: map[int]map[netip.Addr]int{}}
		for range spec.Connections {
			v := int64(80000)
			if made < total/2 {
				v = 300000
			}
			dr.LatenciesNs = append(dr.LatenciesNs, v)
			made++
		}
		return dr, nil
	}}
	clients := []*topology.Netns{{Name: "pb-000000-client0"}}
	w, err := warmupPhase(context.Background(), sc, e, clients, services, noProgress{})
	if err != nil || w == nil {
		t.Fatalf("warmupPhase = %+v, %v", w, err)
	}
	if len(drives) != len(plan) {
		t.Fatalf("%d drives, want the plan's %d steps", len(drives), len(plan))
	}
	rows := TrafficPlan(sc.Traffic, sc.Repetitions, sc.Seed)
	for i, d := range drives {
		st := plan[i]
		if !d.Direct || d.Position != st.Position || d.Connections != st.Connections || d.Warmup != st.Warmup || d.Seed != st.Seed || d.Concurrency != 2 || len(d.Clients) != 1 {
			t.Errorf("drive %d: %+v, want direct at step %+v", i, d, st)
		}
		if d.Seed == rows[i].Seed {
			t.Errorf("drive %d: seed %d is the rows' own", i, d.Seed)
		}
	}
	if want := total + 5*3; w.Connections != want || w.Errors != 0 {
		t.Errorf("connections %d (errors %d), want %d: every recorded and warmup connection of the plan", w.Connections, w.Errors, want)
	}
	near := func(got, want int64) bool { return got >= want && got <= want+want/1000 } // HDR histogram precision
	if !near(w.FirstP50Ns, 300000) || !near(w.LastP50Ns, 80000) {
		t.Errorf("p50 first quarter %d, last %d: want 300000 and 80000", w.FirstP50Ns, w.LastP50Ns)
	}
	sc.Traffic.Connections = 0
	drives = nil
	if w, err := warmupPhase(context.Background(), sc, e, clients, services, noProgress{}); w != nil || err != nil || len(drives) != 0 {
		t.Errorf("no connections: %+v, %v, %d drives; want no pass", w, err, len(drives))
	}
}
