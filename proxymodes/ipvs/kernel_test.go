//go:build linux

package ipvs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/traffic"
)

// requireIPVS runs the calling test where IP_VS exists: on the host when
// its kernel has it, else inside a user-mode-linux guest with every IPVS
// module loaded (testenv.InUML), which reports back here. It returns true
// when the test ran in the guest and the caller must return. Without root
// or without user-mode-linux it skips (fails with PROXYBENCH_REQUIRE_KERNEL=1).
func requireIPVS(t *testing.T) (delegated bool) {
	t.Helper()
	testenv.RequireKernel(t, binIPSet, binRestore, binSave)
	ns := testenv.NewNetns(t, "ipvsprobe")
	ok, _ := hasIPVS(ns)
	return testenv.InUML(t, ok, KernelModules("")...)
}

func countPrefix(out []byte, prefix string) int {
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// TestKernelSync programs 1k services x 3 endpoints in a throwaway
// namespace, checks every object with ipvsadm, ip, ipset and iptables,
// changes one endpoint (one real server out, one in), shrinks, and cleans
// up.
func TestKernelSync(t *testing.T) {
	if requireIPVS(t) {
		return
	}
	ns := testenv.NewNetns(t, "ipvs")
	ctx := context.Background()
	p := New(testCfg, ns)
	svcs := genServices(1000, 3)
	st, err := p.Sync(ctx, svcs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("full sync 1k x 3: wall %v cpu %v objects %d bytes %d phases %v", st.Wall, st.CPU, st.Objects, st.Bytes, st.Phases)
	// Virtual, real servers, addresses, KUBE-CLUSTER-IP and KUBE-IPVS-IPS
	// members, 19 rules (nat and filter) and 9 jumps.
	if st.Kind != "full" || st.Objects != 1000+3000+1000+2000+19+9 {
		t.Errorf("stats %+v", st)
	}
	check := func(nsvc, nreal int) {
		t.Helper()
		out, err := ns.Run(ctx, nil, "ipvsadm", "-S", "-n")
		if err != nil {
			t.Fatal(err)
		}
		if a, r := countPrefix(out, "-A "), countPrefix(out, "-a "); a != nsvc || r != nreal {
			t.Errorf("ipvsadm -S: %d virtual, %d real servers, want %d, %d", a, r, nsvc, nreal)
		}
		if !strings.Contains(string(out), "-a -t 198.18.0.1:80 -r 198.19.0.1:8080 -m -w 1\n") {
			t.Errorf("ipvsadm -S lacks the first real server:\n%.300s", out)
		}
		out, err = ns.Run(ctx, nil, "ip", "-4", "-o", "addr", "show", "dev", DummyDevice)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(out), "/32 "); n != nsvc {
			t.Errorf("%s holds %d addresses, want %d", DummyDevice, n, nsvc)
		}
		out, err = ns.Run(ctx, nil, "ipset", "list", ClusterIPSet)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(out), ",tcp:80"); n != nsvc {
			t.Errorf("ipset %s: %d entries, want %d", ClusterIPSet, n, nsvc)
		}
	}
	check(1000, 3000)
	nat, err := ns.Run(ctx, nil, binSave, "-t", "nat")
	if err != nil {
		t.Fatal(err)
	}
	if n := countPrefix(nat, "-A "); n != 9+3 {
		t.Errorf("nat table has %d rules, want 12:\n%s", n, nat)
	}
	filter, err := ns.Run(ctx, nil, binSave, "-t", "filter")
	if err != nil {
		t.Fatal(err)
	}
	if n := countPrefix(filter, "-A "); n != 10+6 {
		t.Errorf("filter table has %d rules, want 16:\n%s", n, filter)
	}

	svcs[500].Endpoints[2].IP = netip.MustParseAddr("198.19.200.1")
	st, err = p.Sync(ctx, svcs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("incremental sync, one endpoint replaced: wall %v objects %d phases %v", st.Wall, st.Objects, st.Phases)
	if st.Kind != "incremental" || st.Objects != 2 {
		t.Errorf("incremental stats %+v, want 2 objects", st)
	}
	out, _ := ns.Run(ctx, nil, "ipvsadm", "-L", "-n", "-t", "198.18.1.245:80")
	if !strings.Contains(string(out), "198.19.200.1:8080") || strings.Contains(string(out), "198.19.5.224:8080") {
		t.Errorf("service 500 after the change:\n%s", out)
	}
	check(1000, 3000)

	st, err = p.Sync(ctx, svcs[:400])
	if err != nil {
		t.Fatal(err)
	}
	check(400, 1200)
	if err := p.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	out, _ = ns.Run(ctx, nil, "ipvsadm", "-S", "-n")
	nat, _ = ns.Run(ctx, nil, binSave, "-t", "nat")
	filter, _ = ns.Run(ctx, nil, binSave, "-t", "filter")
	sets, _ := ns.Run(ctx, nil, "ipset", "list", "-n")
	links, _ := ns.Run(ctx, nil, "ip", "-o", "link")
	if len(out) != 0 || strings.Contains(string(nat), "KUBE-") || strings.Contains(string(filter), "KUBE-") || len(sets) != 0 || strings.Contains(string(links), DummyDevice) {
		t.Errorf("after Cleanup: ipvs %q, nat %q, filter %q, sets %q, links %q", out, nat, filter, sets, links)
	}
}

// testbed builds client(s) -> node -> backend namespaces, starts the echo
// server and returns them; everything is torn down when the test ends.
func testbed(t *testing.T, clients int, svcs []workload.Service) *topology.Testbed {
	t.Helper()
	tb, err := topology.Build(context.Background(), topology.Spec{
		RunID: topology.NewRunID(), ClientPods: clients,
		ServiceCIDR: netip.MustParsePrefix("198.18.0.0/16"), PodCIDR: netip.MustParsePrefix("198.19.0.0/17"),
		NodeCIDR: netip.MustParsePrefix("198.19.255.0/24"),
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

// TestKernelTrafficReachesEveryEndpoint: through the IPVS node, every
// connection to a VIP lands on an endpoint of that service and, with rr,
// every endpoint of the first and last service is reached equally.
func TestKernelTrafficReachesEveryEndpoint(t *testing.T) {
	if requireIPVS(t) {
		return
	}
	svcs := genServices(200, 3)
	tb := testbed(t, 2, svcs)
	p := New(testCfg, tb.Node)
	if _, err := p.Sync(context.Background(), svcs); err != nil {
		t.Fatal(err)
	}
	defer p.Cleanup(context.Background())
	for _, pos := range []string{workload.PosFirst, workload.PosLast, workload.PosRandom} {
		res, err := traffic.Drive(context.Background(), traffic.DriveSpec{
			Clients: tb.Clients, Services: svcs, Position: pos,
			Connections: 150, Warmup: 0, Concurrency: 1, Timeout: 5 * time.Second, Seed: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Errors != 0 || res.Misses != 0 || len(res.LatenciesNs) != 150 {
			t.Fatalf("%s: errors %d misses %d samples %d: %v", pos, res.Errors, res.Misses, len(res.LatenciesNs), res.ErrorSamples)
		}
		if pos != workload.PosRandom {
			h := res.Hits[res.Target.Service]
			if len(h) != 3 {
				t.Fatalf("%s: hits %v, want all 3 endpoints", pos, h)
			}
			for a, n := range h {
				if n != 50 {
					t.Errorf("%s: endpoint %s got %d of 150 connections, rr gives 50", pos, a, n)
				}
			}
		}
	}
}

// conn is one open connection through a VIP and the endpoint it reached.
type conn struct {
	c      net.Conn
	landed netip.Addr
}

// dial connects from ns to vip:port and reads the echo line (the endpoint
// reached). The connection stays open (active in IPVS) until closed.
func dial(t *testing.T, ns *topology.Netns, vip netip.Addr, port uint16) conn {
	t.Helper()
	var c net.Conn
	err := ns.Do(func() error {
		var err error
		c, err = net.DialTimeout("tcp4", net.JoinHostPort(vip.String(), strconv.Itoa(int(port))), 5*time.Second)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	ap, err := netip.ParseAddrPort(strings.Fields(line + " ")[0])
	if err != nil {
		t.Fatalf("bad echo %q", line)
	}
	return conn{c, ap.Addr()}
}

// closeRST closes c with RST (SO_LINGER 0): the IPVS connection entry
// leaves the active count at once.
func closeRST(c conn) {
	if tc, ok := c.c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.c.Close()
}

// schedRig programs one service with endpoints of the given weights
// under scheduler sched.
func schedRig(t *testing.T, sched string, clients int, weights ...int) (*topology.Testbed, *Proxier, []workload.Service) {
	t.Helper()
	svcs := genServices(1, len(weights))
	for i, w := range weights {
		svcs[0].Endpoints[i].Weight = w
	}
	tb := testbed(t, clients, svcs)
	cfg := testCfg
	cfg.Scheduler = sched
	p := New(cfg, tb.Node)
	if _, err := p.Sync(context.Background(), svcs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Cleanup(context.Background()) })
	return tb, p, svcs
}

// sequence makes n sequential connections from client ns, each closed
// before the next, and returns the endpoint index of each.
func sequence(t *testing.T, ns *topology.Netns, svc workload.Service, n int) []int {
	t.Helper()
	idx := map[netip.Addr]int{}
	for i, e := range svc.Endpoints {
		idx[e.IP] = i
	}
	out := make([]int, n)
	for i := range out {
		c := dial(t, ns, svc.ClusterIP, svc.Ports[0].Port)
		j, ok := idx[c.landed]
		if !ok {
			t.Fatalf("connection landed on %s, not an endpoint", c.landed)
		}
		out[i] = j
		closeRST(c)
	}
	return out
}

// TestKernelSchedulers checks each scheduler's choices on a known sequence
// against its definition in net/netfilter/ipvs/ip_vs_<name>.c.
func TestKernelSchedulers(t *testing.T) {
	if requireIPVS(t) {
		return
	}

	// ip_vs_rr.c: strict rotation over the real servers.
	t.Run("rr", func(t *testing.T) {
		tb, _, svcs := schedRig(t, "rr", 1, 1, 1, 1)
		seq := sequence(t, tb.Clients[0], svcs[0], 30)
		for i := 3; i < len(seq); i++ {
			if seq[i] != seq[i-3] || seq[i] == seq[i-1] {
				t.Fatalf("rr sequence %v is not a strict rotation", seq)
			}
		}
	})
	// ip_vs_wrr.c: per cycle of sum(weights) connections, each real
	// server gets exactly its weight.
	t.Run("wrr", func(t *testing.T) {
		tb, _, svcs := schedRig(t, "wrr", 1, 1, 2, 3)
		seq := sequence(t, tb.Clients[0], svcs[0], 60)
		for c := 0; c < 10; c++ {
			var got [3]int
			for _, j := range seq[6*c : 6*c+6] {
				got[j]++
			}
			if got != [3]int{1, 2, 3} {
				t.Fatalf("wrr cycle %d: %v, want [1 2 3] (sequence %v)", c, got, seq)
			}
		}
	})
	// ip_vs_sh.c: the source address alone picks the real server.
	t.Run("sh", func(t *testing.T) {
		tb, _, svcs := schedRig(t, "sh", 4, 1, 1, 1)
		for i, cl := range tb.Clients {
			seq := sequence(t, cl, svcs[0], 10)
			for _, j := range seq {
				if j != seq[0] {
					t.Fatalf("sh: client %d (%s) reached endpoints %v", i, tb.ClientAddrs[i], seq)
				}
			}
		}
	})
	// ip_vs_lc.c: each new connection goes to the real server with the
	// fewest active connections; ip_vs_wlc.c: fewest per unit of weight.
	for _, tc := range []struct {
		sched   string
		weights []int
		open    int
		want    []int
	}{
		{"lc", []int{1, 1, 1}, 9, []int{3, 3, 3}},
		{"wlc", []int{1, 2, 3}, 12, []int{2, 4, 6}},
	} {
		t.Run(tc.sched, func(t *testing.T) {
			tb, _, svcs := schedRig(t, tc.sched, 1, tc.weights...)
			idx := map[netip.Addr]int{}
			for i, e := range svcs[0].Endpoints {
				idx[e.IP] = i
			}
			got := make([]int, len(tc.weights))
			var held []conn
			for i := 0; i < tc.open; i++ {
				c := dial(t, tb.Clients[0], svcs[0].ClusterIP, 80)
				held = append(held, c)
				got[idx[c.landed]]++
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("%s: %d held connections spread %v, want %v", tc.sched, tc.open, got, tc.want)
			}
			// Close every connection on endpoint 0: the next ones go there.
			var keep []conn
			for _, c := range held {
				if idx[c.landed] == 0 {
					closeRST(c)
				} else {
					keep = append(keep, c)
				}
			}
			time.Sleep(100 * time.Millisecond)
			c := dial(t, tb.Clients[0], svcs[0].ClusterIP, 80)
			if idx[c.landed] != 0 {
				t.Errorf("%s: after freeing endpoint 0 the next connection went to %d", tc.sched, idx[c.landed])
			}
			for _, c := range append(keep, c) {
				closeRST(c)
			}
		})
	}
	// ip_vs_mh.c (Maglev hashing): each source keeps one real server, and
	// removing one real server moves only (about) the sources it served.
	t.Run("mh", func(t *testing.T) {
		tb, p, svcs := schedRig(t, "mh", 12, 1, 1, 1, 1)
		before := make([]int, len(tb.Clients))
		for i, cl := range tb.Clients {
			seq := sequence(t, cl, svcs[0], 3)
			if seq[0] != seq[1] || seq[1] != seq[2] {
				t.Fatalf("mh: client %d reached %v", i, seq)
			}
			before[i] = seq[0]
		}
		removed := svcs[0].Endpoints[3].IP
		svcs[0].Endpoints = svcs[0].Endpoints[:3]
		if _, err := p.Sync(context.Background(), svcs); err != nil {
			t.Fatal(err)
		}
		kept, stayed := 0, 0
		for i, cl := range tb.Clients {
			after := sequence(t, cl, svcs[0], 1)[0]
			if before[i] == 3 {
				continue
			}
			kept++
			if after == before[i] {
				stayed++
			}
		}
		t.Logf("mh: %d of %d sources not on %s kept their real server", stayed, kept, removed)
		if kept > 0 && stayed*4 < kept*3 {
			t.Errorf("mh: only %d of %d unaffected sources kept their real server", stayed, kept)
		}
	})
}

// TestKernelProbe: without IP_VS the probe names --kernel uml; with it,
// every scheduler the guest loaded is listed.
func TestKernelProbe(t *testing.T) {
	testenv.RequireKernel(t)
	ns := testenv.NewNetns(t, "ipvsprobe")
	ok, why := Probe(context.Background(), ns)
	t.Logf("probe: %v %s", ok, why)
	if _, err := os.Stat("/proc/thread-self/net/ip_vs"); err != nil {
		if ok || !strings.Contains(why, "has no IP_VS") || !strings.Contains(why, "--kernel uml") {
			t.Errorf("probe without IP_VS: %v %q", ok, why)
		}
		return
	}
	if !ok || !strings.Contains(why, "schedulers "+strings.Join(Schedulers, " ")) {
		t.Errorf("probe with IP_VS and every scheduler module loaded: %v %q", ok, why)
	}
}

// TestKernelBatchMatchesPerObject: batched requests program exactly what
// moby/ipvs's one-request-per-object calls program, and a failure inside a
// batch is reported with the object that failed.
func TestKernelBatchMatchesPerObject(t *testing.T) {
	if requireIPVS(t) {
		return
	}
	ctx := context.Background()
	svcs := genServices(300, 3)
	svcs[3].Endpoints[1].Weight = 7
	cfg := testCfg
	cfg.Scheduler, cfg.SessionAffinity, cfg.AffinityTimeout = "wlc", true, 30*time.Second
	var dumps [2]string
	for i, perObject := range []bool{false, true} {
		ns := testenv.NewNetns(t, "ipvsb"+strconv.Itoa(i))
		p := New(cfg, ns)
		p.perObject = perObject
		if _, err := p.Sync(ctx, svcs); err != nil {
			t.Fatal(err)
		}
		out, err := ns.Run(ctx, nil, "ipvsadm", "-S", "-n")
		if err != nil {
			t.Fatal(err)
		}
		addrs, _ := ns.Run(ctx, nil, "ip", "-4", "-o", "addr", "show", "dev", DummyDevice)
		dumps[i] = string(out) + strings.ReplaceAll(string(addrs), "\n", "")
		if perObject {
			break
		}
		// A duplicate in the middle of a batch: the error names it.
		rs, _ := Render(cfg, svcs[:1])
		dup := Op{Kind: OpNewService, Service: toService(&rs.Virtual[0])}
		okOp := Op{Kind: OpNewService, Service: toService(&VirtualServer{Address: netip.MustParseAddr("198.18.99.1"), Protocol: "TCP", Port: 80, Scheduler: "rr"})}
		_, err = Apply(p.h, []Op{okOp, dup})
		if err == nil || !strings.Contains(err.Error(), "new-service TCP/198.18.0.1:80") || !strings.Contains(err.Error(), "exists") {
			t.Errorf("duplicate in batch: %v", err)
		}
	}
	if !strings.Contains(dumps[0], "198.19.0.11:8080 -m -w 7") || strings.Count(dumps[0], "-A -t") != 300 {
		t.Errorf("batched table:\n%.400s", dumps[0])
	}
	// The batch test's extra virtual server is the only difference.
	if d := strings.Replace(dumps[0], "-A -t 198.18.99.1:80 -s rr\n", "", 1); d != dumps[1] {
		t.Errorf("batched and per-object tables differ:\n%.500s\n---\n%.500s", d, dumps[1])
	}
}

// TestKernelGracefulTermination: on the real kernel, a removed real server
// holding a connection stays at weight 0 (its connection keeps working,
// new connections go elsewhere) and is deleted by GracefulCheck only once
// its connections are gone, as kube-proxy's graceful termination.
func TestKernelGracefulTermination(t *testing.T) {
	if requireIPVS(t) {
		return
	}
	svcs := genServices(1, 2)
	tb := testbed(t, 1, svcs)
	p := New(testCfg, tb.Node)
	if _, err := p.Sync(context.Background(), svcs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Cleanup(context.Background()) })
	s := svcs[0]
	a, b := s.Endpoints[0].IP, s.Endpoints[1].IP
	var held conn
	for i := 0; i < 2; i++ {
		c := dial(t, tb.Clients[0], s.ClusterIP, 80)
		if c.landed == a {
			held = c
			continue
		}
		defer closeRST(c)
	}
	if !held.landed.IsValid() {
		t.Fatalf("rr sent neither of two connections to %s", a)
	}
	removed := s
	removed.Endpoints = s.Endpoints[1:]
	if _, err := p.Sync(context.Background(), []workload.Service{removed}); err != nil {
		t.Fatal(err)
	}
	if got := p.Terminating(); len(got) != 1 || !strings.Contains(got[0], a.String()) {
		t.Fatalf("Terminating() = %q, want the real server %s", got, a)
	}
	for i, j := range sequence(t, tb.Clients[0], removed, 4) {
		if j != 0 {
			t.Errorf("new connection %d landed on endpoint %d, want %s (the removed one has weight 0)", i, j, b)
		}
	}
	// The held connection still works: no RST or EOF, only our timeout.
	_ = held.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := held.c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("held connection to the terminating %s: %v, want it open (read timeout)", a, err)
	}
	if n, err := p.GracefulCheck(); n != 0 || err != nil {
		t.Errorf("GracefulCheck with a held connection: deleted %d, %v; want 0", n, err)
	}
	closeRST(held)
	// The closed connection stays an inactive entry (IPVS CLOSE state, 10 s)
	// before the real server counts as drained; poll, bounded.
	deadline := time.Now().Add(90 * time.Second)
	for len(p.Terminating()) > 0 && time.Now().Before(deadline) {
		if _, err := p.GracefulCheck(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
	}
	if got := p.Terminating(); len(got) != 0 {
		t.Fatalf("still terminating 90 s after its last connection closed: %q", got)
	}
	dests, err := p.h.GetDestinations(toService(&VirtualServer{Address: s.ClusterIP, Protocol: "TCP", Port: 80, Scheduler: "rr"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(dests) != 1 || addrOf(dests[0].Address) != b {
		t.Errorf("real servers after draining: %d, want only %s", len(dests), b)
	}
}

// TestKernelSchedulerPortFlags: from one client address, sh and mh send
// every connection to one endpoint; with sh-port / mh-port the source port
// enters the hash and the connections spread (ip_vs_sh.c, ip_vs_mh.c
// IP_VS_SVC_F_SCHED_*_PORT).
func TestKernelSchedulerPortFlags(t *testing.T) {
	if requireIPVS(t) {
		return
	}
	svcs := genServices(1, 4)
	tb := testbed(t, 1, svcs)
	for _, c := range []struct {
		sched string
		flags []string
	}{{"sh", nil}, {"sh", []string{"sh-port"}}, {"mh", nil}, {"mh", []string{"mh-port"}}} {
		cfg := testCfg
		cfg.Scheduler, cfg.SchedulerFlags = c.sched, c.flags
		p := New(cfg, tb.Node)
		if _, err := p.Sync(context.Background(), svcs); err != nil {
			t.Fatal(err)
		}
		seen := map[int]int{}
		for _, j := range sequence(t, tb.Clients[0], svcs[0], 40) {
			seen[j]++
		}
		if err := p.Cleanup(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(c.flags) == 0 && len(seen) != 1 {
			t.Errorf("%s: one client reached %d endpoints %v, want 1 (source hash)", c.sched, len(seen), seen)
		}
		if len(c.flags) > 0 && len(seen) < 2 {
			t.Errorf("%s %v: one client reached %d endpoint(s) %v over 40 connections, want the port hash to spread them", c.sched, c.flags, len(seen), seen)
		}
	}
}
