//go:build linux

package userspace

import (
	"context"
	"net"
	"strings"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/scenarios"
)

// probeRules is a miniature of the portal layout: a REDIRECT with the
// matches the mode uses.
const probeRules = `*nat
:` + ChainPortalsContainer + ` - [0:0]
-A ` + ChainPortalsContainer + ` -m comment --comment "probe" -p tcp -m tcp -d 198.18.0.1/32 --dport 80 -j REDIRECT --to-ports 40000
COMMIT
`

func init() {
	proxymodes.Register(proxymodes.Mode{
		Name: "userspace",
		New: func(sc *scenarios.Scenario, node proxymodes.Node) (proxymodes.Proxier, error) {
			cfg := Config{
				Backend: sc.IPTables.Backend,
				Affinity: Affinity{
					ClientIP: sc.Services.SessionAffinity == "ClientIP",
					Timeout:  sc.Services.SessionAffinityTimeout.Duration,
				},
			}
			if err := cfg.Validate(); err != nil {
				return nil, err
			}
			return New(cfg, node), nil
		},
		Binaries: func(sc *scenarios.Scenario) []string {
			b := sc.IPTables.Backend
			return []string{"iptables-" + b, "iptables-" + b + "-restore"}
		},
		Probe: Probe,
	})
}

// Probe checks in node (a throwaway namespace) that a TCP listener opens
// there and that each iptables back end accepts a REDIRECT portal.
func Probe(ctx context.Context, node proxymodes.Node) (bool, string) {
	if err := node.Do(func() error {
		l, err := net.Listen("tcp4", "0.0.0.0:0")
		if err == nil {
			l.Close()
		}
		return err
	}); err != nil {
		return false, "cannot listen in a network namespace: " + err.Error()
	}
	var ok, bad []string
	for _, be := range []string{BackendLegacy, BackendNft} {
		if _, err := node.Run(ctx, []byte(probeRules), "iptables-"+be+"-restore", "--noflush"); err != nil {
			msg, _, _ := strings.Cut(err.Error(), "\n")
			bad = append(bad, be+": "+msg)
			continue
		}
		ok = append(ok, be)
	}
	if len(ok) == 0 {
		return false, "no iptables back end accepts a REDIRECT portal (" + strings.Join(bad, "; ") + "); run make setup"
	}
	why := "listeners open in the node namespace; back ends " + strings.Join(ok, ", ") + " accept REDIRECT"
	if len(bad) > 0 {
		why += "; " + strings.Join(bad, "; ")
	}
	return true, why
}
