//go:build linux

package runner

import (
	"context"
	"fmt"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
)

// watchDeliverySamples is how many single EndpointSlice writes the nodes
// phase times to every node's kube-proxy (kubeproxy.MeasureWatchDelivery):
// five removals of one endpoint and five puts back.
const watchDeliverySamples = 10

// multiNode is a kube-proxy row's proxier that runs kube-proxy on every
// node against one control plane (kubeproxy.Proxier with
// ProxierSpec.Others).
type multiNode interface {
	NodeCount() int
	// NodeProxiers stand for the other nodes' kube-proxies (node-1
	// first) in the row's per-node list.
	NodeProxiers() []proxymodes.Proxier
	// MeasureWatchDelivery times samples single EndpointSlice writes to
	// every node's kube-proxy.
	MeasureWatchDelivery(ctx context.Context, samples int) ([]measure.WatchDelivery, error)
}

// kubeProxyNodes are the nodes a kube-proxy row runs kube-proxy on (every
// node of tb when the scenario has several; nil: node0 alone).
func kubeProxyNodes(sc *scenarios.Scenario, tb *topology.Testbed) []*topology.Netns {
	if sc.Topology.NodeCount() < 2 {
		return nil
	}
	return tb.Nodes
}

// nodesPhaseV is the nodes phase (topology.nodes > 1): every node runs
// its own proxier over the same services, as every node runs its own
// kube-proxy. A builtin row starts every other node's proxier here; they
// are cleaned up when the row ends. A kube-proxy row's proxier started
// kube-proxy on every node with its first sync (one control plane for
// all): the phase adds the other nodes' kube-proxies to the row's list
// and times the watch delivery to each (watchDeliverySamples writes);
// its report (reports.KubeProxyNodesReport) is built from the row's
// kube-proxy record after the row.
var nodesPhaseV = Phase{
	PhaseRule: scenarios.PhaseRule{Name: "nodes", Field: "topology.nodes", Scope: scenarios.ScopeRow, Rules: true,
		Wants: func(s *scenarios.Scenario) bool { return s.Topology.NodeCount() > 1 }},
	Report: reports.KubeProxyNodesReport,
	Run: func(ctx context.Context, r *Row) error {
		if mn, ok := r.Proxier.(multiNode); ok && r.Mode.Implementation == scenarios.ImplKubeProxy {
			if mn.NodeCount() != len(r.Testbed.Nodes) {
				return fmt.Errorf("nodes: the %s row runs kube-proxy on %d of %d nodes", r.Mode.Name, mn.NodeCount(), len(r.Testbed.Nodes))
			}
			r.Proxiers = append(r.Proxiers, mn.NodeProxiers()...)
			r.Defer(func() error {
				for n := 1; n < len(r.Testbed.Nodes); n++ {
					if err := r.Env.flush(n); err != nil {
						r.Faults.add("conntrack flush of node%d after the mode failed (the next mode may follow its NAT entries): %v", n, err)
					}
				}
				return nil
			})
			r.Progress().Start(fmt.Sprintf("%s: watch delivery to %d kube-proxies, %d writes", r.Mode.Name, mn.NodeCount(), watchDeliverySamples), 1)
			_, err := mn.MeasureWatchDelivery(ctx, watchDeliverySamples)
			r.Progress().Done()
			if err != nil {
				return fmt.Errorf("nodes: %w", err)
			}
			return nil
		}
		extra, err := startNodes(ctx, r.Mode, r.Sc, r.Testbed, r.Services)
		r.Defer(func() error { return stopNodes(ctx, r.Env, extra, r.Faults) })
		r.Proxiers = append(r.Proxiers, extra...)
		return err
	},
}
