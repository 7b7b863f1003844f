//go:build linux

package kubeproxy

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// kube-proxy's own stale UDP conntrack cleanup, as the transitions phase
// reads it. Each proxier (iptables, nftables, ipvs) calls
// pkg/proxy/conntrack.CleanStaleEntries at the end of a sync whose
// endpoint changes touched a UDP ServicePort
// (EndpointsMap.Update's ConntrackCleanupRequired): it lists the node's
// UDP conntrack entries and deletes every one whose original destination
// is a UDP service's IP and whose reply source is not one of its serving
// endpoints. It accounts for it twice: in its metrics,
// kubeproxy_conntrack_reconciler_sync_duration_seconds (one observation
// per cleanup) and kubeproxy_conntrack_reconciler_deleted_entries_total
// (the entries deleted; kube-proxy v1.33 on, kubernetes#130204), and in
// its log at -v 4: "Finished reconciling conntrack entries" with
// entriesDeleted, or "Failed to clear all conntrack entries" (an error,
// any -v).

const (
	// MetricConntrackSync is kube-proxy's cleanup duration histogram
	// (IPv4 series): its count is the cleanups run.
	MetricConntrackSync = "kubeproxy_conntrack_reconciler_sync_duration_seconds"
	// MetricConntrackDeleted is kube-proxy's counter of the conntrack
	// entries its cleanup deleted (IPv4 series).
	MetricConntrackDeleted = "kubeproxy_conntrack_reconciler_deleted_entries_total"
	// ConntrackVerbosity is the -v at which kube-proxy logs each cleanup
	// with the entries it deleted (klog V(4) in
	// pkg/proxy/conntrack/cleanup.go).
	ConntrackVerbosity = 4
)

// ConntrackMark is kube-proxy's cleanup account at one moment
// (ConntrackMarkNow), the start of a ConntrackSince.
type ConntrackMark struct {
	runs     uint64
	deleted  float64
	hasCount bool // the deleted-entries counter existed
	logFrom  int
}

// ConntrackCleanup is what kube-proxy says its conntrack cleanup did
// between a ConntrackMark and ConntrackSince.
type ConntrackCleanup struct {
	// Runs is the cleanups kube-proxy ran (its duration histogram's
	// growth); Deleted the entries they deleted by its counter (-1: the
	// counter does not exist, a kube-proxy before v1.33, or none grew it
	// yet and Runs is 0).
	Runs    int
	Deleted int
	// LogRuns and LogDeleted are the same by its log's "Finished
	// reconciling conntrack entries" lines (IPv4) and their entriesDeleted
	// (0, 0 below -v 4); Errors its "Failed to clear all conntrack
	// entries" and "Failed to list conntrack entries" lines.
	LogRuns, LogDeleted int
	Errors              []string
}

// ConntrackMarkNow scrapes kube-proxy's cleanup metrics and notes its
// log's size. Errors: no kube-proxy running, a failed scrape.
func (p *Proxier) ConntrackMarkNow(ctx context.Context) (ConntrackMark, error) {
	if p.kp == nil {
		return ConntrackMark{}, errors.New("kubeproxy: no kube-proxy running")
	}
	m, err := p.kp.Scrape(ctx)
	if err != nil {
		return ConntrackMark{}, p.orExited(err, "a conntrack reading")
	}
	mk := conntrackOf(m)
	mk.logFrom = p.kp.logSize()
	return mk, nil
}

// conntrackOf reads the IPv4 cleanup metrics of one scrape.
func conntrackOf(m Metrics) ConntrackMark {
	var mk ConntrackMark
	if h, err := m.Histogram(MetricConntrackSync, "IPv4"); err == nil {
		mk.runs = h.Count
	}
	if v, ok := counterOf(m, MetricConntrackDeleted, "IPv4"); ok {
		mk.deleted, mk.hasCount = v, true
	}
	return mk
}

// counterOf is the value of family name's series with ip_family=family.
func counterOf(m Metrics, name, family string) (float64, bool) {
	f, ok := m[name]
	if !ok {
		return 0, false
	}
	for _, s := range f.GetMetric() {
		for _, l := range s.GetLabel() {
			if l.GetName() == "ip_family" && l.GetValue() == family {
				if c := s.GetCounter(); c != nil {
					return c.GetValue(), true
				}
				return s.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// ConntrackSince is kube-proxy's cleanup account since mk: its metrics'
// growth and its log's lines after mk. The log is read as it stands: call
// it after the sync of interest ended (Sync returns then).
func (p *Proxier) ConntrackSince(ctx context.Context, mk ConntrackMark) (ConntrackCleanup, error) {
	now, err := p.ConntrackMarkNow(ctx)
	if err != nil {
		return ConntrackCleanup{}, err
	}
	c := ConntrackCleanup{Runs: int(now.runs - mk.runs), Deleted: -1}
	switch {
	case now.hasCount:
		c.Deleted = int(now.deleted - mk.deleted)
	case c.Runs == 0:
		c.Deleted = 0
	}
	log := readFile(p.kp.LogPath)
	if mk.logFrom <= len(log) {
		log = log[mk.logFrom:]
	}
	c.LogRuns, c.LogDeleted, c.Errors = ParseConntrackLog(log)
	return c, nil
}

var kvDeleted = regexp.MustCompile(`\bentriesDeleted=(\d+)`)

// ParseConntrackLog reads kube-proxy's IPv4 cleanup lines from log
// (klog's text format): each "Finished reconciling conntrack entries"
// (runs, and the sum of their entriesDeleted), and the text of each
// "Failed to clear all conntrack entries" or "Failed to list conntrack
// entries" line (errs; the clear failure's entriesDeleted counts too).
func ParseConntrackLog(log []byte) (runs, deleted int, errs []string) {
	eachIPv4Line(log, func(m [][]byte) {
		rest := m[8]
		n := 0
		if d := kvDeleted.FindSubmatch(rest); d != nil {
			n, _ = strconv.Atoi(string(d[1]))
		}
		switch msg := string(m[7]); msg {
		case "Finished reconciling conntrack entries":
			runs++
			deleted += n
		case "Failed to clear all conntrack entries", "Failed to list conntrack entries":
			deleted += n
			errs = append(errs, msg+string(rest))
		}
	})
	return runs, deleted, errs
}

// RaiseVerbosity raises the running kube-proxy's -v to at least v for a
// phase (PUT /debug/flags/v, served with enableProfiling:
// PassFromScenario sets it for the scenarios whose phases read kube-proxy's
// log) and returns how its log came to have the lines (note, for the
// report) and restore, which puts the -v back (a no-op when it was not
// raised). When the -v cannot be raised, note says why and restore is a
// no-op: the phase goes on without the log lines.
func (p *Proxier) RaiseVerbosity(ctx context.Context, v int, what string) (note string, restore func(context.Context) error) {
	noop := func(context.Context) error { return nil }
	if p.kp == nil {
		return "no kube-proxy running", noop
	}
	cur := p.kp.Spec.Verbosity
	if cur == 0 {
		cur = 2
	}
	switch {
	case cur >= v:
		return fmt.Sprintf("kube-proxy ran at -v %d: its log has %s", cur, what), noop
	case !profiling(p.spec.Pass):
		return fmt.Sprintf("kube-proxy ran at -v %d with enableProfiling false (kubeProxy.config), so its -v could not be raised to %d for the phase: its log lacks %s", cur, v, what), noop
	}
	if err := p.kp.setVerbosity(ctx, v); err != nil {
		return fmt.Sprintf("kube-proxy's -v could not be raised to %d (%v): its log lacks %s", v, err, what), noop
	}
	kp := p.kp
	return fmt.Sprintf("kube-proxy's -v raised from %d to %d for the phase (PUT /debug/flags/v; enableProfiling on) for %s", cur, v, what),
		func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := kp.setVerbosity(ctx, cur); err != nil {
				return fmt.Errorf("put kube-proxy's -v %d back: %w", cur, err)
			}
			return nil
		}
}
