//go:build linux

package controlplane_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// selfCPU is this process's user+system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkControlPlane10k: etcd and kube-apiserver started in a fresh
// namespace until /readyz, then 10k Services and their 10k EndpointSlices
// (3 endpoints each) created through client-go. Reports ready-s (control
// plane up), create-s (objects), objects/s (Services and EndpointSlices
// created per second) and total-s; the target is total <= 60 s. With
// PROXYBENCH_CP_PROFILE=DIR set, CPU profiles of kube-apiserver and etcd
// taken over 20 s of the creation (from its 5th second) are written to DIR.
//
//	go test -run '^$' -bench ControlPlane10k -benchtime 1x ./topology/controlplane
func BenchmarkControlPlane10k(b *testing.B) {
	testenv.RequireKernel(b)
	bins := testenv.RequireKube(b)
	svcs := servicesN(10000)
	profDir := os.Getenv("PROXYBENCH_CP_PROFILE")
	for range b.N {
		self0 := selfCPU()
		t0 := time.Now()
		cp, err := controlplane.Start(context.Background(), controlplane.Spec{RunID: topology.NewRunID(),
			Avoid:     []netip.Prefix{netip.MustParsePrefix("198.18.0.0/16"), netip.MustParsePrefix("198.19.0.0/17")},
			Bin:       controlplane.Binaries{Etcd: bins.Etcd, APIServer: bins.APIServer},
			Profiling: profDir != ""})
		if err != nil {
			b.Fatal(err)
		}
		profDone := make(chan error, 1)
		if profDir != "" {
			go func() {
				time.Sleep(5 * time.Second)
				profDone <- cp.Profile(context.Background(), 20*time.Second,
					filepath.Join(profDir, "kube-apiserver.pprof"), filepath.Join(profDir, "etcd.pprof"))
			}()
		} else {
			profDone <- nil
		}
		st, err := apiobjects.Create(context.Background(), cp.Client, apiobjects.Spec{
			ServiceCIDR: netip.MustParsePrefix("198.18.0.0/16"), Services: svcs, Workers: 64})
		total := time.Since(t0)
		if perr := <-profDone; perr != nil {
			b.Log(perr)
		}
		apiCPU, etcdCPU, clientCPU := cp.APIServer.CPU(), cp.Etcd.CPU(), selfCPU()-self0
		cp.Stop()
		if err != nil {
			b.Fatal(err)
		}
		if st.Services != len(svcs) || st.EndpointSlices != len(svcs) {
			b.Fatalf("created %d services and %d slices, want %d each", st.Services, st.EndpointSlices, len(svcs))
		}
		b.ReportMetric(cp.Ready.Seconds(), "ready-s")
		b.ReportMetric(st.Elapsed.Seconds(), "create-s")
		b.ReportMetric(float64(st.Services+st.EndpointSlices)/st.Elapsed.Seconds(), "objects/s")
		b.ReportMetric(total.Seconds(), "total-s")
		// Where the time went, independent of the machine's load: CPU
		// seconds of kube-apiserver and etcd over the whole run.
		b.ReportMetric(apiCPU.Seconds(), "apiserver-cpu-s")
		b.ReportMetric(etcdCPU.Seconds(), "etcd-cpu-s")
		b.ReportMetric(clientCPU.Seconds(), "client-cpu-s")
		if la, err := os.ReadFile("/proc/loadavg"); err == nil {
			b.Logf("load average at the end: %s", strings.TrimSpace(string(la)))
		}
	}
}
