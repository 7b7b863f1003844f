//go:build linux

package runner

import (
	"context"
	"testing"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
)

// nodePortScenario is the nodePortLookup tests' scenario: 10 ClusterIP
// services, then 10 NodePort ones, over modes (with impl's rows).
func nodePortScenario(modes, impl string) string {
	return `
seed: 1
repetitions: 1
modes: ` + modes + `
implementation: ` + impl + `
kernel: host
services:
  count: 10
  endpoints: {count: 2}
  groups:
  - {count: 10, type: NodePort, endpoints: {count: 2}}
traffic: {connections: 40, concurrency: 2, positions: [first, middle, last], warmup: 2, nodePorts: true}
`
}

// checkNodePortLookup checks every row of res with rules: the
// nodePortLookup phase reached the first, middle and last NodePort
// service (after the 10 ClusterIP ones) at every connection, beside the
// cluster IP lookup; none has no node port lookup.
func checkNodePortLookup(t *testing.T, res *reports.Result) {
	t.Helper()
	want := map[string]string{"first": "pb/svc-00010:p80", "middle": "pb/svc-00015:p80", "last": "pb/svc-00019:p80"}
	for _, m := range res.Modes {
		if m.Mode == "none" {
			if len(m.NodePortLookup) != 0 {
				t.Errorf("none: node port lookup %+v, want none (no rules)", m.NodePortLookup)
			}
			continue
		}
		if len(m.NodePortLookup) != 3 || len(m.Lookup) != 3 {
			t.Fatalf("%s: %d node port and %d cluster IP positions, want 3 each", m.Mode, len(m.NodePortLookup), len(m.Lookup))
		}
		for _, p := range m.NodePortLookup {
			if p.Service != want[p.Position] || p.Errors != 0 || p.Misses != 0 || p.Latency.Count != 40 {
				t.Errorf("%s %s via node port: service %q, %d errors %v, %d misses, %d samples; want %s answered 40 times",
					m.Mode, p.Position, p.Service, p.Errors, p.ErrorText, p.Misses, p.Latency.Count, want[p.Position])
			}
		}
	}
}

// TestNodePortLookupKernel: through the host's iptables and nftables
// rules, the nodePortLookup phase reaches the first, middle and last of
// the NodePort services (after 10 ClusterIP ones) at every connection,
// each on an endpoint of its own service, beside the cluster IP lookup.
func TestNodePortLookupKernel(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore", "nft")
	sc, err := scenarios.Parse([]byte(nodePortScenario("[none, iptables, nftables]", "[builtin]")), "nodeports-test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkNodePortLookup(t, res)
}

// TestNodePortLookupKubeProxyKernel: the same through kube-proxy's
// nftables rules, whose node ports answer on the node's primary IP only
// by default (nodePortAddresses "primary" in nftables mode): the phase
// dials that address, so every connection answers (dialled at the pod's
// gateway, another local address of the node, every one was refused).
func TestNodePortLookupKubeProxyKernel(t *testing.T) {
	testenv.RequireKernel(t, "nft")
	kb := testenv.RequireKube(t)
	testenv.RequireSlow(t, "a control plane and kube-proxy, about 20 s under load")
	res := runKubeProxyScenario(t, kb, "nodeports-kube-proxy-test.yaml", nodePortScenario("[none, nftables]", "[kube-proxy]"))
	if len(res.Modes) != 2 || res.Modes[1].Implementation != "kube-proxy" {
		t.Fatalf("rows %d, want none and nftables (kube-proxy)", len(res.Modes))
	}
	checkNodePortLookup(t, res)
}

// TestTopologyAwareKernel: on 3 nodes in 2 zones, builtin iptables
// follows the hints the testbed wrote: a PreferSameNode service with an
// endpoint on every node keeps every connection of a node's pod on that
// node, a PreferClose one keeps them in the zone, and one without a
// distribution spreads them; the topology section's cells all agree
// with the documented shares.
func TestTopologyAwareKernel(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore")
	sc, err := scenarios.Parse([]byte(`
seed: 1
repetitions: 1
modes: [iptables]
kernel: host
network: {nodeCIDR: 198.18.255.0/24}
topology: {nodes: 3, zones: [zone-a, zone-a, zone-b], clientPods: 3, clientAddresses: 2, pods: isolated, externalClient: true}
services:
  count: 1
  endpoints: {count: 3}
  groups:
  - {count: 1, endpoints: {count: 3}, trafficDistribution: PreferClose}
  - {count: 1, endpoints: {count: 3}, trafficDistribution: PreferSameNode}
traffic: {connections: 20, warmup: 2, positions: [first]}
serviceTypes: {connections: 30, timeout: 500ms}
`), "topology-test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ServiceTypes == nil {
		t.Fatal("no serviceTypes result")
	}
	n := 0
	for _, c := range res.ServiceTypes.Cells {
		if c.Expected.SameNode == nil {
			continue
		}
		n++
		if d := c.Differs(); d != "" || c.OK != c.Attempts {
			t.Errorf("%s %s (%q) from %s: %d of %d answered, differs: %s", c.Row, c.Service, c.Distribution, c.Client, c.OK, c.Attempts, d)
		}
		if c.Distribution == scenarios.DistPreferSameNode && c.SameNode != c.OK {
			t.Errorf("PreferSameNode from %s: %d of %d on the client's node", c.Client, c.SameNode, c.OK)
		}
		if c.Distribution == scenarios.DistPreferClose && c.SameZone != c.OK {
			t.Errorf("PreferClose from %s: %d of %d in the client's zone", c.Client, c.SameZone, c.OK)
		}
	}
	if n != 3*6 {
		t.Errorf("%d topology cells, want 18 (3 services × 3 pods and 3 nodes)", n)
	}
}
