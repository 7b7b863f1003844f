package kubeproxy

import (
	"errors"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/scenarios"
)

var checkCatalog = scenarios.Catalog{Modes: []string{"none", "iptables", "ipvs", "nftables", "userspace"}, KubeProxyConfig: CheckConfig}

const checkBase = "services: {count: 10}\nmodes: [iptables, nftables, ipvs]\nimplementation: [builtin, kube-proxy]\nkubeProxy:\n  config:\n"

// TestCheckConfigRefuses: each bad kubeProxy.config is one error at the
// field's own line (the line after checkBase's 5 is 6), naming the
// field, with a fix.
func TestCheckConfigRefuses(t *testing.T) {
	for _, c := range []struct {
		name, yaml, field string
		line              int
		want              string
	}{
		{"misspelt key", "    iptables:\n      minSyncPerod: 1s\n", "kubeProxy.config.iptables.minSyncPerod", 7, `did you mean "minSyncPeriod"`},
		{"unknown top-level block", "    iptabels:\n      minSyncPeriod: 1s\n", "kubeProxy.config.iptabels", 6, `rename it to "iptables"`},
		{"wrong case", "    IPTables: {minSyncPeriod: 1s}\n", "kubeProxy.config.IPTables", 6, "unknown field"},
		{"bad duration", "    iptables:\n      minSyncPeriod: banana\n", "kubeProxy.config.iptables.minSyncPeriod", 7, `want a duration, got "banana"`},
		{"number for a duration", "    nftables: {syncPeriod: 5}\n", "kubeProxy.config.nftables.syncPeriod", 6, "want a duration"},
		{"string for an integer", "    iptables: {masqueradeBit: x}\n", "kubeProxy.config.iptables.masqueradeBit", 6, "want an integer"},
		{"nested list", "    ipvs: {excludeCIDRs: [[10.0.0.0/8]]}\n", "kubeProxy.config.ipvs.excludeCIDRs", 6, "want a list of strings, got a list holding a list"},
		{"scalar for a block", "    ipvs: 5\n", "kubeProxy.config.ipvs", 6, "want a mapping of fields"},
		{"owned field", "    clusterCIDR: 10.0.0.0/8\n", "kubeProxy.config.clusterCIDR", 6, "set network.clusterCIDR"},
		{"owned nested field", "    conntrack:\n      tcpBeLiberal: true\n      maxPerCore: 0\n", "kubeProxy.config.conntrack.maxPerCore", 8, "set by the testbed"},
		{"owned bind address", "    bindAddress: 0.0.0.0\n", "kubeProxy.config.bindAddress", 6, "set by the testbed"},
		{"owned hostname", "    hostnameOverride: n\n", "kubeProxy.config.hostnameOverride", 6, "set by the testbed"},
		{"negative minSyncPeriod", "    nftables: {minSyncPeriod: -1s}\n", "kubeProxy.config.nftables.minSyncPeriod", 6, "negative"},
		{"negative syncPeriod", "    iptables: {syncPeriod: -1s}\n", "kubeProxy.config.iptables.syncPeriod", 6, "negative"},
		{"min above the scenario's sync", "    iptables: {minSyncPeriod: 1h}\n", "kubeProxy.config.iptables.minSyncPeriod", 6, "minSyncPeriod 1h0m0s > syncPeriod"},
		{"scenario's own min above sync", "    {}\niptables: {syncPeriod: 1s, minSyncPeriod: 5s}\n", "iptables.minSyncPeriod", 7, "which kube-proxy refuses"},
		{"unknown scheduler", "    ipvs: {scheduler: fifo}\n", "kubeProxy.config.ipvs.scheduler", 6, `no IPVS scheduler "fifo"`},
		{"negative ipvs timeout", "    ipvs: {udpTimeout: -1s}\n", "kubeProxy.config.ipvs.udpTimeout", 6, "negative"},
		{"bad exclude CIDR", "    ipvs: {excludeCIDRs: [10.0.0.0/8, x]}\n", "kubeProxy.config.ipvs.excludeCIDRs[1]", 6, "not a CIDR"},
		{"masquerade bit", "    nftables: {masqueradeBit: 32}\n", "kubeProxy.config.nftables.masqueradeBit", 6, "use 0..31"},
		{"oom score", "    oomScoreAdj: -1001\n", "kubeProxy.config.oomScoreAdj", 6, "out of range"},
		{"detect local mode", "    detectLocalMode: ClusterCIDRs\n", "kubeProxy.config.detectLocalMode", 6, `did you mean "ClusterCIDR"`},
		{"bridge without interface", "    detectLocalMode: BridgeInterface\n", "kubeProxy.config.detectLocalMode", 6, "needs detectLocal.bridgeInterface"},
		{"node port address", "    nodePortAddresses: [primary, nowhere]\n", "kubeProxy.config.nodePortAddresses[1]", 6, "neither a CIDR"},
		{"burst", "    clientConnection: {burst: -1}\n", "kubeProxy.config.clientConnection.burst", 6, "negative"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := checkCatalog.Parse([]byte(checkBase+c.yaml), "t.yaml")
			var fe *scenarios.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err %v, want a *FieldError", err)
			}
			var found *scenarios.FieldError
			for _, e := range unjoin(err) {
				if errors.As(e, &fe) && fe.Field == c.field {
					found = fe
				}
			}
			if found == nil {
				t.Fatalf("no error at %s in:\n%v", c.field, err)
			}
			if found.Line != c.line || !strings.Contains(found.Error(), c.want) || found.Fix == "" {
				t.Errorf("got %v (line %d), want line %d, %q and a fix", found, found.Line, c.line, c.want)
			}
		})
	}
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// TestCheckConfigAccepts: kube-proxy's own fields with good values pass,
// and a scenario without kube-proxy is not checked.
func TestCheckConfigAccepts(t *testing.T) {
	good := "    featureGates: {NFTablesProxyMode: true}\n    iptables: {minSyncPeriod: 0s, syncPeriod: 1m, masqueradeAll: true, localhostNodePorts: false}\n" +
		"    nftables: {minSyncPeriod: 2s, masqueradeBit: 0}\n    ipvs: {scheduler: wlc, strictARP: true, excludeCIDRs: [10.0.0.0/8], tcpTimeout: 0s}\n" +
		"    conntrack: {tcpBeLiberal: true}\n    nodePortAddresses: [primary, 198.18.0.0/15]\n    detectLocalMode: ClusterCIDR\n" +
		"    clientConnection: {qps: 50, burst: 100}\n    logging: {format: text}\n    configSyncPeriod: 0s\n    oomScoreAdj: -999\n"
	if _, err := checkCatalog.Parse([]byte(checkBase+good), "t.yaml"); err != nil {
		t.Errorf("good config refused: %v", err)
	}
	if errs := CheckConfig(&scenarios.Scenario{Modes: []string{"iptables"}, KubeProxy: scenarios.KubeProxySpec{Config: scenarios.FreeForm{"nope": 1}}}); errs != nil {
		t.Errorf("builtin-only scenario checked: %v", errs)
	}
}
