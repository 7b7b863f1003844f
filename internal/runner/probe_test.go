//go:build linux

package runner

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
)

// dialEchoFromPort connects from the calling namespace's source port
// sport to dst:port and reads the echo line (the endpoint that answered);
// the socket is closed with SO_LINGER 0 (RST), so the port is free again
// at once.
func dialEchoFromPort(sport int, dst netip.Addr, port uint16, timeout time.Duration) (netip.AddrPort, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{Port: sport}, Timeout: timeout}
	c, err := d.Dial("tcp4", netip.AddrPortFrom(dst, port).String())
	if err != nil {
		return netip.AddrPort{}, err
	}
	defer func() {
		_ = c.(*net.TCPConn).SetLinger(0)
		c.Close()
	}()
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("read echo: %w", err)
	}
	return netip.ParseAddrPort(strings.Fields(line + " ")[0])
}

// untranslated lists node's TCP conntrack entries to dst whose reply
// was never translated (reply source = original destination).
func untranslated(t *testing.T, node *topology.Netns, dst netip.AddrPort) []string {
	t.Helper()
	h, err := node.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	flows, err := h.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range flows {
		if f.Forward.Protocol == unix.IPPROTO_TCP && f.Forward.DstIP.Equal(net.IP(dst.Addr().AsSlice())) && f.Forward.DstPort == dst.Port() &&
			f.Reverse.SrcIP.Equal(f.Forward.DstIP) && f.Reverse.SrcPort == f.Forward.DstPort {
			out = append(out, f.String())
		}
	}
	return out
}

// TestDataPlaneProbeLeavesNoUntranslatedEntries: the data-plane probe of a
// kube-proxy sync.full dials the probed services before the node has their
// rules. With conntrack and NAT hooks already active in the node (a
// previous row's leftovers; here an empty nft nat chain and a ct rule), every
// failed probe leaves an untranslated SYN_SENT entry there for 120 s
// (nf_conntrack_tcp_timeout_syn_sent), and a later connection that reuses
// its 4-tuple (the client's ephemeral ports wrap within 3000 connections
// to one service) is not DNATed: refused or timed out, as in
// nftables (kube-proxy) at 10k services (issue 13). After the probe, no
// such entry is left, and a connection from the source port of every
// failed probe lands on the service's endpoint.
func TestDataPlaneProbeLeavesNoUntranslatedEntries(t *testing.T) {
	testenv.RequireKernel(t, "nft")
	ctx := context.Background()
	sc, err := scenarios.Parse([]byte("modes: [nftables]\nservices: {count: 2, endpoints: {count: 1}}\n"), "probe.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tb, svcs, teardown := echoTestbed(t, ctx, sc)
	defer teardown()
	// NAT hooks (null bindings for what no rule translates) and conntrack
	// (a ct expression) active in the node, before any service rule.
	if out, err := tb.Node.Run(ctx, []byte("table ip pbprobetest { chain pre { type nat hook prerouting priority -100; }; chain pbct { type filter hook forward priority 0; ct state invalid drop; }; }\n"), "nft", "-f", "-"); err != nil {
		t.Fatalf("nft nat and ct chains: %v: %s", err, out)
	}

	e := newEnv(tb)
	var mu sync.Mutex
	next := 41000
	failed := map[netip.AddrPort][]int{} // probed service -> source ports of its failed probes
	e.dial = func(dst netip.Addr, port uint16, timeout time.Duration) (netip.AddrPort, time.Time, error) {
		mu.Lock()
		sport := next
		next++
		mu.Unlock()
		start := time.Now()
		landed, err := dialEchoFromPort(sport, dst, port, timeout)
		if err != nil {
			mu.Lock()
			failed[netip.AddrPortFrom(dst, port)] = append(failed[netip.AddrPortFrom(dst, port)], sport)
			mu.Unlock()
		}
		return landed, start, err
	}
	type probeOut struct {
		probed int
		err    error
	}
	done := make(chan probeOut, 1)
	go func() {
		_, n, err := dataPlaneProbe(e)(ctx, svcs)
		done <- probeOut{n, err}
	}()
	// A few failed probes per service, then the rules.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		enough := len(failed) == len(svcs) && len(failed[netip.AddrPortFrom(svcs[0].ClusterIP, 80)]) >= 3 && len(failed[netip.AddrPortFrom(svcs[1].ClusterIP, 80)]) >= 3
		mu.Unlock()
		if enough {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("probes without rules: failed %v, want 3 per service", failed)
		}
	}
	// Else the test would show nothing: the old probe left these behind.
	if left := untranslated(t, tb.Node, netip.AddrPortFrom(svcs[0].ClusterIP, 80)); len(left) == 0 {
		t.Fatalf("failed probes left no untranslated conntrack entry in the node: conntrack not active there")
	}
	m, err := modes.Lookup("nftables")
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.New(sc, tb.Node)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Cleanup(context.Background())
	if _, err := p.Sync(ctx, svcs); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.probed != len(svcs) {
		t.Fatalf("probe: %d probed, %v", r.probed, r.err)
	}

	for _, s := range svcs {
		dst := netip.AddrPortFrom(s.ClusterIP, 80)
		if left := untranslated(t, tb.Node, dst); len(left) > 0 {
			t.Errorf("%v: %d untranslated conntrack entries left in the node after the probe, e.g. %s", dst, len(left), left[0])
		}
		var bad []string
		for _, sport := range failed[dst] {
			var landed netip.AddrPort
			err := tb.Clients[0].Do(func() error {
				var err error
				landed, err = dialEchoFromPort(sport, dst.Addr(), dst.Port(), 500*time.Millisecond)
				return err
			})
			if err != nil || !s.HasReadyEndpoint(landed.Addr()) {
				bad = append(bad, fmt.Sprintf("port %d: %v (landed %v)", sport, err, landed))
			}
		}
		if len(bad) > 0 {
			t.Errorf("%v: %d of %d connections from the source ports of failed probes did not reach an endpoint: %s",
				dst, len(bad), len(failed[dst]), strings.Join(bad, "; "))
		}
	}
}
