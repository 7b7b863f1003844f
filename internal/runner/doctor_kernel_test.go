//go:build linux

package runner

import (
	"context"
	"slices"
	"testing"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
)

// TestKernelProbeHostNamespaceOfRun: the host probe of a run runs in
// pb-<runID>-probe, the run's own namespace, so that a run killed while
// probing (TestKernelCleanupHostRunKilledAnyMoment kills at random
// moments) leaves it to `cleanup --run <id>` and the test's check of the
// run's leftovers; it used a fresh ID, and a make test left
// pb-<6 hex>-probe that only a plain cleanup removed. Afterwards none of
// the run's namespaces is left.
func TestKernelProbeHostNamespaceOfRun(t *testing.T) {
	testenv.RequireKernel(t)
	id := topology.NewRunID()
	defer topology.Cleanup(id)
	var during []string
	probe := proxymodes.Mode{Name: "pb-test-probe", Probe: func(ctx context.Context, node proxymodes.Node) (bool, string) {
		left, _ := topology.Leftovers()
		for _, n := range left {
			if topology.RunIDOf(n) == id {
				during = append(during, n)
			}
		}
		return true, "probed"
	}}
	all := modes.All
	modes.All = append(slices.Clone(all), probe)
	defer func() { modes.All = all }()
	sc := &scenarios.Scenario{}
	sc.SetDefaults()
	st, err := ProbeHost(context.Background(), sc, []string{probe.Name}, id)
	if err != nil || len(st) != 1 || !st[0].Available {
		t.Fatalf("ProbeHost = %+v, %v", st, err)
	}
	if want := topology.NetnsName(id, "probe"); !slices.Equal(during, []string{want}) {
		t.Errorf("namespaces of run %s while probing: %v, want [%s]", id, during, want)
	}
	left, _ := topology.Leftovers()
	for _, n := range left {
		if topology.RunIDOf(n) == id {
			t.Errorf("ProbeHost left %s", n)
		}
	}
}
