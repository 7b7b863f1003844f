// Package apiobjects turns the scenario's services into Kubernetes API
// objects (Services, EndpointSlices, Nodes) and creates them through
// client-go, in parallel and without client-side throttling, so a real
// kube-proxy sees what the builtin proxiers are given.
package apiobjects

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"

	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// TriggerTimeAnnotation is the EndpointSlice annotation kube-proxy reads
// to compute network_programming_duration_seconds (the time of the change
// that triggered the slice's update, RFC 3339 with nanoseconds; set by the
// EndpointSlice controller in a real cluster, by proxybench here).
const TriggerTimeAnnotation = corev1.EndpointsLastChangeTriggerTime

// ManagedBy is the endpointslice.kubernetes.io/managed-by value of the
// slices proxybench writes.
const ManagedBy = "proxybench"

// ServiceCIDRName is the ServiceCIDR object that makes the scenario's
// service range allocatable next to the API server's own range.
const ServiceCIDRName = "proxybench"

// Service returns the API object of s: a selector-less ClusterIP Service
// (no controller touches its EndpointSlices), single-stack IPv4, with s's
// ClusterIP and ports, and sessionAffinity None.
func Service(s workload.Service) *corev1.Service {
	return ServiceWithAffinity(s, 0)
}

// ServiceWithAffinity is Service with sessionAffinity ClientIP and
// sessionAffinityConfig.clientIP.timeoutSeconds affinity (whole seconds)
// when affinity > 0 (the scenario's services.sessionAffinity, which the
// builtin modes apply to every service).
func ServiceWithAffinity(s workload.Service, affinity time.Duration) *corev1.Service {
	ports := make([]corev1.ServicePort, len(s.Ports))
	for j, p := range s.Ports {
		ports[j] = corev1.ServicePort{Name: p.Name, Port: int32(p.Port), TargetPort: intstr.FromInt32(int32(p.TargetPort)), Protocol: corev1.Protocol(p.Protocol)}
	}
	single := corev1.IPFamilyPolicySingleStack
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name},
		Spec: corev1.ServiceSpec{
			Type:            corev1.ServiceTypeClusterIP,
			ClusterIP:       s.ClusterIP.String(),
			ClusterIPs:      []string{s.ClusterIP.String()},
			IPFamilies:      []corev1.IPFamily{corev1.IPv4Protocol},
			IPFamilyPolicy:  &single,
			Ports:           ports,
			SessionAffinity: corev1.ServiceAffinityNone,
		},
	}
	if secs := int32(affinity / time.Second); secs > 0 {
		svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		svc.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &secs}}
	}
	expose(svc, s)
	return svc
}

// expose sets the Service surface of s on svc: type, node ports (given,
// so builtin and kube-proxy rows see the same numbers), external IPs,
// the traffic policies, the health check node port, and the LoadBalancer
// ingress IPs in status (which Create writes with UpdateStatus: there is
// no cloud controller; the testbed is the one that writes them).
func expose(svc *corev1.Service, s workload.Service) {
	switch s.Type {
	case "NodePort":
		svc.Spec.Type = corev1.ServiceTypeNodePort
	case "LoadBalancer":
		svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	}
	for j, p := range s.Ports {
		svc.Spec.Ports[j].NodePort = int32(p.NodePort)
	}
	for _, ip := range s.ExternalIPs {
		svc.Spec.ExternalIPs = append(svc.Spec.ExternalIPs, ip.String())
	}
	if s.Exposed() {
		etp := corev1.ServiceExternalTrafficPolicyCluster
		if s.ExternalLocal {
			etp = corev1.ServiceExternalTrafficPolicyLocal
		}
		svc.Spec.ExternalTrafficPolicy = etp
	}
	if s.InternalLocal {
		itp := corev1.ServiceInternalTrafficPolicyLocal
		svc.Spec.InternalTrafficPolicy = &itp
	}
	if s.HealthCheckNodePort != 0 {
		svc.Spec.HealthCheckNodePort = int32(s.HealthCheckNodePort)
	}
	if s.TrafficDistribution != "" {
		td := s.TrafficDistribution
		svc.Spec.TrafficDistribution = &td
	}
	for _, ip := range s.LoadBalancerIPs {
		svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip.String()})
	}
}

// writeLoadBalancerStatus writes s's LoadBalancer ingress IPs into the
// stored Service's status (the cloud controller's job in a real
// cluster), retrying on a conflict.
func writeLoadBalancerStatus(ctx context.Context, c kubernetes.Interface, s workload.Service) error {
	if len(s.LoadBalancerIPs) == 0 {
		return nil
	}
	want := ServiceWithAffinity(s, 0).Status
	for try := 0; ; try++ {
		cur, err := c.CoreV1().Services(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
		if err == nil {
			cur.Status = want
			_, err = c.CoreV1().Services(s.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		}
		if err == nil || try >= 5 || !apierrors.IsConflict(err) {
			if err != nil {
				return fmt.Errorf("apiobjects: write status.loadBalancer of %s/%s: %w", s.Namespace, s.Name, err)
			}
			return nil
		}
	}
}

// SliceName is the name of s's (IPv4) EndpointSlice.
func SliceName(s workload.Service) string { return s.Name + "-pb" }

// SliceName6 is the name of s's IPv6 EndpointSlice in a dual-stack run
// (Spec.IPv6): the EndpointSlice controller writes one slice per address
// type of a dual-stack Service.
func SliceName6(s workload.Service) string { return s.Name + "-pb6" }

// DualStack makes svc, built from IPv4 service s, a dual-stack Service
// with policy (PreferDualStack or RequireDualStack): ClusterIPs s's
// IPv4 ClusterIP then its IPv6 twin in the /96 p (scenarios.Twin6, as
// workload.Twin6 gives the builtin IPv6 proxier), IPFamilies [IPv4,
// IPv6], the IPv4 family primary as the API server's first
// --service-cluster-ip-range. kube-proxy's IPv6 proxier programs the
// second ClusterIP with the IPv6 slice's endpoints (EndpointSlice6).
func DualStack(svc *corev1.Service, s workload.Service, p netip.Prefix, policy string) {
	pol := corev1.IPFamilyPolicy(policy)
	svc.Spec.ClusterIPs = []string{s.ClusterIP.String(), scenarios.Twin6(p, s.ClusterIP).String()}
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	svc.Spec.IPFamilyPolicy = &pol
}

// EndpointSlice6 is the IPv6 EndpointSlice of IPv4 service s in a
// dual-stack run: EndpointSlice of s's IPv6 twin in the /96 p
// (workload.Twin6: every endpoint address twinned), addressType IPv6,
// named SliceName6.
func EndpointSlice6(s workload.Service, p netip.Prefix, trigger time.Time) *discoveryv1.EndpointSlice {
	es := EndpointSlice(workload.Twin6(p, []workload.Service{s})[0], trigger)
	es.Name = SliceName6(s)
	return es
}

// EndpointSlice returns the EndpointSlice of s, of s's ClusterIP's
// family (addressType IPv4, or IPv6 for an IPv6 twin), labelled with its
// service name, with trigger as TriggerTimeAnnotation. Each endpoint's
// conditions are its workload.Endpoint's: ready = Ready and not
// Terminating, serving = Serving or ready, terminating = Terminating; so
// an endpoint that is not Ready, Serving or Terminating has all three
// false (a pod that is not ready yet). Terminating marks one being
// deleted on an existing slice.
func EndpointSlice(s workload.Service, trigger time.Time) *discoveryv1.EndpointSlice {
	ports := make([]discoveryv1.EndpointPort, len(s.Ports))
	for j, p := range s.Ports {
		name, port, proto := p.Name, int32(p.TargetPort), corev1.Protocol(p.Protocol)
		ports[j] = discoveryv1.EndpointPort{Name: &name, Port: &port, Protocol: &proto}
	}
	eps := make([]discoveryv1.Endpoint, len(s.Endpoints))
	for k, e := range s.Endpoints {
		ready := e.Ready && !e.Terminating
		serving, terminating := e.Serving || ready, e.Terminating
		eps[k] = discoveryv1.Endpoint{
			Addresses:  []string{e.IP.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating},
		}
		if e.Node != "" {
			eps[k].NodeName = &s.Endpoints[k].Node
		}
		if e.Zone != "" {
			eps[k].Zone = &s.Endpoints[k].Zone
		}
		eps[k].Hints = hints(e, s.TrafficDistribution)
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Namespace, Name: SliceName(s),
			Labels: map[string]string{
				discoveryv1.LabelServiceName: s.Name,
				discoveryv1.LabelManagedBy:   ManagedBy,
			},
			Annotations: map[string]string{TriggerTimeAnnotation: trigger.UTC().Format(time.RFC3339Nano)},
		},
		AddressType: addressType(s),
		Endpoints:   eps,
		Ports:       ports,
	}
}

// addressType is the EndpointSlice address type of s's family: IPv6
// for an IPv6 ClusterIP (workload.Twin6), else IPv4.
func addressType(s workload.Service) discoveryv1.AddressType {
	if s.ClusterIP.Is6() && !s.ClusterIP.Is4In6() {
		return discoveryv1.AddressTypeIPv6
	}
	return discoveryv1.AddressTypeIPv4
}

// Terminating marks endpoint k of slice as terminating (ready=false,
// serving as given): a pod being deleted, which kube-proxy keeps using
// only when no endpoint of the service is ready (KEP-1669).
func Terminating(slice *discoveryv1.EndpointSlice, k int, serving bool) {
	f, t := false, true
	slice.Endpoints[k].Conditions = discoveryv1.EndpointConditions{Ready: &f, Serving: &serving, Terminating: &t}
}

// hints are the EndpointSlice hints of e under trafficDistribution td
// as the EndpointSlice controller writes them (workload.Endpoint.Hints:
// kube-controller-manager is not in the loop, the testbed writes them),
// nil when e gets none.
func hints(e workload.Endpoint, td string) *discoveryv1.EndpointHints {
	zones, nodes := e.Hints(td)
	if len(zones) == 0 && len(nodes) == 0 {
		return nil
	}
	h := &discoveryv1.EndpointHints{}
	for _, z := range zones {
		h.ForZones = append(h.ForZones, discoveryv1.ForZone{Name: z})
	}
	for _, n := range nodes {
		h.ForNodes = append(h.ForNodes, discoveryv1.ForNode{Name: n})
	}
	return h
}

// Node is one fake node as the API sees it.
type Node struct {
	Name       string     // kube-proxy's hostnameOverride
	InternalIP netip.Addr // so kube-proxy does not wait 30 s for an address
	// Zone is its topology.kubernetes.io/zone label ("" : none), which
	// kube-proxy reads from its own Node to follow zone hints.
	Zone string
}

// NodeObject returns the Node object of n, with its InternalIP and Ready.
func NodeObject(n Node) *corev1.Node {
	labels := map[string]string{corev1.LabelHostname: n.Name}
	if n.Zone != "" {
		labels[corev1.LabelTopologyZone] = n.Zone
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels},
		Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.InternalIP.String()}, {Type: corev1.NodeHostName, Address: n.Name}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

// Spec is what Create creates.
type Spec struct {
	// ServiceCIDR is the scenario's service range, registered as a
	// ServiceCIDR object (the API server's own range holds only the
	// `kubernetes` Service).
	ServiceCIDR netip.Prefix
	Nodes       []Node
	Services    []workload.Service
	// Workers is the number of concurrent create calls (default 64).
	Workers int
	// Trigger is the trigger time written on every slice (default: now).
	Trigger time.Time
	// SessionAffinity, when > 0, gives every Service sessionAffinity
	// ClientIP with this timeout (ServiceWithAffinity).
	SessionAffinity time.Duration
	// Zones labels each Node named in it with its zone
	// (topology.kubernetes.io/zone; scenarios.NodeZones), over Node.Zone.
	Zones map[string]string
	// IPv6, when valid, is the /96 of a dual-stack run's IPv6 twins
	// (scenarios.Scenario.IPv6Prefix): the ServiceCIDR gets the IPv6
	// twin of ServiceCIDR too, every Service both families (DualStack,
	// with FamilyPolicy) and a second, IPv6 EndpointSlice
	// (EndpointSlice6). The API server must be dual-stack
	// (controlplane.Spec.DualStack).
	IPv6         netip.Prefix
	FamilyPolicy string
}

// dualStack reports whether spec asks for dual-stack objects.
func (spec Spec) dualStack() bool { return spec.IPv6.IsValid() }

// Stats says what Create did and how long it took.
type Stats struct {
	Services, EndpointSlices, Nodes int
	// Elapsed is the wall time of the whole Create.
	Elapsed time.Duration
}

// Create creates the namespace(s) of spec.Services, the ServiceCIDR, the
// Nodes, then every Service and its EndpointSlice with spec.Workers calls
// in flight. An object that already exists is an error. On the first error
// it stops and returns it with what was created so far.
func Create(ctx context.Context, c kubernetes.Interface, spec Spec) (Stats, error) {
	t0 := time.Now()
	var st Stats
	if spec.Trigger.IsZero() {
		spec.Trigger = time.Now()
	}
	workers := spec.Workers
	if workers <= 0 {
		workers = 64
	}
	if spec.ServiceCIDR.IsValid() {
		cidrs := []string{spec.ServiceCIDR.Masked().String()}
		if spec.dualStack() {
			cidrs = append(cidrs, scenarios.TwinPrefix6(spec.IPv6, spec.ServiceCIDR.Masked()).String())
		}
		sc := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: ServiceCIDRName},
			Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
		if _, err := c.NetworkingV1().ServiceCIDRs().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
			return st, fmt.Errorf("apiobjects: create ServiceCIDR %s: %w", spec.ServiceCIDR, err)
		}
	}
	namespaces := map[string]bool{}
	for _, s := range spec.Services {
		namespaces[s.Namespace] = true
	}
	for ns := range namespaces {
		_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return st, fmt.Errorf("apiobjects: create namespace %s: %w", ns, err)
		}
	}
	for _, n := range spec.Nodes {
		if z := spec.Zones[n.Name]; z != "" {
			n.Zone = z
		}
		if _, err := c.CoreV1().Nodes().Create(ctx, NodeObject(n), metav1.CreateOptions{}); err != nil {
			return st, fmt.Errorf("apiobjects: create node %s: %w", n.Name, err)
		}
		st.Nodes++
	}
	var nsvc, nslice atomic.Int64
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				s := spec.Services[i]
				err := createServiceAs(ctx, c, s, spec.serviceObject(s))
				if err == nil {
					nsvc.Add(1)
					objs := []*discoveryv1.EndpointSlice{EndpointSlice(s, spec.Trigger)}
					if spec.dualStack() {
						objs = append(objs, EndpointSlice6(s, spec.IPv6, spec.Trigger))
					}
					for _, slice := range objs {
						err = retryCreate(ctx, func() error {
							_, err := c.DiscoveryV1().EndpointSlices(s.Namespace).Create(ctx, slice, metav1.CreateOptions{})
							return err
						})
						if err != nil {
							err = fmt.Errorf("apiobjects: create EndpointSlice %s/%s: %w", s.Namespace, slice.Name, err)
							break
						}
						nslice.Add(1)
					}
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					cancel()
				}
			}
		}()
	}
feed:
	for i := range spec.Services {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	st.Services, st.EndpointSlices = int(nsvc.Load()), int(nslice.Load())
	st.Elapsed = time.Since(t0)
	if len(errs) > 0 {
		return st, errs[0]
	}
	return st, ctx.Err()
}

// createDeadline bounds createService's retries of a Service the API
// server refuses as invalid. A create that timed out on a loaded API
// server can leave its ClusterIP's IPAddress object behind without the
// Service ("provided IP is already allocated" on every retry, seen at 10k
// NodePort services at load 40); kube-apiserver's repair loop deletes
// such a leaked IPAddress once it is older than its 60 s grace period
// (pkg/registry/core/service/ipallocator/controller/repairip.go,
// syncIPAddress), and releaseLeakedIPs deletes one itself after the
// same grace where that loop lags; a leaked node port waits for the node
// port repair loop (every 3 min), so the retries outlast that.
const createDeadline = 5 * time.Minute

// serviceObject is the Service Create writes for s: ServiceWithAffinity,
// made dual-stack (DualStack) in a dual-stack spec.
func (spec Spec) serviceObject(s workload.Service) *corev1.Service {
	svc := ServiceWithAffinity(s, spec.SessionAffinity)
	if spec.dualStack() {
		DualStack(svc, s, spec.IPv6, spec.FamilyPolicy)
	}
	return svc
}

// createService creates s, retrying for up to createDeadline while its
// ClusterIP is not yet allocatable (the API server picks up a new
// ServiceCIDR through an informer, a moment after it is created) or is
// held by an attempt that timed out without storing the Service.
func createService(ctx context.Context, c kubernetes.Interface, s workload.Service, affinity time.Duration) error {
	return createServiceAs(ctx, c, s, ServiceWithAffinity(s, affinity))
}

// createServiceAs is createService writing obj (s's Service object).
func createServiceAs(ctx context.Context, c kubernetes.Interface, s workload.Service, obj *corev1.Service) error {
	deadline := time.Now().Add(createDeadline)
	for {
		err := retryCreate(ctx, func() error {
			_, err := c.CoreV1().Services(s.Namespace).Create(ctx, obj, metav1.CreateOptions{})
			return err
		})
		if err == nil {
			return writeLoadBalancerStatus(ctx, c, s)
		}
		if (apierrors.IsInvalid(err) || apierrors.IsAlreadyExists(err)) && stored(ctx, c, s) {
			// A create that timed out was stored after all: its retry
			// finds the ClusterIP taken ("provided IP is already
			// allocated") before it finds the name taken, or the name
			// taken once a leaked address was released below.
			return writeLoadBalancerStatus(ctx, c, s)
		}
		if apierrors.IsInvalid(err) {
			if holder, herr := releaseLeakedIPs(ctx, c, s, obj); herr != nil {
				return fmt.Errorf("apiobjects: create Service %s/%s (clusterIP %s): %w", s.Namespace, s.Name, s.ClusterIP, herr)
			} else if holder != "" {
				return fmt.Errorf("apiobjects: create Service %s/%s (clusterIP %s): the address is held by %s, not by a leaked allocation: %w", s.Namespace, s.Name, s.ClusterIP, holder, err)
			}
		}
		if !apierrors.IsInvalid(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("apiobjects: create Service %s/%s (clusterIP %s): %w", s.Namespace, s.Name, s.ClusterIP, err)
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// leakGrace is how old an IPAddress whose Service does not exist must be
// before releaseLeakedIPs deletes it: kube-apiserver's own repair loop
// waits the same 60 s (its default request timeout), since a Service
// create still in flight holds its address that long before the Service
// is stored (pkg/registry/core/service/ipallocator/controller/repairip.go,
// syncIPAddress).
const leakGrace = 60 * time.Second

// releaseLeakedIPs deletes, for each ClusterIP of obj (Service s), the
// IPAddress object (networking.k8s.io/v1, named by the address) that
// references Service s while s does not exist and is older than
// leakGrace: the allocation a timed-out create left behind. kube-apiserver's
// repair loop deletes such an address too, but only when its informer
// and work queue get to it, which a slow guest's API server at 10k
// NodePort services did not within createDeadline. It returns the holder
// ("Service ns/name", "networking.k8s.io/gateways ns/name") when an
// address belongs to another object: a real conflict, which no retry
// mends; "" otherwise. The error is a failed read or delete.
func releaseLeakedIPs(ctx context.Context, c kubernetes.Interface, s workload.Service, obj *corev1.Service) (string, error) {
	ips := obj.Spec.ClusterIPs
	if len(ips) == 0 && obj.Spec.ClusterIP != "" {
		ips = []string{obj.Spec.ClusterIP}
	}
	for _, ip := range ips {
		addr, err := c.NetworkingV1().IPAddresses().Get(ctx, ip, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue // released meanwhile: the next create takes it
		}
		if err != nil {
			if retriable(err) {
				continue
			}
			return "", fmt.Errorf("read IPAddress %s: %w", ip, err)
		}
		ref := addr.Spec.ParentRef
		if ref == nil {
			return "IPAddress " + ip + " without a parent", nil
		}
		if ref.Group != "" || ref.Resource != "services" || ref.Namespace != s.Namespace || ref.Name != s.Name {
			return fmt.Sprintf("%s %s/%s", refKind(ref), ref.Namespace, ref.Name), nil
		}
		if _, err := c.CoreV1().Services(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			continue // the Service is there (with another address) or unreadable now
		}
		if time.Since(addr.CreationTimestamp.Time) < leakGrace {
			continue // a create may still be in flight
		}
		uid := addr.UID
		err = c.NetworkingV1().IPAddresses().Delete(ctx, ip, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && !retriable(err) {
			return "", fmt.Errorf("delete leaked IPAddress %s: %w", ip, err)
		}
	}
	return "", nil
}

// refKind names a parent reference's resource as kubectl does: "Service"
// for core services, group/resource otherwise.
func refKind(ref *networkingv1.ParentReference) string {
	if ref.Group == "" && ref.Resource == "services" {
		return "Service"
	}
	if ref.Group == "" {
		return ref.Resource
	}
	return ref.Group + "/" + ref.Resource
}

// stored reports whether the API server holds Service s with its
// ClusterIP.
func stored(ctx context.Context, c kubernetes.Interface, s workload.Service) bool {
	got, err := c.CoreV1().Services(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	return err == nil && got.Spec.ClusterIP == s.ClusterIP.String()
}

// retryCreate calls create until it succeeds, up to 5 times while it
// fails with a timeout or overload (the API server's 504 "request did not
// complete within requested timeout", 429, 503, or a cut connection: seen
// on a machine with a load of 25 on 2 cores, where etcd answered one
// transaction after more than a minute). AlreadyExists after such a
// failure is success: the timed-out attempt was stored after all.
func retryCreate(ctx context.Context, create func() error) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		err = create()
		switch {
		case err == nil:
			return nil
		case attempt > 0 && apierrors.IsAlreadyExists(err):
			return nil
		case !retriable(err) || ctx.Err() != nil:
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(time.Duration(attempt+1) * 200 * time.Millisecond):
		}
	}
	return err
}

// retriable reports whether a create that failed with err may be tried
// again: a timeout, overload or broken connection, not a refusal.
func retriable(err error) bool {
	if apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) {
		return true
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return false // any other answer of the API server is final
	}
	return errors.Is(err, context.DeadlineExceeded) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err)
}

// UpdateSlice replaces s's EndpointSlice with one built from s (its current
// endpoints) stamped with trigger: how churn reaches kube-proxy.
func UpdateSlice(ctx context.Context, c kubernetes.Interface, s workload.Service, trigger time.Time) error {
	cur, err := c.DiscoveryV1().EndpointSlices(s.Namespace).Get(ctx, SliceName(s), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("apiobjects: get EndpointSlice %s/%s: %w", s.Namespace, SliceName(s), err)
	}
	next := EndpointSlice(s, trigger)
	next.ResourceVersion = cur.ResourceVersion
	if _, err := c.DiscoveryV1().EndpointSlices(s.Namespace).Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("apiobjects: update EndpointSlice %s/%s: %w", s.Namespace, SliceName(s), err)
	}
	return nil
}

// CreateService creates Service s (ServiceWithAffinity) and then its
// EndpointSlice stamped with trigger, as a new Service reaches a cluster:
// the Service first, then the EndpointSlice controller's slice for it
// with the time of the change as its last-change-trigger-time. It
// retries as Create does (a ClusterIP not yet allocatable, a timeout).
func CreateService(ctx context.Context, c kubernetes.Interface, s workload.Service, affinity time.Duration, trigger time.Time) error {
	if err := createService(ctx, c, s, affinity); err != nil {
		return err
	}
	slice := EndpointSlice(s, trigger)
	err := retryCreate(ctx, func() error {
		_, err := c.DiscoveryV1().EndpointSlices(s.Namespace).Create(ctx, slice, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("apiobjects: create EndpointSlice %s/%s: %w", s.Namespace, SliceName(s), err)
	}
	return nil
}

// DeleteService deletes Service s and then its EndpointSlice, as a cluster
// removes a Service (the EndpointSlice controller's slices go after it;
// kube-proxy drops a deleted slice's trigger time, so the deletion adds
// no network-programming observation).
func DeleteService(ctx context.Context, c kubernetes.Interface, s workload.Service) error {
	if err := c.CoreV1().Services(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("apiobjects: delete Service %s/%s: %w", s.Namespace, s.Name, err)
	}
	if err := c.DiscoveryV1().EndpointSlices(s.Namespace).Delete(ctx, SliceName(s), metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("apiobjects: delete EndpointSlice %s/%s: %w", s.Namespace, SliceName(s), err)
	}
	return nil
}

// ReplaceSlice writes s's EndpointSlice built from s (its current
// endpoints and their conditions) stamped with trigger, in one
// unconditional update (no resourceVersion: the EndpointSlice strategy
// allows it, pkg/registry/discovery/endpointslice), as the EndpointSlice
// controller writes a slice from its informer's copy in one request.
// UpdateSlice reads the slice first.
func ReplaceSlice(ctx context.Context, c kubernetes.Interface, s workload.Service, trigger time.Time) error {
	if _, err := c.DiscoveryV1().EndpointSlices(s.Namespace).Update(ctx, EndpointSlice(s, trigger), metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("apiobjects: update EndpointSlice %s/%s: %w", s.Namespace, SliceName(s), err)
	}
	return nil
}

// SliceHolds reports whether the API holds s's EndpointSlice as
// ReplaceSlice(ctx, c, s, trigger) writes it: trigger in its
// trigger-time annotation and s's endpoint addresses, in order. A write
// whose answer was lost (the client's deadline passed while the API
// server committed it, as with kube-apiserver starting in a loaded
// guest) reads back true, as the EndpointSlice controller's informer
// would show it its own write. A missing slice is false with no error;
// another failure of the GET is returned, naming the slice.
func SliceHolds(ctx context.Context, c kubernetes.Interface, s workload.Service, trigger time.Time) (bool, error) {
	es, err := c.DiscoveryV1().EndpointSlices(s.Namespace).Get(ctx, SliceName(s), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("apiobjects: get EndpointSlice %s/%s: %w", s.Namespace, SliceName(s), err)
	}
	if es.Annotations[TriggerTimeAnnotation] != trigger.UTC().Format(time.RFC3339Nano) || len(es.Endpoints) != len(s.Endpoints) {
		return false, nil
	}
	for i, e := range es.Endpoints {
		if len(e.Addresses) != 1 || e.Addresses[0] != s.Endpoints[i].IP.String() {
			return false, nil
		}
	}
	return true, nil
}

// RenameSlice moves s's endpoints from its EndpointSlice named from to a
// new one named to (EndpointSlice with that name, stamped with trigger):
// the new slice is created first and the old one deleted after, so the
// service never lacks its endpoints, as the EndpointSlice controller
// replaces a slice it recreates. Errors name the slice and the step.
func RenameSlice(ctx context.Context, c kubernetes.Interface, s workload.Service, from, to string, trigger time.Time) error {
	es := EndpointSlice(s, trigger)
	es.Name = to
	if _, err := c.DiscoveryV1().EndpointSlices(s.Namespace).Create(ctx, es, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("apiobjects: create EndpointSlice %s/%s: %w", s.Namespace, to, err)
	}
	if err := c.DiscoveryV1().EndpointSlices(s.Namespace).Delete(ctx, from, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("apiobjects: delete EndpointSlice %s/%s: %w", s.Namespace, from, err)
	}
	return nil
}
