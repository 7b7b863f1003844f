// Package modes lists the proxy modes of this build, once: adding a mode
// is its own package under proxymodes plus one line in All
// (docs/architecture.md, "Adding a mode"). It imports every mode, and so
// their kernel libraries; the sim engine takes the list from its caller
// instead of importing this package.
package modes

import (
	"fmt"
	"strings"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/iptables"
	"github.com/proxybench/proxybench/proxymodes/ipvs"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/proxymodes/nftables"
	"github.com/proxybench/proxybench/proxymodes/none"
	"github.com/proxybench/proxybench/proxymodes/userspace"
	"github.com/proxybench/proxybench/scenarios"
)

// All is every mode of this build, in the order doctor and help list them.
var All = []proxymodes.Mode{
	none.Mode,
	iptables.Mode,
	ipvs.Mode,
	nftables.Mode,
	userspace.Mode,
}

// Lookup returns the mode called name, or an error listing every name.
func Lookup(name string) (proxymodes.Mode, error) {
	for _, m := range All {
		if m.Name == name {
			return m, nil
		}
	}
	return proxymodes.Mode{}, fmt.Errorf("unknown proxy mode %q (modes: %s)", name, strings.Join(Names(), ", "))
}

// Names lists the modes' names in the order of All.
func Names() []string {
	out := make([]string, len(All))
	for i, m := range All {
		out[i] = m.Name
	}
	return out
}

// Catalog is what scenario validation checks names against.
// It carries each mode's Protocols, the modes with a scheduler
// (HasScheduler) and those whose proxy terminates connections
// (Traits.Terminates), the modes with IPv6, node ports and topology
// hints, and kube-proxy's configuration check (kubeproxy.CheckConfig).
func Catalog() scenarios.Catalog {
	c := scenarios.Catalog{Modes: Names(), Protocols: map[string][]string{}, KubeProxyConfig: kubeproxy.CheckConfig}
	for _, m := range All {
		c.Protocols[m.Name] = m.Protocols
		if m.HasScheduler() {
			c.Schedulers = append(c.Schedulers, m.Name)
		}
		if m.Traits.Terminates {
			c.Terminating = append(c.Terminating, m.Name)
		}
		if m.IPv6 {
			c.IPv6 = append(c.IPv6, m.Name)
		}
		if m.NodePorts {
			c.NodePorts = append(c.NodePorts, m.Name)
		}
		if m.TopologyHints {
			c.TopologyHints = append(c.TopologyHints, m.Name)
		}
	}
	return c
}
