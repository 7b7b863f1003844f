package workload

import (
	"testing"

	"github.com/proxybench/proxybench/scenarios"
)

// TestServicesNamedPorts: services.ports reaches every generated service
// as written, and PortName follows kube-proxy's ServicePortName (no
// ":port" for an unnamed port).
func TestServicesNamedPorts(t *testing.T) {
	sc, err := scenarios.Parse([]byte("engine: sim\nservices:\n  count: 3\n  ports:\n  - {name: dns-tcp, port: 53, targetPort: 5353}\n  - {name: dns, port: 53, protocol: UDP, targetPort: 5353}\n"), "d.yaml")
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := Services(sc)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs {
		want := []ServicePort{{Name: "dns-tcp", Port: 53, TargetPort: 5353, Protocol: "TCP"}, {Name: "dns", Port: 53, TargetPort: 5353, Protocol: "UDP"}}
		if len(s.Ports) != 2 || s.Ports[0] != want[0] || s.Ports[1] != want[1] {
			t.Fatalf("%s: ports %+v, want %+v", s.Name, s.Ports, want)
		}
	}
	if got := svcs[2].PortName(svcs[2].Ports[1]); got != "pb/svc-00002:dns" {
		t.Errorf("PortName = %q", got)
	}
	if got := svcs[0].PortName(ServicePort{Port: 80}); got != "pb/svc-00000" {
		t.Errorf("unnamed PortName = %q, want pb/svc-00000", got)
	}
	if got := FlatTargets(svcs); len(got) != 6 || got[5] != (Target{2, 1}) {
		t.Errorf("FlatTargets = %v", got)
	}
}

// TestServicesExposure: groups follow the main services with their
// exposure, and endpoints sit on their nodes (endpointNodes, else k mod
// nodes with isolated pods).
func TestServicesExposure(t *testing.T) {
	sc, err := scenarios.Parse([]byte(`topology: {pods: isolated, nodes: 2}
services:
  count: 1
  endpoints: {count: 2}
  groups:
  - {count: 1, type: LoadBalancer, externalTrafficPolicy: Local, endpointNodes: [node-1]}
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := Services(sc)
	if err != nil {
		t.Fatal(err)
	}
	if len(svcs) != 2 {
		t.Fatalf("%d services, want 2", len(svcs))
	}
	if s := svcs[0]; s.Exposed() || s.Ports[0].NodePort != 0 || s.Endpoints[0].Node != "node-0" || s.Endpoints[1].Node != "node-1" {
		t.Errorf("main service %+v", s)
	}
	s := svcs[1]
	if !s.HasNodePorts() || s.Ports[0].NodePort != 30000 || s.HealthCheckNodePort != 30001 || !s.ExternalLocal || len(s.LoadBalancerIPs) != 1 {
		t.Errorf("LB service %+v", s)
	}
	if got := len(s.LocalEndpoints("node-1")); got != 2 {
		t.Errorf("node-1 has %d local endpoints, want 2", got)
	}
	if got := len(s.LocalEndpoints("node-0")); got != 0 {
		t.Errorf("node-0 has %d local endpoints, want 0", got)
	}
	if svcs[1].ClusterIP != svcs[0].ClusterIP.Next() {
		t.Errorf("group ClusterIP %s does not follow %s", svcs[1].ClusterIP, svcs[0].ClusterIP)
	}
}
