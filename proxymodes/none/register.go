package none

import (
	"context"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/scenarios"
)

func init() {
	proxymodes.Register(proxymodes.Mode{
		Name:   "none",
		New:    func(*scenarios.Scenario, proxymodes.Node) (proxymodes.Proxier, error) { return New(), nil },
		Direct: true,
		Probe: func(context.Context, proxymodes.Node) (bool, string) {
			return true, "network namespaces and veth work"
		},
	})
}
