package apiobjects

import (
	"context"
	"net/netip"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// TestCreateDualStack: with Spec.IPv6 every Service gets both ClusterIPs
// (the IPv4 one first, its RFC 6052 twin second), families [IPv4, IPv6]
// and the scenario's policy, beside its IPv4 EndpointSlice an IPv6 one
// (addressType IPv6, every endpoint twinned, the same ports and
// conditions), and the ServiceCIDR both ranges; without it nothing
// IPv6 is written.
func TestCreateDualStack(t *testing.T) {
	p := netip.MustParsePrefix("2001:2::/96")
	s := workload.Service{Namespace: "pb", Name: "svc-00000", ClusterIP: netip.MustParseAddr("198.18.0.1"),
		Ports:     []workload.ServicePort{{Name: "p80", Port: 80, TargetPort: 8080, Protocol: "TCP"}},
		Endpoints: []workload.Endpoint{{IP: netip.MustParseAddr("198.19.0.1"), Ready: true}, {IP: netip.MustParseAddr("198.19.0.2"), Ready: false}}}
	svcCIDR := netip.MustParsePrefix("198.18.0.0/16")
	for _, dual := range []bool{true, false} {
		c := fake.NewSimpleClientset()
		spec := Spec{ServiceCIDR: svcCIDR, Services: []workload.Service{s}}
		if dual {
			spec.IPv6, spec.FamilyPolicy = p, scenarios.RequireDualStack
		}
		st, err := Create(context.Background(), c, spec)
		if err != nil {
			t.Fatal(err)
		}
		wantSlices := map[bool]int{true: 2, false: 1}[dual]
		if st.Services != 1 || st.EndpointSlices != wantSlices {
			t.Errorf("dual %v: stats %+v, want 1 service and %d slices", dual, st, wantSlices)
		}
		svc, err := c.CoreV1().Services("pb").Get(context.Background(), s.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cidr, err := c.NetworkingV1().ServiceCIDRs().Get(context.Background(), ServiceCIDRName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s6, err6 := c.DiscoveryV1().EndpointSlices("pb").Get(context.Background(), SliceName6(s), metav1.GetOptions{})
		s4, err4 := c.DiscoveryV1().EndpointSlices("pb").Get(context.Background(), SliceName(s), metav1.GetOptions{})
		if err4 != nil || s4.AddressType != discoveryv1.AddressTypeIPv4 || s4.Endpoints[0].Addresses[0] != "198.19.0.1" {
			t.Errorf("dual %v: IPv4 slice %+v, %v", dual, s4, err4)
		}
		if !dual {
			if len(svc.Spec.ClusterIPs) != 1 || len(svc.Spec.IPFamilies) != 1 || *svc.Spec.IPFamilyPolicy != "SingleStack" || len(cidr.Spec.CIDRs) != 1 || err6 == nil {
				t.Errorf("single-stack: clusterIPs %v families %v policy %v cidrs %v, IPv6 slice err %v", svc.Spec.ClusterIPs, svc.Spec.IPFamilies, *svc.Spec.IPFamilyPolicy, cidr.Spec.CIDRs, err6)
			}
			continue
		}
		if got := svc.Spec.ClusterIPs; len(got) != 2 || got[0] != "198.18.0.1" || got[1] != "2001:2::c612:1" || svc.Spec.ClusterIP != "198.18.0.1" {
			t.Errorf("clusterIPs %v (clusterIP %s), want [198.18.0.1 2001:2::c612:1]", got, svc.Spec.ClusterIP)
		}
		if got := svc.Spec.IPFamilies; len(got) != 2 || got[0] != "IPv4" || got[1] != "IPv6" || *svc.Spec.IPFamilyPolicy != "RequireDualStack" {
			t.Errorf("families %v policy %v", got, *svc.Spec.IPFamilyPolicy)
		}
		if got := cidr.Spec.CIDRs; len(got) != 2 || got[0] != "198.18.0.0/16" || got[1] != "2001:2::c612:0/112" {
			t.Errorf("ServiceCIDR %v, want [198.18.0.0/16 2001:2::c612:0/112]", got)
		}
		if err6 != nil {
			t.Fatal(err6)
		}
		if s6.AddressType != discoveryv1.AddressTypeIPv6 || len(s6.Endpoints) != 2 || s6.Endpoints[0].Addresses[0] != "2001:2::c613:1" || s6.Endpoints[1].Addresses[0] != "2001:2::c613:2" {
			t.Errorf("IPv6 slice %s %+v", s6.AddressType, s6.Endpoints)
		}
		if *s6.Endpoints[1].Conditions.Ready || !*s6.Endpoints[0].Conditions.Ready || *s6.Ports[0].Port != 8080 || s6.Labels[discoveryv1.LabelServiceName] != s.Name {
			t.Errorf("IPv6 slice conditions, ports or labels differ from the IPv4 one: %+v", s6)
		}
	}
}
