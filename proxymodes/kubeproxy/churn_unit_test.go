//go:build linux

package kubeproxy

import (
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/scenarios"
)

// churnLog is kube-proxy v1.37.2's log at -v 4 during churn (iptables
// mode, lines as it writes them), with an IPv6 sync, a sync begun before
// the phase's offset and a failed one.
const churnLog = `I1202 00:56:31.166028   17325 proxier.go:655] "Syncing iptables rules" ipFamily="IPv4" fullSync=false
--- phase ---
I1202 00:56:31.300793   17325 proxier.go:649] "SyncProxyRules complete" ipFamily="IPv4" elapsed="134.843098ms"
I1202 00:56:32.556292   17325 config.go:142] "Calling handler.OnEndpointSliceUpdate"
I1202 00:56:32.556527   17325 proxier.go:655] "Syncing iptables rules" ipFamily="IPv4" fullSync=false
I1202 00:56:32.591134   17325 proxier.go:1402] "Network programming" ipFamily="IPv4" endpoint="pb/svc-00074" elapsed=0.041747907
I1202 00:56:32.591246   17325 proxier.go:649] "SyncProxyRules complete" ipFamily="IPv4" elapsed="34.855122ms"
I1202 00:56:32.600000   17325 proxier.go:655] "Syncing iptables rules" ipFamily="IPv6" fullSync=false
I1202 00:56:32.600100   17325 proxier.go:1402] "Network programming" ipFamily="IPv6" endpoint="pb/svc-00074" elapsed=0.05
I1202 00:56:32.610000   17325 proxier.go:649] "SyncProxyRules complete" ipFamily="IPv6" elapsed="10ms"
I1202 00:56:33.593753   17325 proxier.go:655] "Syncing iptables rules" ipFamily="IPv4" fullSync=true
E1202 00:56:33.700000   17325 proxier.go:1391] "Failed to execute iptables-restore" err="exit status 1" ipFamily="IPv4"
I1202 00:56:33.700100   17325 proxier.go:660] "Sync failed" ipFamily="IPv4" retryingTime="30s"
I1202 00:56:33.700200   17325 proxier.go:649] "SyncProxyRules complete" ipFamily="IPv4" elapsed="106.4ms"
{"ts":1764636994000.1,"msg":"Network programming","v":4,"ipFamily":"IPv4","endpoint":{"name":"svc-1","namespace":"pb"},"elapsed":0.2}
I1202 00:56:34.797442   17325 proxier.go:655] "Syncing iptables rules" ipFamily="IPv4" fullSync=false
I1202 00:56:34.847519   17325 proxier.go:1402] "Network programming" ipFamily="IPv4" endpoint="pb/svc-00002" elapsed=0.770284012
I1202 00:56:34.847563   17325 proxier.go:1402] "Network programming" ipFamily="IPv4" endpoint="pb/svc-00026" elapsed=1.02564219
I1202 00:56:34.847659   17325 proxier.go:649] "SyncProxyRules complete" ipFamily="IPv4" elapsed="50.9492ms"
`

// TestParseChurnLog reads kube-proxy's IPv4 syncs and per-change lines
// from the phase's part of its log: kinds from fullSync, a failed sync,
// a sync begun before the phase without a kind, the IPv6 family and
// other formats left out, times in the year nearest the reference.
func TestParseChurnLog(t *testing.T) {
	log := churnLog[strings.Index(churnLog, "--- phase ---"):]
	ref := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	progs, syncs := ParseChurnLog([]byte(log), ref, time.UTC)
	at := func(s string) time.Time {
		v, err := time.ParseInLocation("2006-01-02 15:04:05.000000", "2026-12-02 "+s, time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if len(progs) != 3 || progs[0] != (Programmed{Service: "pb/svc-00074", At: at("00:56:32.591134"), Elapsed: 41747907}) ||
		progs[2].Service != "pb/svc-00026" || progs[2].Elapsed != 1025642190 {
		t.Errorf("programmed %+v", progs)
	}
	if len(syncs) != 4 {
		t.Fatalf("syncs %+v, want 4 IPv4 ones", syncs)
	}
	if s := syncs[0]; s.Kind != "" || s.End != at("00:56:31.300793") || s.Start != s.End.Add(-134843098) {
		t.Errorf("sync begun before the phase: %+v", s)
	}
	if s := syncs[1]; s.Kind != "partial" || s.Start != at("00:56:32.556527") || s.Elapsed != 34855122 || s.Failed {
		t.Errorf("partial sync %+v", s)
	}
	if s := syncs[2]; s.Kind != "full" || !s.Failed || s.Elapsed != 106400000 {
		t.Errorf("failed full sync %+v", s)
	}
	// A line of December read on 1 January belongs to the year before.
	p, _ := ParseChurnLog([]byte(log), time.Date(2027, 1, 1, 0, 0, 1, 0, time.UTC), time.UTC)
	if len(p) == 0 || p[0].At.Year() != 2026 {
		t.Errorf("year of a December line read in January: %v", p)
	}
}

// TestKubeProxyMinSync: a swept 0 is 1ns for the iptables and nftables
// modes, whose defaulting reads 0 as 1 s, and 0 for IPVS, where 0 is
// kept; others pass through.
func TestKubeProxyMinSync(t *testing.T) {
	for _, tc := range []struct {
		mode string
		d    time.Duration
		want time.Duration
	}{{"iptables", 0, time.Nanosecond}, {"nftables", 0, time.Nanosecond}, {"ipvs", 0, 0}, {"iptables", time.Second, time.Second}} {
		if got := KubeProxyMinSync(tc.mode, tc.d); got != tc.want {
			t.Errorf("%s %v: %v, want %v", tc.mode, tc.d, got, tc.want)
		}
	}
}

// TestPassFromScenarioChurnProfiling: a churn scenario's kube-proxy gets
// enableProfiling (its /debug/flags/v), unless kubeProxy.config says
// otherwise; a scenario without churn does not.
func TestPassFromScenarioChurnProfiling(t *testing.T) {
	for _, tc := range []struct {
		extra string
		want  any
	}{
		{"churn: {rate: 5}\n", true},
		{"churn: {rate: 5}\nkubeProxy: {config: {enableProfiling: false}}\n", false},
		{"", nil},
	} {
		sc, err := scenarios.Parse([]byte("modes: [iptables]\nimplementation: [kube-proxy]\nservices: {count: 3}\n"+tc.extra), "p.yaml")
		if err != nil {
			t.Fatal(err)
		}
		pass, err := PassFromScenario(sc, "iptables")
		if err != nil {
			t.Fatal(err)
		}
		if got := pass["enableProfiling"]; got != tc.want {
			t.Errorf("%q: enableProfiling %v, want %v", tc.extra, got, tc.want)
		}
	}
}

// TestCheckSweepAboveSyncPeriod: a swept minSyncPeriod above the
// syncPeriod kube-proxy would run with is refused at its entry (the
// churn phase restarts kube-proxy with it, and kube-proxy refuses it).
func TestCheckSweepAboveSyncPeriod(t *testing.T) {
	sc, err := scenarios.Parse([]byte("modes: [iptables]\nimplementation: [kube-proxy]\nservices: {count: 3}\nchurn: {rate: 5}\niptables: {syncPeriod: 5s}\nsweep: {minSyncPeriod: [0s, 10s]}\n"), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	errs := CheckConfig(sc)
	found := false
	for _, e := range errs {
		if e.Field == "sweep.minSyncPeriod[0]" {
			t.Errorf("0s refused: %v", e)
		}
		if e.Field == "sweep.minSyncPeriod[1]" && strings.Contains(e.Msg, "above syncPeriod 5s") {
			found = true
		}
	}
	if !found {
		t.Errorf("errors %v, want sweep.minSyncPeriod[1] above syncPeriod 5s", errs)
	}
}
