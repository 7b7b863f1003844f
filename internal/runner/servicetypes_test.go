//go:build linux

package runner

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
)

// TestExpectCell: the documented outcome per path, policy and client
// location (the table the serviceTypes phase checks), for a service
// whose one endpoint sits on node-0.
func TestExpectCell(t *testing.T) {
	e := workload.NewEndpoint(netip.MustParseAddr("198.19.0.1"))
	e.Node = "node-0"
	svc := func(typ string, etp, itp bool) *workload.Service {
		return &workload.Service{Type: typ, ExternalLocal: etp, InternalLocal: itp, Endpoints: []workload.Endpoint{e},
			Ports: []workload.ServicePort{{Port: 80, NodePort: 30000, Protocol: "TCP"}}}
	}
	ipt, nft := proxymodes.Mode{Name: "a", LocalhostNodePorts: true}, proxymodes.Mode{Name: "b"}
	pod1 := stClient{label: "pod@node-1", ns: &topology.Netns{Name: "pb-x-client1"}, node: 1}
	host1 := stClient{label: "host@node-1", ns: &topology.Netns{Name: "pb-x-node1"}, node: 1}
	ext := stClient{label: "external", ns: &topology.Netns{Name: "pb-x-ext"}, node: -1}
	for _, tc := range []struct {
		name      string
		mode      proxymodes.Mode
		s         *workload.Service
		path      string
		entry     int
		c         stClient
		reachable bool
		source    string
	}{
		{"cluster IP from a pod", ipt, svc("ClusterIP", false, false), "clusterIP", 1, pod1, true, "client"},
		{"itp Local, no endpoint on the client's node", ipt, svc("ClusterIP", false, true), "clusterIP", 1, pod1, false, ""},
		{"etp Cluster, external at the node without endpoint", ipt, svc("NodePort", false, false), "nodePort", 1, ext, true, "node"},
		{"etp Local, external at the node without endpoint", ipt, svc("NodePort", true, false), "nodePort", 1, ext, false, ""},
		{"etp Local, external at the endpoint's node", nft, svc("LoadBalancer", true, false), "loadBalancer", 0, ext, true, "client"},
		{"etp Local, pod through its own node", ipt, svc("LoadBalancer", true, false), "loadBalancer", 1, pod1, true, "client"},
		{"host client: source not checked", ipt, svc("NodePort", false, false), "nodePort", 0, host1, true, ""},
		{"localhost node port in nftables", nft, svc("NodePort", false, false), "localhost", 1, host1, false, ""},
		{"localhost node port in iptables", ipt, svc("NodePort", false, false), "localhost", 1, host1, true, ""},
		{"no endpoints", ipt, &workload.Service{Type: "NodePort"}, "nodePort", 0, ext, false, ""},
	} {
		got := expectCell(tc.mode, tc.s, tc.path, tc.entry, tc.c)
		if got.Reachable != tc.reachable || got.Source != tc.source || got.Why == "" {
			t.Errorf("%s: %+v, want reachable %v source %q", tc.name, got, tc.reachable, tc.source)
		}
	}
}

// TestCleanupBothBackends: kube-proxy's leftovers are cleaned with both
// iptables back ends; a back end whose cleanup fails while the other's
// rules still hold its objects (an ipset in use) is cleaned again after
// the other, with no error left; one that keeps failing is named.
func TestCleanupBothBackends(t *testing.T) {
	defer func(n int) { cleanupTries = n }(cleanupTries)
	cleanupTries = 1
	nd := &topology.Netns{Name: "pb-x-node0"}
	var calls []string
	nftClean := false
	m := proxymodes.Mode{Name: "ipvs", CleanupLeftovers: func(_ context.Context, sc *scenarios.Scenario, _ proxymodes.Node) error {
		calls = append(calls, sc.IPTables.Backend)
		switch {
		case sc.IPTables.Backend == "nft":
			nftClean = true
		case !nftClean:
			return errors.New("ipset: Set cannot be destroyed: it is in use by a kernel component")
		}
		return nil
	}}
	if err := cleanupBothBackends(context.Background(), m, &scenarios.Scenario{}, nd); err != nil {
		t.Errorf("legacy held by nft's rules: %v, want it cleaned after nft", err)
	}
	if got := strings.Join(calls, ","); got != "legacy,nft,legacy" {
		t.Errorf("calls %s, want legacy,nft,legacy", got)
	}
	m.CleanupLeftovers = func(_ context.Context, sc *scenarios.Scenario, _ proxymodes.Node) error {
		if sc.IPTables.Backend == "legacy" {
			return errors.New("stuck")
		}
		return nil
	}
	if err := cleanupBothBackends(context.Background(), m, &scenarios.Scenario{}, nd); err == nil || !strings.Contains(err.Error(), "cleanup (legacy): stuck") {
		t.Errorf("legacy failing every round: %v, want its error named", err)
	}
}
