//go:build linux

package traffic

import (
	"context"
	"net/netip"
	"strings"
	"testing"
)

// TestDownEndpointsRejectsBadInput: an unknown way down or a non-IPv4
// address fails before anything runs in the backend (nil here: a call
// would panic).
func TestDownEndpointsRejectsBadInput(t *testing.T) {
	if _, err := DownEndpoints(context.Background(), nil, nil, "explode"); err == nil || !strings.Contains(err.Error(), "reset") {
		t.Errorf("bad how: %v", err)
	}
	if _, err := DownEndpoints(context.Background(), nil, []netip.Addr{netip.MustParseAddr("fd00::1")}, DownReset); err == nil || !strings.Contains(err.Error(), "IPv4") {
		t.Errorf("IPv6 address: %v", err)
	}
}
