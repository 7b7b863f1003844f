//go:build linux

package ipvs

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/workload"
)

// twoEndpoints is one TCP and one UDP ServicePort on 198.18.0.1 with
// endpoints eps (from 198.19.0.1).
func twoEndpoints(eps ...string) []workload.Service {
	s := workload.Service{Namespace: "pb", Name: "svc", ClusterIP: netip.MustParseAddr("198.18.0.1"),
		Ports: []workload.ServicePort{
			{Name: "http", Port: 80, TargetPort: 8080, Protocol: "TCP"},
			{Name: "dns", Port: 53, TargetPort: 5353, Protocol: "UDP"},
		}}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, workload.Endpoint{IP: netip.MustParseAddr(e), Ready: true, Weight: 1})
	}
	return []workload.Service{s}
}

var (
	vip  = netip.MustParseAddr("198.18.0.1")
	rsA  = netip.MustParseAddr("198.19.0.1")
	rsB  = netip.MustParseAddr("198.19.0.2")
	tcpA = "TCP/198.18.0.1:80/198.19.0.1:8080"
)

// reals returns the "addr:port weight" lines of one virtual server in the
// fake's dump.
func reals(r *rig, vs string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(r.h.Dump(), "\n") {
		switch {
		case strings.HasPrefix(l, vs+" "):
			in = true
		case strings.HasPrefix(l, "  -> ") && in:
			out = append(out, strings.TrimPrefix(l, "  -> "))
		default:
			in = false
		}
	}
	return out
}

// TestGracefulTermination follows kube-proxy's graceful_termination.go: a
// removed TCP real server with connections goes to weight 0 and stays
// until they drain; a UDP one and a drained one are deleted at once; one
// desired again is re-added at its weight.
func TestGracefulTermination(t *testing.T) {
	r := newRig(testCfg)
	r.sync(t, twoEndpoints("198.19.0.1", "198.19.0.2"))
	for _, c := range []struct {
		proto string
		port  uint16
	}{{"TCP", 80}, {"UDP", 53}} {
		tp := uint16(8080)
		if c.proto == "UDP" {
			tp = 5353
		}
		if err := r.h.SetConnections(c.proto, vip, c.port, rsA, tp, 1, 2); err != nil {
			t.Fatal(err)
		}
	}

	r.sync(t, twoEndpoints("198.19.0.2"))
	if got, want := reals(r, "TCP 198.18.0.1:80"), []string{"198.19.0.1:8080 Masq 0", "198.19.0.2:8080 Masq 1"}; !slices.Equal(got, want) {
		t.Errorf("TCP after removing A with connections: %q, want %q (weight 0, kept)", got, want)
	}
	if got, want := reals(r, "UDP 198.18.0.1:53"), []string{"198.19.0.2:5353 Masq 1"}; !slices.Equal(got, want) {
		t.Errorf("UDP after removing A with connections: %q, want %q (deleted at once)", got, want)
	}
	if got := r.p.Terminating(); !slices.Equal(got, []string{tcpA}) {
		t.Errorf("Terminating() = %q, want [%s]", got, tcpA)
	}

	// Another sync leaves it alone; a check before it drains keeps it.
	r.h.ResetCalls()
	r.sync(t, twoEndpoints("198.19.0.2"))
	if n, err := r.p.GracefulCheck(); n != 0 || err != nil {
		t.Errorf("GracefulCheck with connections left: deleted %d, %v; want 0, nil", n, err)
	}
	if c := r.h.Calls(); c["DelDestination"]+c["UpdateDestination"] != 0 {
		t.Errorf("calls while draining: %v, want no update or delete", c)
	}
	// Drained: the check deletes it.
	if err := r.h.SetConnections("TCP", vip, 80, rsA, 8080, 0, 0); err != nil {
		t.Fatal(err)
	}
	if n, err := r.p.GracefulCheck(); n != 1 || err != nil {
		t.Errorf("GracefulCheck when drained: deleted %d, %v; want 1, nil", n, err)
	}
	if got, want := reals(r, "TCP 198.18.0.1:80"), []string{"198.19.0.2:8080 Masq 1"}; !slices.Equal(got, want) {
		t.Errorf("TCP after draining: %q, want %q", got, want)
	}
	if got := r.p.Terminating(); len(got) != 0 {
		t.Errorf("Terminating() after the check = %q, want none", got)
	}

	// Removed without connections: deleted at once.
	r.sync(t, twoEndpoints("198.19.0.1", "198.19.0.2"))
	r.sync(t, twoEndpoints("198.19.0.1"))
	if got, want := reals(r, "TCP 198.18.0.1:80"), []string{"198.19.0.1:8080 Masq 1"}; !slices.Equal(got, want) {
		t.Errorf("TCP after removing a drained B: %q, want %q", got, want)
	}

	// Back while terminating: deleted and re-added at its weight.
	r.sync(t, twoEndpoints("198.19.0.1", "198.19.0.2"))
	if err := r.h.SetConnections("TCP", vip, 80, rsB, 8080, 3, 0); err != nil {
		t.Fatal(err)
	}
	r.sync(t, twoEndpoints("198.19.0.1"))
	if got := len(r.p.Terminating()); got != 1 {
		t.Fatalf("%d terminating, want 1", got)
	}
	r.h.ResetCalls()
	r.sync(t, twoEndpoints("198.19.0.1", "198.19.0.2"))
	if got, want := reals(r, "TCP 198.18.0.1:80"), []string{"198.19.0.1:8080 Masq 1", "198.19.0.2:8080 Masq 1"}; !slices.Equal(got, want) {
		t.Errorf("TCP after B came back: %q, want %q", got, want)
	}
	// TCP: delete and re-add (kube-proxy's MoveRSOutofGracefulDeleteList);
	// UDP: B was deleted at once, so only an add.
	if c := r.h.Calls(); c["DelDestination"] != 1 || c["NewDestination"] != 2 {
		t.Errorf("calls when B came back: %v, want 1 delete and 2 adds", c)
	}
	if got := r.p.Terminating(); len(got) != 0 {
		t.Errorf("Terminating() after B came back = %q, want none", got)
	}
}

// TestSchedulerFlags: sh-port sets IP_VS_SVC_F_SCHED2 on every virtual
// server, a sync programs it and a flag of another scheduler is refused.
func TestSchedulerFlags(t *testing.T) {
	cfg := testCfg
	cfg.Scheduler, cfg.SchedulerFlags = "sh", []string{"sh-port"}
	r := newRig(cfg)
	r.sync(t, twoEndpoints("198.19.0.1"))
	if d := r.h.Dump(); !strings.Contains(d, "TCP 198.18.0.1:80 sh flags 0x10\n") {
		t.Errorf("fake after sync:\n%s\nwant sh with flags 0x10", d)
	}
	cfg.SchedulerFlags = []string{"mh-port"}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "mh-port") {
		t.Errorf("Validate(sh with mh-port) = %v, want an error naming mh-port", err)
	}
}
