//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"gonum.org/v1/gonum/stat"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
)

// connReusePhase makes connReuse.connections connections, one at a time,
// from client pod 0 to the first service, with the client namespace's
// ephemeral range narrowed to connReuse.ports ports and tcp_tw_reuse=1,
// each closed by the client with FIN (TIME_WAIT on the client); a connect
// finding every port in TIME_WAIT younger than tcp_tw_reuse's 1 s waits
// for one to age (so the rate is about ports per second). A mode whose
// connections go through IPVS (Mode.VSSysctls: ipvs, also as a
// kube-proxy row) runs one pass per connReuse.reuseModes value of
// net.ipv4.vs.conn_reuse_mode, which overrides node.sysctls' for the pass
// (every node namespace); the pass also applies node.sysctls' other IPVS
// keys (expire_nodest_conn, expire_quiescent_template: ip_vs may have
// been loaded after the testbed was built) and records them read back;
// afterwards conn_reuse_mode goes back to node.sysctls' value. A
// kube-proxy row's pass keeps the other keys as kube-proxy set them
// (passSysctls). Other modes run once. The client namespace's settings are restored afterwards.
func connReusePhase(ctx context.Context, r *Row) (out []reports.ConnReusePass, err error) {
	sc, e, m, services, prog := r.Sc, r.Env, r.Mode, r.Services, r.Progress()
	cr := sc.ConnReuse
	lo := 20000
	if err := e.clientSysctl("net/ipv4/ip_local_port_range", fmt.Sprintf("%d %d", lo, lo+cr.Ports-1)); err != nil {
		return nil, err
	}
	if err := e.clientSysctl("net/ipv4/tcp_tw_reuse", "1"); err != nil {
		return nil, err
	}
	defer func() {
		rerr := errors.Join(e.clientSysctl("net/ipv4/ip_local_port_range", "1024 65535"), e.clientSysctl("net/ipv4/tcp_tw_reuse", "2"))
		if rerr != nil && err == nil {
			err = fmt.Errorf("restore client sysctls: %w", rerr)
		}
	}()
	modes := []int{-1}
	if m.VSSysctls {
		modes = cr.ReuseModes
	}
	svc := services[0]
	for _, mode := range modes {
		// The node's IPVS sysctls of node.sysctls (ip_vs is loaded now),
		// with the pass's conn_reuse_mode; read back into the pass.
		var sysctls map[string]string
		if mode >= 0 {
			var err error
			if sysctls, err = e.nodeSysctls(sc, "net.ipv4.vs.", passSysctls(sc, m, e, mode)); err != nil {
				return out, err
			}
		}
		if err := e.flush(0); err != nil {
			return out, err
		}
		prog.Start(fmt.Sprintf("%s: %d FIN-closed connections from %d source ports (conn_reuse_mode %d)", m.Name, cr.Connections, cr.Ports, mode), cr.Connections)
		p := reports.ConnReusePass{ReuseMode: mode, Kernel: e.kernel(), Connections: cr.Connections, Ports: cr.Ports, Sysctls: sysctls}
		var lats []int64
		eps := map[netip.Addr]bool{}
		lastEP := map[int]netip.Addr{} // source port -> endpoint of its last connection
		err := e.inClient(func() error {
			for i := 0; i < cr.Connections; i++ {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				src, landed, lat, err := e.dialFIN(svc.ClusterIP, svc.Ports[0].Port, 5*time.Second)
				// Every port in TIME_WAIT younger than 1 s (tcp_tw_reuse's
				// bound): wait for one to age, then try again.
				for wait := 0; errors.Is(err, unix.EADDRNOTAVAIL) && wait < 250; wait++ {
					time.Sleep(20 * time.Millisecond)
					src, landed, lat, err = e.dialFIN(svc.ClusterIP, svc.Ports[0].Port, 5*time.Second)
				}
				prog.Add(1)
				if err != nil {
					p.Errors++
					if len(p.ErrorSamples) < 3 {
						p.ErrorSamples = append(p.ErrorSamples, err.Error())
					}
					continue
				}
				if src != 0 {
					if prev, seen := lastEP[src]; seen {
						p.Reused++
						if prev == landed.Addr() {
							p.ReusedSameEndpoint++
						}
					}
					lastEP[src] = landed.Addr()
				}
				eps[landed.Addr()] = true
				if lat > time.Second {
					p.Slow++
				}
				lats = append(lats, int64(lat))
			}
			return nil
		})
		prog.Done()
		if err != nil {
			return out, err
		}
		if mode >= 0 {
			// Back to node.sysctls' value for the next pass or mode.
			if _, err := e.nodeSysctls(sc, reuseKey, nil); err != nil {
				return out, err
			}
		}
		if n := len(lats); n > 0 {
			xs := make([]float64, n)
			for i, l := range lats {
				xs[i] = float64(l)
			}
			slices.Sort(xs)
			p.P50Ns = int64(stat.Quantile(0.5, stat.Empirical, xs, nil))
			p.P99Ns = int64(stat.Quantile(0.99, stat.Empirical, xs, nil))
			p.MaxNs = int64(xs[n-1])
		}
		p.Endpoints = len(eps)
		out = append(out, p)
	}
	return out, nil
}

const reuseKey = "net.ipv4.vs.conn_reuse_mode"

// passSysctls is a pass's override of node.sysctls: conn_reuse_mode =
// mode and, on a kube-proxy row, node.sysctls' other IPVS keys at what
// node0 holds now, so that the pass keeps what kube-proxy's IPVS mode
// set at its start (expire_nodest_conn=1, expire_quiescent_template=1;
// conn_reuse_mode 0 on kernels before 5.9, left as-is from 5.9 on:
// pkg/proxy/ipvs/proxier.go NewProxier) and records it read back. A
// kube-proxy row needs no restart for a pass: kube-proxy reads none of
// them after its start, and the kernel reads conn_reuse_mode per
// connection.
func passSysctls(sc *scenarios.Scenario, m proxymodes.Mode, e *env, mode int) map[string]string {
	ov := map[string]string{reuseKey: fmt.Sprint(mode)}
	if m.Base == "" || e.nodeSysctl == nil {
		return ov
	}
	for k := range sc.Node.Sysctls {
		if strings.HasPrefix(k, "net.ipv4.vs.") && k != reuseKey {
			if v, err := e.nodeSysctl(k); err == nil {
				ov[k] = v
			}
		}
	}
	return ov
}

// connReusePhaseV is the conn-reuse phase as a Phase.
var connReusePhaseV = Phase{
	PhaseRule: scenarios.PhaseRule{Name: "connReuse", Field: "connReuse", Scope: scenarios.ScopeRow, Rules: true, TCP: true,
		Wants: func(s *scenarios.Scenario) bool { return s.ConnReuse != nil }},
	Report: reports.ConnReuseReport,
	Run: func(ctx context.Context, r *Row) (err error) {
		if r.Result.ConnReuse, err = connReusePhase(ctx, r); err != nil {
			return fmt.Errorf("conn reuse: %w", err)
		}
		return nil
	},
}
