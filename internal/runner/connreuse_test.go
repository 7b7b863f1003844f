//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/ipvs"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// connReuseFake is the connReuse phase's client pod and nodes: source
// ports are taken in turn from the ephemeral range the phase wrote, a
// connection lands round robin on the service's endpoints (the count
// starts over at every flush: a pass), except that with
// conn_reuse_mode 0 a reused source port lands where its last
// connection did (IPVS reuses the connection entry), and with 1 a reused
// port's connect takes 1.5 s (the pre-5.9 SYN drop and retransmit).
type connReuseFake struct {
	env
	log *stepLog

	mu         sync.Mutex
	lo, hi     int
	reuseMode  string
	n, rr      int // per pass: connections made, endpoints picked
	attempts   int
	last       map[int]netip.Addr
	busy       map[int]int // connection index: EADDRNOTAVAIL answers before it succeeds
	refuse     int         // connection index refused (1-based); 0: none
	nodeErrAt  int         // the nodeErrAt-th nodeSysctls call (1-based) fails
	nodeCalls  int
	restoreErr error
	inClientIn bool
}

func newConnReuseFake(svcs []workload.Service) *connReuseFake {
	f := &connReuseFake{log: &stepLog{}, busy: map[int]int{}}
	eps := svcs[0].Endpoints
	f.env = env{
		clientSysctl: func(key, value string) error {
			f.log.add("client %s=%s", key, value)
			f.mu.Lock()
			defer f.mu.Unlock()
			if key == "net/ipv4/ip_local_port_range" {
				lo, hi, _ := strings.Cut(value, " ")
				f.lo, _ = strconv.Atoi(lo)
				f.hi, _ = strconv.Atoi(hi)
				if value == "1024 65535" {
					return f.restoreErr
				}
			}
			return nil
		},
		nodeSysctls: func(_ *scenarios.Scenario, prefix string, override map[string]string) (map[string]string, error) {
			f.log.add("node %s %v", prefix, override)
			f.mu.Lock()
			defer f.mu.Unlock()
			f.nodeCalls++
			if f.nodeCalls == f.nodeErrAt {
				return nil, errors.New("node.sysctls.net.ipv4.vs.conn_reuse_mode: permission denied")
			}
			mode := override["net.ipv4.vs.conn_reuse_mode"]
			if mode == "" {
				mode = "1" // node.sysctls' value
			}
			f.reuseMode = mode
			return map[string]string{"net.ipv4.vs.conn_reuse_mode": mode, "net.ipv4.vs.expire_nodest_conn": "0"}, nil
		},
		flush: func(n int) error {
			f.log.add("flush %d", n)
			f.mu.Lock()
			defer f.mu.Unlock()
			f.n, f.rr, f.last = 0, 0, map[int]netip.Addr{}
			return nil
		},
		inClient: func(fn func() error) error {
			f.log.add("in client")
			f.mu.Lock()
			f.inClientIn = true
			f.mu.Unlock()
			defer func() { f.mu.Lock(); f.inClientIn = false; f.mu.Unlock() }()
			return fn()
		},
		dialFIN: func(dst netip.Addr, port uint16, _ time.Duration) (int, netip.AddrPort, time.Duration, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.attempts++
			if !f.inClientIn || dst != svcs[0].ClusterIP || port != svcs[0].Ports[0].Port {
				return 0, netip.AddrPort{}, 0, fmt.Errorf("dial %s:%d outside the client or not to the first service", dst, port)
			}
			i := f.n + 1
			if f.busy[i] > 0 {
				f.busy[i]--
				return 0, netip.AddrPort{}, 0, fmt.Errorf("connect: %w", unix.EADDRNOTAVAIL)
			}
			if i == f.refuse {
				f.refuse = 0
				return 0, netip.AddrPort{}, time.Millisecond, fmt.Errorf("connect %s:%d: %w", dst, port, unix.ECONNREFUSED)
			}
			f.n++
			src := f.lo + (f.n-1)%(f.hi-f.lo+1)
			prev, reused := f.last[src]
			ep := prev
			if !reused || f.reuseMode != "0" {
				ep = eps[f.rr%len(eps)].IP
				f.rr++
			}
			f.last[src] = ep
			lat := time.Duration(f.n) * time.Millisecond
			if reused && f.reuseMode == "1" {
				lat = 1500 * time.Millisecond
			}
			return src, netip.AddrPortFrom(ep, 8080), lat, nil
		},
		kernel: func() string { return "6.6.6-fake" },
	}
	return f
}

func connReuseScenario(t *testing.T) (*scenarios.Scenario, []workload.Service) {
	return phaseScenario(t, "", "connReuse: {connections: 20, ports: 5, reuseModes: [1, 0]}\n")
}

// TestConnReusePhaseOnFake: the ipvs mode runs one pass per
// conn_reuse_mode, each between the node sysctls for the pass and back
// to node.sysctls' value, inside the client narrowed to 5 ports and
// restored afterwards; each pass's figures come from its connections:
// reuses of a source port, reuses landing on the same endpoint (all with
// mode 0, none with 1 here), the slow connects and the latency
// quantiles; a connect finding no free port is retried, not counted.
func TestConnReusePhaseOnFake(t *testing.T) {
	sc, svcs := connReuseScenario(t)
	f := newConnReuseFake(svcs)
	f.busy[7] = 2
	r := phaseRow(sc, &f.env, ipvs.Mode, newFakeProxier(), svcs)
	if err := connReusePhaseV.Run(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	wantSteps(t, f.log, []string{
		"client net/ipv4/ip_local_port_range=20000 20004", "client net/ipv4/tcp_tw_reuse=1",
		"node net.ipv4.vs. map[net.ipv4.vs.conn_reuse_mode:1]", "flush 0", "in client", "node net.ipv4.vs.conn_reuse_mode map[]",
		"node net.ipv4.vs. map[net.ipv4.vs.conn_reuse_mode:0]", "flush 0", "in client", "node net.ipv4.vs.conn_reuse_mode map[]",
		"client net/ipv4/ip_local_port_range=1024 65535", "client net/ipv4/tcp_tw_reuse=2",
	})
	if f.attempts != 2*20+2 {
		t.Errorf("%d connects, want 40 and the 2 retries of a connect without a free port", f.attempts)
	}
	out := r.Result.ConnReuse
	if len(out) != 2 {
		t.Fatalf("%d passes, want one per conn_reuse_mode", len(out))
	}
	ms := func(n int) int64 { return int64(time.Duration(n) * time.Millisecond) }
	slow := int64(1500 * time.Millisecond)
	for i, w := range []struct {
		mode, sameEP, slow int
		p50, p99, max      int64
	}{
		// mode 1: 5 new ports (1-5 ms), then 15 reuses at 1.5 s on the
		// next endpoint in turn (20 connections over 4 endpoints: never
		// the same one as 5 connections before).
		{1, 0, 15, slow, slow, slow},
		// mode 0: 1..20 ms; every reuse on its port's endpoint.
		{0, 15, 0, ms(10), ms(20), ms(20)},
	} {
		p := out[i]
		if p.ReuseMode != w.mode || p.Kernel != "6.6.6-fake" || p.Connections != 20 || p.Ports != 5 || p.Errors != 0 || p.Endpoints != 4 {
			t.Errorf("pass %d: %+v", i, p)
		}
		if p.Reused != 15 || p.ReusedSameEndpoint != w.sameEP || p.Slow != w.slow {
			t.Errorf("conn_reuse_mode %d: %d reused, %d on the same endpoint, %d slow; want 15, %d, %d", p.ReuseMode, p.Reused, p.ReusedSameEndpoint, p.Slow, w.sameEP, w.slow)
		}
		if p.P50Ns != w.p50 || p.P99Ns != w.p99 || p.MaxNs != w.max {
			t.Errorf("conn_reuse_mode %d: p50 %v p99 %v max %v, want %v %v %v", p.ReuseMode, time.Duration(p.P50Ns), time.Duration(p.P99Ns), time.Duration(p.MaxNs), time.Duration(w.p50), time.Duration(w.p99), time.Duration(w.max))
		}
		if want := fmt.Sprint(w.mode); p.Sysctls["net.ipv4.vs.conn_reuse_mode"] != want || p.Sysctls["net.ipv4.vs.expire_nodest_conn"] != "0" {
			t.Errorf("conn_reuse_mode %d: sysctls %v, want what the nodes read back", p.ReuseMode, p.Sysctls)
		}
	}

	// Another mode: one pass, no node sysctl; a refused connect is an
	// error of the pass (with its text), not a reuse.
	f = newConnReuseFake(svcs)
	f.refuse = 4
	r = phaseRow(sc, &f.env, fakeMode(), newFakeProxier(), svcs)
	if err := connReusePhaseV.Run(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	wantSteps(t, f.log, []string{
		"client net/ipv4/ip_local_port_range=20000 20004", "client net/ipv4/tcp_tw_reuse=1", "flush 0", "in client",
		"client net/ipv4/ip_local_port_range=1024 65535", "client net/ipv4/tcp_tw_reuse=2",
	})
	if len(r.Result.ConnReuse) != 1 {
		t.Fatalf("%d passes, want 1", len(r.Result.ConnReuse))
	}
	p := r.Result.ConnReuse[0]
	if p.ReuseMode != -1 || p.Sysctls != nil || p.Errors != 1 || len(p.ErrorSamples) != 1 || !strings.Contains(p.ErrorSamples[0], "connection refused") {
		t.Errorf("pass %+v: want mode -1, no sysctls, the refused connect as its one error", p)
	}
	if p.Reused != 14 || p.ReusedSameEndpoint != 0 || p.Slow != 0 || p.MaxNs != ms(19) {
		t.Errorf("%d reused, %d same endpoint, %d slow, max %v; want 19 connections over 5 ports: 14, 0, 0, 19ms", p.Reused, p.ReusedSameEndpoint, p.Slow, time.Duration(p.MaxNs))
	}
}

// TestConnReusePhaseErrors: a failed node sysctl stops the phase with
// the passes before it kept in the row and the client's sysctls
// restored; a failed restore fails a phase that otherwise finished,
// keeping its passes; a client the phase cannot enter fails it.
func TestConnReusePhaseErrors(t *testing.T) {
	sc, svcs := connReuseScenario(t)
	restored := []string{"client net/ipv4/ip_local_port_range=1024 65535", "client net/ipv4/tcp_tw_reuse=2"}

	f := newConnReuseFake(svcs)
	f.nodeErrAt = 3 // the second pass's
	r := phaseRow(sc, &f.env, ipvs.Mode, newFakeProxier(), svcs)
	err := connReusePhaseV.Run(context.Background(), r)
	if err == nil || !strings.HasPrefix(err.Error(), "conn reuse: node.sysctls.net.ipv4.vs.conn_reuse_mode: permission denied") {
		t.Fatalf("error %v, want the node sysctl's", err)
	}
	if len(r.Result.ConnReuse) != 1 || r.Result.ConnReuse[0].ReuseMode != 1 {
		t.Errorf("the row kept %+v, want the first pass", r.Result.ConnReuse)
	}
	if steps := f.log.get(); len(steps) < 2 || fmt.Sprint(steps[len(steps)-2:]) != fmt.Sprint(restored) {
		t.Errorf("steps %q: the client's sysctls were not restored last", steps)
	}

	f = newConnReuseFake(svcs)
	f.restoreErr = errors.New("read-only /proc/sys")
	r = phaseRow(sc, &f.env, ipvs.Mode, newFakeProxier(), svcs)
	if err := connReusePhaseV.Run(context.Background(), r); err == nil || !strings.Contains(err.Error(), "restore client sysctls: read-only /proc/sys") {
		t.Errorf("error %v, want the failed restore", err)
	}
	if len(r.Result.ConnReuse) != 2 {
		t.Errorf("the row kept %d passes, want both", len(r.Result.ConnReuse))
	}

	f = newConnReuseFake(svcs)
	f.inClient = func(func() error) error { return errors.New(`enter netns "pb-x-c0": bad file descriptor`) }
	r = phaseRow(sc, &f.env, fakeMode(), newFakeProxier(), svcs)
	if err := connReusePhaseV.Run(context.Background(), r); err == nil || !strings.Contains(err.Error(), "bad file descriptor") || f.attempts != 0 {
		t.Errorf("error %v after %d connects, want the client's failure before any", err, f.attempts)
	}
	if steps := f.log.get(); fmt.Sprint(steps[len(steps)-2:]) != fmt.Sprint(restored) {
		t.Errorf("steps %q: the client's sysctls were not restored", steps)
	}
}

// TestPassSysctls: a builtin row's pass overrides conn_reuse_mode alone
// (node.sysctls' other IPVS keys are written as the scenario says); a
// kube-proxy row's also holds those keys at what node0 reads now (what
// kube-proxy set at its start), so the pass writes none of them, and
// leaves out a key node0 cannot read.
func TestPassSysctls(t *testing.T) {
	sc := &scenarios.Scenario{Node: scenarios.NodeSpec{Sysctls: map[string]string{
		"net.ipv4.vs.conn_reuse_mode": "1", "net.ipv4.vs.expire_nodest_conn": "0", "net.ipv4.vs.expire_quiescent_template": "0", "net.ipv4.ip_forward": "1"}}}
	read := map[string]string{"net.ipv4.vs.expire_nodest_conn": "1"}
	e := &env{nodeSysctl: func(k string) (string, error) {
		if v, ok := read[k]; ok {
			return v, nil
		}
		return "", fs.ErrNotExist
	}}
	if got := passSysctls(sc, proxymodes.Mode{Name: "ipvs"}, e, 0); !maps.Equal(got, map[string]string{"net.ipv4.vs.conn_reuse_mode": "0"}) {
		t.Errorf("builtin: %v", got)
	}
	want := map[string]string{"net.ipv4.vs.conn_reuse_mode": "1", "net.ipv4.vs.expire_nodest_conn": "1"}
	if got := passSysctls(sc, proxymodes.Mode{Name: "ipvs (kube-proxy)", Base: "ipvs"}, e, 1); !maps.Equal(got, want) {
		t.Errorf("kube-proxy: %v, want %v", got, want)
	}
}
