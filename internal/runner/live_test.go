//go:build linux

package runner

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/monitoring"
	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
)

// TestKernelLiveMetricsScraped runs one monitored builtin iptables row on
// the host (10 services, traffic at two positions, Prometheus every 1 s):
// the row's own Prometheus, in pb-<runid>-prom, scraped proxybench's live
// metrics while the row ran (up{job="proxybench"} is 1, the traffic
// phase's answered connections and the full sync are in its TSDB, with
// the row's labels), nothing of this process or its children listened
// in the root namespace meanwhile, the row's record says which targets
// were up, and after the row its namespace is gone and its TSDB kept.
func TestKernelLiveMetricsScraped(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore", "prometheus", "promtool", "ss")
	before := testenv.RootSnapshot(t)
	sc, err := scenarios.Parse([]byte(`
seed: 7
repetitions: 1
modes: [iptables]
services: {count: 10, endpoints: {count: 2}}
traffic: {connections: 200, concurrency: 2, positions: [first, last], warmup: 5, timeout: 1s}
monitoring: {prometheus: true, interval: 1s}
`), "live-test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	o := Options{Progress: &recProgress{}, ArtifactDir: t.TempDir()}
	o.defaults()
	o.live = monitoring.NewLive()
	services, err := workload.Services(sc)
	if err != nil {
		t.Fatal(err)
	}
	tb, echo, err := buildPhase(ctx, sc, o, [][]workload.Service{services})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		echo.Close()
		if err := tb.Teardown(); err != nil {
			t.Error(err)
		}
		testenv.CompareRoot(t, before, testenv.RootSnapshot(t))
	}()
	m, err := modes.Lookup("iptables")
	if err != nil {
		t.Fatal(err)
	}
	// A final phase after the alerts phase (which waited for a scrape
	// after the row's last phase) asks the row's Prometheus itself.
	var got map[string]float64
	var listeners []string
	var promNS string
	probe := Phase{PhaseRule: scenarios.PhaseRule{Name: "probe", Scope: scenarios.ScopeRow}, Final: true, Run: func(ctx context.Context, r *Row) error {
		ph := r.rowServer()
		if ph == nil {
			return fmt.Errorf("the builtin row has no Prometheus")
		}
		srv, first, _ := ph.Prometheus()
		promNS = srv.Spec.NS.Name
		listeners = testenv.RootListeners(t, slices.Collect(maps.Keys(topology.ChildProcesses(tb.RunID)))...)
		got = map[string]float64{}
		for _, q := range []string{
			`min(up{job="proxybench"})`,
			`sum(proxybench_lookup_connections_total{outcome="ok",mode="iptables",implementation="builtin",kernel="host",row="iptables"})`,
			`sum(proxybench_lookup_connect_duration_seconds_count{position="last"})`,
			`sum(proxybench_sync_proxy_rules_duration_seconds_count{kind="full"})`,
			`max(proxybench_sync_proxy_rules_objects)`,
		} {
			s, err := srv.Client.QueryRange(ctx, q, first, time.Now(), time.Second)
			if err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
			if len(s) == 1 && len(s[0].Samples) > 0 {
				got[q] = s[0].Samples[len(s[0].Samples)-1].V
			}
		}
		return nil
	}}
	mr, _, err := runRow(ctx, append(slices.Clone(Phases), probe), sc, o, tb, newEnv(tb), services, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	for q, v := range got {
		t.Logf("%s = %v", q, v)
	}
	want := map[string]float64{`min(up{job="proxybench"})`: 1,
		`sum(proxybench_lookup_connections_total{outcome="ok",mode="iptables",implementation="builtin",kernel="host",row="iptables"})`: 400,
		`sum(proxybench_lookup_connect_duration_seconds_count{position="last"})`:                                                       200}
	for q, v := range want {
		if got[q] != v {
			t.Errorf("%s = %v, want %v (every recorded connection answered, scraped after the row's last phase)", q, got[q], v)
		}
	}
	if n := got[`sum(proxybench_sync_proxy_rules_duration_seconds_count{kind="full"})`]; n < 1 {
		t.Errorf("full syncs scraped %v, want at least sync.full's", n)
	}
	if obj := got[`max(proxybench_sync_proxy_rules_objects)`]; int(obj) != mr.SyncFull[len(mr.SyncFull)-1].Objects || obj <= 0 {
		t.Errorf("objects scraped %v, want the last full sync's %d", obj, mr.SyncFull[len(mr.SyncFull)-1].Objects)
	}
	if len(listeners) > 0 {
		t.Errorf("during the row, this process or its children listened in the root namespace:\n%s", strings.Join(listeners, "\n"))
	}
	mon := mr.Monitoring
	if mon == nil || !mon.LiveOnly || mon.Error != "" {
		t.Fatalf("monitoring %+v: want the builtin row's record", mon)
	}
	if len(mon.Targets) != 1 || mon.Targets[0].Job != monitoring.LiveJob || mon.Targets[0].Instance != monitoring.LiveAddr ||
		mon.Targets[0].Up == 0 || mon.Targets[0].Up != mon.Targets[0].Scrapes {
		t.Errorf("targets %+v: want proxybench at %s, every scrape up", mon.Targets, monitoring.LiveAddr)
	}
	if entries, err := os.ReadDir(mon.TSDB); err != nil || len(entries) == 0 || !strings.HasPrefix(mon.TSDB, o.ArtifactDir) {
		t.Errorf("TSDB %s: %d entries, %v: want it kept in the row's folder of %s", mon.TSDB, len(entries), err, o.ArtifactDir)
	}
	if _, err := os.Stat(filepath.Join("/run/netns", promNS)); promNS == "" || !os.IsNotExist(err) {
		t.Errorf("the row's Prometheus namespace %q after the row: %v, want it deleted", promNS, err)
	}
	if o.live.Current() != nil {
		t.Error("the live endpoint still serves the row after it ended")
	}
}
