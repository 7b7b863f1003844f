package scenarios

import (
	"slices"
	"strings"
	"testing"
)

func TestImplementationsPerMode(t *testing.T) {
	sc, err := testCatalog.Parse([]byte("services: {count: 10}\nmodes: [none, iptables, ipvs, nftables, userspace]\nimplementation: [builtin, kube-proxy]\nkubeProxy:\n  modes: [nftables, iptables]\n"), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for mode, want := range map[string][]string{
		"none":      {"builtin"},
		"iptables":  {"builtin", "kube-proxy"},
		"ipvs":      {"builtin"}, // not in kubeProxy.modes
		"nftables":  {"builtin", "kube-proxy"},
		"userspace": {"builtin"}, // kube-proxy has none
	} {
		if got := sc.Implementations(mode); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", mode, got, want)
		}
	}
	// Default: builtin only, and no kube-proxy anywhere.
	def, err := testCatalog.Parse([]byte("services: {count: 10}\nmodes: [iptables]\n"), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := def.Implementations("iptables"); !slices.Equal(got, []string{"builtin"}) || def.UsesKubeProxy() {
		t.Errorf("default: %v, uses kube-proxy %v", got, def.UsesKubeProxy())
	}
}

func TestImplementationRefused(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"modes: [iptables]\nimplementation: [kube-proxy, iptables]\n", `implementation[1]: unknown value "iptables"`},
		{"modes: [iptables]\nimplementation: [builtin, builtin]\n", "listed twice"},
		{"modes: [iptables]\nimplementation: [kube-proxy]\nkubeProxy: {modes: [ipvs]}\n", `mode "ipvs" is not in modes`},
		{"modes: [iptables, userspace]\nimplementation: [kube-proxy]\n", "mode userspace has no kube-proxy implementation"},
		{"modes: [iptables]\nkubeProxy: {binaries: [/x]}\n", "no mode runs with kube-proxy"},
		{"modes: [iptables]\nimplementation: [kube-proxy]\ntopology: {nodes: 2}\nchurn: {rate: 1, duration: 1s}\nsweep: {minSyncPeriod: [0s, 1s]}\n", "sweep.minSyncPeriod: not yet with implementation kube-proxy on several nodes"},
		{"modes: [iptables]\nimplementation: [kube-proxy]\nkubeProxy: {config: [1]}\n", "kubeProxy.config: want a mapping"},
		{"modes: [iptables]\nimplementation: [kube-proxy]\nkubeProxy: {config: null}\n", "kubeProxy.config: has no value (want a mapping); fix: write key: value lines"},
	} {
		_, err := testCatalog.Parse([]byte("services: {count: 10}\n"+c.yaml), "t.yaml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want %q", c.yaml, err, c.want)
		}
	}
}
