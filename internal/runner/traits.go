//go:build linux

package runner

import (
	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
)

// FillTraits gives each row of r without traits (a result written before
// reports.ModeResult.Traits was recorded) its mode's, from the build's
// mode list, as a run records them: a builtin row its Mode's, a
// kube-proxy row its base mode's kube-proxy variant's (kubeproxy.Variant).
// A row of a mode this build lacks, or of a mode without traits, is left
// as it is. The report command calls it on the result it reads, so an
// older result reads as it did before.
func FillTraits(r *reports.Result) {
	for i := range r.Modes {
		m := &r.Modes[i]
		if m.Traits != (measure.ModeTraits{}) {
			continue
		}
		name := m.BaseMode
		if name == "" {
			name = m.Mode
		}
		md, err := modes.Lookup(name)
		if err != nil {
			continue
		}
		if m.Implementation == scenarios.ImplKubeProxy {
			md = kubeproxy.Variant(md, kubeproxy.VariantSpec{Label: m.Mode})
		}
		m.Traits = md.Traits
	}
}
