//go:build linux

package runner

import (
	"context"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
)

// TestKernelModeSwitchHost runs the modeSwitch phase for real on the host
// kernel, builtin, iptables → nftables and back at 20 services: every
// probed service answers through the new mode; the connections held
// across the switch survive (their conntrack entries keep the old NAT);
// the nftables start removes the iptables mode's rules but the
// KUBE-FIREWALL chain and its jumps (kube-proxy v1.37's iptables
// CleanupLeftovers keeps them), the iptables start removes the nftables
// table; after the recovery cleanup no service chain and no nft table is
// left.
func TestKernelModeSwitchHost(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore", "nft")
	sc, err := scenarios.Parse([]byte(`
seed: 6
repetitions: 1
modes: [iptables, nftables]
services: {count: 20, endpoints: {count: 3}}
traffic: {connections: 50, concurrency: 1, positions: [first]}
modeSwitch:
  pairs: [{from: iptables, to: nftables}, {from: nftables, to: iptables}]
  services: 4
  timeout: 250ms
  settle: 10s
  established: 4
`), "mode-switch-test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ModeSwitch) != 2 {
		t.Fatalf("%d switches, want 2", len(res.ModeSwitch))
	}
	for _, m := range res.ModeSwitch {
		label := m.Label()
		if m.Error != "" {
			t.Errorf("%s: %s", label, m.Error)
			continue
		}
		out, never := m.MaxOutage()
		t.Logf("%s: outage max %.3f s, %d/%d failed, %d/%d held survived, first sync %.3f s; left: %s; after cleanup: %s",
			label, float64(out)/1e9, m.Window.Failed, m.Window.Attempts, m.Survived, m.Established, float64(m.FirstSyncNs)/1e9,
			reports.LeftoverText(m.Leftovers), reports.LeftoverText(m.AfterCleanup))
		if never || len(m.Services) != 4 {
			t.Errorf("%s: a probed service never answered again: %+v", label, m.Services)
		}
		if m.Established != 4 || m.Survived != 4 {
			t.Errorf("%s: %d of %d held connections survived (%v), want all", label, m.Survived, m.Established, m.BrokenHow)
		}
		for _, l := range m.Leftovers {
			if m.From == "nftables" || !strings.Contains(l.Name, "KUBE-FIREWALL") {
				t.Errorf("%s: leftover %s", label, l)
			}
		}
		for _, l := range m.AfterCleanup {
			if l.Kind == "nft table" || strings.HasPrefix(l.Name, "KUBE-SVC-") || strings.HasPrefix(l.Name, "KUBE-SEP-") || l.Name == "KUBE-SERVICES" {
				t.Errorf("%s: left after the cleanup: %s", label, l)
			}
		}
		if m.CleanupError != "" {
			t.Errorf("%s: cleanup: %s", label, m.CleanupError)
		}
	}
	if len(res.Sections) == 0 || res.Sections[len(res.Sections)-1].Phase != "modeSwitch" {
		t.Errorf("no modeSwitch section in %d sections", len(res.Sections))
	}
}
