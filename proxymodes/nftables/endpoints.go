package nftables

import (
	"net/netip"
	"regexp"
	"strings"

	"github.com/proxybench/proxybench/proxymodes"
)

var (
	listElemRE = regexp.MustCompile(`(\d+\.\d+\.\d+\.\d+) \. \d+`)
	listDNATRE = regexp.MustCompile(`dnat (?:ip )?to (\d+\.\d+\.\d+\.\d+)(?::\d+)?`)
)

// endpointReadBack is Mode.Endpoints: nft list table ip kube-proxy,
// optional (before the first sync there is no table: no endpoint).
var endpointReadBack = &proxymodes.EndpointReadBack{
	Commands: []proxymodes.ReadCommand{{Name: "nft", Args: []string{"list", "table", "ip", "kube-proxy"}, Optional: true}},
	Parse:    ParseEndpoints,
}

// ParseEndpoints adds to out the endpoints of text (nft list table
// output): the "ip . port" elements of a dnat rule's numgen map (nft
// wraps an inline map over lines, read up to its "}") and the "dnat to
// ip:port" of a service with one endpoint.
func ParseEndpoints(text string, out map[netip.Addr]bool) {
	add := func(s string) {
		if a, err := netip.ParseAddr(s); err == nil {
			out[a] = true
		}
	}
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if !strings.Contains(l, "dnat") {
			continue
		}
		for strings.Contains(l, "{") && !strings.Contains(l, "}") && i+1 < len(lines) {
			i++
			l += " " + lines[i]
		}
		for _, m := range listElemRE.FindAllStringSubmatch(l, -1) {
			add(m[1])
		}
		for _, m := range listDNATRE.FindAllStringSubmatch(l, -1) {
			add(m[1])
		}
	}
}
