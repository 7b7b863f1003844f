//go:build linux

package topology

import (
	"net/netip"
	"strings"
	"testing"
)

// TestOverlapSentences: a network prefix that overlaps a host address or
// route gets one sentence naming each; a disjoint one none; families do
// not mix.
func TestOverlapSentences(t *testing.T) {
	hostP := []netip.Prefix{netip.MustParsePrefix("10.0.0.5/24"), netip.MustParsePrefix("198.18.4.0/24"), netip.MustParsePrefix("2001:2::/64")}
	host := []string{"address 10.0.0.5/24 (eth0)", "route 198.18.4.0/24 (br0)", "route 2001:2::/64 (br0)"}
	got := overlapSentences(map[string]netip.Prefix{
		"network.serviceCIDR": netip.MustParsePrefix("198.18.0.0/16"),
		"network.podCIDR":     netip.MustParsePrefix("198.19.0.0/17"),
	}, hostP, host)
	if len(got) != 1 || !strings.HasPrefix(got[0], "network.serviceCIDR 198.18.0.0/16 overlaps the host's route 198.18.4.0/24 (br0): isolation still holds") {
		t.Fatalf("got %q", got)
	}
	if got := overlapSentences(map[string]netip.Prefix{"network.podCIDR": netip.MustParsePrefix("198.19.0.0/17")}, hostP, host); got != nil {
		t.Errorf("a disjoint prefix warned: %q", got)
	}
}
