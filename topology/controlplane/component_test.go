//go:build linux

package controlplane

import (
	"context"
	"net/netip"
	"strings"
	"testing"
)

// TestComponentErrors: StopComponent and StartComponent refuse an
// unknown component, a stopped one, a running one and one never started,
// each saying which.
func TestComponentErrors(t *testing.T) {
	cp := &ControlPlane{}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{cp.StopComponent("kube-scheduler"), `unknown component "kube-scheduler"`},
		{cp.StopComponent("etcd"), "etcd is not running"},
		{func() error { _, err := cp.StartComponent(context.Background(), "kube-apiserver", 0); return err }(), "kube-apiserver was never started"},
		{func() error { _, err := cp.StartComponent(context.Background(), "etc", 0); return err }(), `unknown component "etc"`},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("error %v, want %q", tc.err, tc.want)
		}
	}
}

// TestServiceRanges: a dual-stack control plane's
// --service-cluster-ip-range is the IPv4 /28 then an IPv6 range of
// Candidates6 that overlaps none of the scenario's ranges (the second
// when the scenario's IPv6 plan covers the first), within the API
// server's 20-bit limit; none left is an error naming the candidates.
func TestServiceRanges(t *testing.T) {
	v4 := netip.MustParsePrefix("100.64.254.0/28")
	cp := &ControlPlane{ServiceRange: v4}
	if got := cp.serviceRanges(); got != "100.64.254.0/28" {
		t.Errorf("single-stack %q", got)
	}
	six, err := choose(Candidates6, []netip.Prefix{netip.MustParsePrefix("198.18.0.0/16"), netip.MustParsePrefix("2001:2::/96")})
	if err != nil || six != Candidates6[0] || six.Bits() < 108 {
		t.Fatalf("choose %v, %v; want %v", six, err, Candidates6[0])
	}
	cp.ServiceRange6 = six
	if got := cp.serviceRanges(); got != "100.64.254.0/28,2001:2:0:fffe::/120" {
		t.Errorf("dual-stack %q", got)
	}
	if got, err := choose(Candidates6, []netip.Prefix{netip.MustParsePrefix("2001:2:0:fffe::/96")}); err != nil || got != Candidates6[1] {
		t.Errorf("choose beside a plan over the first candidate: %v, %v", got, err)
	}
	if _, err := choose(Candidates6, []netip.Prefix{netip.MustParsePrefix("2001:2::/48")}); err == nil || !strings.Contains(err.Error(), "2001:2:0:fffe::/120") {
		t.Errorf("every candidate covered: %v", err)
	}
}
