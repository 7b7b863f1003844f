package fidelity

import (
	"regexp"
	"slices"

	"github.com/proxybench/proxybench/scenarios"
)

// Known is a documented difference between builtin's ruleset and
// kube-proxy's for the same services: a line of the normalised comparison
// that one side has and the other does not, why, and what it changes.
// docs/modes.md ("Fidelity") lists every one under its ID.
type Known struct {
	// ID is the name docs/modes.md lists it under.
	ID string
	// Modes it applies to.
	Modes []string `json:"-"`
	// Side is the implementation whose reading has the line (Builtin,
	// KubeProxy), "" for both.
	Side string `json:"-"`
	// Tool and Line match the section and the normalised line.
	Tool, Line *regexp.Regexp `json:"-"`
	// Why says where the difference comes from and what it changes.
	Why string `json:"-"`
	// MayNotShow, when set, says when the difference is absent without
	// having been fixed (a kernel without IPv6); Explain does not count
	// it unused then.
	MayNotShow string `json:"-"`
}

// Match returns the first of known that d (of mode) is, or nil.
func Match(known []Known, mode string, d Difference) *Known {
	for i := range known {
		k := &known[i]
		if !slices.Contains(k.Modes, mode) || (k.Side != "" && k.Side != d.Side) {
			continue
		}
		if (k.Tool == nil || k.Tool.MatchString(d.Tool)) && k.Line.MatchString(d.Line) {
			return k
		}
	}
	return nil
}

// Explain sets Known on each of diffs (of mode) from known, and returns the
// differences no entry explains and the entries of mode that explained
// none (a difference that went away: fixed, or the case is not in the
// services compared), but those that may not show (Known.MayNotShow).
func Explain(known []Known, mode string, diffs []Difference) (unexplained []Difference, unused []Known) {
	used := map[string]bool{}
	for i := range diffs {
		diffs[i].Known = Match(known, mode, diffs[i])
		if diffs[i].Known == nil {
			unexplained = append(unexplained, diffs[i])
		} else {
			used[diffs[i].Known.ID] = true
		}
	}
	for _, k := range known {
		if slices.Contains(k.Modes, mode) && !used[k.ID] && k.MayNotShow == "" {
			unused = append(unused, k)
		}
	}
	return unexplained, unused
}

var (
	allModes     = scenarios.KubeProxyModes
	iptablesMode = []string{"iptables"}
	ipvsMode     = []string{"ipvs"}
)

func re(s string) *regexp.Regexp { return regexp.MustCompile(s) }

// KnownDifferences are the documented differences of kube-proxy v1.37.2's
// rulesets from builtin's for the same services (docs/modes.md,
// "Fidelity", lists them under the same IDs). TestKernelFidelity fails on
// a difference none of them explains, and on one of them that no longer
// shows (fixed: remove it here and in the docs).
var KnownDifferences = []Known{
	{ID: "dual-stack", Modes: allModes, Side: KubeProxy, Tool: re(`^(ip6tables-|nft list table ip6 )`), Line: re(`.`),
		Why:        "kube-proxy runs dual-stack when the node namespace supports IPv6 and programs an IPv6 ruleset beside the IPv4 one (base chains and helpers, no service: the testbed has none); builtin programs IPv4 only. No effect on IPv4 traffic; every kube-proxy sync also runs the IPv6 program, which its CPU figures include.",
		MayNotShow: "on a kernel without IPv6 (Debian's user-mode-linux guest, uml:debian) kube-proxy programs IPv4 only"},
	{ID: "dual-stack", Modes: ipvsMode, Side: KubeProxy, Tool: re(`^ipset`), Line: re(`KUBE-6-|family inet6`),
		Why:        "kube-proxy's IPVS mode creates the IPv6 twins (KUBE-6-*) of its ipsets for its IPv6 ruleset.",
		MayNotShow: "on a kernel without IPv6 (uml:debian) kube-proxy creates no IPv6 set"},
	{ID: "iptables-canary", Modes: iptablesMode, Side: KubeProxy, Tool: re(`^iptables-`), Line: re(`KUBE-PROXY-CANARY|^\*mangle :(PREROUTING|INPUT|FORWARD|OUTPUT|POSTROUTING) `),
		Why: "kube-proxy's iptables monitor creates empty KUBE-PROXY-CANARY chains in the mangle, nat and filter tables and polls them to notice another program flushing its tables (then it resyncs); builtin has no monitor. The chains hold no rule."},
	{ID: "iptables-nfacct", Modes: iptablesMode, Tool: re(`^iptables-`), Line: re(`^\*filter -A KUBE-FORWARD -m conntrack --ctstate INVALID |^\*nat -A KUBE-NODEPORTS -d 127\.0\.0\.0/8 .* -m nfacct --nfacct-name +localhost_nps_accepted_pkts `),
		Why: "kube-proxy counts, when the kernel has xt_nfacct, the packets KUBE-FORWARD drops as conntrack INVALID in the nfacct object ct_state_invalid_dropped_pkts (its metric kubeproxy_iptables_ct_state_invalid_dropped_packets_total), and the localhost node port packets it accepts in localhost_nps_accepted_pkts (kubeproxy_iptables_localhost_nodeports_accepted_packets_total: one more KUBE-NODEPORTS rule per node port, -d 127.0.0.0/8 ... -m nfacct, before the port's own rule and jumping to the same KUBE-EXT chain); builtin drops and accepts the same packets without counting them (the INVALID rule without -m nfacct, no localhost rule: the port's own rule takes localhost packets to the same chain)."},
	{ID: "ipvs-ipset-maxelem", Modes: ipvsMode, Tool: re(`^ipset`), Line: re(`^create (KUBE-CLUSTER-IP hash:ip,port|KUBE-IPVS-IPS hash:ip) family inet hashsize 1024 maxelem `),
		Why: "builtin creates KUBE-CLUSTER-IP (a member per service port) and KUBE-IPVS-IPS (a member per kube-ipvs0 address) with maxelem 1048576, so that scenarios past 65,536 ClusterIP:port pairs or addresses run; kube-proxy keeps ipset's default 65536, and past that many its ipset additions fail."},
}
