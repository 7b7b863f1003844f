// Package fidelity reads back from the kernel the ruleset a proxy mode
// installed in one node namespace, in the kernel's own tools' formats
// (iptables-save, nft list table, ipvsadm -Sn, ipset save), normalises it
// for what must differ between two implementations of the same mode
// (chain-name hashes, counters, ordering the kernel ignores) and diffs two
// such readings: builtin's and kube-proxy's for the same services (issue
// 13, item 7; docs/modes.md, "Fidelity"). `proxybench dump` prints a
// reading, `proxybench dump --diff` the comparison.
package fidelity

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/scenarios"
)

// Section is one tool's view of a namespace's kernel state.
type Section struct {
	// Tool is the command line that printed Text ("iptables-legacy-save",
	// "nft list table ip kube-proxy", "ipvsadm -Sn", "ipset save").
	Tool string
	// Text is its output, verbatim.
	Text string
}

// Reading is what a mode left in one namespace: the sections of the tools
// that had something to show, in a fixed order (iptables, ip6tables, nft,
// ipvsadm, ipset, kube-ipvs0 addresses).
type Reading struct {
	Mode string
	// Implementation is Builtin or KubeProxy (set by Install).
	Implementation string `json:",omitempty"`
	Sections       []Section
	// Testbed lists addresses and prefixes of objects the testbed itself
	// added (kube-proxy's control plane: the `kubernetes` Service's
	// ClusterIP and its service range); Normalise drops what holds them.
	Testbed []string `json:",omitempty"`
	// Notes are what went wrong without spoiling the reading (a failed
	// cleanup before the testbed's teardown).
	Notes []string `json:",omitempty"`
}

// String prints every section under a "# <tool>" header, as a user would
// see it running the tools one after the other.
func (r Reading) String() string {
	var b strings.Builder
	for i, s := range r.Sections {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "# %s\n%s", s.Tool, s.Text)
		if !strings.HasSuffix(s.Text, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// Section returns the section printed by tool, if any.
func (r Reading) Section(tool string) (Section, bool) {
	for _, s := range r.Sections {
		if s.Tool == tool {
			return s, true
		}
	}
	return Section{}, false
}

// Backends are the iptables back ends Read looks at: the one a builtin
// proxier programs, or both for kube-proxy (it uses whichever `iptables`
// is on its PATH: Debian's alternative, nft unless legacy was selected).
var Backends = []string{"legacy", "nft"}

// Read returns what mode left in node, read with the kernel's own tools
// run inside node (proxymodes.Node.Run):
//
//   - iptables and ipvs: iptables-<be>-save and ip6tables-<be>-save for
//     each back end of backends that holds a KUBE- chain (kube-proxy's
//     dual-stack detection programs IPv6 too);
//   - nftables: nft list table for every table named kube-proxy (ip and
//     ip6 families);
//   - the mode's own read-back commands (proxymodes.Mode.ReadBack), for
//     ipvs ipvsadm -Sn (every virtual and real server, numeric), ipset
//     save, and the IPv4 addresses of kube-ipvs0 (ip -4 -o addr show).
//
// mode is one of scenarios.KubeProxyModes. A tool that fails is an error
// naming it and its output (an optional read-back command's reading is
// left out instead); a tool whose output holds nothing of the mode is
// left out.
func Read(ctx context.Context, node proxymodes.Node, mode string, backends []string) (Reading, error) {
	r := Reading{Mode: mode}
	run := func(name string, args ...string) (string, error) {
		out, err := node.Run(ctx, nil, name, args...)
		if err != nil {
			return "", fmt.Errorf("fidelity: %s %s: %w: %s", name, strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	md, err := modes.Lookup(mode)
	if err != nil || !slices.Contains(scenarios.KubeProxyModes, mode) {
		return r, fmt.Errorf("fidelity: mode %q: want %s", mode, orList(scenarios.KubeProxyModes))
	}
	// Every mode: a mode that should leave no iptables rules (nftables)
	// is read too, so that any it does leave shows.
	for _, fam := range []string{"iptables", "ip6tables"} {
		for _, be := range backends {
			tool := fam + "-" + be + "-save"
			out, err := run(tool)
			if err != nil {
				return r, err
			}
			if strings.Contains(out, ":KUBE-") {
				r.Sections = append(r.Sections, Section{Tool: tool, Text: out})
			}
		}
	}
	tables, err := run("nft", "list", "tables")
	if err != nil {
		return r, err
	}
	for _, line := range strings.Split(tables, "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "table" && f[2] == "kube-proxy" {
			out, err := run("nft", "list", "table", f[1], f[2])
			if err != nil {
				return r, err
			}
			r.Sections = append(r.Sections, Section{Tool: "nft list table " + f[1] + " " + f[2], Text: out})
		}
	}
	for _, c := range md.ReadBack {
		out, err := run(c.Name, c.Args...)
		if err != nil {
			if c.Optional {
				continue
			}
			return r, err
		}
		r.Sections = append(r.Sections, Section{Tool: strings.Join(append([]string{c.Name}, c.Args...), " "), Text: out})
	}
	return r, nil
}

// orList joins names as "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
