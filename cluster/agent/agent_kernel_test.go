//go:build linux

package agent_test

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/cluster/agent"
	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/traffic"
)

// TestKernelAgent runs the agent's HTTP API and its jobs in a "pod"
// namespace joined by a veth pair to a backend namespace with the echo
// server (what the cluster engine's pool pods run), every socket in the
// two testbed namespaces: a lookup's raw samples come back over HTTP
// with every connection landed on the endpoint; a probe waiting for that
// endpoint is met, one waiting for it to go times out with the reason;
// bad requests are refused naming the field. The services' "ClusterIP"
// is the endpoint itself (no proxy rules: the agent, not a mode, is
// under test). About 1 s.
func TestKernelAgent(t *testing.T) {
	testenv.RequireKernel(t)
	before := testenv.RootSnapshot(t)
	pod, backend := testenv.NewNetns(t, "apod"), testenv.NewNetns(t, "aback")
	podIP, backIP := netip.MustParseAddr("198.19.9.1"), netip.MustParseAddr("198.19.9.2")
	if err := topology.Veth(pod, "eth0", backend, "eth0", podIP, backIP); err != nil {
		t.Fatal(err)
	}
	echo, err := traffic.StartEcho(backend, []uint16{8080})
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := agent.New(ctx, agent.Health{Node: "node-a", Pod: "agent-x"}, []*topology.Netns{pod})
	var l net.Listener
	if err := pod.Do(func() error {
		var err error
		l, err = net.Listen("tcp4", net.JoinHostPort(podIP.String(), "8081"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, l) }()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := pod.Do(func() error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}}}
	c := agent.Client{T: agent.HTTPTransport("http://"+net.JoinHostPort(podIP.String(), "8081"), hc), Poll: 20 * time.Millisecond}

	h, err := c.Health(ctx)
	if err != nil || h.Node != "node-a" || h.Pod != "agent-x" || h.Now.IsZero() {
		t.Fatalf("health %+v, %v", h, err)
	}
	svc := workload.Service{Namespace: "ns", Name: "s0", ClusterIP: backIP,
		Ports: []workload.ServicePort{{Port: 8080, TargetPort: 8080, Protocol: "TCP"}}, Endpoints: []workload.Endpoint{workload.NewEndpoint(backIP)}}
	other := svc
	other.Name = "s1"
	if err := c.StartLookup(ctx, agent.LookupRequest{ID: "l1", Services: []workload.Service{svc, other}, Position: workload.PosLast,
		Connections: 40, Warmup: 5, Concurrency: 2, Timeout: time.Second, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	st, err := c.WaitLookup(ctx, "l1")
	if err != nil {
		t.Fatal(err)
	}
	r := st.Result
	if r == nil || len(r.LatenciesNs) != 40 || r.Errors != 0 || r.Misses != 0 || r.Hits[1][backIP] != 40 || r.Target.Service != 1 {
		t.Fatalf("lookup result %+v: want 40 samples on service 1 (the last), all landed on %s", r, backIP)
	}
	for _, ns := range r.LatenciesNs {
		if ns <= 0 || ns > int64(time.Second) {
			t.Fatalf("a connect time of %d ns", ns)
		}
	}

	if err := c.StartProbe(ctx, agent.ProbeRequest{ID: "p1", Service: svc, Want: []netip.Addr{backIP}}); err != nil {
		t.Fatal(err)
	}
	p, err := c.WaitProbe(ctx, "p1")
	if err != nil || !p.Met || p.FirstSuccess.Before(p.Started) || p.Attempts != 1 {
		t.Errorf("probe for a reachable endpoint: %+v, %v: want met at the first attempt", p, err)
	}
	if err := c.StartProbe(ctx, agent.ProbeRequest{ID: "p2", Service: svc, Want: []netip.Addr{backIP}, Gone: true,
		Interval: 10 * time.Millisecond, Deadline: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	p, err = c.WaitProbe(ctx, "p2")
	if err == nil || p.Met || p.Attempts < 2 || !strings.Contains(err.Error(), "not changed after 200ms") {
		t.Errorf("probe for an endpoint that stays: %+v, %v: want unmet after 200ms, with several attempts", p, err)
	}

	for _, bad := range []struct {
		req  agent.LookupRequest
		want string
	}{
		{agent.LookupRequest{ID: "l1", Services: []workload.Service{svc}, Position: workload.PosFirst, Connections: 1, Concurrency: 1, Timeout: time.Second}, "exists"},
		{agent.LookupRequest{ID: "l2", Position: workload.PosFirst, Connections: 1, Concurrency: 1, Timeout: time.Second}, "services: none"},
		{agent.LookupRequest{ID: "l3", Services: []workload.Service{svc}, Position: "second", Connections: 1, Concurrency: 1, Timeout: time.Second}, "position"},
	} {
		if err := c.StartLookup(ctx, bad.req); err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("lookup %+v: err %v, want 400 naming %q", bad.req.ID, err, bad.want)
		}
	}
	if err := c.Forget(ctx, "lookups", "l1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lookup(ctx, "l1"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a forgotten job: err %v, want 404", err)
	}
	cancel()
	if err := <-served; err != nil {
		t.Error(err)
	}
	s.Wait()
	testenv.CompareRoot(t, before, testenv.RootSnapshot(t))
}
