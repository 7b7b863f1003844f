package iptables

import (
	"net/netip"
	"regexp"
	"strings"

	"github.com/proxybench/proxybench/proxymodes"
)

var (
	// iptables-save: a rule's chain, its jump or goto, its DNAT target.
	saveRuleRE = regexp.MustCompile(`^-A (\S+) `)
	saveJumpRE = regexp.MustCompile(` -[jg] (\S+)`)
	saveDNATRE = regexp.MustCompile(`--to-destination (\d+\.\d+\.\d+\.\d+)(?::\d+)?`)
)

// endpointReadBack is Mode.Endpoints: the nat table of both back ends
// (iptables-legacy-save and iptables-nft-save -t nat; a row writes one
// of them, the other lists no KUBE-SERVICES).
var endpointReadBack = &proxymodes.EndpointReadBack{
	Commands: []proxymodes.ReadCommand{
		{Name: "iptables-legacy-save", Args: []string{"-t", "nat"}},
		{Name: "iptables-nft-save", Args: []string{"-t", "nat"}},
	},
	Parse: ParseEndpoints,
}

// ParseEndpoints adds to out the DNAT targets of the chains reachable by
// jumps and gotos from KUBE-SERVICES in text (iptables-save -t nat
// output): the endpoints new connections can reach. A KUBE-SEP chain
// left behind but no longer jumped to sends nothing there, so it adds
// nothing.
func ParseEndpoints(text string, out map[netip.Addr]bool) {
	jumps := map[string][]string{}
	dnat := map[string][]string{}
	for _, l := range strings.Split(text, "\n") {
		m := saveRuleRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if j := saveJumpRE.FindStringSubmatch(l); j != nil {
			jumps[m[1]] = append(jumps[m[1]], j[1])
		}
		if d := saveDNATRE.FindStringSubmatch(l); d != nil {
			dnat[m[1]] = append(dnat[m[1]], d[1])
		}
	}
	seen := map[string]bool{}
	var walk func(string)
	walk = func(c string) {
		if seen[c] {
			return
		}
		seen[c] = true
		for _, a := range dnat[c] {
			if addr, err := netip.ParseAddr(a); err == nil {
				out[addr] = true
			}
		}
		for _, j := range jumps[c] {
			walk(j)
		}
	}
	walk("KUBE-SERVICES")
}
