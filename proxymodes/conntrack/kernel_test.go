//go:build linux

package conntrack

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/workload"
)

// TestKernelClean creates UDP conntrack entries in a throwaway namespace
// (one DNATed to a live endpoint, one to a removed endpoint, one never
// DNATed, one to another port) and checks that Clean deletes exactly the
// stale two.
func TestKernelClean(t *testing.T) {
	testenv.RequireKernel(t)
	ns := testenv.NewNetns(t, "ct")
	client := netip.MustParseAddr("198.18.128.2")
	mk := func(sport, dport uint16, replySrc netip.Addr) *netlink.ConntrackFlow {
		return &netlink.ConntrackFlow{
			FamilyType: netlink.FAMILY_V4,
			Forward:    netlink.IPTuple{Protocol: 17, SrcIP: net.IP(client.AsSlice()), DstIP: net.IP(vip.AsSlice()), SrcPort: sport, DstPort: dport},
			Reverse:    netlink.IPTuple{Protocol: 17, SrcIP: net.IP(replySrc.AsSlice()), DstIP: net.IP(client.AsSlice()), SrcPort: 5353, DstPort: sport},
			TimeOut:    120,
		}
	}
	flows := []*netlink.ConntrackFlow{mk(1001, 53, epA), mk(1002, 53, epB), mk(1003, 53, vip), mk(1004, 54, vip)}
	err := ns.Do(func() error {
		for _, f := range flows {
			if err := netlink.ConntrackCreate(netlink.ConntrackTable, netlink.FAMILY_V4, f); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		testenv.Skip(t, "cannot create conntrack entries (nf_conntrack netlink): "+err.Error())
	}
	rule := NewRule([]workload.Service{svc(vip, "UDP", workload.Endpoint{IP: epA, Ready: true, Weight: 1})})
	n, err := Clean(ns, rule)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("Clean deleted %d flows, want 2 (to removed endpoint, never DNATed)", n)
	}
	left, err := List(ns)
	if err != nil {
		t.Fatal(err)
	}
	var got []netip.Addr
	for _, f := range left {
		got = append(got, f.ReplySrc)
	}
	want := []netip.Addr{epA, vip} // live endpoint on :53, never-DNATed flow on :54
	slices.SortFunc(got, netip.Addr.Compare)
	slices.SortFunc(want, netip.Addr.Compare)
	if !slices.Equal(got, want) {
		t.Errorf("flows left have reply sources %v, want %v", got, want)
	}
}
