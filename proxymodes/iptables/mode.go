//go:build linux

package iptables

import (
	"context"
	"strings"
	"time"

	"github.com/proxybench/proxybench/internal/lib/xtables"
	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/syncloop"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// probeRules is a miniature of the nat layout: every match and target the
// mode uses (comment, statistic, mark, addrtype, DNAT, MASQUERADE --random-fully).
const probeRules = `*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-PROBE - [0:0]
:KUBE-POSTROUTING - [0:0]
-A KUBE-SERVICES -m comment --comment "probe" -m tcp -p tcp -d 198.18.0.1 --dport 80 -j KUBE-SVC-PROBE
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j RETURN
-A KUBE-SVC-PROBE -m statistic --mode random --probability 0.5000000000 -m tcp -p tcp -j DNAT --to-destination 198.19.0.1:8080
-A KUBE-POSTROUTING -m mark --mark 0x4000/0x4000 -j MASQUERADE --random-fully
COMMIT
`

// Mode is the iptables mode: kube-proxy's iptables proxier
// (pkg/proxy/iptables), programmed with iptables-restore.
var Mode = proxymodes.Mode{
	Name:      "iptables",
	Protocols: []string{"TCP", "UDP", "SCTP"},
	New:       proxymodes.NewFrom(ConfigFromScenario, New),
	// kube-proxy's iptables.localhostNodePorts (default true).
	LocalhostNodePorts: true,
	NodePorts:          true,
	// Render's KubeProxyOrderAt per node (Config.NodeName, Config.Zones).
	TopologyHints: true,
	// ip6tables, as kube-proxy's IPv6 proxier (Config.IPv6).
	IPv6:   true,
	Render: proxymodes.RenderFrom(ConfigFromScenario, Rendering),
	Sim:    proxymodes.SimModel{Lookup: proxymodes.LookupLinear, Choice: proxymodes.ChoiceStatistic, PartialRewritesWalk: true},
	// One KUBE-SERVICES rule per ServicePort, walked in render order;
	// SyncStats.Objects counts the restore input's "-A" lines.
	Traits:        measure.ModeTraits{Walk: chainServices, Objects: "rules", IPTablesBackend: true},
	UsesIPTables:  true,
	SplitBaseline: true,
	SyncPeriods: func(sc *scenarios.Scenario) (time.Duration, time.Duration) {
		return sc.IPTables.MinSyncPeriod.Duration, sc.IPTables.SyncPeriod.Duration
	},
	// kube-proxy's runner syncs with nothing changed only once an hour
	// (its maxInterval, FullSyncPeriod); syncPeriod is the retry after a
	// failed sync.
	MaxSyncInterval: syncloop.DefaultFullSyncPeriod,
	Fairness: func(sc *scenarios.Scenario) measure.Expectation {
		e := measure.Expectation{Unit: measure.UnitConnection, Source: "kube-proxy iptables: statistic random 1/(n-i), weights ignored"}
		return e.WithAffinity(sc.Services.SessionAffinity == "ClientIP")
	},
	Binaries: func(sc *scenarios.Scenario) []string {
		b := sc.IPTables.Backend
		out := []string{xtables.Binary(b, ""), xtables.Binary(b, "restore"), xtables.Binary(b, "save")}
		if sc.DualStack() {
			for _, t := range []string{"", "restore", "save"} {
				out = append(out, xtables.Binary6(b, t)) // the IPv6 proxier's
			}
		}
		return out
	},
	KernelOptions:    proxymodes.IPTablesKernelOptionsFor,
	Probe:            Probe,
	CleanupLeftovers: cleanupLeftovers,
	CleansAtStart:    []string{"nftables"},
	Owns:             owns,
	Endpoints:        endpointReadBack,
	// kube-proxy's resync without an API change (pkg/proxy/iptables/proxier.go).
	KubeProxyResync: "kube-proxy iptables: no periodic sync but FullSyncPeriod (1 h, and none in large-cluster mode, over 1000 endpoints); a sync runs on an API change, then KUBE-SERVICES is rewritten and a jump to a missing chain fails it, the retry after syncPeriod being full; its canary monitor polls mangle KUBE-PROXY-CANARY every syncPeriod and answers its absence with a full sync",
}

// ConfigFromScenario maps a validated scenario to a Config: the iptables
// back end, network.clusterCIDR and services.sessionAffinity(Timeout);
// for the scenario's IPv6 view (Scenario.ForFamily) an IPv6 proxier with
// the IPv6 clusterCIDR.
// Mode.New and Mode.Render both use it, so the real run and the sim
// render the same rules.
func ConfigFromScenario(sc *scenarios.Scenario) (Config, error) {
	_, _, _, cluster := sc.Prefixes()
	cfg := Config{Backend: sc.IPTables.Backend, ClusterCIDR: cluster, NoConntrackCleanup: sc.NoConntrackCleanup, NodeName: scenarios.NodeName(0), Zones: sc.NodeZones(), IPv6: sc.IsIPv6()}
	if sc.Services.SessionAffinity == "ClientIP" {
		cfg.AffinityTimeout = sc.Services.SessionAffinityTimeout.Duration
	}
	return cfg, cfg.Validate()
}

// Rendering renders services under cfg for Mode.Render: the restore input,
// its "-A" lines as objects (kube-proxy's sync_proxy_rules_iptables_total),
// and the KUBE-SERVICES walk of a new connection (Walker).
func Rendering(cfg Config, services []workload.Service) (*proxymodes.Rendering, error) {
	rs, err := Render(cfg, services)
	if err != nil {
		return nil, err
	}
	w, err := NewWalker(rs)
	if err != nil {
		return nil, err
	}
	return &proxymodes.Rendering{
		Objects: rs.NatRules + rs.FilterRules, Bytes: len(rs.Data), Rules: rs.Data,
		Walk: func(t workload.Target) int {
			s := &services[t.Service]
			n, _ := w.RulesWalked(s.ClusterIP, s.Ports[t.Port].Port)
			return n
		},
		AffinityTimeout: cfg.AffinityTimeout,
		Info:            map[string]string{"backend": cfg.Backend},
	}, nil
}

// Probe loads a miniature of kube-proxy's nat rules with both back ends in
// node (a throwaway namespace) and reports which work.
func Probe(ctx context.Context, node proxymodes.Node) (bool, string) {
	ok, bad := proxymodes.ProbeIPTablesBackends(ctx, node, probeRules)
	if len(ok) == 0 {
		return false, "no back end accepts kube-proxy's rules (" + strings.Join(bad, "; ") + "); run make setup"
	}
	why := "back ends " + strings.Join(ok, ", ") + " accept statistic, DNAT, MASQUERADE, addrtype, comment"
	if len(bad) > 0 {
		why += "; " + strings.Join(bad, "; ")
	}
	return true, why
}

// Rendering renders services with the proxier's own Config, as its next
// full Sync programs them (proxymodes.Renderer).
func (p *Proxier) Rendering(services []workload.Service) (*proxymodes.Rendering, error) {
	return Rendering(p.cfg, services)
}
