package iptables

import (
	"fmt"
	"math/rand"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/workload"
)

// affinityServices is one service with 3 endpoints.
func affinityServices() []workload.Service {
	var eps []workload.Endpoint
	for i := 1; i <= 3; i++ {
		eps = append(eps, workload.Endpoint{IP: netip.AddrFrom4([4]byte{198, 19, 0, byte(i)}), Ready: true, Weight: 1})
	}
	return []workload.Service{{Namespace: "pb", Name: "svc-00000", ClusterIP: netip.MustParseAddr("198.18.0.1"),
		Ports: []workload.ServicePort{{Name: "p80", Port: 80, TargetPort: 8080, Protocol: "TCP"}}, Endpoints: eps}}
}

// TestAffinityRules: with sessionAffinity ClientIP the KUBE-SVC chain
// starts with one recent --rcheck rule per endpoint and every KUBE-SEP
// DNAT rule sets its recent list, in kube-proxy's layout.
func TestAffinityRules(t *testing.T) {
	rs, err := Render(Config{Backend: BackendLegacy, ClusterCIDR: testCfg.ClusterCIDR, AffinityTimeout: 10800 * time.Second}, affinityServices())
	if err != nil {
		t.Fatal(err)
	}
	svc := ServiceChainName("pb/svc-00000:p80", "tcp")
	sep := EndpointChainName("pb/svc-00000:p80", "tcp", "198.19.0.1:8080")
	for _, want := range []string{
		`-A ` + svc + ` -m comment --comment "pb/svc-00000:p80 -> 198.19.0.1:8080" -m recent --name ` + sep + ` --rcheck --seconds 10800 --reap -j ` + sep,
		`-A ` + sep + ` -m comment --comment pb/svc-00000:p80 -m recent --name ` + sep + ` --set -m tcp -p tcp -j DNAT --to-destination 198.19.0.1:8080`,
	} {
		if !strings.Contains(string(rs.Data), want+"\n") {
			t.Errorf("missing rule:\n%s\nin:\n%s", want, rs.Data)
		}
	}
	plain, _ := Render(Config{Backend: BackendLegacy, ClusterCIDR: testCfg.ClusterCIDR}, affinityServices())
	if rs.NatRules != plain.NatRules+3 || strings.Contains(string(plain.Data), "recent") {
		t.Errorf("nat rules %d vs %d without affinity", rs.NatRules, plain.NatRules)
	}
}

// TestAffinityTrace traces packets through the rendered KUBE-SVC and
// KUBE-SEP chains, with the recent lists kept per chain as xt_recent does
// (--set adds the source, --rcheck --seconds matches a source seen within
// the timeout): every connection of one client reaches its first
// endpoint; 250 clients spread over all three.
func TestAffinityTrace(t *testing.T) {
	rs, err := Render(Config{Backend: BackendLegacy, AffinityTimeout: 60 * time.Second}, affinityServices())
	if err != nil {
		t.Fatal(err)
	}
	chains := map[string][][]string{}
	for _, l := range strings.Split(string(rs.Data), "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[0] == "-A" && strings.HasPrefix(f[1], "KUBE-S") {
			chains[f[1]] = append(chains[f[1]], f[2:])
		}
	}
	recent := map[string]map[string]time.Time{}
	rng := rand.New(rand.NewSource(1))
	now := time.Unix(0, 0)
	arg := func(r []string, k string) string {
		for i := range r[:len(r)-1] {
			if r[i] == k {
				return r[i+1]
			}
		}
		return ""
	}
	has := func(r []string, k string) bool { return strings.Contains(" "+strings.Join(r, " ")+" ", " "+k+" ") }
	var trace func(chain, src string) string
	trace = func(chain, src string) string {
		for _, r := range chains[chain] {
			if name := arg(r, "--name"); has(r, "--rcheck") {
				if seen, ok := recent[name][src]; !ok || now.Sub(seen) > 60*time.Second {
					continue
				}
			}
			if p := arg(r, "--probability"); p != "" {
				var f float64
				if _, err := fmtSscan(p, &f); err != nil || rng.Float64() >= f {
					continue
				}
			}
			if has(r, "--set") {
				name := arg(r, "--name")
				if recent[name] == nil {
					recent[name] = map[string]time.Time{}
				}
				recent[name][src] = now
			}
			if d := arg(r, "--to-destination"); d != "" {
				return d
			}
			if j := arg(r, "-j"); strings.HasPrefix(j, "KUBE-SEP") {
				return trace(j, src)
			}
		}
		return ""
	}
	svc := ServiceChainName("pb/svc-00000:p80", "tcp")
	spread := map[string]int{}
	for c := 0; c < 250; c++ {
		src := netip.AddrFrom4([4]byte{198, 19, 192, byte(c)}).String()
		first := trace(svc, src)
		spread[first]++
		for i := 0; i < 20; i++ {
			now = now.Add(time.Second)
			if got := trace(svc, src); got != first {
				t.Fatalf("client %s: connection %d went to %s, first to %s", src, i, got, first)
			}
		}
	}
	if len(spread) != 3 {
		t.Errorf("clients spread over %v", spread)
	}
}

func fmtSscan(s string, f *float64) (int, error) { return fmt.Sscan(s, f) }
