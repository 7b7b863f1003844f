//go:build linux

package kubeproxy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/scenarios"
)

// TestDryRun: the real kube-proxy checks the configuration proxybench
// would give it without starting: a good one passes, an unknown or locked
// feature gate is a ConfigError naming the gate's field and kube-proxy's
// reason. It needs bin/kube-proxy, not root: kube-proxy opens nothing.
func TestDryRun(t *testing.T) {
	kb := testenv.RequireKube(t)
	for _, c := range []struct {
		name, gates, field, want string
	}{
		{"good", "{}", "", ""},
		{"unknown gate", "{NoSuchGate: true}", "kubeProxy.config.featureGates.NoSuchGate", "unrecognized feature gate: NoSuchGate"},
		{"locked gate", "{NFTablesProxyMode: false}", "kubeProxy.config.featureGates.NFTablesProxyMode", "locked to true"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc, err := scenarios.Parse([]byte("services: {count: 10}\nmodes: [iptables, nftables]\nimplementation: [kube-proxy]\nkubeProxy:\n  config:\n    featureGates: "+c.gates+"\n"), "t.yaml")
			if err != nil {
				t.Fatal(err)
			}
			for _, mode := range []string{"iptables", "nftables"} {
				err := DryRun(context.Background(), kb.KubeProxy, mode, sc)
				var ce *ConfigError
				switch {
				case c.want == "" && err != nil:
					t.Errorf("%s: %v", mode, err)
				case c.want != "" && !errors.As(err, &ce):
					t.Errorf("%s: %v, want a ConfigError", mode, err)
				case c.want != "" && (ce.Field != c.field || !strings.Contains(ce.Reason, c.want) || strings.Contains(ce.Reason, "\n")):
					t.Errorf("%s: %q at %s, want %q at %s", mode, ce.Reason, ce.Field, c.want, c.field)
				}
			}
		})
	}
}
