//go:build linux

package ipvs

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/scenarios"
)

func init() {
	proxymodes.Register(proxymodes.Mode{
		Name: "ipvs",
		New: func(sc *scenarios.Scenario, node proxymodes.Node) (proxymodes.Proxier, error) {
			cfg, err := ConfigFromScenario(sc)
			if err != nil {
				return nil, err
			}
			return New(cfg, node), nil
		},
		Binaries: func(*scenarios.Scenario) []string { return []string{binIPSet, binRestore, binSave} },
		Probe:    Probe,
	})
}

// ConfigFromScenario maps a validated scenario to a Config: the ipvs
// block (scheduler, excludeCIDRs, timeouts), network.clusterCIDR and
// services.sessionAffinity(Timeout).
func ConfigFromScenario(sc *scenarios.Scenario) (Config, error) {
	_, _, _, cluster := sc.Prefixes()
	cfg := Config{
		Scheduler:       sc.IPVS.Scheduler,
		ClusterCIDR:     cluster,
		SessionAffinity: sc.Services.SessionAffinity == "ClientIP",
		AffinityTimeout: sc.Services.SessionAffinityTimeout.Duration,
		TCPTimeout:      sc.IPVS.TCPTimeout.Duration,
		TCPFinTimeout:   sc.IPVS.TCPFinTimeout.Duration,
		UDPTimeout:      sc.IPVS.UDPTimeout.Duration,
	}
	for _, c := range sc.IPVS.ExcludeCIDRs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return Config{}, fmt.Errorf("ipvs: excludeCIDRs: %w", err)
		}
		cfg.ExcludeCIDRs = append(cfg.ExcludeCIDRs, p)
	}
	return cfg, cfg.Validate()
}

// Probe reports whether node's kernel has IP_VS (/proc/net/ip_vs exists in
// the namespace), for example "host kernel 6.18.0 has no IP_VS
// (CONFIG_IP_VS not set); available with --kernel uml".
func Probe(ctx context.Context, node proxymodes.Node) (bool, string) {
	if ok, why := hasIPVS(node); !ok {
		return false, why
	}
	var line string
	_ = node.Do(func() error {
		line = ipvsVersion()
		return nil
	})
	return true, "kernel has IP_VS (" + line + "); schedulers load as ip_vs_<name> modules"
}
