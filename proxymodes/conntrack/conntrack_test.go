package conntrack

import (
	"net/netip"
	"testing"

	"github.com/proxybench/proxybench/workload"
)

var (
	vip  = netip.MustParseAddr("198.18.0.1")
	epA  = netip.MustParseAddr("198.19.0.1")
	epB  = netip.MustParseAddr("198.19.0.2")
	vip2 = netip.MustParseAddr("198.18.0.2")
)

func svc(ip netip.Addr, proto string, eps ...workload.Endpoint) workload.Service {
	return workload.Service{Namespace: "pb", Name: "s", ClusterIP: ip,
		Ports:     []workload.ServicePort{{Name: "dns", Port: 53, TargetPort: 5353, Protocol: proto}},
		Endpoints: eps}
}

func TestStale(t *testing.T) {
	ready := func(a netip.Addr) workload.Endpoint { return workload.Endpoint{IP: a, Ready: true, Weight: 1} }
	services := []workload.Service{
		svc(vip, "UDP", ready(epA), workload.Endpoint{IP: epB, Ready: false}),
		svc(vip2, "UDP"), // no endpoints: left alone
	}
	tcp := []workload.Service{svc(vip, "TCP", ready(epA))}
	r := NewRule(services)
	for _, c := range []struct {
		name string
		r    Rule
		f    Flow
		want bool
	}{
		{"flow to the serving endpoint stays", r, Flow{17, vip, 53, epA}, false},
		{"flow never DNATed (sent while 0 endpoints) goes", r, Flow{17, vip, 53, vip}, true},
		{"flow to a removed or not-ready endpoint goes", r, Flow{17, vip, 53, epB}, true},
		{"other port of the ClusterIP stays", r, Flow{17, vip, 54, vip}, false},
		{"TCP flow stays", r, Flow{6, vip, 53, vip}, false},
		{"service without endpoints: stays", r, Flow{17, vip2, 53, vip2}, false},
		{"TCP service: UDP flow to it stays", NewRule(tcp), Flow{17, vip, 53, vip}, false},
	} {
		if got := c.r.Stale(c.f); got != c.want {
			t.Errorf("%s: Stale(%+v) = %v, want %v", c.name, c.f, got, c.want)
		}
	}
	if !NewRule(tcp).Empty() || NewRule(services).Empty() {
		t.Errorf("Empty: TCP-only rule %v, UDP rule %v", NewRule(tcp).Empty(), NewRule(services).Empty())
	}
}
