//go:build linux

package userspace_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/proxymodes/iptables"
	"github.com/proxybench/proxybench/proxymodes/userspace"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/traffic"
)

var (
	serviceCIDR = netip.MustParsePrefix("198.18.0.0/16")
	podCIDR     = netip.MustParsePrefix("198.19.0.0/17")
	nodeCIDR    = netip.MustParsePrefix("198.19.255.0/24")
)

func testServices(t testing.TB, n, eps int) []workload.Service {
	t.Helper()
	sc := &scenarios.Scenario{Seed: 1}
	sc.Services = scenarios.ServicesSpec{Count: n, PortsPerService: 1, Protocol: "TCP", Port: 80, TargetPort: 8080,
		Endpoints: scenarios.EndpointsSpec{Distribution: "fixed", Count: eps}}
	sc.Network = scenarios.NetworkSpec{ServiceCIDR: serviceCIDR.String(), PodCIDR: podCIDR.String(), NodeCIDR: nodeCIDR.String(), ClusterCIDR: "198.19.0.0/16"}
	svcs, err := workload.Services(sc)
	if err != nil {
		t.Fatal(err)
	}
	return svcs
}

// testbed builds a topology with an echo server; both go when the test ends.
func testbed(t *testing.T, svcs []workload.Service) *topology.Testbed { return testbedB(t, svcs) }

func testbedB(t testing.TB, svcs []workload.Service) *topology.Testbed {
	t.Helper()
	tb, err := topology.Build(context.Background(), topology.Spec{
		RunID: topology.NewRunID(), ClientPods: 2, ServiceCIDR: serviceCIDR, PodCIDR: podCIDR, NodeCIDR: nodeCIDR,
	})
	if err != nil {
		t.Fatal(err)
	}
	echo, err := traffic.StartEcho(tb.Backend, workload.TargetPorts(svcs))
	if err != nil {
		tb.Teardown()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		echo.Close()
		if err := tb.Teardown(); err != nil {
			t.Error(err)
		}
	})
	return tb
}

// dialEach makes per connections to every service's ClusterIP from the
// client namespaces (one thread per client) and returns, per service, the
// endpoints the echo server reported.
func dialEach(t *testing.T, tb *topology.Testbed, svcs []workload.Service, per int) ([]map[netip.Addr]int, []error) {
	t.Helper()
	hits := make([]map[netip.Addr]int, len(svcs))
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for w, c := range tb.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.Do(func() error {
				for i := w; i < len(svcs); i += len(tb.Clients) {
					s := &svcs[i]
					m := map[netip.Addr]int{}
					for k := 0; k < per; k++ {
						a, err := echoVia(netip.AddrPortFrom(s.ClusterIP, s.Ports[0].Port))
						if err != nil {
							mu.Lock()
							errs = append(errs, fmt.Errorf("%s: %w", s.Name, err))
							mu.Unlock()
							continue
						}
						m[a.Addr()]++
					}
					hits[i] = m
				}
				return nil
			})
		}()
	}
	wg.Wait()
	return hits, errs
}

func echoVia(dst netip.AddrPort) (netip.AddrPort, error) {
	c, err := net.DialTimeout("tcp4", dst.String(), 5*time.Second)
	if err != nil {
		return netip.AddrPort{}, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("read echo via %s: %w", dst, err)
	}
	return netip.ParseAddrPort(strings.Fields(line + " ")[0])
}

func natSave(t *testing.T, tb *topology.Testbed) string {
	t.Helper()
	out, err := tb.Node.Run(context.Background(), nil, "iptables-legacy-save", "-t", "nat")
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func flushConntrack(t testing.TB, n *topology.Netns) {
	h, err := n.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	_ = h.ConntrackTableFlush(netlink.ConntrackTable)
}

// TestKernelProxy1k proxies 1k services x 3 endpoints through REDIRECT
// portals in a real testbed: every endpoint of every service is reached in
// round-robin order, incremental syncs open, close and rebalance only what
// changed, and after Cleanup no listener, rule, chain or goroutine is
// left and the root namespace is unchanged.
func TestKernelProxy1k(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore", "iptables-legacy-save", "iptables-legacy", "ss")
	before := testenv.RootSnapshot(t)
	goroutines := runtime.NumGoroutine()
	ctx := context.Background()
	svcs := testServices(t, 1000, 3)
	tb := testbed(t, svcs)

	p := userspace.New(userspace.Config{Backend: userspace.BackendLegacy}, tb.Node)
	st, err := p.Sync(ctx, svcs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("full sync of 1000 services: wall %v cpu %v objects %d bytes %d phases %v", st.Wall, st.CPU, st.Objects, st.Bytes, st.Phases)
	if st.Kind != "full" || st.Objects != 3000 || p.Listeners() != 1000 || st.Wall <= 0 || st.Wall < st.Phases["listeners"] {
		t.Fatalf("full sync: kind %s objects %d listeners %d; want full, 3000, 1000", st.Kind, st.Objects, p.Listeners())
	}
	nat := natSave(t, tb)
	if n := strings.Count(nat, "-j REDIRECT"); n != 2000 {
		t.Errorf("%d REDIRECT rules, want 2000", n)
	}
	for _, j := range []string{"-A PREROUTING -m comment --comment \"handle ClusterIPs; NOTE: this must be before the NodePort rules\" -j KUBE-PORTALS-CONTAINER",
		"-A OUTPUT -m comment --comment \"handle ClusterIPs; NOTE: this must be before the NodePort rules\" -j KUBE-PORTALS-HOST"} {
		if strings.Count(nat, j) != 1 {
			t.Errorf("jump %q present %d times, want once", j, strings.Count(nat, j))
		}
	}

	// Round robin: 3 connections per service reach its 3 endpoints once each.
	hits, errs := dialEach(t, tb, svcs, 3)
	if len(errs) > 0 {
		t.Fatalf("%d failed connections, first: %v", len(errs), errs[0])
	}
	for i, h := range hits {
		for _, e := range svcs[i].Endpoints {
			if h[e.IP] != 1 {
				t.Fatalf("service %d: hits %v, want each of its 3 endpoints once", i, h)
			}
		}
	}
	// The traffic driver at a random position: no error, no miss.
	res, err := traffic.Drive(ctx, traffic.DriveSpec{Clients: tb.Clients, Services: svcs, Position: workload.PosRandom,
		Connections: 2000, Warmup: 20, Concurrency: 4, Timeout: 2 * time.Second, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || res.Misses != 0 {
		t.Fatalf("drive: %d errors %d misses: %v", res.Errors, res.Misses, res.ErrorSamples)
	}
	if c := p.Counters(); c.Failed != 0 || c.Proxied < 5000 {
		t.Errorf("counters %+v", c)
	}

	// Incremental: an endpoint change costs no restore.
	changed := append([]workload.Service(nil), svcs...)
	changed[0].Endpoints = append([]workload.Endpoint(nil), svcs[0].Endpoints...)
	changed[0].Endpoints[0].Ready = false
	st, err = p.Sync(ctx, changed)
	if err != nil {
		t.Fatal(err)
	}
	if st.Kind != "incremental" || st.Bytes != 0 || st.Objects != 0 {
		t.Errorf("endpoint change: %+v, want incremental with no restore", st)
	}
	h, errs := dialEach(t, tb, changed[:1], 4)
	if len(errs) > 0 || h[0][svcs[0].Endpoints[0].IP] != 0 || h[0][svcs[0].Endpoints[1].IP] != 2 {
		t.Errorf("after unready endpoint 0: hits %v errors %v", h[0], errs)
	}
	// Removing a service closes its listener and rewrites the portals.
	port, _ := p.ProxyPort(svcs[999].PortName(svcs[999].Ports[0]), "TCP")
	st, err = p.Sync(ctx, changed[:999])
	if err != nil {
		t.Fatal(err)
	}
	if st.Kind != "incremental" || p.Listeners() != 999 || st.Objects != 1+2*999 || st.Bytes == 0 {
		t.Errorf("service removed: %+v, %d listeners", st, p.Listeners())
	}
	if n := strings.Count(natSave(t, tb), "-j REDIRECT"); n != 2*999 {
		t.Errorf("%d REDIRECT rules after removal, want %d", n, 2*999)
	}
	if err := dialNode(tb, port); err == nil {
		t.Errorf("listener %d of the removed service still accepts", port)
	}

	if err := p.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	nat = natSave(t, tb)
	if strings.Contains(nat, "KUBE-") || strings.Contains(nat, "REDIRECT") {
		t.Errorf("after Cleanup nat still holds:\n%s", nat)
	}
	out, err := tb.Node.Run(ctx, nil, "ss", "-Hltn")
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("listeners left in the node namespace after Cleanup:\n%s", s)
	}
	flushConntrack(t, tb.Node)
	if _, errs := dialEach(t, tb, svcs[:3], 1); len(errs) != 3 {
		t.Errorf("after Cleanup %d of 3 connections to VIPs failed, want all", len(errs))
	}
	// Goroutines: accept loops, copies and the dial pool are gone.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > goroutines+10 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutines+10 {
		t.Errorf("%d goroutines after Cleanup, %d before", n, goroutines)
	}
	// A Sync after Cleanup is full again.
	if st, err := p.Sync(ctx, svcs[:10]); err != nil || st.Kind != "full" {
		t.Errorf("sync after cleanup: %+v %v", st, err)
	}
	if err := p.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.CompareRoot(t, before, testenv.RootSnapshot(t)) })
}

// dialNode connects to the node's listener port from inside the node.
func dialNode(tb *topology.Testbed, port uint16) error {
	return tb.Node.Do(func() error {
		c, err := net.DialTimeout("tcp4", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
}

// TestKernelEndpointDown downs one endpoint of each of 100 services
// (REJECT with tcp-reset in the backend namespace): every connection
// through the userspace proxy succeeds by retrying the next endpoint,
// while iptables mode over the same services fails about 1/3 of them.
// With DROP the proxy still succeeds, after the 250 ms first try.
func TestKernelEndpointDown(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore", "iptables-legacy-save", "iptables-legacy")
	before := testenv.RootSnapshot(t)
	ctx := context.Background()
	svcs := testServices(t, 100, 3)
	tb := testbed(t, svcs)
	var down []netip.Addr
	for _, s := range svcs {
		down = append(down, s.Endpoints[0].IP)
	}
	undo, err := traffic.DownEndpoints(ctx, tb.Backend, down, traffic.DownReset)
	if err != nil {
		t.Fatal(err)
	}
	drive := func(n int) *traffic.DriveResult {
		t.Helper()
		res, err := traffic.Drive(ctx, traffic.DriveSpec{Clients: tb.Clients, Services: svcs, Position: workload.PosRandom,
			Connections: n, Concurrency: 4, Timeout: 2 * time.Second, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	p := userspace.New(userspace.Config{Backend: userspace.BackendLegacy}, tb.Node)
	if _, err := p.Sync(ctx, svcs); err != nil {
		t.Fatal(err)
	}
	res := drive(900)
	c := p.Counters()
	t.Logf("userspace, 1 of 3 endpoints reset: %d errors of 900; counters %+v", res.Errors, c)
	if res.Errors != 0 || res.Misses != 0 {
		t.Errorf("userspace: %d errors %d misses, want 0: %v", res.Errors, res.Misses, res.ErrorSamples)
	}
	for svc, h := range res.Hits {
		if h[svcs[svc].Endpoints[0].IP] != 0 {
			t.Fatalf("service %d: a connection landed on the down endpoint: %v", svc, h)
		}
	}
	if c.Retried < 200 || c.Failed != 0 {
		t.Errorf("counters %+v: want ~450 retried, 0 failed", c)
	}
	if err := p.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	flushConntrack(t, tb.Node)

	ip := iptables.New(iptables.Config{Backend: iptables.BackendLegacy, ClusterCIDR: netip.MustParsePrefix("198.19.0.0/16")}, tb.Node)
	if _, err := ip.Sync(ctx, svcs); err != nil {
		t.Fatal(err)
	}
	res = drive(900)
	rate := float64(res.Errors) / 900
	t.Logf("iptables, 1 of 3 endpoints reset: %d errors of 900 (%.3f)", res.Errors, rate)
	if rate < 0.25 || rate > 0.42 {
		t.Errorf("iptables failure rate %.3f, want about 1/3: %v", rate, res.ErrorSamples)
	}
	if err := ip.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	flushConntrack(t, tb.Node)
	if err := undo(); err != nil {
		t.Fatal(err)
	}

	// DROP: the first try times out after 250 ms, the retry succeeds.
	undo, err = traffic.DownEndpoints(ctx, tb.Backend, down, traffic.DownDrop)
	if err != nil {
		t.Fatal(err)
	}
	p = userspace.New(userspace.Config{Backend: userspace.BackendLegacy}, tb.Node)
	if _, err := p.Sync(ctx, svcs); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res = drive(60)
	t.Logf("userspace, 1 of 3 endpoints dropped: %d errors of 60 in %v; counters %+v", res.Errors, time.Since(start), p.Counters())
	if res.Errors != 0 {
		t.Errorf("userspace with dropped endpoints: %d errors: %v", res.Errors, res.ErrorSamples)
	}
	if err := p.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if err := undo(); err != nil {
		t.Fatal(err)
	}
	out, err := tb.Backend.Run(ctx, nil, "iptables-legacy-save", "-t", "filter")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), traffic.ChainDown) {
		t.Errorf("backend filter after undo:\n%s", out)
	}
	t.Cleanup(func() { testenv.CompareRoot(t, before, testenv.RootSnapshot(t)) })
}
