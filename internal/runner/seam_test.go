//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
)

// Fakes shared by the connReuse, lifecycle and transitions phases' unit
// tests: a log of the steps across the fakes and a proxier that writes
// its syncs into it.

// stepLog records, in order, what the phase asked of its fakes.
type stepLog struct {
	mu    sync.Mutex
	steps []string
}

func (l *stepLog) add(format string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.steps = append(l.steps, fmt.Sprintf(format, a...))
}

func (l *stepLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.steps)
}

// wantSteps fails t unless the log is want, showing both one step a line.
func wantSteps(t *testing.T, l *stepLog, want []string) {
	t.Helper()
	if got := l.get(); !slices.Equal(got, want) {
		t.Errorf("steps:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// logProxier is a fakeProxier that logs each Sync as "sync NAME
// SERVICE=a,b" (the watched service's endpoints by their names in
// names, "~" after one not ready; "SERVICE=-": no such service), or
// "sync NAME failed", and each forced full sync; hook sees the services
// before and after a successful sync and may change its stats.
type logProxier struct {
	*fakeProxier
	name, watch string
	log         *stepLog
	names       map[netip.Addr]string
	hook        func(before, after []workload.Service, st *proxymodes.SyncStats)
}

func (p *logProxier) Sync(ctx context.Context, services []workload.Service) (proxymodes.SyncStats, error) {
	p.mu.Lock()
	before := p.state
	p.mu.Unlock()
	st, err := p.fakeProxier.Sync(ctx, services)
	if err != nil {
		p.log.add("sync %s failed", p.name)
		return st, err
	}
	p.log.add("sync %s %s=%s", p.name, p.watch, p.endpoints(services))
	if p.hook != nil {
		p.hook(before, services, &st)
	}
	return st, nil
}

// ForceFullSync makes the next Sync full (proxymodes.FullSyncer).
func (p *logProxier) ForceFullSync() {
	p.mu.Lock()
	p.fresh = true
	p.mu.Unlock()
	p.log.add("force %s", p.name)
}

// endpoints names the watched service's endpoints in services.
func (p *logProxier) endpoints(services []workload.Service) string {
	for _, s := range services {
		if s.Name != p.watch {
			continue
		}
		var out []string
		for _, e := range s.Endpoints {
			n := p.names[e.IP]
			if n == "" {
				n = e.IP.String()
			}
			if !e.Ready {
				n += "~"
			}
			out = append(out, n)
		}
		return strings.Join(out, ",")
	}
	return "-"
}

// service returns the service of services with ClusterIP vip.
func service(services []workload.Service, vip netip.Addr) (workload.Service, bool) {
	for _, s := range services {
		if s.ClusterIP == vip {
			return s, true
		}
	}
	return workload.Service{}, false
}

// readyIPs are the ready endpoints of s.
func readyIPs(s workload.Service) []netip.Addr {
	var out []netip.Addr
	for _, e := range s.Endpoints {
		if e.Ready {
			out = append(out, e.IP)
		}
	}
	return out
}

// phaseRow is a row of mode m on fake env e and proxier p.
func phaseRow(sc *scenarios.Scenario, e *env, m proxymodes.Mode, p proxymodes.Proxier, svcs []workload.Service) *Row {
	return &Row{Sc: sc, O: Options{Progress: &recProgress{}}, Env: e, Mode: m, Proxier: p, Proxiers: []proxymodes.Proxier{p},
		Services: svcs, Result: &reports.ModeResult{Mode: m.Name}, Faults: &faults{}}
}

// TestEnvNoBackend: without a shared backend host (pods: isolated) the
// listeners of the lifecycle and transitions phases fail with
// errNoBackend, before touching a namespace.
func TestEnvNoBackend(t *testing.T) {
	e := newEnv(&topology.Testbed{})
	if _, err := e.listen([]uint16{5353}); !errors.Is(err, errNoBackend) {
		t.Errorf("listen: %v, want errNoBackend", err)
	}
	if _, err := e.listenUDP([]uint16{5353}); !errors.Is(err, errNoBackend) {
		t.Errorf("listenUDP: %v, want errNoBackend", err)
	}
}
