//go:build linux

package fidelity_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"testing"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/proxymodes/fidelity"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

const scenarioYAML = `services:
  count: 5
  portsPerService: 2
  sessionAffinity: ClientIP
  sessionAffinityTimeout: 600s
modes: [iptables, nftables, ipvs]
`

// fidelityServices are the cases of the comparison, on two TCP ports
// (80 → 8080, 81 → 8081): 0, 1 and 3 ready endpoints, 2 ready and one
// terminating (serving), and only a terminating serving one (kube-proxy's
// fallback to serving terminating endpoints, KEP-1669).
func fidelityServices(t *testing.T, sc *scenarios.Scenario) []workload.Service {
	svcs, err := workload.Services(sc)
	if err != nil {
		t.Fatal(err)
	}
	_, podNet, _, _ := sc.Prefixes()
	pod := podNet.Addr().Next()
	next := func() netip.Addr { a := pod; pod = pod.Next(); return a }
	term := func() workload.Endpoint {
		return workload.Endpoint{IP: next(), Serving: true, Terminating: true, Weight: 1}
	}
	counts := []int{0, 1, 3, 2, 0}
	for i := range svcs {
		svcs[i].Endpoints = nil
		for range counts[i] {
			svcs[i].Endpoints = append(svcs[i].Endpoints, workload.NewEndpoint(next()))
		}
	}
	svcs[3].Endpoints = append(svcs[3].Endpoints, term())
	svcs[4].Endpoints = append(svcs[4].Endpoints, term())
	return svcs
}

func TestKernelFidelityDump(t *testing.T) {
	mode := os.Getenv("FIDELITY_MODE")
	if mode == "" {
		t.Skip("set FIDELITY_MODE")
	}
	testenv.RequireKernel(t, "iptables-legacy-save", "nft")
	bins := testenv.RequireKube(t)
	sc, err := modes.Catalog().Parse([]byte(scenarioYAML), "fidelity.yaml")
	if err != nil {
		t.Fatal(err)
	}
	svcs := fidelityServices(t, sc)
	var rs []fidelity.Reading
	for _, impl := range fidelity.Implementations {
		r, err := fidelity.Install(context.Background(), fidelity.Spec{Scenario: sc, Mode: mode, Implementation: impl, Services: svcs,
			Kube: fidelity.KubeBinaries{KubeProxy: bins.KubeProxy, APIServer: bins.APIServer, Etcd: bins.Etcd}})
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	b, _ := json.Marshal(rs)
	os.WriteFile("/tmp/kpf-"+mode+".json", b, 0o644)
	fmt.Println(fidelity.Unified(rs[0], rs[1], fidelity.KnownDifferences))
}
