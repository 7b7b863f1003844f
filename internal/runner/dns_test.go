//go:build linux

package runner

import (
	"context"
	"os"
	"testing"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/proxymodes/ipvs"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
)

// dnsScenario is a small scenarios/dns.yaml: 4 services with dns-tcp
// 53/TCP and dns 53/UDP, 3 endpoints, first (svc-00000:dns-tcp) and last
// (svc-00003:dns), with udp as traffic.udp.
func dnsScenario(t *testing.T, modes, udp string) *scenarios.Scenario {
	t.Helper()
	sc, err := scenarios.Parse([]byte(`
seed: 53
repetitions: 1
modes: `+modes+`
services:
  count: 4
  ports:
  - {name: dns-tcp, protocol: TCP, port: 53, targetPort: 5353}
  - {name: dns, protocol: UDP, port: 53, targetPort: 5353}
  endpoints: {count: 3}
traffic: {connections: 150, concurrency: 2, positions: [first, last], warmup: 5, timeout: 1s`+udp+`}
`), "dns-test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// checkDNS runs sc and checks, for every mode, that both ServicePorts of
// the DNS-like service answered every connection and exchange from an
// endpoint of the service (no error, no miss), with one row per port,
// and returns the result.
func checkDNSService(t *testing.T, sc *scenarios.Scenario, modes ...string) *reports.Result {
	t.Helper()
	res, err := Run(context.Background(), sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Modes) != len(modes) {
		t.Fatalf("%d modes ran, want %v", len(res.Modes), modes)
	}
	for _, m := range res.Modes {
		want := map[string]string{"first": "pb/svc-00000:dns-tcp", "last": "pb/svc-00003:dns"}
		for _, p := range m.Lookup {
			if p.Service != want[p.Position] || p.Errors != 0 || p.Misses != 0 || p.Latency.Count != 150 {
				t.Errorf("%s %s: service %q, %d errors %v, %d misses, %d samples; want %s answered 150 times",
					m.Mode, p.Position, p.Service, p.Errors, p.ErrorText, p.Misses, p.Latency.Count, want[p.Position])
			}
		}
		if len(m.Ports) != 2 || m.Ports[0].Name != "dns-tcp" || m.Ports[1].Name != "dns" || m.Ports[1].Protocol != "UDP" {
			t.Errorf("%s: per-port rows %+v, want dns-tcp and dns", m.Mode, m.Ports)
			continue
		}
		for _, p := range m.Ports {
			if p.Latency.Count != 150 || p.Errors != 0 || p.Fairness == nil {
				t.Errorf("%s %s: %d samples, %d errors, fairness %v", m.Mode, p.Name, p.Latency.Count, p.Errors, p.Fairness)
			}
			t.Logf("%s %s %d/%s: p50 %.1f µs p99 %.1f µs, min Jain %.3f", m.Mode, p.Name, p.Port, p.Protocol,
				float64(p.Latency.P50)/1e3, float64(p.Latency.P99)/1e3, p.Fairness.MinJain)
		}
	}
	return res
}

// TestDNSServiceHost runs the DNS-like service (53/TCP + 53/UDP) through
// the host kernel's modes, from kernel-chosen UDP source ports: the UDP
// exchanges spread over the endpoints like the TCP connections (every
// endpoint reached at the last position).
func TestDNSServiceHost(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore", "nft")
	res := checkDNSService(t, dnsScenario(t, "[none, iptables, nftables, userspace]", ""), "none", "iptables", "nftables", "userspace")
	for _, m := range res.Modes {
		for _, p := range m.Lookup {
			if p.Position == "last" && reached(p.Hits) != 3 {
				t.Errorf("%s: UDP exchanges from kernel-chosen ports reached %v, want all 3 endpoints", m.Mode, p.Hits)
			}
		}
	}
}

// TestDNSFixedSourcePort: from one fixed UDP source port every exchange
// to the dns port of one service is the same conntrack entry, so the
// iptables and nftables modes DNAT them all to the endpoint the first
// one picked (kubernetes#48370's mechanism), while TCP connections from
// kernel-chosen ports still spread; mode none (no NAT) spreads both.
func TestDNSFixedSourcePort(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore", "nft")
	sc := dnsScenario(t, "[none, iptables, nftables, userspace]", ", udp: {sourcePort: 5300, sourcePorts: 2}")
	res := checkDNSService(t, sc, "none", "iptables", "nftables", "userspace")
	for _, m := range res.Modes {
		for _, p := range m.Lookup {
			n := reached(p.Hits)
			switch {
			case p.Position == "first" && n != 3:
				t.Errorf("%s: TCP hits %v, want all 3 endpoints", m.Mode, p.Hits)
			case p.Position == "last" && m.Mode == "none" && n != 3:
				t.Errorf("none: UDP hits %v, want all 3 endpoints (no NAT)", p.Hits)
			case p.Position == "last" && m.Mode != "none" && n > 2:
				t.Errorf("%s: UDP hits from 2 fixed source ports %v, want at most 2 endpoints (one per conntrack entry)", m.Mode, p.Hits)
			}
		}
	}
}

// TestDNSServiceIPVS runs the DNS-like service through the ipvs mode
// (a TCP and a UDP virtual server on 53), in the user-mode-linux guest
// where the host lacks IP_VS.
func TestDNSServiceIPVS(t *testing.T) {
	testenv.RequireKernel(t, "ipset", "iptables-legacy-restore")
	_, err := os.Stat("/proc/net/ip_vs")
	if testenv.InUML(t, err == nil, ipvs.KernelModules("")...) {
		return
	}
	checkDNSService(t, dnsScenario(t, "[ipvs]", ""), "ipvs")
}

// reached counts the endpoints with at least one hit.
func reached(hits map[string]int) int {
	n := 0
	for _, h := range hits {
		if h > 0 {
			n++
		}
	}
	return n
}
