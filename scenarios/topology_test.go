package scenarios

import (
	"strings"
	"testing"
)

// TestTrafficDistributionRefused: a bad trafficDistribution or zone list
// is refused at its field with a fix and a line (exit 2 before anything
// is built).
func TestTrafficDistributionRefused(t *testing.T) {
	const topo = "topology: {pods: isolated, nodes: 3, zones: [zone-a, zone-a, zone-b]}\n"
	for _, tc := range []struct {
		name, yaml, field, msg, fix string
	}{
		{"unknown value", topo + "services: {count: 1, trafficDistribution: PreferZone}\n", "services.trafficDistribution", `unknown value "PreferZone"`, "PreferSameZone"},
		{"lower case", topo + "services: {count: 1, trafficDistribution: preferClose}\n", "services.trafficDistribution", "unknown value", "PreferClose"},
		{"hints without zones", "topology: {pods: isolated, nodes: 3}\nservices: {count: 1, trafficDistribution: PreferClose}\n", "services.trafficDistribution", "without topology.zones", "topology.zones"},
		{"hints without zones in a group", "topology: {pods: isolated, nodes: 2}\nservices:\n  count: 1\n  groups:\n  - {count: 1, trafficDistribution: PreferSameZone}\n", "services.groups[0].trafficDistribution", "without topology.zones", "topology.zones"},
		{"shared pods", "topology: {nodes: 2, zones: [a, b]}\nservices: {count: 1, trafficDistribution: PreferSameNode}\n", "services.trafficDistribution", "topology.pods: isolated", "isolated"},
		{"zones for fewer nodes", "topology: {pods: isolated, nodes: 3, zones: [zone-a, zone-b]}\nservices: {count: 1}\n", "topology.zones", "2 zones given for 3 nodes", "one zone per node"},
		{"bad zone name", "topology: {pods: isolated, nodes: 2, zones: [zone-a, \"zone b\"]}\nservices: {count: 1}\n", "topology.zones[1]", "not a label value", "zone-a"},
		{"empty zone name", "topology: {pods: isolated, nodes: 2, zones: [zone-a, \"\"]}\nservices: {count: 1}\n", "topology.zones[1]", "not a label value", "zone-a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "f.yaml")
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.yaml)
			}
			for _, fe := range fieldErrors(t, err) {
				if fe.Field == tc.field && strings.Contains(fe.Msg, tc.msg) && strings.Contains(fe.Fix, tc.fix) && fe.Line > 0 {
					return
				}
			}
			t.Errorf("no error at %s saying %q with a fix naming %q and a line; got:\n%v", tc.field, tc.msg, tc.fix, err)
		})
	}
}

// TestTrafficDistributionAccepted: every value validates where its
// hints can be written (PreferSameNode needs no zones), and the zones
// map to nodes by index.
func TestTrafficDistributionAccepted(t *testing.T) {
	for _, td := range TrafficDistributions {
		y := "topology: {pods: isolated, nodes: 3, zones: [zone-a, zone-a, zone-b]}\nservices:\n  count: 1\n  groups:\n  - {count: 1, trafficDistribution: " + td + "}\n"
		sc, err := Parse([]byte(y), "f.yaml")
		if err != nil {
			t.Fatalf("%s refused: %v", td, err)
		}
		exps, err := sc.Exposures()
		if err != nil {
			t.Fatal(err)
		}
		if exps[0].TrafficDistribution != "" || exps[1].TrafficDistribution != td || !strings.HasSuffix(exps[1].Label(), "td="+td) {
			t.Errorf("%s: exposures %+v", td, exps)
		}
		if sc.ZoneOf("node-1") != "zone-a" || sc.ZoneOf("node-2") != "zone-b" || sc.ZoneOf("node-3") != "" {
			t.Errorf("zones: %v", sc.NodeZones())
		}
	}
	if _, err := Parse([]byte("topology: {pods: isolated, nodes: 2}\nservices: {count: 1, trafficDistribution: PreferSameNode}\n"), "f.yaml"); err != nil {
		t.Errorf("PreferSameNode without zones refused: %v", err)
	}
}

// TestTrafficDistributionRefusesModesWithoutHints: with a catalog, a
// trafficDistribution under a builtin mode that does not follow hints is
// refused at the first field that sets it, naming the mode, why and a
// fix; kube-proxy alone runs it, unless serviceTypes (whose passes run
// builtin in every mode) is set.
func TestTrafficDistributionRefusesModesWithoutHints(t *testing.T) {
	cat := Catalog{Modes: []string{"none", "iptables", "ipvs", "nftables", "userspace"}, TopologyHints: []string{"iptables", "nftables"}}
	const topo = "topology: {pods: isolated, nodes: 3, zones: [zone-a, zone-a, zone-b]}\n"
	const grp = "services:\n  count: 1\n  groups:\n  - {count: 1, trafficDistribution: PreferSameNode}\n"
	for _, tc := range []struct {
		name, yaml, msg, fix string
	}{
		{"ipvs builtin", "modes: [none, ipvs]\n" + topo + grp, "builtin ipvs does not narrow its endpoints", "implementation: [kube-proxy]"},
		{"ipvs named as kube-proxy's", "modes: [none, ipvs]\n" + topo + grp, "kube-proxy's ipvs follows them", "remove ipvs from modes"},
		{"userspace", "modes: [iptables, userspace]\n" + topo + grp, "no userspace mode", "remove userspace from modes"},
		{"ipvs with serviceTypes under kube-proxy", "modes: [none, ipvs]\nimplementation: [kube-proxy]\n" + topo + grp + "serviceTypes: {}\n", "builtin ipvs", "remove trafficDistribution"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cat.Parse([]byte(tc.yaml), "f.yaml")
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.yaml)
			}
			for _, fe := range fieldErrors(t, err) {
				if fe.Field == "services.groups[0].trafficDistribution" && strings.Contains(fe.Msg, tc.msg) && strings.Contains(fe.Fix, tc.fix) && fe.Line > 0 {
					return
				}
			}
			t.Errorf("no error at services.groups[0].trafficDistribution saying %q with a fix naming %q and a line; got:\n%v", tc.msg, tc.fix, err)
		})
	}
	for _, y := range []string{
		"modes: [none, iptables, nftables]\n" + topo + grp,
		"modes: [none, ipvs]\nimplementation: [kube-proxy]\n" + topo + grp,
		"modes: [none, ipvs, userspace]\n" + topo + "services: {count: 1}\n",
	} {
		if _, err := cat.Parse([]byte(y), "f.yaml"); err != nil {
			t.Errorf("refused:\n%s%v", y, err)
		}
	}
}
