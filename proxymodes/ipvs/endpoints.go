package ipvs

import (
	"net/netip"
	"regexp"
	"strings"

	"github.com/proxybench/proxybench/proxymodes"
)

var saveRealRE = regexp.MustCompile(`-r (\d+\.\d+\.\d+\.\d+):\d+.* -w (\d+)`)

// endpointReadBack is Mode.Endpoints: ipvsadm -Sn.
var endpointReadBack = &proxymodes.EndpointReadBack{
	Commands: []proxymodes.ReadCommand{{Name: "ipvsadm", Args: []string{"-Sn"}}},
	Parse:    ParseEndpoints,
}

// ParseEndpoints adds to out the real servers of text (ipvsadm -Sn
// output) with a weight above 0: a weight-0 server, draining after
// kube-proxy's graceful termination (pkg/proxy/ipvs/graceful_termination.go),
// takes no new connection.
func ParseEndpoints(text string, out map[netip.Addr]bool) {
	for _, l := range strings.Split(text, "\n") {
		if m := saveRealRE.FindStringSubmatch(l); m != nil && m[2] != "0" {
			if a, err := netip.ParseAddr(m[1]); err == nil {
				out[a] = true
			}
		}
	}
}
