//go:build linux

package runner

import (
	"context"
	"errors"
	"net/netip"
	"slices"
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

// TestCleanupBothBackends: a legacy cleanup that fails while the nft back
// end's rules still reference the sets succeeds on its second run, after
// nft's, and no error is left; one that keeps failing is named by its
// back end.
func TestCleanupBothBackends(t *testing.T) {
	sc := &scenarios.Scenario{}
	var calls []string
	nftClean := false
	ok := func(_ context.Context, c *scenarios.Scenario, _ proxymodes.Node) error {
		calls = append(calls, c.IPTables.Backend)
		if c.IPTables.Backend == "nft" {
			nftClean = true
			return nil
		}
		if !nftClean {
			return errors.New("Set cannot be destroyed: it is in use by a kernel component")
		}
		return nil
	}
	if err := cleanupBothBackends(context.Background(), sc, nil, ok); err != nil {
		t.Fatalf("error %v after calls %v, want none", err, calls)
	}
	if want := []string{"legacy", "nft", "legacy"}; !slices.Equal(calls, want) {
		t.Errorf("calls %v, want %v", calls, want)
	}
	calls = nil
	bad := func(_ context.Context, c *scenarios.Scenario, _ proxymodes.Node) error {
		calls = append(calls, c.IPTables.Backend)
		if c.IPTables.Backend == "legacy" {
			return errors.New("stuck")
		}
		return nil
	}
	err := cleanupBothBackends(context.Background(), sc, nil, bad)
	if err == nil || !strings.Contains(err.Error(), "cleanup (legacy): stuck") || strings.Contains(err.Error(), "(nft)") {
		t.Errorf("error %v, want cleanup (legacy) named alone", err)
	}
}
