//go:build linux

package traffic

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"

	"github.com/proxybench/proxybench/internal/lib/xtables"
	"github.com/proxybench/proxybench/topology"
)

// ChainDown is the filter chain DownEndpoints fills in the backend namespace.
const ChainDown = "PB-DOWN-ENDPOINTS"

// How an endpoint is down, for DownEndpoints.
const (
	// DownReset answers TCP to the endpoint with a RST (a pod whose port
	// is closed): REJECT --reject-with tcp-reset.
	DownReset = "reset"
	// DownDrop drops TCP to the endpoint (a pod that vanished without a
	// trace): DROP; a dial then waits for its timeout.
	DownDrop = "drop"
)

// DownEndpoints makes the endpoints ips unreachable over TCP inside the
// backend host namespace (whose AnyIP route otherwise answers for every
// pod IP): it fills filter chain PB-DOWN-ENDPOINTS with one rule per
// address ("-d <ip>/32 -p tcp -j REJECT --reject-with tcp-reset" for
// DownReset, "-j DROP" for DownDrop) and prepends a jump to it from INPUT,
// all in one iptables-legacy-restore --noflush. undo removes the jump and
// the chain. It fails on an unknown how or a non-IPv4 address.
func DownEndpoints(ctx context.Context, backend *topology.Netns, ips []netip.Addr, how string) (undo func() error, err error) {
	target := ""
	switch how {
	case DownReset:
		target = "REJECT --reject-with tcp-reset"
	case DownDrop:
		target = "DROP"
	default:
		return nil, fmt.Errorf("traffic: down endpoints: how %q: want %q or %q", how, DownReset, DownDrop)
	}
	var b bytes.Buffer
	b.WriteString("*filter\n:" + ChainDown + " - [0:0]\n")
	for _, ip := range ips {
		if !ip.Is4() {
			return nil, fmt.Errorf("traffic: down endpoint %q: want IPv4", ip)
		}
		fmt.Fprintf(&b, "-A %s -d %s/32 -p tcp -j %s\n", ChainDown, ip, target)
	}
	b.WriteString("-I INPUT 1 -j " + ChainDown + "\nCOMMIT\n")
	bin := xtables.Binary("legacy", "restore")
	if _, err := backend.Run(ctx, b.Bytes(), bin, xtables.RestoreArgs("--noflush")...); err != nil {
		return nil, fmt.Errorf("traffic: down %d endpoints: %w", len(ips), err)
	}
	undo = func() error {
		data := "*filter\n:" + ChainDown + " - [0:0]\n-D INPUT -j " + ChainDown + "\n-X " + ChainDown + "\nCOMMIT\n"
		if _, err := backend.Run(context.Background(), []byte(data), bin, xtables.RestoreArgs("--noflush")...); err != nil {
			return fmt.Errorf("traffic: undo down endpoints: %w", err)
		}
		return nil
	}
	return undo, nil
}
