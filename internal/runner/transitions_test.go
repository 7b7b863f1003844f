//go:build linux

package runner

import (
	"net/netip"
	"testing"
	"time"

	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// TestTally: exchanges before the change are ignored; recovery is the
// first live answer's time after it; stale and lost are counted apart.
func TestTally(t *testing.T) {
	t0 := time.Unix(100, 0)
	live, old := netip.MustParseAddr("198.19.0.2"), netip.MustParseAddr("198.19.0.1")
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	recs := []exchange{
		{sent: at(-20), answered: at(-19), from: old},
		{sent: at(0), answered: at(1), from: old},
		{sent: at(20), answered: at(220)},
		{sent: at(240), answered: at(245), from: live},
		{sent: at(260), answered: at(261), from: live},
	}
	var tr reports.Transition
	tally(&tr, recs, t0, []netip.Addr{live})
	if tr.Sent != 4 || tr.Stale != 1 || tr.Lost != 1 || tr.Live != 2 || tr.RecoveryNs != int64(245*time.Millisecond) {
		t.Errorf("tally = %+v, want 4 sent, 1 stale, 1 lost, 2 live, recovery 245ms", tr)
	}
	var never reports.Transition
	tally(&never, recs[:3], t0, []netip.Addr{live})
	if never.RecoveryNs != -1 {
		t.Errorf("no live answer: recovery %d, want -1", never.RecoveryNs)
	}
}

// TestDNSLike: the DNS-like service takes the addresses after the last
// service and endpoint, with 53/UDP and 53/TCP.
func TestDNSLike(t *testing.T) {
	sc, err := scenarios.Parse([]byte("services:\n  count: 3\n"), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := workload.Services(sc)
	if err != nil {
		t.Fatal(err)
	}
	dns, a, b, err := dnsLike(sc, svcs, 5353)
	if err != nil {
		t.Fatal(err)
	}
	if dns.ClusterIP != netip.MustParseAddr("198.18.0.4") || a != netip.MustParseAddr("198.19.0.10") || b != a.Next() {
		t.Errorf("dns %s, endpoints %s %s; want 198.18.0.4, 198.19.0.10, .11", dns.ClusterIP, a, b)
	}
	if len(dns.Ports) != 2 || dns.Ports[0].Protocol != "UDP" || dns.Ports[1].Protocol != "TCP" || dns.Ports[0].Port != 53 {
		t.Errorf("ports %+v, want 53/UDP and 53/TCP", dns.Ports)
	}
	if got := withEndpoints(svcs, dns, a); len(got) != 4 || len(got[3].Endpoints) != 1 || len(svcs) != 3 {
		t.Errorf("withEndpoints: %d services, dns endpoints %v", len(got), got[len(got)-1].Endpoints)
	}
}
