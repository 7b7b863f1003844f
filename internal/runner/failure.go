//go:build linux

package runner

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// downAddresses are the endpoints failure injection kills: the first n of
// every service (all of a service's endpoints when it has fewer).
func downAddresses(services []workload.Service, n int) []netip.Addr {
	var down []netip.Addr
	for _, s := range services {
		for _, e := range s.Endpoints[:min(n, len(s.Endpoints))] {
			down = append(down, e.IP)
		}
	}
	return down
}

// failurePhase makes failure.downEndpointsPerService endpoints of every
// service dead for the whole run (their pod IPs answer TCP with RST, or
// not at all, per failure.mode) and returns how to revive them; with no
// failure configured it does nothing. A failed injection fails the run:
// every figure would be taken against live endpoints the scenario says
// are dead.
func failurePhase(ctx context.Context, sc *scenarios.Scenario, e *env, services []workload.Service) (undo func() error, err error) {
	n := sc.Failure.DownEndpointsPerService
	if n <= 0 {
		return func() error { return nil }, nil
	}
	undo, err = e.down(ctx, downAddresses(services, n), sc.Failure.Mode)
	if err != nil {
		return nil, fmt.Errorf("failure injection: %w", err)
	}
	return undo, nil
}
