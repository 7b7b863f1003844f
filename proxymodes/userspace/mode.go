//go:build linux

package userspace

import (
	"context"
	"net"
	"strings"
	"time"

	"github.com/proxybench/proxybench/internal/lib/xtables"
	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// probeRules is a miniature of the portal layout: a REDIRECT with the
// matches the mode uses.
const probeRules = `*nat
:` + ChainPortalsContainer + ` - [0:0]
-A ` + ChainPortalsContainer + ` -m comment --comment "probe" -p tcp -m tcp -d 198.18.0.1/32 --dport 80 -j REDIRECT --to-ports 40000
COMMIT
`

// Mode is the userspace mode: the legacy userspace proxy (kube-proxy
// before 1.26, pkg/proxy/userspace): a listener per ServicePort in this
// process behind iptables REDIRECT portals.
var Mode = proxymodes.Mode{
	Name: "userspace",
	// The legacy proxy had TCP and UDP sockets, never SCTP.
	Protocols: []string{"TCP", "UDP"},
	New:       proxymodes.NewFrom(ConfigFromScenario, New),
	Render:    proxymodes.RenderFrom(ConfigFromScenario, Rendering),
	Sim: proxymodes.SimModel{Lookup: proxymodes.LookupLinear, Choice: proxymodes.ChoiceRoundRobin, Estimate: &proxymodes.SimEstimate{
		Note:             "estimated: not calibrated; 40 µs of accept, dial and copy over mode none",
		LookupOverheadNs: 40000,
		FullNs:           2e7, FullPerObjectNs: 20000, IncrementalNs: 2e7,
		PerChangedObjectNs: 20000, ObjectsPerChange: 3, CPUPerWall: 1, SyncCV: 0.05,
	}},
	// One portal per ServicePort, walked in render order; the listeners
	// accept the client's connection and dial the endpoint.
	Traits:       measure.ModeTraits{Walk: ChainPortalsContainer, Terminates: true},
	UsesIPTables: true,
	// The legacy proxier's sync loop took the iptables block's periods.
	SyncPeriods: func(sc *scenarios.Scenario) (time.Duration, time.Duration) {
		return sc.IPTables.MinSyncPeriod.Duration, sc.IPTables.SyncPeriod.Duration
	},
	Fairness: func(sc *scenarios.Scenario) measure.Expectation {
		e := measure.Expectation{Unit: measure.UnitConnection, Source: "legacy userspace proxy: round robin over a shuffled list"}
		return e.WithAffinity(sc.Services.SessionAffinity == "ClientIP")
	},
	Binaries: func(sc *scenarios.Scenario) []string {
		b := sc.IPTables.Backend
		return []string{xtables.Binary(b, ""), xtables.Binary(b, "restore")}
	},
	KernelOptions: func(sc *scenarios.Scenario) []string {
		// The portals' REDIRECT target besides iptables' own.
		return append(proxymodes.IPTablesKernelOptionsFor(sc), "CONFIG_NETFILTER_XT_TARGET_REDIRECT")
	},
	Probe: Probe,
	// kube-proxy v1.37 has no userspace mode (removed in v1.26): nothing
	// of it cleans up after one, and since KEP-2448 a start cleaned up no
	// other mode.
	Owns: owns,
}

// ConfigFromScenario maps a validated scenario to a Config: the iptables
// back end of the portals and services.sessionAffinity(Timeout). Mode.New
// and Mode.Render both use it.
func ConfigFromScenario(sc *scenarios.Scenario) (Config, error) {
	cfg := Config{
		Backend: sc.IPTables.Backend,
		Affinity: Affinity{
			ClientIP: sc.Services.SessionAffinity == "ClientIP",
			Timeout:  sc.Services.SessionAffinityTimeout.Duration,
		},
	}
	return cfg, cfg.Validate()
}

// SimProxyPortBase is the first proxy port Rendering gives the portals; the
// proxier's listeners get theirs from the kernel.
const SimProxyPortBase = 30000

// Rendering renders the portals of services for Mode.Render, in the
// proxier's order, with proxy ports from SimProxyPortBase on (the real
// listeners' ports are the kernel's choice, the only difference): the
// restore input, portals plus "-A" lines as objects, and the
// KUBE-PORTALS-CONTAINER walk of a new connection (one rule per
// ServicePort, in render order).
func Rendering(cfg Config, services []workload.Service) (*proxymodes.Rendering, error) {
	var portals []Portal
	pp := uint16(SimProxyPortBase)
	base := make([]int, len(services))
	for i := range services {
		s := &services[i]
		base[i] = len(portals)
		for _, p := range s.Ports {
			portals = append(portals, Portal{Name: s.PortName(p), ClusterIP: s.ClusterIP, Port: p.Port, Protocol: p.Protocol, ProxyPort: pp})
			pp++
			if pp == 0 {
				pp = SimProxyPortBase
			}
		}
	}
	rs, err := Render(portals)
	if err != nil {
		return nil, err
	}
	r := &proxymodes.Rendering{
		Objects: len(portals) + rs.Rules, Bytes: len(rs.Data), Rules: rs.Data,
		Walk: func(t workload.Target) int { return base[t.Service] + t.Port + 1 },
		Info: map[string]string{"backend": "userspace"},
	}
	if cfg.Affinity.ClientIP {
		r.AffinityTimeout = cfg.Affinity.Timeout
	}
	return r, nil
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
	ok, bad := proxymodes.ProbeIPTablesBackends(ctx, node, probeRules)
	if len(ok) == 0 {
		return false, "no iptables back end accepts a REDIRECT portal (" + strings.Join(bad, "; ") + "); run make setup"
	}
	why := "listeners open in the node namespace; back ends " + strings.Join(ok, ", ") + " accept REDIRECT"
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
