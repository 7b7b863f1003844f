//go:build linux

package iptables

import (
	"context"
	"strings"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/scenarios"
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

func init() {
	proxymodes.Register(proxymodes.Mode{
		Name: "iptables",
		New: func(sc *scenarios.Scenario, node proxymodes.Node) (proxymodes.Proxier, error) {
			_, _, _, cluster := sc.Prefixes()
			cfg := Config{Backend: sc.IPTables.Backend, ClusterCIDR: cluster, NoConntrackCleanup: sc.NoConntrackCleanup}
			if sc.Services.SessionAffinity == "ClientIP" {
				cfg.AffinityTimeout = sc.Services.SessionAffinityTimeout.Duration
			}
			if err := cfg.Validate(); err != nil {
				return nil, err
			}
			return New(cfg, node), nil
		},
		Binaries: func(sc *scenarios.Scenario) []string {
			b := sc.IPTables.Backend
			return []string{"iptables-" + b, "iptables-" + b + "-restore", "iptables-" + b + "-save"}
		},
		Probe: Probe,
	})
}

// Probe loads a miniature of kube-proxy's nat rules with both back ends in
// node (a throwaway namespace) and reports which work.
func Probe(ctx context.Context, node proxymodes.Node) (bool, string) {
	var ok []string
	var bad []string
	for _, be := range []string{BackendLegacy, BackendNft} {
		bin := "iptables-" + be + "-restore"
		if _, err := node.Run(ctx, []byte(probeRules), bin, "--noflush"); err != nil {
			msg, _, _ := strings.Cut(err.Error(), "\n")
			bad = append(bad, be+": "+msg)
			continue
		}
		ok = append(ok, be)
	}
	if len(ok) == 0 {
		return false, "no back end accepts kube-proxy's rules (" + strings.Join(bad, "; ") + "); run make setup"
	}
	why := "back ends " + strings.Join(ok, ", ") + " accept statistic, DNAT, MASQUERADE, addrtype, comment"
	if len(bad) > 0 {
		why += "; " + strings.Join(bad, "; ")
	}
	return true, why
}
