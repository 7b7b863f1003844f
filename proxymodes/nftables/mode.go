//go:build linux

package nftables

import (
	"context"
	"strings"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/syncloop"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// probeRules is a miniature of the layout: a verdict map keyed by
// address . protocol . port, numgen random vmap, ct state, DNAT, mark,
// masquerade fully-random and reject, in a throwaway table.
const probeRules = `add table ip pb-probe
add chain ip pb-probe nat-prerouting { type nat hook prerouting priority -100 ; }
add chain ip pb-probe nat-postrouting { type nat hook postrouting priority 100 ; }
add chain ip pb-probe filter-input { type filter hook input priority -110 ; }
add chain ip pb-probe svc
add chain ip pb-probe ep0
add chain ip pb-probe ep1
add chain ip pb-probe rej
add map ip pb-probe service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }
add rule ip pb-probe nat-prerouting ip daddr . meta l4proto . th dport vmap @service-ips
add rule ip pb-probe svc numgen random mod 2 vmap { 0 : goto ep0 , 1 : goto ep1 }
add rule ip pb-probe ep0 ip saddr 198.19.0.1 mark set mark or 0x4000
add rule ip pb-probe ep0 meta l4proto tcp dnat to 198.19.0.1:8080
add rule ip pb-probe ep1 meta l4proto tcp dnat to 198.19.0.2:8080
add rule ip pb-probe rej reject
add rule ip pb-probe filter-input ct state new ip daddr 198.18.0.9 goto rej
add rule ip pb-probe nat-postrouting mark and 0x4000 == 0 return
add rule ip pb-probe nat-postrouting masquerade fully-random
add element ip pb-probe service-ips { 198.18.0.1 . tcp . 80 : goto svc }
delete table ip pb-probe
`

// Mode is the nftables mode: kube-proxy's nftables proxier
// (pkg/proxy/nftables), programmed with nft through knftables.
var Mode = proxymodes.Mode{
	Name:      "nftables",
	Protocols: []string{"TCP", "UDP", "SCTP"},
	NodePorts: true,
	New:       proxymodes.NewFrom(ConfigFromScenario, New),
	Render:    proxymodes.RenderFrom(ConfigFromScenario, Rendering),
	Sim:       proxymodes.SimModel{Lookup: proxymodes.LookupHash, Choice: proxymodes.ChoiceNumgen},
	// table ip6 kube-proxy, as kube-proxy's IPv6 proxier (Config.IPv6).
	IPv6: true,
	// Render's KubeProxyOrderAt per node (Config.NodeName, Config.Zones).
	TopologyHints: true,
	SyncPeriods: func(sc *scenarios.Scenario) (time.Duration, time.Duration) {
		return sc.NFTables.MinSyncPeriod.Duration, sc.NFTables.SyncPeriod.Duration
	},
	// kube-proxy's runner syncs with nothing changed only once an hour
	// (its maxInterval, FullSyncPeriod); syncPeriod is the retry after a
	// failed sync.
	MaxSyncInterval: syncloop.DefaultFullSyncPeriod,
	Fairness: func(sc *scenarios.Scenario) measure.Expectation {
		e := measure.Expectation{Unit: measure.UnitConnection, Source: "kube-proxy nftables: numgen random mod n, weights ignored"}
		return e.WithAffinity(sc.Services.SessionAffinity == "ClientIP")
	},
	Binaries: func(*scenarios.Scenario) []string { return []string{"nft"} },
	Modules: func(*scenarios.Scenario) []string {
		// Modules of Debian's UML kernel 6.1 (nat and reject_ipv4
		// expressions are part of nf_tables there).
		return []string{"nf_conntrack", "nf_nat", "nf_reject_ipv4", "nf_tables", "nft_numgen", "nft_ct", "nft_masq", "nft_reject"}
	},
	// The ip family with the expressions of the layout (numgen vmap, ct
	// state, dnat, masquerade, reject): net/netfilter/Kconfig.
	KernelOptions: func(*scenarios.Scenario) []string {
		return []string{"CONFIG_NF_TABLES", "CONFIG_NF_TABLES_IPV4", "CONFIG_NFT_NUMGEN", "CONFIG_NFT_CT", "CONFIG_NFT_NAT", "CONFIG_NFT_MASQ", "CONFIG_NFT_REJECT"}
	},
	Probe:            Probe,
	CleanupLeftovers: cleanupLeftovers,
	CleansAtStart:    []string{"iptables", "ipvs"},
	Owns:             owns,
	Endpoints:        endpointReadBack,
	// kube-proxy's resync without an API change (pkg/proxy/nftables/proxier.go).
	KubeProxyResync: "kube-proxy nftables: no periodic sync but FullSyncPeriod (1 h); a partial sync writes only changed services' elements, so a foreign deletion of an unchanged one stands until a full sync; no canary",
}

// ConfigFromScenario maps a validated scenario to a Config:
// network.clusterCIDR and services.sessionAffinity(Timeout); for the
// scenario's IPv6 view (Scenario.ForFamily) an IPv6 proxier with the
// IPv6 CIDRs. Mode.New and
// Mode.Render both use it, so the real run and the sim render the same
// rules.
func ConfigFromScenario(sc *scenarios.Scenario) (Config, error) {
	svc, _, _, cluster := sc.Prefixes()
	cfg := Config{ClusterCIDR: cluster, ServiceCIDR: svc, NoConntrackCleanup: sc.NoConntrackCleanup, NodeName: scenarios.NodeName(0), Zones: sc.NodeZones(), IPv6: sc.IsIPv6()}
	if sc.Services.SessionAffinity == "ClientIP" {
		cfg.AffinityTimeout = sc.Services.SessionAffinityTimeout.Duration
	}
	return cfg, cfg.Validate()
}

// Rendering renders services under cfg for Mode.Render: the full sync's
// transaction as nft commands (knftables' Transaction text, the proxier's
// first Sync), its chains, rules and elements as objects, and about 120
// bytes of netlink message per object.
func Rendering(cfg Config, services []workload.Service) (*proxymodes.Rendering, error) {
	rs, err := Render(cfg, services)
	if err != nil {
		return nil, err
	}
	tx := knftables.NewFake(cfg.TableFamily(), Table).NewTransaction()
	rs.Full(tx)
	objects := rs.Counts().Objects()
	return &proxymodes.Rendering{
		Objects: objects, Bytes: objects * 120, Rules: []byte(tx.String()),
		AffinityTimeout: cfg.AffinityTimeout,
		Info:            map[string]string{"backend": "knftables"},
	}, nil
}

// Probe loads (and deletes, in the same transaction) a miniature of
// kube-proxy's nftables layout with nft in node (a throwaway namespace).
func Probe(ctx context.Context, node proxymodes.Node) (bool, string) {
	if _, err := node.Run(ctx, []byte(probeRules), "nft", "-f", "-"); err != nil {
		msg, _, _ := strings.Cut(err.Error(), "\n")
		return false, "nft rejects kube-proxy's nftables layout (" + msg + "); the kernel needs nf_tables with numgen, ct, nat, masq, reject"
	}
	return true, "nf_tables accepts verdict maps, numgen vmap, ct, DNAT, masquerade fully-random, reject"
}

// Rendering renders services with the proxier's own Config, as its next
// full Sync programs them (proxymodes.Renderer).
func (p *Proxier) Rendering(services []workload.Service) (*proxymodes.Rendering, error) {
	return Rendering(p.cfg, services)
}
