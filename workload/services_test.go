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
