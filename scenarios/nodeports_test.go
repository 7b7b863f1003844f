package scenarios

import (
	"strings"
	"testing"
)

// TestNodePortLookupRefused: traffic.nodePorts is refused at its field,
// with a fix and a line, when no service has node ports, and, with a
// catalog, when a builtin row's mode programs none; accepted when every
// builtin row programs them or the mode runs with kube-proxy alone.
func TestNodePortLookupRefused(t *testing.T) {
	cat := Catalog{Modes: []string{"none", "iptables", "ipvs", "nftables", "userspace"}, NodePorts: []string{"iptables", "nftables"}}
	const np = "services:\n  count: 2\n  groups:\n  - {count: 2, type: NodePort}\ntraffic: {nodePorts: true}\n"
	for _, tc := range []struct {
		name, yaml, msg, fix string
	}{
		{"every service ClusterIP", "modes: [none, iptables]\nservices: {count: 2}\ntraffic: {nodePorts: true}\n", "no service has node ports", "NodePort or LoadBalancer"},
		{"userspace builtin", "modes: [none, iptables, userspace]\n" + np, "builtin userspace programs no node ports", "remove userspace from modes"},
		{"ipvs builtin beside kube-proxy", "modes: [none, ipvs]\nimplementation: [builtin, kube-proxy]\n" + np, "builtin ipvs programs no node ports", "implementation: [kube-proxy] alone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cat.Parse([]byte(tc.yaml), "f.yaml")
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.yaml)
			}
			for _, fe := range fieldErrors(t, err) {
				if fe.Field == "traffic.nodePorts" && strings.Contains(fe.Msg, tc.msg) && strings.Contains(fe.Fix, tc.fix) && fe.Line > 0 {
					return
				}
			}
			t.Errorf("no error at traffic.nodePorts saying %q with a fix naming %q and a line; got:\n%v", tc.msg, tc.fix, err)
		})
	}
	for _, y := range []string{
		"modes: [none, iptables, nftables]\n" + np,
		"modes: [none, ipvs]\nimplementation: [kube-proxy]\n" + np,
	} {
		if _, err := cat.Parse([]byte(y), "f.yaml"); err != nil {
			t.Errorf("refused:\n%s%v", y, err)
		}
	}
	sc, err := cat.Parse([]byte("modes: [none, iptables]\n"+np), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.NodePortServices(); len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Errorf("NodePortServices %v, want [2 3] (the group after the 2 ClusterIP services)", got)
	}
}
