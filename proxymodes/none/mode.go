package none

import (
	"context"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// Mode is the baseline: no rules; traffic dials pod IPs directly. It has
// no sync loop (no SyncPeriods), so it takes no churn phase.
var Mode = proxymodes.Mode{
	Name: scenarios.BaselineMode,
	// No rules: traffic dials the endpoints, whatever the protocol.
	Protocols: []string{"TCP", "UDP", "SCTP"},
	New:       func(*scenarios.Scenario, proxymodes.Node) (proxymodes.Proxier, error) { return New(), nil },
	Render: func(*scenarios.Scenario, []workload.Service) (*proxymodes.Rendering, error) {
		return &proxymodes.Rendering{Info: map[string]string{"backend": "none"}}, nil
	},
	Sim:           proxymodes.SimModel{Lookup: proxymodes.LookupDirect},
	KernelOptions: func(*scenarios.Scenario) []string { return []string{"CONFIG_NET_NS", "CONFIG_VETH"} },
	Direct:        true,
	IPv6:          true,
	SplitBaseline: true,
	Probe: func(context.Context, proxymodes.Node) (bool, string) {
		return true, "network namespaces and veth work"
	},
}

// Rendering is empty: mode none programs nothing (proxymodes.Renderer).
func (*Proxier) Rendering([]workload.Service) (*proxymodes.Rendering, error) {
	return &proxymodes.Rendering{Info: map[string]string{"backend": "none"}}, nil
}
