package userspace

import (
	"bytes"
	"fmt"
	"net/netip"
	"strconv"
)

// The nat chains of the legacy userspace proxier (pkg/proxy/userspace/proxier.go).
const (
	// ChainPortalsContainer holds one REDIRECT per ServicePort for traffic
	// arriving from pods (jumped to from nat PREROUTING).
	ChainPortalsContainer = "KUBE-PORTALS-CONTAINER"
	// ChainPortalsHost holds one REDIRECT per ServicePort for traffic the
	// node itself originates (jumped to from nat OUTPUT).
	ChainPortalsHost = "KUBE-PORTALS-HOST"
)

// jumpRule is one rule from a built-in nat chain into a portal chain.
type jumpRule struct {
	chain string   // built-in chain: PREROUTING or OUTPUT
	args  []string // rule spec, ending "-j <portal chain>"
}

// jumpRules are the legacy proxier's iptablesContainerPortalChain and
// iptablesHostPortalChain jumps, with its comment; it prepended them
// (EnsureRule Prepend), and so does the Proxier.
var jumpRules = []jumpRule{
	{"PREROUTING", []string{"-m", "comment", "--comment", "handle ClusterIPs; NOTE: this must be before the NodePort rules", "-j", ChainPortalsContainer}},
	{"OUTPUT", []string{"-m", "comment", "--comment", "handle ClusterIPs; NOTE: this must be before the NodePort rules", "-j", ChainPortalsHost}},
}

// Portal is one ServicePort as the legacy proxier exposed it: the
// ClusterIP:Port that pods dial, redirected to ProxyPort, the port of the
// proxy's listener on every node address.
type Portal struct {
	// Name is kube-proxy's ServicePortName, "namespace/name:port".
	Name      string
	ClusterIP netip.Addr
	Port      uint16
	// Protocol is "TCP" or "UDP".
	Protocol  string
	ProxyPort uint16
}

// Ruleset is rendered iptables-restore input.
type Ruleset struct {
	// Data is restore input for the nat table, for use with --noflush: it
	// declares (and so flushes) both portal chains and refills them.
	Data []byte
	// Rules is the number of "-A" lines: 2 per portal.
	Rules int
}

// Render writes the portal rules of portals in their order (pure: no
// kernel). Each portal gives the legacy rule
//
//	-A KUBE-PORTALS-CONTAINER -m comment --comment "ns/svc:port" -p tcp -m tcp -d <clusterIP>/32 --dport <port> -j REDIRECT --to-ports <proxyPort>
//
// and the same in KUBE-PORTALS-HOST. The legacy host portal DNATed to the
// node's own address when the proxy listened on 0.0.0.0; REDIRECT (to
// 127.0.0.1 in OUTPUT) reaches the same 0.0.0.0 listener with one rule
// form. It fails on a non-IPv4 ClusterIP, an unknown protocol or a zero
// port.
func Render(portals []Portal) (Ruleset, error) {
	var b bytes.Buffer
	b.Grow(64 + 2*160*len(portals))
	b.WriteString("*nat\n:" + ChainPortalsContainer + " - [0:0]\n:" + ChainPortalsHost + " - [0:0]\n")
	var line []byte
	for _, chain := range []string{ChainPortalsContainer, ChainPortalsHost} {
		for i := range portals {
			p := &portals[i]
			proto, ok := map[string]string{"TCP": "tcp", "UDP": "udp"}[p.Protocol]
			switch {
			case !ok:
				return Ruleset{}, fmt.Errorf("userspace: portal %q: protocol %q: want TCP or UDP", p.Name, p.Protocol)
			case !p.ClusterIP.Is4():
				return Ruleset{}, fmt.Errorf("userspace: portal %q: clusterIP %q: want IPv4", p.Name, p.ClusterIP)
			case p.Port == 0 || p.ProxyPort == 0:
				return Ruleset{}, fmt.Errorf("userspace: portal %q: port %d, proxy port %d: want both > 0", p.Name, p.Port, p.ProxyPort)
			}
			line = append(line[:0], "-A "...)
			line = append(line, chain...)
			line = append(line, " -m comment --comment \""...)
			line = append(line, p.Name...)
			line = append(line, "\" -p "...)
			line = append(line, proto...)
			line = append(line, " -m "...)
			line = append(line, proto...)
			line = append(line, " -d "...)
			line = p.ClusterIP.AppendTo(line)
			line = append(line, "/32 --dport "...)
			line = strconv.AppendUint(line, uint64(p.Port), 10)
			line = append(line, " -j REDIRECT --to-ports "...)
			line = strconv.AppendUint(line, uint64(p.ProxyPort), 10)
			line = append(line, '\n')
			b.Write(line)
		}
	}
	b.WriteString("COMMIT\n")
	return Ruleset{Data: b.Bytes(), Rules: 2 * len(portals)}, nil
}

// cleanupData flushes and deletes both portal chains (restore --noflush
// input); the jumps to them must be gone first. Declaring a missing chain
// creates it, so it also succeeds when nothing is left.
const cleanupData = "*nat\n:" + ChainPortalsContainer + " - [0:0]\n:" + ChainPortalsHost + " - [0:0]\n" +
	"-X " + ChainPortalsContainer + "\n-X " + ChainPortalsHost + "\nCOMMIT\n"
