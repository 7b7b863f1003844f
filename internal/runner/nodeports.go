//go:build linux

package runner

import (
	"context"
	"net/netip"

	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
)

// nodePortLookupPhaseV is the nodePortLookup phase (traffic.nodePorts)
// as a Phase: after the traffic phase, the same plan of positions and
// connections from the client pods, dialled at the node's primary IP and each
// service's node port, over the services that have node ports (their
// first, middle and last), so a row's lookup through node ports stands
// beside its lookup through cluster IPs in one run. In iptables mode a
// node port packet walks every KUBE-SERVICES rule before the last one
// jumps to KUBE-NODEPORTS, which it walks to its port; nftables looks
// both up in maps.
var nodePortLookupPhaseV = Phase{
	PhaseRule: scenarios.PhaseRule{Name: "nodePortLookup", Field: "traffic.nodePorts", Scope: scenarios.ScopeRow, Rules: true, TCP: true,
		Wants: func(s *scenarios.Scenario) bool { return s.Traffic.NodePorts }},
	Run: runNodePortLookup,
	Report: func(label string, mr *reports.ModeResult) []reports.Section {
		return reports.NodePortLookupSections(label, mr)
	},
}

// nodePortAddrs is the node address each client pod dials for a node
// port: its node's primary IP, the Node object's InternalIP and
// kube-proxy's bindAddress (kubeproxy.NodeIP: the node's address in
// nodeNet). Every mode answers node ports there: kube-proxy v1.37's
// nftables mode by default only there (nodePortAddresses unset is
// "primary" in nftables mode, every local address in iptables and ipvs
// mode; Kubernetes "Virtual IPs and Service Proxies", migrating to
// nftables), which a dial at another local address of the node (the
// pod's gateway) showed: 1000 of 1000 refused at 10k services.
func nodePortAddrs(tb *topology.Testbed, nodeNet netip.Prefix) ([]netip.Addr, error) {
	byNode := map[int]netip.Addr{}
	out := make([]netip.Addr, len(tb.ClientAddrs))
	for i := range tb.ClientAddrs {
		n := 0
		if i < len(tb.ClientNode) {
			n = tb.ClientNode[i]
		}
		ip, ok := byNode[n]
		if !ok {
			var err error
			if ip, err = kubeproxy.NodeIP(tb.Nodes[n], nodeNet); err != nil {
				return nil, err
			}
			byNode[n] = ip
		}
		out[i] = ip
	}
	return out, nil
}

// runNodePortLookup drives the traffic plan through node-0's node ports
// (trafficPhaseVia) without lookup.kernel (its BPF filter follows cluster
// IPs) and keeps the positions in the row's NodePortLookup. A builtin
// mode that programs no node ports (Mode.NodePorts false) is noted and
// skipped.
func runNodePortLookup(ctx context.Context, r *Row) error {
	if !r.Mode.NodePorts && r.Mode.Base == "" {
		r.Faults.add("nodePortLookup: builtin %s does not program node ports; not measured", r.Mode.Name)
		return nil
	}
	var svcs []workload.Service
	for _, i := range r.Sc.NodePortServices() {
		if i < len(r.Services) {
			svcs = append(svcs, r.Services[i])
		}
	}
	sc := *r.Sc
	off := false
	sc.Traffic.KernelTime = &off
	_, _, nodeNet, _ := sc.Prefixes()
	addrs, err := nodePortAddrs(r.Testbed, nodeNet)
	if err != nil {
		return err
	}
	to, err := trafficPhaseVia(ctx, &sc, r.Env, r.Testbed.Clients, svcs, false, addrs, r.Mode.Name+" via node ports", r.Progress(), nil)
	if err != nil {
		return err
	}
	r.Result.NodePortLookup = to.lookup
	return nil
}
