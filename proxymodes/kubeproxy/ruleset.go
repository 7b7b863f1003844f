//go:build linux

package kubeproxy

import (
	"context"
	"fmt"
	"strings"

	"github.com/proxybench/proxybench/topology"
)

// IPVSRuleset is what kube-proxy's IPVS mode left in a node namespace,
// each text verbatim in its tool's own format.
type IPVSRuleset struct {
	// IPVS is `ipvsadm -Sn`: one -A line per virtual server (ClusterIP:port,
	// scheduler, -p timeout for ClientIP affinity) and one -a line per real
	// server with its weight (a terminating endpoint kept at weight 0).
	IPVS string
	// IPSet is `ipset save`: KUBE-CLUSTER-IP (hash:ip,port) and the other
	// KUBE-* sets kube-proxy's iptables rules match on.
	IPSet string
	// IPTables is `iptables-save` of the `iptables` on PATH (Debian's
	// alternative: the nft back end), the back end kube-proxy itself uses:
	// the KUBE-SERVICES, KUBE-POSTROUTING, KUBE-MARK-MASQ chains that
	// match the sets.
	IPTables string
	// Addresses is `ip -4 -o addr show dev kube-ipvs0`: every ClusterIP
	// bound to kube-proxy's dummy interface.
	Addresses string
}

// ReadIPVS reads an IPVS ruleset back from node with the kernel's own
// tools (ipvsadm, ipset, iptables-save, ip), run inside the namespace.
// Where IP_VS is missing (the host kernel here) call it inside a
// user-mode-linux guest (testenv.InUML, or a run with kernel: uml). A
// tool failing is an error naming it and carrying its output.
func ReadIPVS(ctx context.Context, node *topology.Netns) (IPVSRuleset, error) {
	var r IPVSRuleset
	for _, c := range []struct {
		into *string
		argv []string
	}{
		{&r.IPVS, []string{"ipvsadm", "-Sn"}},
		{&r.IPSet, []string{"ipset", "save"}},
		{&r.IPTables, []string{"iptables-save"}},
		{&r.Addresses, []string{"ip", "-4", "-o", "addr", "show", "dev", "kube-ipvs0"}},
	} {
		out, err := node.Run(ctx, nil, c.argv[0], c.argv[1:]...)
		if err != nil {
			return r, fmt.Errorf("kubeproxy: %s in %s: %w: %s", strings.Join(c.argv, " "), node.Name, err, out)
		}
		*c.into = string(out)
	}
	return r, nil
}

// String prints the four texts under "# <tool>" headers.
func (r IPVSRuleset) String() string {
	var b strings.Builder
	for _, s := range []struct{ tool, text string }{
		{"ipvsadm -Sn", r.IPVS}, {"ipset save", r.IPSet}, {"iptables-save", r.IPTables}, {"ip -4 -o addr show dev kube-ipvs0", r.Addresses},
	} {
		fmt.Fprintf(&b, "# %s\n%s", s.tool, s.text)
		if s.text != "" && !strings.HasSuffix(s.text, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}
