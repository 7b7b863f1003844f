package workload

import (
	"net/netip"
	"testing"
)

// TestServingFallback: a service without ready endpoints sends its
// traffic to its serving terminating ones (KEP-1669); a ready endpoint,
// or no serving one, turns the fallback off.
func TestServingFallback(t *testing.T) {
	ip := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	term := func(a string, serving bool) Endpoint {
		return Endpoint{IP: ip(a), Serving: serving, Terminating: true, Weight: 1}
	}
	for _, c := range []struct {
		name string
		eps  []Endpoint
		want []string
	}{
		{"ready and terminating", []Endpoint{NewEndpoint(ip("10.0.0.1")), term("10.0.0.2", true)}, []string{"10.0.0.1"}},
		{"only serving terminating", []Endpoint{term("10.0.0.2", true), term("10.0.0.3", true)}, []string{"10.0.0.2", "10.0.0.3"}},
		{"terminating, not serving", []Endpoint{term("10.0.0.2", false)}, nil},
		{"not ready, not terminating", []Endpoint{{IP: ip("10.0.0.4"), Weight: 1}, term("10.0.0.5", true)}, []string{"10.0.0.5"}},
	} {
		s := Service{Endpoints: c.eps}
		got := s.ReadyEndpoints()
		if len(got) != len(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
			continue
		}
		for i, e := range got {
			if e.IP.String() != c.want[i] || !s.HasReadyEndpoint(e.IP) {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
			}
		}
	}
}
