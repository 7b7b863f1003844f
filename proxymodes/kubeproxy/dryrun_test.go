//go:build linux

package kubeproxy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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

// TestDryRunConfigIsAFile: DryRun hands kube-proxy its configuration as a
// regular file it can open by path, not /dev/stdin, which a user-mode-linux
// guest's /dev does not have (the IPVS rows of kube-proxy-10k failed there
// with "open /dev/stdin: no such file or directory"). A stand-in kube-proxy
// refuses anything but a regular file holding a KubeProxyConfiguration and
// writes the --write-config-to file; the folder is gone afterwards.
func TestDryRunConfigIsAFile(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "kube-proxy")
	script := `#!/bin/sh
# kube-proxy --config FILE --write-config-to OUT
[ "$1" = --config ] && [ "$3" = --write-config-to ] || { echo 'E0 "command failed" err="bad args"'; exit 1; }
[ -f "$2" ] && [ ! -L "$2" ] || { echo "E0 \"command failed\" err=\"open $2: not a regular file\""; exit 1; }
grep -q '^kind: KubeProxyConfiguration' "$2" || { echo 'E0 "command failed" err="no KubeProxyConfiguration"'; exit 1; }
echo "$2" > "` + filepath.Join(dir, "seen") + `"
cp "$2" "$4"
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	sc, err := scenarios.Parse([]byte("services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\n"), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := DryRun(context.Background(), fake, "iptables", sc); err != nil {
		t.Fatalf("DryRun: %v", err)
	}
	seen, err := os.ReadFile(filepath.Join(dir, "seen"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(strings.TrimSpace(string(seen)))); !os.IsNotExist(err) {
		t.Errorf("the dry run's folder %s is still there (%v)", filepath.Dir(string(seen)), err)
	}
}
