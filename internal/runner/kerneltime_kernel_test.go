//go:build linux

package runner

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/scenarios"
)

// TestLookupKernelShape pins lookup.kernel's shape on the host kernel at
// 5000 services: iptables' nat walk is linear in the service's place in
// KUBE-SERVICES (one rule per ServicePort before it, kube-proxy's
// layout), so its last service's SYN costs the kernel more than its
// first's, by more than 5 µs (the walk past 4999 rules: tens of µs on
// this machine, ~7 ns a rule; a bracket that missed the nat hook would
// see no difference at all); nftables finds every service in one lookup
// of the service-ips verdict map (a hash set of ClusterIP . protocol .
// port: nft_set_hash, no position), so its first and last stay within a
// band of 25% of the first's p50 plus 1 µs (the noise of p50 over 300
// SYNs on a shared 2-core machine, where 1k-service runs differ by 5%).
func TestLookupKernelShape(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore", "nft")
	sc, err := scenarios.Parse([]byte(`
name: lookup-kernel-shape
seed: 7
repetitions: 1
kernel: host
modes: [iptables, nftables]
services: {count: 5000, endpoints: {count: 1}}
traffic: {connections: 300, concurrency: 2, warmup: 20, positions: [first, last]}
`), "lookup-kernel-shape.yaml")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := Run(context.Background(), sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("run took %s", time.Since(start).Round(time.Millisecond))
	p50 := map[string]map[string]float64{}
	for _, m := range res.Modes {
		if m.KernelTime == nil {
			t.Fatalf("%s: no KernelTime recorded", m.Mode)
		}
		if m.KernelTime.Absent != "" {
			testenv.Skip(t, "lookup.kernel not measured here: "+m.KernelTime.Absent)
		}
		p50[m.Mode] = map[string]float64{}
		for _, p := range m.Lookup {
			if p.Kernel.Count < 285 || p.Kernel.Count > 330 {
				t.Errorf("%s %s: %d SYNs timed for 300 recorded connections", m.Mode, p.Position, p.Kernel.Count)
			}
			if p.KernelOther.Count < 300 {
				t.Errorf("%s %s: %d other packets timed, want at least one per connection", m.Mode, p.Position, p.KernelOther.Count)
			}
			p50[m.Mode][p.Position] = float64(p.Kernel.P50)
			t.Logf("%s %s: lookup.kernel p50 %.2f µs p99 %.2f µs (n %d), other p50 %.2f µs; lookup.latency p50 %.1f µs", m.Mode, p.Position,
				float64(p.Kernel.P50)/1e3, float64(p.Kernel.P99)/1e3, p.Kernel.Count, float64(p.KernelOther.P50)/1e3, float64(p.Latency.P50)/1e3)
		}
	}
	ipt, nft := p50["iptables"], p50["nftables"]
	if d := ipt["last"] - ipt["first"]; d <= 5000 {
		t.Errorf("iptables: last − first lookup.kernel p50 = %.2f µs, want > 5 µs (the walk past 4999 KUBE-SERVICES rules)", d/1e3)
	}
	if d, band := math.Abs(nft["last"]-nft["first"]), 0.25*nft["first"]+1000; d > band {
		t.Errorf("nftables: |last − first| lookup.kernel p50 = %.2f µs, want within %.2f µs (one verdict-map lookup whatever the position)", d/1e3, band/1e3)
	}
}

// TestDoctorKernelTime: as root on a kernel that runs the programs the
// doctor says lookup.kernel is measured, naming the program type; else it
// says why not.
func TestDoctorKernelTime(t *testing.T) {
	testenv.RequireKernel(t)
	got := DoctorKernelTime()
	if !strings.HasPrefix(got, "measured here (tp_btf programs)") && !strings.HasPrefix(got, "measured here (raw_tp programs)") {
		testenv.Skip(t, "lookup.kernel not measured here: "+got)
	}
}
