//go:build linux

package kubeproxy

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/workload"
)

// procIPVS is /proc/net/ip_vs as the 6.12 guest printed it (addresses in
// hex): two virtual servers, three real servers.
const procIPVS = `IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port Scheduler Flags
  -> RemoteAddress:Port Forward Weight ActiveConn InActConn
TCP  C6120001:0050 rr
  -> C6130001:1F90      Masq    1      0          0
  -> C6130002:1F90      Masq    1      0          0
UDP  C6120002:0035 rr
  -> C6130003:0035      Masq    1      0          0
`

func TestCountIPVS(t *testing.T) {
	v, r := countIPVS([]byte(procIPVS))
	if v != 2 || r != 3 {
		t.Errorf("countIPVS = %d virtual, %d real; want 2, 3 (the header's \"  -> RemoteAddress\" line is no real server)", v, r)
	}
	if v, r := countIPVS([]byte(strings.Join(strings.SplitAfter(procIPVS, "\n")[:3], ""))); v != 0 || r != 0 {
		t.Errorf("header only: %d, %d; want 0, 0", v, r)
	}
}

// ipsetListT is `ipset list -t` (headers only), two of kube-proxy's sets.
const ipsetListT = `Name: KUBE-CLUSTER-IP
Type: hash:ip,port
Revision: 7
Header: family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x2c4ed5c4
Size in memory: 9432
References: 2
Number of entries: 106

Name: KUBE-IPVS-IPS
Type: hash:ip
Revision: 6
Header: family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x1b6c5a3a
Size in memory: 7944
References: 1
Number of entries: 201
`

func TestCountIPSets(t *testing.T) {
	got := countIPSets([]byte(ipsetListT))
	if len(got) != 2 || got["KUBE-CLUSTER-IP"] != 106 || got["KUBE-IPVS-IPS"] != 201 {
		t.Errorf("countIPSets = %v, want KUBE-CLUSTER-IP 106, KUBE-IPVS-IPS 201", got)
	}
	if got := countIPSets(nil); len(got) != 0 {
		t.Errorf("no sets: %v", got)
	}
}

func TestWantIPVS(t *testing.T) {
	svcs := []workload.Service{
		{ClusterIP: netip.MustParseAddr("198.18.0.1"), Ports: make([]workload.ServicePort, 2)},
		{ClusterIP: netip.MustParseAddr("198.18.0.2"), Ports: make([]workload.ServicePort, 1)},
	}
	if w := WantIPVS(svcs); w != (Want{Ports: 4, IPs: 3}) {
		t.Errorf("WantIPVS = %+v, want 4 ServicePorts and 3 ClusterIPs (each with the kubernetes Service)", w)
	}
}

func TestProgressSummaryAndRate(t *testing.T) {
	p := measure.SyncProgress{VirtualServers: 10001, WantVirtualServers: 10001, RealServers: 30000, Addresses: 10001,
		WantClusterIP: 10001, WantIPVSIPs: 10001, IPSets: map[string]int{"KUBE-CLUSTER-IP": 2314, "KUBE-IPVS-IPS": 10001, "KUBE-LOOP-BACK": 3}}
	s := p.Words()
	for _, want := range []string{"10001 of 10001 virtual servers (30000 real servers)", "KUBE-CLUSTER-IP 2314 of 10001", "KUBE-IPVS-IPS 10001 of 10001", "other KUBE-* sets 3"} {
		if !strings.Contains(s, want) {
			t.Errorf("ProgressSummary = %q, lacks %q", s, want)
		}
	}
	// Node ports add virtual servers on every node address: not "17501 of 10001".
	np := measure.SyncProgress{VirtualServers: 17501, WantVirtualServers: 10001, RealServers: 52500, Addresses: -1}
	if s := np.Words(); strings.Contains(s, "17501 of 10001") || !strings.Contains(s, "17501 virtual servers: 10001 ClusterIP ServicePorts wanted") {
		t.Errorf("with node ports: %q", s)
	}
	if s := (measure.SyncProgress{VirtualServers: -1, RealServers: -1, Addresses: -1}).Words(); !strings.Contains(s, "no progress counts") {
		t.Errorf("a mode without counts: %q", s)
	}
	a := measure.SyncProgress{AtNs: int64(time.Minute), IPSets: map[string]int{"KUBE-CLUSTER-IP": 100, "KUBE-IPVS-IPS": 0}}
	b := measure.SyncProgress{AtNs: int64(2 * time.Minute), IPSets: map[string]int{"KUBE-CLUSTER-IP": 400, "KUBE-IPVS-IPS": 0}}
	noSets := measure.SyncProgress{AtNs: int64(3 * time.Minute)}
	r := ProgressRate([]measure.SyncProgress{a, b, noSets})
	if !strings.Contains(r, "+300 in the last 1m0s (200ms per entry") {
		t.Errorf("ProgressRate = %q, want +300 entries in 1m0s, 200ms each", r)
	}
	if r := ProgressRate([]measure.SyncProgress{b, b}); r != "" {
		t.Errorf("no growth: %q, want none", r)
	}
	if r := ProgressRate([]measure.SyncProgress{a}); r != "" {
		t.Errorf("one reading: %q, want none", r)
	}
}
