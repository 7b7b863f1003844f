package nftables

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/workload"
)

// TestAffinityLayout: with ClientIP affinity each endpoint gets a dynamic
// set with the timeout, its chain records the client ("update @set { ip
// saddr }") before the DNAT, and the service chain sends a known client
// to its endpoint before numgen picks one, as kube-proxy's nftables proxier.
func TestAffinityLayout(t *testing.T) {
	cfg := testCfg
	cfg.AffinityTimeout = 10800 * time.Second
	svcs := genServices(3, 2)
	fake, rs := applyFake(t, cfg, svcs)
	dump := fake.Dump()
	ep := EndpointChainName("pb", "svc-00001", "tcp", "p80", svcs[1].Endpoints[0].IP, 8080)
	set := affinitySetName(ep)
	for _, want := range []string{
		"add set ip kube-proxy " + set + " { type ipv4_addr ; flags dynamic,timeout ; timeout 10800s ; }",
		"add rule ip kube-proxy " + ep + " update @" + set + " { ip saddr }",
		"ip saddr @" + set + " goto " + ep,
	} {
		if !strings.Contains(dump, want) {
			t.Errorf("dump lacks %q", want)
		}
	}
	svc := rs.Chain(ServiceChainName("pb", "svc-00001", "tcp", "p80"))
	last := svc.Rules[len(svc.Rules)-1]
	if !strings.HasPrefix(last, "numgen random mod 2") {
		t.Errorf("numgen must come after the affinity checks: %q", svc.Rules)
	}
	if strings.Contains(applyFakeDump(t, testCfg, svcs), "affinity-") {
		t.Error("affinity sets without sessionAffinity")
	}

	// An endpoint replaced: its set is added and the old one deleted, and
	// the result equals a full sync of the new services.
	svcs[1].Endpoints = append([]workload.Endpoint(nil), svcs[1].Endpoints...)
	svcs[1].Endpoints[0].IP = netip.MustParseAddr("198.19.200.9")
	next, _ := Render(cfg, svcs)
	d, _ := applyDiff(t, fake, rs, next)
	if len(d.SetsAdded) != 1 || len(d.SetsDeleted) != 1 || d.SetsDeleted[0] != set {
		t.Errorf("diff sets +%v -%v", d.SetsAdded, d.SetsDeleted)
	}
	check, _ := applyFake(t, cfg, svcs)
	if fake.Dump() != check.Dump() {
		t.Error("incremental sync with affinity differs from a full sync")
	}
}

func applyFakeDump(t *testing.T, cfg Config, svcs []workload.Service) string {
	f, _ := applyFake(t, cfg, svcs)
	return f.Dump()
}
