//go:build linux

package kubeproxy

import (
	"strings"
	"testing"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/scenarios"
)

func TestCheckModeVersion(t *testing.T) {
	gate := func(name string) map[string]any { return map[string]any{"featureGates": map[string]any{name: true}} }
	for _, c := range []struct {
		mode, version string
		config        map[string]any
		want          string // "" ok, else part of the error
	}{
		{"nftables", "v1.28.9", nil, "came in v1.29"},
		{"nftables", "v1.29.0", nil, "NFTablesProxyMode"},
		{"nftables", "v1.30.2", gate("NFTablesProxyMode"), ""},
		{"nftables", "v1.31.0", nil, ""},
		{"nftables", "v1.37.2", nil, ""},
		{"iptables", "v1.20.0", nil, ""},
		{"ipvs", "v1.37.2", nil, ""},
		{"ipvs", "v1.40.0", nil, "KubeProxyIPVS"},
		{"ipvs", "v1.40.0", gate("KubeProxyIPVS"), ""},
		{"ipvs", "v1.43.0", gate("KubeProxyIPVS"), "removed in v1.43"},
		{"userspace", "v1.37.2", nil, "no mode"},
		{"iptables", "v0.0.0-master", nil, ""},
		{"iptables", "1.37", nil, "not vMAJOR"},
	} {
		err := CheckModeVersion(c.mode, c.version, c.config)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %s: %v, want ok", c.mode, c.version, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s %s: %v, want an error with %q", c.mode, c.version, err, c.want)
		}
	}
}

func TestVariantOfBuiltinMode(t *testing.T) {
	base := proxymodes.Mode{Name: "nftables", Render: nil, Sim: proxymodes.SimModel{Lookup: proxymodes.LookupHash}}
	v := Variant(base, VariantSpec{Binary: "/x/kube-proxy", Version: "v1.36.3", Label: RowLabel("nftables", "v1.36.3", true)})
	if v.Name != "nftables (kube-proxy v1.36.3)" || v.BaseName() != "nftables" || v.ImplementationName() != "kube-proxy" || !v.SingleFullSync || v.Render != nil || v.New == nil {
		t.Errorf("variant %+v", v)
	}
	if RowLabel("iptables", "v1.37.2", false) != "iptables (kube-proxy)" {
		t.Error(RowLabel("iptables", "v1.37.2", false))
	}
	if base.BaseName() != "nftables" || base.ImplementationName() != "builtin" {
		t.Error("builtin mode's names")
	}
}

func TestPassFromScenario(t *testing.T) {
	sc, err := scenarios.Parse([]byte("services: {count: 10}\nmodes: [ipvs]\nimplementation: [kube-proxy]\nipvs: {scheduler: wrr, minSyncPeriod: 2s}\nkubeProxy:\n  config:\n    ipvs: {strictARP: true}\n    featureGates: {Foo: true}\n"), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pass, err := PassFromScenario(sc, "ipvs")
	if err != nil {
		t.Fatal(err)
	}
	ipvs := pass["ipvs"].(map[string]any)
	if ipvs["scheduler"] != "wrr" || ipvs["minSyncPeriod"] != "2s" || ipvs["strictARP"] != true || pass["featureGates"].(map[string]any)["Foo"] != true {
		t.Errorf("pass = %v", pass)
	}
	sc.KubeProxy.Config = scenarios.FreeForm{"hostnameOverride": "x"}
	if _, err := PassFromScenario(sc, "ipvs"); err == nil || !strings.Contains(err.Error(), "hostnameOverride") {
		t.Errorf("owned field: %v", err)
	}
}
