//go:build linux

package controlplane_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/topology/controlplane"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/apiobjects"
)

// servicesN is n services of 3 endpoints each from the default plan.
func servicesN(n int) []workload.Service {
	out := make([]workload.Service, n)
	vip := netip.MustParseAddr("198.18.0.1")
	pod := netip.MustParseAddr("198.19.0.1")
	for i := range out {
		eps := make([]workload.Endpoint, 3)
		for k := range eps {
			eps[k] = workload.Endpoint{IP: pod, Ready: true, Weight: 1}
			pod = pod.Next()
		}
		out[i] = workload.Service{Namespace: workload.Namespace, Name: fmt.Sprintf("svc-%05d", i), ClusterIP: vip,
			Ports: []workload.ServicePort{{Name: "p80", Port: 80, TargetPort: 8080, Protocol: "TCP"}}, Endpoints: eps}
		vip = vip.Next()
	}
	return out
}

// BenchmarkControlPlane10k: etcd and kube-apiserver started in a fresh
// namespace until /readyz, then 10k Services and their 10k EndpointSlices
// (3 endpoints each) created through client-go. Reports ready-s (control
// plane up), create-s (objects) and total-s; the target is total <= 60 s.
//
//	go test -run '^$' -bench ControlPlane10k -benchtime 1x ./topology/controlplane
func BenchmarkControlPlane10k(b *testing.B) {
	testenv.RequireKernel(b)
	bins := testenv.RequireKube(b)
	svcs := servicesN(10000)
	for range b.N {
		t0 := time.Now()
		cp, err := controlplane.Start(context.Background(), controlplane.Spec{RunID: topology.NewRunID(),
			Avoid: []netip.Prefix{netip.MustParsePrefix("198.18.0.0/16"), netip.MustParsePrefix("198.19.0.0/17")},
			Bin:   controlplane.Binaries{Etcd: bins.Etcd, APIServer: bins.APIServer}})
		if err != nil {
			b.Fatal(err)
		}
		st, err := apiobjects.Create(context.Background(), cp.Client, apiobjects.Spec{
			ServiceCIDR: netip.MustParsePrefix("198.18.0.0/16"), Services: svcs, Workers: 64})
		total := time.Since(t0)
		cp.Stop()
		if err != nil {
			b.Fatal(err)
		}
		if st.Services != len(svcs) || st.EndpointSlices != len(svcs) {
			b.Fatalf("created %d services and %d slices, want %d each", st.Services, st.EndpointSlices, len(svcs))
		}
		b.ReportMetric(cp.Ready.Seconds(), "ready-s")
		b.ReportMetric(st.Elapsed.Seconds(), "create-s")
		b.ReportMetric(total.Seconds(), "total-s")
	}
}
