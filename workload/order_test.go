package workload

import (
	"net/netip"
	"testing"
)

// TestKubeProxyOrder: the programmed endpoints sorted by "ip:port" text,
// as kube-proxy orders them, not by address: .10 before .9, and before .1
// too ("198.19.1.10:" < "198.19.1.1:", '0' < ':');
// endpoints that are not programmed stay out.
func TestKubeProxyOrder(t *testing.T) {
	ip := netip.MustParseAddr
	s := Service{Endpoints: []Endpoint{
		NewEndpoint(ip("198.19.1.9")), NewEndpoint(ip("198.19.1.10")), NewEndpoint(ip("198.19.1.1")),
		{IP: ip("198.19.1.2"), Serving: true, Terminating: true, Weight: 1},
		NewEndpoint(ip("198.19.0.200")),
	}}
	got := s.KubeProxyOrder()
	want := []string{"198.19.0.200", "198.19.1.10", "198.19.1.1", "198.19.1.9"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i].IP.String() != want[i] {
			t.Errorf("position %d: %s, want %s (all: %v)", i, got[i].IP, want[i], got)
		}
	}
	if s.Endpoints[0].IP != ip("198.19.1.9") {
		t.Error("KubeProxyOrder reordered the service's own endpoints")
	}
	// Only serving terminating endpoints: they are programmed, in order.
	fb := Service{Endpoints: []Endpoint{
		{IP: ip("10.0.0.9"), Serving: true, Terminating: true, Weight: 1},
		{IP: ip("10.0.0.10"), Serving: true, Terminating: true, Weight: 1},
	}}
	if got := fb.KubeProxyOrder(); len(got) != 2 || got[0].IP != ip("10.0.0.10") {
		t.Errorf("serving fallback: %v", got)
	}
}
