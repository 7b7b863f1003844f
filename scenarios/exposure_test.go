package scenarios

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestExposureRefused: each bad Service setting is refused at its field
// with a fix, as Kubernetes' validation refuses it or the testbed cannot
// build it.
func TestExposureRefused(t *testing.T) {
	const iso = "topology: {pods: isolated, nodes: 2}\n"
	for _, tc := range []struct {
		name, yaml, field, msg string
	}{
		{"node port below the range", "services: {count: 1, type: NodePort, nodePorts: [8080]}\n", "services.nodePorts[0]", "outside the node port range"},
		{"node port above the range", "services: {count: 1, type: NodePort, nodePorts: [32768]}\n", "services.nodePorts[0]", "outside the node port range"},
		{"node port used twice", "services: {count: 2, type: NodePort, nodePorts: [30080, 30080]}\n", "services.nodePorts[1]", "already used"},
		{"node port used twice across groups", "services:\n  count: 1\n  type: NodePort\n  nodePorts: [30080]\n  groups:\n  - {count: 1, type: LoadBalancer, nodePorts: [30080]}\n", "services.groups[0].nodePorts[0]", "already used"},
		{"node ports on ClusterIP", "services: {count: 1, nodePorts: [30080]}\n", "services.nodePorts", "no node ports"},
		{"LB IP in the service CIDR", "services: {count: 1, type: LoadBalancer, loadBalancerIPs: [198.18.0.200]}\n", "services.loadBalancerIPs[0]", "inside network.serviceCIDR"},
		{"LB IP IPv6 in an IPv4 run", "services: {count: 1, type: LoadBalancer, loadBalancerIPs: [\"2001:2::10\"]}\n", "services.loadBalancerIPs[0]", "IPv6 but this run is IPv4-only"},
		{"external IP IPv6", "services: {count: 1, externalIPs: [\"2001:2::10\"]}\n", "services.externalIPs[0]", "IPv6"},
		{"external IP loopback", "services: {count: 1, externalIPs: [127.0.0.5]}\n", "services.externalIPs[0]", "loopback"},
		{"etp Local on ClusterIP", iso + "services: {count: 1, externalTrafficPolicy: Local}\n", "services.externalTrafficPolicy", "externally accessible"},
		{"etp Local on shared pods", "services: {count: 1, type: NodePort, externalTrafficPolicy: Local}\n", "services.externalTrafficPolicy", "pods: isolated"},
		{"health check port on NodePort", iso + "services: {count: 1, type: NodePort, externalTrafficPolicy: Local, healthCheckNodePorts: [30500]}\n", "services.healthCheckNodePorts", "only for type LoadBalancer"},
		{"unknown type", "services: {count: 1, type: ExternalName}\n", "services.type", "unknown value"},
		{"unknown node", iso + "services: {count: 1, type: NodePort, endpointNodes: [node-5]}\n", "services.endpointNodes[0]", "not a node"},
		{"external client on one node", "topology: {externalClient: true}\nservices: {count: 1}\n", "topology.externalClient", "nodes >= 2"},
		{"LB CIDR in the cluster CIDR", "network: {loadBalancerCIDR: 198.19.250.0/24}\nservices: {count: 1, type: LoadBalancer}\n", "network.loadBalancerCIDR", "overlaps clusterCIDR"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantRefused(t, tc.yaml, tc.field, tc.msg) })
	}
}

// TestExposuresAllocate: node ports given are kept and the others are the
// lowest free ones, health check ports exist only for LoadBalancer with
// externalTrafficPolicy Local, LB IPs come from loadBalancerCIDR after
// the given ones, and exposing services shrinks the default serviceCIDR.
func TestExposuresAllocate(t *testing.T) {
	sc, err := Parse([]byte(`topology: {pods: isolated, nodes: 2}
services:
  count: 1
  groups:
  - {count: 2, type: NodePort, nodePorts: [30001]}
  - {count: 2, type: LoadBalancer, externalTrafficPolicy: Local, loadBalancerIPs: [198.18.128.1], endpointNodes: [node-1]}
  - {count: 1, externalIPs: [198.18.129.7], internalTrafficPolicy: Local}
`), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if sc.Network.ServiceCIDR != DefaultExposedServiceCIDR {
		t.Errorf("serviceCIDR %s, want %s", sc.Network.ServiceCIDR, DefaultExposedServiceCIDR)
	}
	ex, err := sc.Exposures()
	if err != nil {
		t.Fatal(err)
	}
	if len(ex) != 6 || sc.ServiceTotal() != 6 || len(sc.EndpointCounts()) != 6 {
		t.Fatalf("%d exposures, total %d, %d endpoint counts; want 6", len(ex), sc.ServiceTotal(), len(sc.EndpointCounts()))
	}
	var got []int
	for _, e := range ex {
		got = append(got, e.NodePorts...)
		if e.HealthCheckNodePort != 0 {
			got = append(got, -e.HealthCheckNodePort)
		}
	}
	// 30001 given; then 30000, and each LB service's node port before its
	// health check port.
	if want := []int{30001, 30000, 30002, -30003, 30004, -30005}; !slices.Equal(got, want) {
		t.Errorf("node ports (health check negative) %v, want %v", got, want)
	}
	if ex[0].Type != TypeClusterIP || ex[0].Exposed() || ex[0].ExternalPolicy != "" {
		t.Errorf("main service %+v, want a plain ClusterIP", ex[0])
	}
	if a, b := ex[3].LoadBalancerIPs[0], ex[4].LoadBalancerIPs[0]; a != netip.MustParseAddr("198.18.128.1") || b != netip.MustParseAddr("198.18.128.2") {
		t.Errorf("LB IPs %s, %s; want 198.18.128.1 (given), 198.18.128.2 (allocated)", a, b)
	}
	if ex[3].ExternalPolicy != PolicyLocal || !slices.Equal(ex[3].EndpointNodes, []string{"node-1"}) {
		t.Errorf("LB Local %+v", ex[3])
	}
	if e := ex[5]; !e.Exposed() || e.ExternalPolicy != PolicyCluster || e.InternalPolicy != PolicyLocal || e.Label() != "ClusterIP+externalIPs etp=Cluster itp=Local" {
		t.Errorf("external IP service %+v (%s)", e, e.Label())
	}
}

// wantRefused parses yaml and fails t unless it is refused with an error
// at field whose message says msg, with a fix and a line.
func wantRefused(t *testing.T, yaml, field, msg string) {
	t.Helper()
	_, err := Parse([]byte(yaml), "f.yaml")
	if err == nil {
		t.Fatalf("accepted:\n%s", yaml)
	}
	for _, fe := range fieldErrors(t, err) {
		if fe.Field == field && strings.Contains(fe.Msg, msg) && fe.Fix != "" && fe.Line > 0 {
			return
		}
	}
	t.Errorf("no error at %s saying %q with a fix and a line; got:\n%v", field, msg, err)
}

// TestNegativeCountOneError: a negative services.count is refused at
// services.count alone, not again by each per-service list ("0 given for
// -5 services").
func TestNegativeCountOneError(t *testing.T) {
	_, err := Parse([]byte("services: {count: -5}\n"), "neg.yaml")
	if err == nil {
		t.Fatal("count -5 accepted")
	}
	if msg := err.Error(); !strings.Contains(msg, "services.count") || strings.Contains(msg, "given for -5 services") {
		t.Errorf("error %q: want services.count alone", msg)
	}
}
