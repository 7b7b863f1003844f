//go:build linux

package kubeproxy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/proxybench/proxybench/internal/monitoring"
)

// Monitor is a Prometheus server beside a Proxier's control plane, in its
// namespace, scraping the row's kube-proxy over the node's link (kube-proxy
// then binds its metrics endpoint to 0.0.0.0 of the node namespace,
// ConfigSpec.MetricsAnyAddress) from each kube-proxy start on, and
// proxybench's own metrics (Live) in that namespace, and evaluating
// Rules. Every control plane of the row (a Cleanup and first
// Sync start a new one) gets its own server on the same TSDB, Dir/data.
type Monitor struct {
	// Binary is the prometheus program ("": on PATH).
	Binary string
	// Interval is the scrape and evaluation interval.
	Interval time.Duration
	// Rules are the rules as the server runs them (scaled); nil: none.
	Rules *monitoring.RuleSet
	// Dir is the server's folder ("": the Proxier's Dir/prometheus).
	Dir string
	// Live, when set, is proxybench's own metrics endpoint
	// (monitoring.Live.Handler): each server also scrapes it, as job
	// monitoring.LiveJob, served in the control plane's namespace
	// (monitoring.ServerSpec.Live).
	Live http.Handler
}

// promState is a Proxier's Prometheus: the running server, when the
// first one started, and how many followed it.
type promState struct {
	srv      *monitoring.Server
	first    time.Time
	ended    time.Time
	restarts int
	cpu      time.Duration // CPU of the servers stopped
}

// startPrometheus starts the row's Prometheus in the control plane's
// namespace, scraping kube-proxy's metrics endpoint over the node's link
// (the node's address on it, as the control-plane namespace reaches it),
// and returns how long its start took.
func (p *Proxier) startPrometheus(ctx context.Context) (time.Duration, error) {
	m := p.spec.Monitor
	if m == nil {
		return 0, nil
	}
	t0 := time.Now()
	dir := m.Dir
	if dir == "" {
		dir = filepath.Join(p.spec.Dir, "prometheus")
	}
	addr := net.JoinHostPort(p.cp.NodeAddr(0).String(), strconv.Itoa(MetricsPort))
	target := monitoring.Target{Addr: addr, Labels: map[string]string{"node": p.spec.Node.Name, "row": p.Mode()}}
	srv, err := monitoring.Start(ctx, monitoring.ServerSpec{RunID: p.runID, NS: p.cp.NS, Binary: m.Binary, Dir: dir, Interval: m.Interval,
		Job: "kube-proxy", Targets: []monitoring.Target{target}, Rules: m.Rules, Live: m.Live})
	if err != nil {
		return 0, fmt.Errorf("kubeproxy: %w", err)
	}
	if p.prom.first.IsZero() {
		p.prom.first = srv.Started
	} else {
		p.prom.restarts++
	}
	p.prom.srv = srv
	return time.Since(t0), nil
}

// stopPrometheus stops the running server (its TSDB stays in its folder).
func (p *Proxier) stopPrometheus() error {
	if p.prom.srv == nil {
		return nil
	}
	p.prom.cpu += p.prom.srv.CPU()
	err := p.prom.srv.Stop()
	p.prom.srv = nil
	p.prom.ended = time.Now()
	return err
}

// Prometheus is the row's running Prometheus (nil when the row is not
// monitored, before the first Sync and after Cleanup) with when the row's
// first server started and how many servers followed it (one per
// control plane).
func (p *Proxier) Prometheus() (srv *monitoring.Server, first time.Time, restarts int) {
	return p.prom.srv, p.prom.first, p.prom.restarts
}

// PrometheusCPU is the CPU time of the row's Prometheus servers so far.
func (p *Proxier) PrometheusCPU() time.Duration {
	return p.prom.cpu + p.prom.srv.CPU()
}
