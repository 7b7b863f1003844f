//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/proxybench/proxybench/internal/monitoring"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload/traffic"
)

// Live metrics: with monitoring (scenario block monitoring, alerts:) Run
// keeps proxybench's own figures as Prometheus series while it measures
// them (monitoring.Live, one registry per row: Row.Live), and every
// row's Prometheus scrapes them as job "proxybench" at the scenario's
// interval: a kube-proxy row's in its control plane's namespace (beside
// kube-proxy, kubeproxy.Monitor.Live), a builtin row's in a namespace of
// its own (rowPrometheus). docs/kube-proxy.md, "proxybench's own live
// metrics".

// observeSync observes one sync in live: st's kind (kind when st has
// none, as a failed sync's stats), wall time and objects, or a failure.
func observeSync(live *monitoring.RowMetrics, kind string, st proxymodes.SyncStats, err error) {
	if live == nil {
		return
	}
	if st.Kind != "" {
		kind = st.Kind
	}
	live.Sync(kind, st.Wall, st.Objects, err != nil)
}

// observeLookup counts one driver call's recorded connections at
// position in live by outcome (ok, miss, every error kind, at 0 too)
// and observes the answered ones' connect times.
func observeLookup(live *monitoring.RowMetrics, position string, dr *traffic.DriveResult) {
	if live == nil || dr == nil {
		return
	}
	out := map[string]int{monitoring.OutcomeMiss: dr.Misses}
	for _, k := range traffic.ErrorKinds {
		out[k] = len(dr.ErrorTimesNs[k])
	}
	live.Lookup(position, dr.LatenciesNs, out)
}

// rowLabels are a row's live labels.
func rowLabels(m proxymodes.Mode, sc *scenarios.Scenario, where Where) monitoring.RowLabels {
	lb := monitoring.RowLabels{Mode: m.Name, Implementation: scenarios.ImplBuiltin, Kernel: string(where), Row: rowLabel(m, sc)}
	if m.Base != "" {
		lb.Mode, lb.Implementation = m.Base, m.Implementation
	}
	return lb
}

// rowPrometheus is a builtin row's Prometheus (a kube-proxy row's runs
// beside its control plane, kubeproxy.Monitor): Debian's server in a
// namespace of its own, pb-<runid>-prom (nothing listens in the root
// namespace), scraping proxybench's own metrics there (job
// monitoring.LiveJob at monitoring.LiveAddr) for the row's life. It
// loads no rule file: the rules users bring read kube-proxy's series
// and job, which a builtin row does not have (docs/kube-proxy.md).
type rowPrometheus struct {
	ns  *topology.Netns
	srv *monitoring.Server
}

// startRowPrometheus starts r's builtin Prometheus with its TSDB in
// dir/prometheus/data. On error nothing is left.
func startRowPrometheus(ctx context.Context, r *Row, live *monitoring.Live, dir string) (*rowPrometheus, error) {
	name := topology.NetnsName(r.Testbed.RunID, "prom")
	ns, err := topology.CreateNetns(name)
	if err != nil {
		if ns != nil {
			_ = ns.Close()
			_ = topology.DeleteNetns(name)
		}
		return nil, fmt.Errorf("monitoring: %w", err)
	}
	srv, err := monitoring.Start(ctx, monitoring.ServerSpec{RunID: r.Testbed.RunID, NS: ns, Dir: filepath.Join(dir, "prometheus"),
		Interval: r.Sc.Monitoring.Interval.Duration, Live: live.Handler()})
	if err != nil {
		_ = ns.Close()
		return nil, errors.Join(fmt.Errorf("monitoring: %w", err), topology.DeleteNetns(name))
	}
	return &rowPrometheus{ns: ns, srv: srv}, nil
}

// Prometheus is the row's server (prometheusHolder): never restarted.
func (p *rowPrometheus) Prometheus() (*monitoring.Server, time.Time, int) {
	if p.srv == nil {
		return nil, time.Time{}, 0
	}
	return p.srv, p.srv.Started, 0
}

// PrometheusCPU is the server's CPU time so far.
func (p *rowPrometheus) PrometheusCPU() time.Duration { return p.srv.CPU() }

// stop stops the server (its TSDB stays) and deletes its namespace.
func (p *rowPrometheus) stop() error {
	err := p.srv.Stop()
	p.srv = nil
	_ = p.ns.Close()
	return errors.Join(err, topology.DeleteNetns(p.ns.Name))
}
