package apiobjects

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/proxybench/proxybench/workload"
)

// TestCreateServiceStoredDespiteTimeout: the API server stores a Service
// but the create times out (a loaded guest); the retry is refused with
// "provided IP is already allocated" (the ClusterIP is checked before the
// name). createService counts it as created, since the Service is there
// with its ClusterIP; a Service of that name with another ClusterIP is
// not ours.
func TestCreateServiceStoredDespiteTimeout(t *testing.T) {
	s := workload.Service{Namespace: "pb", Name: "svc-07079", ClusterIP: netip.MustParseAddr("198.18.27.168"),
		Ports: []workload.ServicePort{{Name: "p80", Port: 80, TargetPort: 8080, Protocol: "TCP"}}}
	c := fake.NewSimpleClientset()
	calls := 0
	c.PrependReactor("create", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		if calls == 1 {
			if err := c.Tracker().Create(a.GetResource(), a.(k8stesting.CreateAction).GetObject(), s.Namespace); err != nil {
				t.Fatal(err)
			}
			return true, nil, apierrors.NewTimeoutError("request did not complete within requested timeout", 1)
		}
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, s.Name, field.ErrorList{
			field.Invalid(field.NewPath("spec", "clusterIPs"), []string{s.ClusterIP.String()}, "failed to allocate IP "+s.ClusterIP.String()+": provided IP is already allocated")})
	})
	if err := createService(context.Background(), c, s, 0); err != nil {
		t.Fatalf("createService after a timed-out but stored create: %v", err)
	}
	if calls != 2 {
		t.Errorf("%d create calls, want the timed-out one and one retry", calls)
	}
	other := s
	other.ClusterIP = netip.MustParseAddr("198.18.27.169")
	if stored(context.Background(), c, other) {
		t.Error("stored() accepts a Service of that name with another ClusterIP")
	}
}

// TestCreateDeleteService: CreateService stores the Service and a slice
// stamped with the trigger time (RFC 3339 with nanoseconds, the
// annotation kube-proxy reads); DeleteService removes both.
func TestCreateDeleteService(t *testing.T) {
	s := workload.Service{Namespace: "pb", Name: "svc-churn-00020", ClusterIP: netip.MustParseAddr("198.18.0.21"),
		Ports:     []workload.ServicePort{{Name: "p80", Port: 80, TargetPort: 8080, Protocol: "TCP"}},
		Endpoints: []workload.Endpoint{workload.NewEndpoint(netip.MustParseAddr("198.19.0.9"))}}
	c := fake.NewSimpleClientset()
	ctx := context.Background()
	trigger := time.Date(2026, 12, 2, 1, 2, 3, 456789012, time.UTC)
	if err := CreateService(ctx, c, s, 0, trigger); err != nil {
		t.Fatal(err)
	}
	sl, err := c.DiscoveryV1().EndpointSlices("pb").Get(ctx, SliceName(s), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := sl.Annotations[TriggerTimeAnnotation]; got != "2026-12-02T01:02:03.456789012Z" {
		t.Errorf("trigger annotation %q", got)
	}
	if _, err := c.CoreV1().Services("pb").Get(ctx, s.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("Service not created: %v", err)
	}
	if err := DeleteService(ctx, c, s); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Services("pb").Get(ctx, s.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Service after DeleteService: %v", err)
	}
	if _, err := c.DiscoveryV1().EndpointSlices("pb").Get(ctx, SliceName(s), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("EndpointSlice after DeleteService: %v", err)
	}
	if err := DeleteService(ctx, c, s); err == nil {
		t.Error("deleting a Service that is gone: no error")
	}
}

// TestServiceExposure: the Service surface reaches the API object as the
// builtin proxiers see it: type, the given node port, external IPs, the
// policies, the health check node port, the LoadBalancer ingress in
// status, and each endpoint's nodeName in its slice.
func TestServiceExposure(t *testing.T) {
	e := workload.NewEndpoint(netip.MustParseAddr("198.19.0.1"))
	e.Node = "node-1"
	s := workload.Service{Namespace: "pb", Name: "lb", ClusterIP: netip.MustParseAddr("198.18.0.9"), Type: "LoadBalancer",
		Ports:           []workload.ServicePort{{Name: "p80", Port: 80, TargetPort: 8080, Protocol: "TCP", NodePort: 30007}},
		LoadBalancerIPs: []netip.Addr{netip.MustParseAddr("198.18.128.3")}, ExternalIPs: []netip.Addr{netip.MustParseAddr("198.18.129.1")},
		ExternalLocal: true, InternalLocal: true, HealthCheckNodePort: 30100, Endpoints: []workload.Endpoint{e}}
	svc := Service(s)
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.Ports[0].NodePort != 30007 || svc.Spec.HealthCheckNodePort != 30100 ||
		svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal || *svc.Spec.InternalTrafficPolicy != corev1.ServiceInternalTrafficPolicyLocal ||
		len(svc.Spec.ExternalIPs) != 1 || svc.Spec.ExternalIPs[0] != "198.18.129.1" ||
		len(svc.Status.LoadBalancer.Ingress) != 1 || svc.Status.LoadBalancer.Ingress[0].IP != "198.18.128.3" {
		t.Errorf("Service: %+v / %+v", svc.Spec, svc.Status)
	}
	if sl := EndpointSlice(s, time.Now()); sl.Endpoints[0].NodeName == nil || *sl.Endpoints[0].NodeName != "node-1" {
		t.Errorf("slice endpoint %+v: want nodeName node-1", sl.Endpoints[0])
	}
	if plain := Service(workload.Service{Namespace: "pb", Name: "c", ClusterIP: s.ClusterIP, Ports: s.Ports[:1]}); plain.Spec.Type != corev1.ServiceTypeClusterIP || plain.Spec.ExternalTrafficPolicy != "" {
		t.Errorf("a ClusterIP service got %+v", plain.Spec)
	}
}

// TestSliceHolds: the slice read back holds a write when its trigger
// annotation and endpoint addresses are the ones written (a lost answer
// of a committed ReplaceSlice), not when either differs, nor when the
// slice is missing; another GET failure is an error naming the slice.
func TestSliceHolds(t *testing.T) {
	s := workload.Service{Namespace: "pb", Name: "svc-00001", ClusterIP: netip.MustParseAddr("198.18.0.2"),
		Ports:     []workload.ServicePort{{Name: "p80", Port: 80, TargetPort: 8080, Protocol: "TCP"}},
		Endpoints: []workload.Endpoint{workload.NewEndpoint(netip.MustParseAddr("198.19.0.9")), workload.NewEndpoint(netip.MustParseAddr("198.19.0.10"))}}
	ctx := context.Background()
	c := fake.NewSimpleClientset()
	t0 := time.Date(2026, 12, 2, 17, 36, 0, 123, time.UTC)
	if ok, err := SliceHolds(ctx, c, s, t0); ok || err != nil {
		t.Fatalf("missing slice: holds %v, err %v; want false, nil", ok, err)
	}
	if _, err := c.DiscoveryV1().EndpointSlices("pb").Create(ctx, EndpointSlice(s, t0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := SliceHolds(ctx, c, s, t0); !ok || err != nil {
		t.Errorf("the slice as written: holds %v, err %v", ok, err)
	}
	if ok, _ := SliceHolds(ctx, c, s, t0.Add(time.Nanosecond)); ok {
		t.Error("another trigger time holds")
	}
	moved := s
	moved.Endpoints = []workload.Endpoint{workload.NewEndpoint(netip.MustParseAddr("198.19.0.11")), s.Endpoints[1]}
	if ok, _ := SliceHolds(ctx, c, moved, t0); ok {
		t.Error("a slice holding the old endpoint holds the replaced one")
	}
	c.PrependReactor("get", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd down")
	})
	if _, err := SliceHolds(ctx, c, s, t0); err == nil || !strings.Contains(err.Error(), SliceName(s)) {
		t.Errorf("GET failure: %v, want an error naming %s", err, SliceName(s))
	}
}

// TestCreateServiceReleasesLeakedIP: a create that timed out left its
// ClusterIP's IPAddress behind without the Service (seen in a uml:6.12
// guest at 10k NodePort services: "provided IP is already allocated" for
// the whole retry deadline). An address older than leakGrace that
// references the missing Service is deleted and the create goes through;
// a younger one is left alone (a create may still be in flight); one
// held by another Service fails at once, naming the holder.
func TestCreateServiceReleasesLeakedIP(t *testing.T) {
	s := workload.Service{Namespace: "pb", Name: "svc-07936", ClusterIP: netip.MustParseAddr("198.18.31.1"),
		Ports: []workload.ServicePort{{Name: "p80", Port: 80, TargetPort: 8080, Protocol: "TCP"}}}
	setup := func(age time.Duration, parent string) *fake.Clientset {
		c := fake.NewSimpleClientset(&networkingv1.IPAddress{
			ObjectMeta: metav1.ObjectMeta{Name: s.ClusterIP.String(), UID: "leak-1",
				CreationTimestamp: metav1.NewTime(time.Now().Add(-age))},
			Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: "pb", Name: parent}},
		})
		c.PrependReactor("create", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if _, err := c.Tracker().Get(networkingv1.SchemeGroupVersion.WithResource("ipaddresses"), "", s.ClusterIP.String()); err == nil {
				return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, s.Name, field.ErrorList{
					field.Invalid(field.NewPath("spec", "clusterIPs"), []string{s.ClusterIP.String()}, "failed to allocate IP "+s.ClusterIP.String()+": provided IP is already allocated")})
			}
			return false, nil, nil
		})
		return c
	}

	c := setup(2*time.Minute, s.Name)
	if err := createService(context.Background(), c, s, 0); err != nil {
		t.Fatalf("createService with a leaked address: %v", err)
	}
	if !stored(context.Background(), c, s) {
		t.Error("the Service was not stored after the leak was released")
	}

	c = setup(10*time.Second, s.Name)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := createService(ctx, c, s, 0); err == nil {
		t.Error("createService took an address a create may still hold (10 s old)")
	}
	if _, err := c.NetworkingV1().IPAddresses().Get(context.Background(), s.ClusterIP.String(), metav1.GetOptions{}); err != nil {
		t.Errorf("a 10 s old address was deleted: %v", err)
	}

	c = setup(2*time.Minute, "svc-00001")
	t0 := time.Now()
	err := createService(context.Background(), c, s, 0)
	if err == nil || !strings.Contains(err.Error(), "held by Service pb/svc-00001") {
		t.Errorf("address held by another Service: err = %v, want one naming Service pb/svc-00001", err)
	}
	if d := time.Since(t0); d > 30*time.Second {
		t.Errorf("a real conflict waited %v for the retry deadline", d)
	}
}
