//go:build linux

package kerneltime_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/lib/kerneltime"
	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/topology"
)

// testbed is client ── node ── backend, each a namespace joined by veth
// pairs, with a DNAT rule in the node from vip:80 to the backend's 8080.
type testbed struct {
	client, node, backend *topology.Netns
	vip, backendAddr      netip.AddrPort
}

func newTestbed(t testing.TB) *testbed {
	t.Helper()
	tb := &testbed{client: testenv.NewNetns(t, "ktc"), node: testenv.NewNetns(t, "ktn"), backend: testenv.NewNetns(t, "ktb"),
		vip: netip.MustParseAddrPort("198.18.9.9:80"), backendAddr: netip.MustParseAddrPort("198.18.250.6:8080")}
	ctx := context.Background()
	for _, l := range []struct {
		a, b         *topology.Netns
		an           string
		addrA, addrB string
	}{{tb.node, tb.client, "ktc", "198.18.250.1", "198.18.250.2"}, {tb.node, tb.backend, "ktb", "198.18.250.5", "198.18.250.6"}} {
		name := l.an + strings.TrimPrefix(strings.SplitN(l.b.Name, "-", 3)[1], "pb-")
		if err := topology.Veth(l.a, name, l.b, "eth0", netip.MustParseAddr(l.addrA), netip.MustParseAddr(l.addrB)); err != nil {
			t.Fatal(err)
		}
	}
	run := func(ns *topology.Netns, args ...string) {
		if out, err := ns.Run(ctx, nil, args[0], args[1:]...); err != nil {
			t.Fatalf("%s: %v: %v %s", ns.Name, args, err, out)
		}
	}
	run(tb.node, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	run(tb.client, "ip", "route", "add", "198.18.0.0/16", "via", "198.18.250.1")
	run(tb.backend, "ip", "route", "add", "198.18.250.0/30", "via", "198.18.250.5")
	run(tb.node, "iptables-legacy", "-w", "5", "-t", "nat", "-A", "PREROUTING", "-d", tb.vip.Addr().String(), "-p", "tcp", "--dport", "80",
		"-j", "DNAT", "--to-destination", tb.backendAddr.String())
	return tb
}

// inode is ns's nsfs inode.
func inode(t testing.TB, ns *topology.Netns) uint64 {
	ino, err := kerneltime.NetnsInode(int(ns.Handle()))
	if err != nil {
		t.Fatal(err)
	}
	return ino
}

// connect makes n connections from the client to the VIP through an
// accepting listener in the backend.
func (tb *testbed) connect(t testing.TB, n int) {
	tb.connectTimed(t, n)
}

// connectTimed is connect, returning each connection's connect(2) time.
func (tb *testbed) connectTimed(t testing.TB, n int) []time.Duration {
	var ds []time.Duration
	var ln net.Listener
	if err := tb.backend.Do(func() (err error) { ln, err = net.Listen("tcp", tb.backendAddr.String()); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	if err := tb.client.Do(func() error {
		for i := 0; i < n; i++ {
			t0 := time.Now()
			c, err := net.DialTimeout("tcp", tb.vip.String(), 2*time.Second)
			if err != nil {
				return err
			}
			ds = append(ds, time.Since(t0))
			c.Close()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return ds
}

// TestTimesSYNThroughDNAT: every connection's SYN is timed once in the
// node namespace, with the ClusterIP as it arrived and the endpoint the
// route lookup was for (after DNAT), in a plausible interval; the
// client's namespace, not in the filter, gives no sample.
func TestTimesSYNThroughDNAT(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy", "ip", "sysctl")
	tb := newTestbed(t)
	for _, kind := range []string{kerneltime.KindBTF, kerneltime.KindRaw} {
		t.Run(kind, func(t *testing.T) { timesSYNThroughDNAT(t, tb, kind) })
	}
}

func timesSYNThroughDNAT(t *testing.T, tb *testbed, kind string) {
	tm, err := kerneltime.Start(kerneltime.Config{Netns: []uint64{inode(t, tb.node)}, Kind: kind, SelfTime: true})
	if err != nil {
		testenv.Skip(t, kerneltime.Reason(err))
	}
	defer tm.Close()
	if tm.Kind() != kind {
		t.Errorf("Kind() = %q, want %q", tm.Kind(), kind)
	}
	t0 := kerneltime.MonotonicNs()
	const conns = 40
	tb.connect(t, conns)
	time.Sleep(50 * time.Millisecond) // the last FIN's ACK
	ss, err := tm.Drain()
	if err != nil {
		t.Fatal(err)
	}
	t1 := kerneltime.MonotonicNs()
	syn, other, replies := 0, 0, 0
	for _, s := range ss {
		if s.StartNs < t0 || s.StartNs > t1 || s.Ns <= 0 || s.Ns > int64(10*time.Millisecond) {
			t.Errorf("sample %+v outside [%d, %d] or with an implausible time", s, t0, t1)
		}
		switch {
		case s.Dst == tb.vip && s.SYN():
			syn++
			if s.Routed != tb.backendAddr.Addr() {
				t.Errorf("SYN %+v routed to %s, want the DNAT target %s", s, s.Routed, tb.backendAddr.Addr())
			}
		case s.Dst == tb.vip:
			other++
		case s.Src == tb.backendAddr:
			replies++ // the backend's answers enter the node too
		default:
			t.Errorf("sample %+v of neither the connections nor their replies", s)
		}
	}
	if syn != conns || other < conns || replies < conns {
		t.Errorf("%d SYNs, %d other packets to the VIP, %d replies; want %d SYNs and at least as many of each other kind", syn, other, replies, conns)
	}
	if lost, err := tm.Lost(); err != nil || lost != 0 {
		t.Errorf("Lost = %d, %v", lost, err)
	}
	if st, err := tm.SelfTime(); err != nil || st.EntryRuns < uint64(3*conns) || st.ExitRuns < uint64(conns) || st.EntryNs == 0 || st.ExitNs == 0 {
		t.Errorf("SelfTime = %+v, %v; want the programs' runs counted", st, err)
	}
	// Drained: a second drain finds nothing new.
	if again, err := tm.Drain(); err != nil || len(again) != 0 {
		t.Errorf("second Drain = %d samples, %v", len(again), err)
	}
}

// nobodyEnv makes the test binary run TestStartAsNobody's body.
const nobodyEnv = "PROXYBENCH_KERNELTIME_NOBODY"

// TestStartAsNobody: as an unprivileged user (nobody, uid 65534) Start
// fails and its reason says it is not root. The test runs a copy of its
// own binary as nobody.
func TestStartAsNobody(t *testing.T) {
	if os.Getenv(nobodyEnv) == "1" {
		_, err := kerneltime.Start(kerneltime.Config{Netns: []uint64{1}})
		if err == nil {
			fmt.Println("REASON: started")
			return
		}
		fmt.Println("REASON: " + kerneltime.Reason(err))
		return
	}
	testenv.RequireKernel(t)
	dir, err := os.MkdirTemp("", "pb-kerneltime-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "kerneltime.test")
	src, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestStartAsNobody$", "-test.count=1")
	cmd.Env = append(os.Environ(), nobodyEnv+"=1")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	var reason string
	for _, l := range strings.Split(string(out), "\n") {
		if r, ok := strings.CutPrefix(l, "REASON: "); ok {
			reason = r
		}
	}
	if !strings.HasPrefix(reason, "not root: BPF programs need CAP_BPF and CAP_PERFMON (uid 65534") {
		t.Errorf("as nobody the reason is %q, want it to say not root\n%s", reason, out)
	}
}

// BenchmarkConnectOverhead is the timer's cost on the fastest path it
// sits on: connects from a client through a node with one DNAT rule to a
// backend (three namespaces, the worst case for the relative cost: no
// rule walk to hide it), in blocks of 200 connects with the timer
// attached and detached in turn. It reports the median connect time of
// both (the median of the blocks' medians) and connect-overhead-%, the
// median over block pairs of on/off, which a loaded machine's noise
// swamps; and, load-independent, what the programs themselves ran
// (Config.SelfTime) per run of each and per connection (every packet of
// the machine runs the entry program, every route lookup the exit one):
// prog-ns/conn, and prog-%-of-connect, that over the timer-off connect
// median. Each b.N is one pair.
func BenchmarkConnectOverhead(b *testing.B) {
	testenv.RequireKernel(b, "iptables-legacy", "ip", "sysctl")
	tb := newTestbed(b)
	tb.connect(b, 200) // warm up: conntrack and the listener
	median := func(xs []float64) float64 {
		s := append([]float64(nil), xs...)
		slices.Sort(s)
		return s[len(s)/2]
	}
	var self kerneltime.SelfTime
	conns := 0
	block := func(on bool) float64 {
		var tm *kerneltime.Timer
		if on {
			var err error
			tm, err = kerneltime.Start(kerneltime.Config{Netns: []uint64{inode(b, tb.node)}, SelfTime: true, Kind: os.Getenv("PROXYBENCH_KERNELTIME_KIND")})
			if err != nil {
				b.Skip(kerneltime.Reason(err))
			}
			defer tm.Close()
		}
		var xs []float64
		for _, d := range tb.connectTimed(b, 200) {
			xs = append(xs, float64(d))
		}
		if tm != nil {
			st, err := tm.SelfTime()
			if err != nil {
				b.Fatal(err)
			}
			self.EntryNs, self.EntryRuns = self.EntryNs+st.EntryNs, self.EntryRuns+st.EntryRuns
			self.ExitNs, self.ExitRuns = self.ExitNs+st.ExitNs, self.ExitRuns+st.ExitRuns
			conns += len(xs)
		}
		return median(xs)
	}
	var on, off, ratio []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var a, c float64
		if i%2 == 0 {
			a = block(true)
			c = block(false)
		} else {
			c = block(false)
			a = block(true)
		}
		on, off, ratio = append(on, a), append(off, c), append(ratio, a/c)
	}
	b.StopTimer()
	b.ReportMetric(median(on)/1e3, "connect-on-µs")
	b.ReportMetric(median(off)/1e3, "connect-off-µs")
	b.ReportMetric(100*(median(ratio)-1), "connect-overhead-%")
	if conns > 0 && self.EntryRuns > 0 && self.ExitRuns > 0 {
		perConn := float64(self.EntryNs+self.ExitNs) / float64(conns)
		b.ReportMetric(float64(self.EntryNs)/float64(self.EntryRuns), "entry-ns/run")
		b.ReportMetric(float64(self.ExitNs)/float64(self.ExitRuns), "exit-ns/run")
		b.ReportMetric(float64(self.EntryRuns+self.ExitRuns)/float64(conns), "runs/conn")
		b.ReportMetric(perConn, "prog-ns/conn")
		b.ReportMetric(100*perConn/median(off), "prog-%-of-connect")
	}
}
