//go:build linux

package kubeproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/topology/controlplane"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/apiobjects"
)

// ProxierSpec configures a Proxier.
type ProxierSpec struct {
	// Mode is kube-proxy's mode (iptables, ipvs, nftables).
	Mode string
	// Node is the node namespace (one node: the control plane is the
	// Proxier's own).
	Node        *topology.Netns
	NodeIP      netip.Addr
	ClusterCIDR netip.Prefix
	ServiceCIDR netip.Prefix
	Avoid       []netip.Prefix
	Pass        map[string]any
	KubeProxy   string
	// Version is KubeProxy's version when the caller has checked it
	// already (Version's answer, e.g. runner's preflight); empty:
	// NewProxier checks it (kube-proxy --version and --help).
	Version string
	Bin     controlplane.Binaries
	// Dir keeps the config, kubeconfig and log.
	Dir string
	// Verbosity is kube-proxy's -v (0: 2).
	Verbosity int
	// Label is the row's name ("nftables (kube-proxy)"; default "<mode>
	// (kube-proxy)").
	Label string
	// DataPlane, when set, waits until every probed service answers
	// through the node's rules and returns when the last one first did
	// and how many were probed; the first Sync's Wall is then from the API
	// objects being created to that moment (sync.full seen from the data
	// plane), else to kube-proxy's /healthz answering.
	DataPlane func(ctx context.Context, services []workload.Service) (answered time.Time, probed int, err error)
	// IPTablesBackend is kube-proxy's iptables back end (Spec.IPTablesBackend).
	IPTablesBackend string
	// XtablesLock is kube-proxy's xtables lock file (Spec.XtablesLock;
	// "": /run/xtables.lock).
	XtablesLock string
	// PathFirst is Spec.PathFirst: a folder first on kube-proxy's PATH
	// (failure.syncErrors' wrappers).
	PathFirst string
	// SessionAffinity, when > 0, gives every Service sessionAffinity
	// ClientIP with this timeout (the scenario's
	// services.sessionAffinityTimeout when sessionAffinity is ClientIP).
	SessionAffinity time.Duration
	// Zones labels the Nodes with their zones (scenarios.NodeZones; nil:
	// none), which kube-proxy reads to follow the EndpointSlices' hints.
	Zones map[string]string
	// FirstSyncTimeout bounds the first Sync's wait for kube-proxy's
	// first sync and for the data plane, from the API objects created
	// (0: DefaultFirstSyncTimeout; the scenario's
	// kubeProxy.firstSyncTimeout). When it passes with kube-proxy still
	// running, Sync returns a *proxymodes.Unfinished with how far
	// kube-proxy got (ReadProgress) and keeps kube-proxy running for
	// KubeProxyRecord; Cleanup stops it.
	FirstSyncTimeout time.Duration
	// Monitor, when set, runs a Prometheus server beside the control
	// plane that scrapes this kube-proxy (monitor.go).
	Monitor *Monitor
	// ProgressEvery is how often the first sync's progress is read in
	// IPVS mode (0: a minute, at most a tenth of FirstSyncTimeout, at
	// least 5 s); each reading starts one `ipset list -t`.
	ProgressEvery time.Duration
	// Others are the testbed's other node namespaces (topology.nodes >
	// 1), OtherIPs their InternalIPs: each runs its own kube-proxy
	// (NodeName(i+1)) against this Proxier's control plane, started with
	// node-0's and stopped with it (nodes.go). Empty: one node.
	Others   []*topology.Netns
	OtherIPs []netip.Addr
	// Guest says the node runs inside a user-mode-linux guest (the
	// runner's Options.Where): syscalls cost ~25x the host's there, so
	// the control plane gets 8 min to start, and each resident page is a
	// host mapping (controlplane.Spec.LowMemory).
	Guest bool
	// IPv6, when valid, makes the row dual-stack: the /96 of the IPv6
	// twins (scenarios.Scenario.IPv6Prefix). The API server gets an IPv6
	// service range too (controlplane.Spec.DualStack), every Service both
	// ClusterIPs with FamilyPolicy and an IPv6 EndpointSlice
	// (apiobjects.Spec.IPv6), kube-proxy the IPv6 twin of ClusterCIDR
	// beside it (ConfigSpec.ClusterCIDR6); the first Sync also waits for
	// the IPv6 side (FamilySync). On several nodes every kube-proxy gets
	// both cluster CIDRs; FamilySync is node-0's.
	IPv6         netip.Prefix
	FamilyPolicy string
}

// clusterCIDR6 is the IPv6 twin of the cluster CIDR of a dual-stack
// spec, else the zero Prefix.
func (spec ProxierSpec) clusterCIDR6() netip.Prefix {
	if !spec.IPv6.IsValid() {
		return netip.Prefix{}
	}
	return scenarios.TwinPrefix6(spec.IPv6, spec.ClusterCIDR)
}

// Proxier drives the real kube-proxy through the API, behind the same
// interface as the builtin modes (proxymodes.Proxier): the first Sync
// starts the control plane, creates the Node, Services and EndpointSlices
// and starts kube-proxy, and returns when kube-proxy's first sync is done
// (/healthz); later Syncs write what changed to the API and return when
// kube-proxy has finished the sync that programmed them (its
// network-programming observations for the writes, then that sync's end).
type Proxier struct {
	spec  ProxierSpec
	runID string
	cp    *controlplane.ControlPlane
	kp    *Proxy
	// last is what the API holds (the services of the last Sync, with the
	// churn phase's writes, WriteChange, under lastMu).
	lastMu sync.Mutex
	last   map[string]workload.Service
	info   map[string]string
	rec    *measure.KubeProxy
	// halted is the kube-proxy Halt stopped, until Resume; restarts
	// counts the processes stopped so far (the old logs' suffixes).
	halted   *Proxy
	restarts int
	// progress are the readings of the first sync's progress (IPVS).
	progressMu sync.Mutex
	progress   []measure.SyncProgress
	// earlier are the processes stopped so far (Halt, Cleanup), for the
	// record: the row's figures are over every one of them.
	earlier []measure.KubeProxyProcess
	// minSync is kube-proxy's minSyncPeriod (read from its log at its
	// first sync; 1 s, its default, when not found).
	minSync time.Duration
	// exitErr is the *proxymodes.Failed of a kube-proxy that exited on
	// its own (exited), once seen, and exitRec its record.
	exitErr error
	exitRec *measure.KubeProxyExit
	// prom is the Prometheus of the current control plane (Monitor).
	prom promState
	// churn is the running churn phase's account (BeginChurn).
	churn *churnState
	// nodes are the other nodes' kube-proxies (ProxierSpec.Others).
	nodes nodeState
	// sliceGen counts each service's EndpointSlice renames (RenameSlice;
	// namespace/name, under lastMu).
	sliceGen map[string]int
	// ipv6 is the IPv6 side of a dual-stack row's first Sync (FamilySync;
	// nil until then, or when the row is single-stack). A later first
	// Sync (after a Cleanup) keeps the first process's, as record does.
	ipv6 *familySync
}

// familySync is one family's first sync of a dual-stack kube-proxy row:
// its stats, or why it was not measured.
type familySync struct {
	st  proxymodes.SyncStats
	err error
}

// FamilySync returns the first Sync's figures for IPv6 of a dual-stack
// row (ProxierSpec.IPv6): Wall from the API objects created to the last
// probed IPv6 ServicePort first answering through kube-proxy's rules
// (the IPv4 side is the first Sync's own stats), Phases
// "kube-proxy.metric" kube-proxy's own IPv6 full-sync duration
// (kubeproxy_sync_full_proxy_rules_duration_seconds{ip_family="IPv6"}),
// Objects and Bytes what its IPv6 proxier installed, read back
// (ip6tables-<back end>-save, table ip6 kube-proxy). CPU is 0: one
// kube-proxy process runs both families' proxiers, and its CPU is the
// IPv4 sync.full's. An error says why the IPv6 side was not measured
// (single-stack, no first Sync yet, or its probes failed).
func (p *Proxier) FamilySync(fam string) (proxymodes.SyncStats, error) {
	switch {
	case fam != scenarios.IPv6:
		return proxymodes.SyncStats{}, fmt.Errorf("kubeproxy: FamilySync(%q): the IPv4 side is the first Sync's own figures", fam)
	case !p.spec.IPv6.IsValid():
		return proxymodes.SyncStats{}, fmt.Errorf("kubeproxy: %s is single-stack (no IPv6 services)", p.Mode())
	case p.ipv6 == nil:
		return proxymodes.SyncStats{}, fmt.Errorf("kubeproxy: %s has not made its first sync", p.Mode())
	}
	return p.ipv6.st, p.ipv6.err
}

// NewProxier returns a Proxier; nothing starts before the first Sync.
func NewProxier(spec ProxierSpec) (*Proxier, error) {
	id := topology.RunIDOf(spec.Node.Name)
	if id == "" {
		return nil, fmt.Errorf("kubeproxy: node namespace %q is not a testbed namespace", spec.Node.Name)
	}
	if spec.Version == "" {
		v, err := Version(context.Background(), spec.KubeProxy)
		if err != nil {
			return nil, err
		}
		spec.Version = v // every start of it (Start) takes it from here
	}
	if _, _, err := Config(ConfigSpec{Mode: spec.Mode, Pass: spec.Pass}); err != nil {
		return nil, err
	}
	return &Proxier{spec: spec, runID: id}, nil
}

// Mode is the row's label, "<mode> (kube-proxy)" by default.
func (p *Proxier) Mode() string {
	if p.spec.Label != "" {
		return p.spec.Label
	}
	return p.spec.Mode + " (kube-proxy)"
}

// PathFirst is the folder first on kube-proxy's PATH (ProxierSpec.PathFirst;
// "": none).
func (p *Proxier) PathFirst() string { return p.spec.PathFirst }

// Info describes the kube-proxy run: version, binary, config and log
// paths, and the testbed-owned config fields.
func (p *Proxier) Info() map[string]string {
	out := map[string]string{"implementation": "kube-proxy", "binary": p.spec.KubeProxy}
	for k, v := range p.info {
		out[k] = v
	}
	return out
}

const tsMetric = "kubeproxy_sync_proxy_rules_last_timestamp_seconds"

// scrapeTries is how many scrapes syncView makes of a kube-proxy whose
// metrics endpoint times out (each bounded by the Proxy's HTTP client,
// 10 s) before it gives the error up.
const scrapeTries = 3

// scrapeTimedOut reports whether err is one request's timeout (the HTTP
// client's, on the answer's headers or body: a net.Error whose Timeout is
// true) while ctx itself is still live, so that asking again may answer.
// A refused connection (kube-proxy gone) or ctx's own end is not.
func scrapeTimedOut(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// syncView is one scrape of kube-proxy's IPv4 sync state: the end of its
// last sync (kubeproxy_sync_proxy_rules_last_timestamp_seconds, zero when
// absent), its sync duration histogram, and how many network-programming
// latencies it has observed (kubeproxy_network_programming_duration_seconds,
// every series: 0 before the first, when the series does not exist yet).
type syncView struct {
	ts         time.Time
	sync       Histogram
	programmed uint64
}

// syncView scrapes kube-proxy, asking again (up to scrapeTries in all)
// when a scrape timed out while ctx is live: kube-proxy was busy, not
// gone (50 kube-proxies at 10k services, load 100: one scrape of node-0's
// metrics took over the client's 10 s while its iptables monitor forced
// full resyncs, and failed the row's sync back).
func (p *Proxier) syncView(ctx context.Context) (syncView, error) {
	var m Metrics
	var err error
	for try := 1; ; try++ {
		if m, err = p.kp.Scrape(ctx); err == nil || try == scrapeTries || !scrapeTimedOut(ctx, err) {
			break
		}
	}
	if err != nil {
		return syncView{}, err
	}
	ts, h := lastSyncOf(m)
	return syncView{ts: ts, sync: h, programmed: programmedOf(m)}, nil
}

// programmedOf is how many network-programming latencies kube-proxy has
// observed (every series of MetricProgramming; 0 before the first).
func programmedOf(m Metrics) uint64 {
	var n uint64
	if f, ok := m[MetricProgramming]; ok {
		for _, s := range f.GetMetric() {
			n += s.GetHistogram().GetSampleCount()
		}
	}
	return n
}

// lastSyncOf reads kube-proxy's IPv4 last-sync timestamp (zero when
// absent) and sync histogram from one scrape.
func lastSyncOf(m Metrics) (time.Time, Histogram) {
	h, _ := m.Histogram(MetricSync, "IPv4")
	f, ok := m[tsMetric]
	if !ok {
		return time.Time{}, h
	}
	for _, s := range f.GetMetric() {
		for _, l := range s.GetLabel() {
			if l.GetName() == "ip_family" && l.GetValue() == "IPv4" {
				v := s.GetGauge().GetValue()
				return time.Unix(0, int64(v*1e9)), h
			}
		}
	}
	return time.Time{}, h
}

// changeState is kube-proxy's view of the changes it was sent: how many
// Service and EndpointSlice changes it received
// (kubeproxy_sync_proxy_rules_{service,endpoint}_changes_total), how many
// wait for a sync (..._changes_pending), and its IPv4 last-queued and
// last-synced timestamps. ok is false when a series is missing.
type changeState struct {
	total, pending float64
	queued, synced time.Time
	ok             bool
}

func (p *Proxier) changes(ctx context.Context) (changeState, error) { return scrapeChanges(ctx, p.kp) }

// scrapeChanges is changeState from one scrape of kp.
func scrapeChanges(ctx context.Context, kp *Proxy) (changeState, error) {
	m, err := kp.Scrape(ctx)
	if err != nil {
		return changeState{}, err
	}
	return changesOf(m), nil
}

// changesOf is changes of one scrape m.
func changesOf(m Metrics) changeState {
	val := func(name, family string) (float64, bool) {
		f, ok := m[name]
		if !ok {
			return 0, false
		}
		for _, s := range f.GetMetric() {
			match := family == ""
			for _, l := range s.GetLabel() {
				if l.GetName() == "ip_family" && l.GetValue() == family {
					match = true
				}
			}
			if match {
				if c := s.GetCounter(); c != nil {
					return c.GetValue(), true
				}
				return s.GetGauge().GetValue(), true
			}
		}
		return 0, false
	}
	st := changeState{ok: true}
	for _, n := range []string{"kubeproxy_sync_proxy_rules_service_changes_total", "kubeproxy_sync_proxy_rules_endpoint_changes_total"} {
		v, ok := val(n, "")
		st.total += v
		st.ok = st.ok && ok
	}
	for _, n := range []string{"kubeproxy_sync_proxy_rules_service_changes_pending", "kubeproxy_sync_proxy_rules_endpoint_changes_pending"} {
		v, ok := val(n, "")
		st.pending += v
		st.ok = st.ok && ok
	}
	q, ok1 := val("kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds", "IPv4")
	t, ok2 := val(tsMetric, "IPv4")
	st.ok = st.ok && ok1 && ok2
	st.queued, st.synced = time.Unix(0, int64(q*1e9)), time.Unix(0, int64(t*1e9))
	return st
}

// Sync makes the API hold services and waits for kube-proxy to program them.
func (p *Proxier) Sync(ctx context.Context, services []workload.Service) (proxymodes.SyncStats, error) {
	if p.kp == nil {
		return p.first(ctx, services, time.Now())
	}
	const during = "a later sync"
	if err := p.exited(during, proxymodes.SyncStats{}, 0); err != nil {
		return proxymodes.SyncStats{}, err
	}
	// kube-proxy runs at most one sync per minSyncPeriod (its
	// BoundedFrequencyRunner): a write right after its last sync (the
	// runner's sync back after an incremental one) waits out the rest of
	// that period in kube-proxy before any rule changes. sync.incremental
	// measures one change reaching an idle kube-proxy, so the writes wait
	// until minSyncPeriod has passed since its last sync ended (from its
	// start would do; the end is the safe side).
	if err := p.waitIdle(ctx); err != nil {
		return proxymodes.SyncStats{}, p.orExited(err, during)
	}
	// Preparation, outside the figure: the scrapes before the writes and
	// the list of writes. The figure starts when the first write is sent.
	v0, err := p.syncView(ctx)
	if err != nil {
		return proxymodes.SyncStats{}, p.orExited(err, during)
	}
	c0, err := p.changes(ctx)
	if err != nil {
		return proxymodes.SyncStats{}, p.orExited(err, during)
	}
	cur, ops, triggers := p.plan(services)
	u0 := p.kp.Usage()
	logFrom := p.kp.logSize()
	w, err := applyWrites(ctx, ops, 1)
	if err != nil {
		return proxymodes.SyncStats{}, err
	}
	p.last = cur
	if len(ops) == 0 {
		return proxymodes.SyncStats{Kind: "incremental"}, nil
	}
	end, v, err := p.waitWritten(ctx, during, v0, c0, u0, logFrom, w, triggers, len(ops), nil)
	if err != nil {
		return proxymodes.SyncStats{}, err
	}
	d := v.sync.Sub(v0.sync)
	u := p.kp.Usage()
	return incrementalStats(w.start, w.written, end, time.Duration(d.Sum*float64(time.Second)), (u.CPU+u.ChildCPU)-(u0.CPU+u0.ChildCPU)), nil
}

// waitWritten waits, scraping every 50 ms, until kube-proxy has ended
// the sync that programmed the API writes (w: their times; triggers of
// them carried a trigger time kube-proxy observes; changes is how many
// Service and EndpointSlice changes kube-proxy receives from them, for
// writes without a trigger time), from v0 and c0,
// the scrapes before the writes, and, when stillBusy is set, until it
// reports false; it returns when that was seen and the last scrape. A
// sync kube-proxy reported failed meanwhile ends it with failedSync's
// *proxymodes.SyncFailed (its stats over the writes: u0 and logFrom are
// kube-proxy's use and log size before them); 10 minutes without it
// done is an error with the tail of its log. during names the Sync in
// errors.
func (p *Proxier) waitWritten(ctx context.Context, during string, v0 syncView, c0 changeState, u0 Usage, logFrom int, w writeTimes,
	triggers, changes int, stillBusy func() bool) (time.Time, syncView, error) {
	t0, sent, written := w.start, w.sent, w.written
	// Done when the sync that programmed the writes has ended. With
	// trigger-time writes that sync is known exactly: kube-proxy observes
	// one network-programming latency per written trigger time after its
	// rules are written, then ends the sync (the duration histogram is
	// observed last), so: programming observations grew by triggers, and
	// the sync histogram counts a sync more than at the last scrape that
	// had not seen them all. A sync that merely began after the writes
	// were sent is not enough: kube-proxy's informer may deliver the
	// change after such a sync began (seconds later in a guest at 10k
	// services, where one sync takes 90 s), and that sync then ends
	// without it (measured: sync.incremental 91 s while the change took
	// 179 s by kube-proxy's own programming metric, and the traffic after
	// the sync back still reached the moved endpoint).
	// Without trigger-time writes (deletes only), the timing rule below
	// is a best effort: see its comment. Scrapes are 50 ms apart (each
	// costs kube-proxy CPU, which the row reports).
	deadline := time.Now().Add(10 * time.Minute)
	hPrev, prevAt := v0.sync, t0
	pw := newProgrammedWait(v0, triggers)
	fw := failWatch{base: v0}
	var doneAt time.Time // kube-proxy's side seen done (stillBusy may not be)
	var doneView syncView
	for {
		select {
		case <-ctx.Done():
			return time.Time{}, syncView{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if !doneAt.IsZero() {
			if !stillBusy() {
				return doneAt, doneView, nil
			}
			if time.Now().After(deadline) {
				return time.Time{}, syncView{}, fmt.Errorf("the data plane did not show the API writes within 10 min of kube-proxy's sync that programmed them")
			}
			continue
		}
		at := time.Now()
		v, err := p.syncView(ctx)
		if err != nil {
			return time.Time{}, syncView{}, p.orExited(err, during)
		}
		if failed, base := fw.see(v); failed {
			// A sync ended without success. kube-proxy retries it as a
			// full sync after syncPeriod; the change's trigger time went
			// with the failed sync (its endpoints change tracker was
			// drained), so no programming observation will come for it.
			if _, failed, err := p.stillFailed(ctx, base); err != nil {
				return time.Time{}, syncView{}, p.orExited(err, during)
			} else if failed {
				u := p.kp.Usage()
				st := incrementalStats(t0, written, at, time.Duration(v.sync.Sub(base.sync).Sum*float64(time.Second)), (u.CPU+u.ChildCPU)-(u0.CPU+u0.ChildCPU))
				return time.Time{}, syncView{}, p.failedSync(ctx, "incremental sync", st.Phases["kube-proxy"], logFrom, at, base.ts, st)
			}
		}
		var ok bool
		if triggers > 0 {
			ok = pw.done(v)
		} else {
			ok = timedSyncDone(v, hPrev, prevAt, sent, written)
			if !ok && v.sync.Count > v0.sync.Count {
				// A sync that began before the last write may still have
				// taken it in (kube-proxy reads the pending changes a while
				// into a sync): done when kube-proxy received every write,
				// none is pending, and no sync was queued after the last
				// one ended.
				if c, err := p.changes(ctx); err == nil && c.ok && c0.ok {
					ok = c.total >= c0.total+float64(changes) && c.pending == 0 && !c.synced.Before(c.queued) && c.synced.After(c0.synced)
				}
			}
		}
		if ok {
			if stillBusy == nil || !stillBusy() {
				return time.Now(), v, nil
			}
			doneAt, doneView = time.Now(), v
			continue
		}
		if v.sync.Count > hPrev.Count {
			hPrev, prevAt = v.sync, at // syncs begun before the writes; a later one counts
		}
		if time.Now().After(deadline) {
			return time.Time{}, syncView{}, p.orExited(fmt.Errorf("kube-proxy did not finish a sync with the API writes within 10 min (network programming observations %d of %d):\n%s",
				v.programmed-v0.programmed, triggers, p.kp.LogTail(10)), during)
		}
	}
}

// programmedWait tells when the sync that programmed a set of
// trigger-time writes has ended (see Sync): want programming observations
// over the count before the writes, and then a sync counted beyond the
// last scrape that was short of them.
type programmedWait struct {
	want         uint64 // programming observations to reach
	unprogrammed uint64 // sync count at the last scrape short of want
}

// newProgrammedWait starts from v0, the scrape taken before the writes.
func newProgrammedWait(v0 syncView, triggers int) *programmedWait {
	return &programmedWait{want: v0.programmed + uint64(triggers), unprogrammed: v0.sync.Count}
}

// done takes the next scrape, in order, and reports whether it is done.
func (w *programmedWait) done(v syncView) bool {
	if v.programmed < w.want {
		w.unprogrammed = v.sync.Count
		return false
	}
	return v.sync.Count > w.unprogrammed
}

// timedSyncDone is the rule for writes without a trigger time: from the
// scrape before (hPrev, taken at prevAt), each scrape v that counts more
// syncs bounds the start of the last of them: it is not before v.ts -
// (the histogram sum's growth), which must not be before the last write
// was sent; or, when the previous scrape was itself taken after the
// writes, two or more new syncs mean the last began after the first
// ended, after that scrape. It cannot see a change the informer
// delivered after such a sync began.
func timedSyncDone(v syncView, hPrev Histogram, prevAt, sent, written time.Time) bool {
	step := v.sync.Sub(hPrev)
	return step.Count > 0 && (!v.ts.Add(-time.Duration(step.Sum*float64(time.Second))).Before(sent) ||
		(step.Count >= 2 && !prevAt.Before(written)))
}

// waitIdle waits until minSyncPeriod has passed since kube-proxy's last
// IPv4 sync ended (kubeproxy_sync_proxy_rules_last_timestamp_seconds):
// IdleAt, as the cluster engine's programming probes wait.
func (p *Proxier) waitIdle(ctx context.Context) error {
	v, err := p.syncView(ctx)
	if err != nil {
		return err
	}
	at := IdleAt(v.ts, p.minSyncPeriod())
	if at.IsZero() {
		return nil
	}
	wait := time.Until(at)
	if wait <= 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
		return nil
	}
}

// minSyncPeriod is kube-proxy's minSyncPeriod as it logged it, else 1 s.
func (p *Proxier) minSyncPeriod() time.Duration {
	if p.minSync == 0 && p.kp != nil {
		p.minSync = p.kp.MinSyncPeriod()
	}
	if p.minSync <= 0 {
		return time.Second
	}
	return p.minSync
}

// Scrape is one scrape of the running kube-proxy's metrics endpoint.
func (p *Proxier) Scrape(ctx context.Context) (Metrics, error) {
	if p.kp == nil {
		return nil, errors.New("kubeproxy: no kube-proxy running")
	}
	return p.kp.Scrape(ctx)
}

func sameService(a, b workload.Service) bool {
	if a.ClusterIP != b.ClusterIP || len(a.Endpoints) != len(b.Endpoints) || len(a.Ports) != len(b.Ports) {
		return false
	}
	for i := range a.Endpoints {
		if a.Endpoints[i] != b.Endpoints[i] {
			return false
		}
	}
	for i := range a.Ports {
		if a.Ports[i] != b.Ports[i] {
			return false
		}
	}
	return true
}

// first starts everything; Wall is from the API objects being written to
// kube-proxy's first sync done, and Phases has the setup apart.
func (p *Proxier) first(ctx context.Context, services []workload.Service, t0 time.Time) (st proxymodes.SyncStats, err error) {
	defer func() {
		// An unfinished first sync, a failed one and a kube-proxy that
		// exited keep what there is for KubeProxyRecord; Cleanup stops
		// the rest.
		var u *proxymodes.Unfinished
		var sf *proxymodes.SyncFailed
		var f *proxymodes.Failed
		if err != nil && !errors.As(err, &u) && !errors.As(err, &sf) && !errors.As(err, &f) {
			_ = p.stop()
		}
	}()
	if err := os.MkdirAll(p.spec.Dir, 0o755); err != nil {
		return st, err
	}
	cps := controlplane.Spec{RunID: p.runID, Nodes: p.allNodes(), Avoid: p.spec.Avoid, Bin: p.spec.Bin, DualStack: p.spec.IPv6.IsValid()}
	if p.spec.IPv6.IsValid() {
		cps.Avoid = append(slices.Clone(cps.Avoid), p.spec.IPv6)
	}
	if p.spec.Guest {
		cps.StartTimeout = 8 * time.Minute
		cps.LowMemory = true
	}
	p.cp, err = controlplane.Start(ctx, cps)
	if err != nil {
		return st, err
	}
	up := time.Now()
	node := apiobjects.Node{Name: NodeName(0), InternalIP: p.spec.NodeIP}
	nodes := []apiobjects.Node{node}
	for i, ip := range p.spec.OtherIPs {
		nodes = append(nodes, apiobjects.Node{Name: NodeName(i + 1), InternalIP: ip})
	}
	ost, err := apiobjects.Create(ctx, p.cp.Client, apiobjects.Spec{ServiceCIDR: p.spec.ServiceCIDR, Nodes: nodes, Services: services, SessionAffinity: p.spec.SessionAffinity, Zones: p.spec.Zones,
		IPv6: p.spec.IPv6, FamilyPolicy: p.spec.FamilyPolicy})
	if err != nil {
		return st, err
	}
	// Prometheus, when the row is monitored, starts now, kube-proxy its
	// target from the start: a Prometheus up during the API objects'
	// creation would count those minutes as kube-proxy absent (the
	// seeds' KubeProxyDown). Its start-up is setup: it is counted in
	// setup.controlPlane (up moves by it), not in sync.full.
	if d, err := p.startPrometheus(ctx); err != nil {
		return st, err
	} else {
		up = up.Add(d)
	}
	created := time.Now()
	if err := p.keepLog(); err != nil {
		return st, err
	}
	kc := filepath.Join(p.spec.Dir, node.Name+".kubeconfig")
	if err := p.cp.WriteKubeconfig(0, kc); err != nil {
		return st, err
	}
	p.kp, err = Start(ctx, Spec{RunID: p.runID, Node: p.spec.Node, Binary: p.spec.KubeProxy, Version: p.spec.Version, Dir: p.spec.Dir, Verbosity: p.spec.Verbosity, IPTablesBackend: p.spec.IPTablesBackend,
		XtablesLock: p.xtablesLock(node.Name), PathFirst: p.spec.PathFirst, Config: ConfigSpec{Mode: p.spec.Mode, Pass: p.spec.Pass, ClusterCIDR: p.spec.ClusterCIDR, ClusterCIDR6: p.spec.clusterCIDR6(), NodeName: node.Name, NodeIP: node.InternalIP, Kubeconfig: kc,
			MetricsAnyAddress: p.spec.Monitor != nil}})
	if err != nil {
		return st, err
	}
	// Its first sync (by its metric; /healthz answers 200 while kube-proxy
	// starts up, before any rule is programmed) and the data plane are
	// waited for together, both until the bound; kube-proxy failing to
	// sync stops the probes. In IPVS mode its progress is read meanwhile.
	bound := p.spec.FirstSyncTimeout
	if bound <= 0 {
		bound = DefaultFirstSyncTimeout
	}
	deadline := created.Add(bound)
	pctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	// Every other node's kube-proxy starts now too, as a DaemonSet's
	// pods would once the objects exist; their first syncs are waited
	// for beside node-0's.
	waitOthers := func() error { return nil }
	if len(p.spec.Others) > 0 {
		if waitOthers, err = p.startOthers(pctx, created, bound); err != nil {
			return st, err
		}
	}
	want := WantIPVS(services)
	stopProgress := p.watchProgress(pctx, created, want, bound)
	healthy := make(chan error, 1)
	var syncedAt time.Time
	go func() {
		_, err := p.kp.WaitSynced(pctx, bound)
		syncedAt = time.Now()
		if err != nil && time.Now().Before(deadline) {
			cancel() // kube-proxy failed: stop the probes
		}
		healthy <- err
	}()
	// A dual-stack row's IPv6 services are probed beside the IPv4 ones.
	v6 := make(chan familyProbe, 1)
	if p.spec.IPv6.IsValid() && p.spec.DataPlane != nil {
		go func() {
			var fp familyProbe
			fp.answered, fp.probed, fp.err = p.spec.DataPlane(pctx, workload.Twin6(p.spec.IPv6, services))
			v6 <- fp
		}()
	} else {
		close(v6)
	}
	var answered time.Time
	probed := 0
	var derr error
	if p.spec.DataPlane != nil {
		answered, probed, derr = p.spec.DataPlane(pctx, services)
	}
	herr := <-healthy
	fp6, dual := <-v6
	oerr := waitOthers()
	stopProgress()
	var fsf *FirstSyncFailed
	if errors.As(herr, &fsf) && ctx.Err() == nil {
		metrics, _ := p.scrapeSync(ctx)
		p.record(t0, up, created, ost, probed, metrics, 0)
		u := p.kp.Usage()
		st := proxymodes.SyncStats{Kind: "full", Wall: fsf.At.Sub(created), CPU: u.CPU + u.ChildCPU,
			Phases: map[string]time.Duration{"setup.controlPlane": up.Sub(t0), "setup.api": created.Sub(up), "kube-proxy.metric": fsf.Own}}
		return st, p.failedSync(ctx, "first sync", fsf.Own, 0, fsf.At, time.Time{}, st)
	}
	if herr != nil && ctx.Err() == nil && !time.Now().Before(deadline) {
		if exited, _ := p.kp.Proc.Exited(); !exited {
			return p.unfinished(ctx, services, t0, up, created, ost, bound, want, answered, probed, derr)
		}
	}
	if (herr != nil || derr != nil) && ctx.Err() == nil && p.kp.exitedWithin(exitWait) {
		var firstSync time.Duration // its first sync, when it was seen done before the exit
		if herr == nil {
			firstSync = syncedAt.Sub(created)
		}
		return p.exitedInFirst(ctx, t0, up, created, ost, answered, probed, derr, firstSync)
	}
	if herr != nil {
		return st, herr
	}
	if derr != nil {
		return st, fmt.Errorf("data plane after kube-proxy's first sync: %w", derr)
	}
	if oerr != nil {
		return st, fmt.Errorf("the other nodes' kube-proxies: %w", oerr)
	}
	if len(p.spec.Others) > 0 {
		p.nodes.first0, p.nodes.firstFull0 = firstSyncOf(ctx, p.kp, created)
	}
	done := syncedAt
	if p.spec.DataPlane != nil {
		done = answered
	}
	p.last = map[string]workload.Service{}
	for _, s := range services {
		p.last[s.Name] = s
	}
	// kube-proxy observes its sync metrics when the sync returns, a
	// moment after /healthz and the data plane see it: wait for them.
	var metrics []measure.Metric
	for wait := time.Now().Add(10 * time.Second); ; {
		metrics, err = p.scrapeSync(ctx)
		if c, _ := measure.MetricDelta(nil, metrics, MetricSync, "IPv4"); (err == nil && c > 0) || time.Now().After(wait) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	u := p.kp.Usage()
	// The record describes the row's first process (its sync.full); a
	// first Sync after a Cleanup (the fairness phase's fresh resync) keeps
	// it, and the processes before count in Earlier.
	p.record(t0, up, created, ost, probed, metrics, syncedAt.Sub(created))
	fn, fsum := measure.MetricDelta(nil, metrics, MetricSyncFull, "IPv4")
	if fn == 0 {
		// IPVS mode has no full/partial variants (only the iptables and
		// nftables proxiers observe them): its one sync histogram.
		_, fsum = measure.MetricDelta(nil, metrics, MetricSync, "IPv4")
	}
	if p.spec.IPTablesBackend != "" {
		p.info["iptablesBackend"] = p.spec.IPTablesBackend
	}
	p.info["backend"] = p.backend()
	st = proxymodes.SyncStats{Kind: "full", Wall: done.Sub(created), CPU: u.CPU + u.ChildCPU,
		Phases: map[string]time.Duration{"setup.controlPlane": up.Sub(t0), "setup.api": created.Sub(up),
			"kube-proxy.firstSync": syncedAt.Sub(created), "kube-proxy.metric": time.Duration(fsum * float64(time.Second))}}
	// What kube-proxy installed, read back (after the timed sync): the
	// objects and bytes builtin reports for what it sent.
	p.readBackStats(ctx, &st, "")
	if dual && p.ipv6 == nil {
		p.ipv6 = p.ipv6Sync(ctx, created, deadline, fp6)
	}
	// Its sync was measured; if kube-proxy exited meanwhile, the row
	// keeps this sync.full and ends here.
	if err := p.exited("its first sync's read-back, after the sync was measured", st, 0); err != nil {
		return st, err
	}
	return st, nil
}

// familyProbe is one family's data-plane probe of a first Sync
// (ProxierSpec.DataPlane's answer).
type familyProbe struct {
	answered time.Time
	probed   int
	err      error
}

// ipv6Sync is the IPv6 side of a dual-stack first Sync (FamilySync) from
// its probe fp, the API objects created at created: kube-proxy's own
// IPv6 full-sync metric and what its IPv6 proxier installed, read back.
// The metric is waited for until deadline (the first sync's bound), not
// only the 10 s the IPv4 one gets after its sync was seen: kube-proxy's
// two families sync in proxiers of their own (pkg/proxy/metaproxier), and
// an IPVS proxier's sync ends with its ipsets and iptables-restore well
// after its virtual servers answer (in a uml:6.12 guest at 10k the IPv6
// side answered at 1,097 s, its sync ended later, and a 10 s wait
// recorded 0.0 s). Never observed by then: no "kube-proxy.metric" phase
// (the report shows "-", not 0).
func (p *Proxier) ipv6Sync(ctx context.Context, created, deadline time.Time, fp familyProbe) *familySync {
	if fp.err != nil {
		return &familySync{err: fmt.Errorf("IPv6 data plane after kube-proxy's first sync: %w", fp.err)}
	}
	var fn uint64
	var fsum float64
	wait := time.Now().Add(10 * time.Second)
	if deadline.After(wait) {
		wait = deadline
	}
	for {
		metrics, err := p.scrapeSync(ctx)
		if err == nil {
			fn, fsum = measure.MetricDelta(nil, metrics, MetricSyncFull, scenarios.IPv6)
			if fn == 0 { // IPVS: one histogram
				fn, fsum = measure.MetricDelta(nil, metrics, MetricSync, scenarios.IPv6)
			}
		}
		if fn > 0 || time.Now().After(wait) || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	st := proxymodes.SyncStats{Kind: "full", Wall: fp.answered.Sub(created), Phases: map[string]time.Duration{}}
	if fn > 0 {
		st.Phases["kube-proxy.metric"] = time.Duration(fsum * float64(time.Second))
	}
	rs, err := p.readBackFamily(ctx, scenarios.IPv6)
	st.Objects, st.Bytes, _ = rulesetFigures(rs, err, "")
	return &familySync{st: st}
}

// record sets p.rec and p.info from the first Sync's setup.
// Only the first call sets them (firstSync 0: not finished).
func (p *Proxier) record(t0, up, created time.Time, ost apiobjects.Stats, probed int, metrics []measure.Metric, firstSync time.Duration) {
	if p.rec == nil {
		p.rec = &measure.KubeProxy{Version: p.kp.Version, Binary: p.spec.KubeProxy, Config: p.kp.ConfigPath, Log: p.kp.LogPath,
			Flags: p.kp.Args, Owned: p.kp.Owned, ControlPlaneNs: int64(up.Sub(t0)), APIObjectsNs: int64(created.Sub(up)),
			APIObjects: ost.Services + ost.EndpointSlices, FirstSyncNs: int64(firstSync), Probed: probed, AfterFullSync: metrics, Exit: p.exitRec}
	}
	if p.info == nil {
		p.info = map[string]string{"version": p.kp.Version, "config": p.kp.ConfigPath, "log": p.kp.LogPath,
			"controlPlaneReady": up.Sub(t0).Round(time.Millisecond).String(),
			"apiObjects":        fmt.Sprintf("%d services + %d slices in %v", ost.Services, ost.EndpointSlices, ost.Elapsed.Round(time.Millisecond))}
		for k, v := range p.kp.Owned {
			p.info["owned."+k] = v
		}
	}
}

// unfinished ends a first Sync whose bound passed while kube-proxy was
// still in its first sync: it reads how far kube-proxy got, records it
// (the data plane's time is kept when every probed service answered)
// and returns a *proxymodes.Unfinished saying so. kube-proxy keeps
// running until Cleanup, so KubeProxyRecord still reads its use.
func (p *Proxier) unfinished(ctx context.Context, services []workload.Service, t0, up, created time.Time, ost apiobjects.Stats,
	bound time.Duration, want Want, answered time.Time, probed int, derr error) (proxymodes.SyncStats, error) {
	at := time.Now()
	last := ReadProgress(ctx, p.spec.Node, p.spec.Mode, want)
	last.AtNs = int64(at.Sub(created))
	p.addProgress(last)
	metrics, _ := p.scrapeSync(ctx)
	p.record(t0, up, created, ost, probed, metrics, 0)
	dataOK := p.spec.DataPlane != nil && derr == nil && !answered.IsZero()
	summary := last.Words()
	if r := ProgressRate(p.Progress()); r != "" {
		summary += "; " + r
	}
	p.rec.Unfinished = &measure.Unfinished{BoundNs: int64(bound), DataPlane: dataOK, Summary: summary}
	p.rec.Progress = p.Progress()
	dp := "the data plane: not every probed service answered"
	switch {
	case p.spec.DataPlane == nil:
		dp = "the data plane was not probed"
	case dataOK:
		dp = fmt.Sprintf("the data plane: all %d probed services answered %v after the API objects (sync.full)", probed, answered.Sub(created).Round(time.Millisecond))
	}
	msg := fmt.Sprintf("kube-proxy's first sync not finished after %v (kubeProxy.firstSyncTimeout): %s; %s; the row's later phases were not run", bound, summary, dp)
	p.info["firstSync"] = msg
	u := p.kp.Usage()
	st := proxymodes.SyncStats{Kind: "full", CPU: u.CPU + u.ChildCPU,
		Phases: map[string]time.Duration{"setup.controlPlane": up.Sub(t0), "setup.api": created.Sub(up)}}
	if dataOK {
		st.Wall = answered.Sub(created)
	}
	// Objects: what kube-proxy had installed when the bound passed, read
	// back, never the services it was asked for (0, shown "-", for IPVS,
	// whose progress readings say how far it got).
	p.readBackStats(ctx, &st, fmt.Sprintf(" when kubeProxy.firstSyncTimeout (%v) passed, its first sync not finished", bound))
	return st, &proxymodes.Unfinished{Stats: st, Msg: msg}
}

// exitedInFirst ends a first Sync during which kube-proxy exited on its
// own, before the data plane answered (firstSync: its first sync by its
// metric when that was seen, else 0): it records what was measured (the
// setup, the progress readings, the metrics of its last scrape that
// answered, its resource use, the objects it had installed, read back)
// and returns a *proxymodes.Failed saying how it exited. Stats.Wall is
// the data plane's time when every probed service had answered.
func (p *Proxier) exitedInFirst(ctx context.Context, t0, up, created time.Time, ost apiobjects.Stats, answered time.Time, probed int, derr error, firstSync time.Duration) (proxymodes.SyncStats, error) {
	metrics, _ := p.scrapeSync(ctx) // the last scrape that answered
	p.record(t0, up, created, ost, probed, metrics, firstSync)
	p.rec.Progress = p.Progress()
	u := p.kp.Usage()
	st := proxymodes.SyncStats{Kind: "full", CPU: u.CPU + u.ChildCPU,
		Phases: map[string]time.Duration{"setup.controlPlane": up.Sub(t0), "setup.api": created.Sub(up)}}
	if p.spec.DataPlane != nil && derr == nil && !answered.IsZero() {
		st.Wall = answered.Sub(created)
	}
	p.readBackStats(ctx, &st, " after kube-proxy exited during its first sync")
	return st, p.exited("its first sync", st, 0)
}

// watchProgress reads the first sync's progress (IPVS mode only) every
// ProgressEvery until ctx ends or the returned stop is called, and
// appends each reading to <Dir>/first-sync-progress.txt (readable from
// the host while a guest runs).
func (p *Proxier) watchProgress(ctx context.Context, created time.Time, want Want, bound time.Duration) (stop func()) {
	if p.spec.Mode != "ipvs" {
		return func() {}
	}
	every := p.spec.ProgressEvery
	if every <= 0 {
		every = min(time.Minute, max(bound/10, 5*time.Second))
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f, _ := os.OpenFile(filepath.Join(p.spec.Dir, "first-sync-progress.txt"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if f != nil {
			defer f.Close()
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(every):
			}
			r := ReadProgress(ctx, p.spec.Node, p.spec.Mode, want)
			if ctx.Err() != nil {
				return // the reading may have been cut short
			}
			r.AtNs = int64(time.Since(created))
			p.addProgress(r)
			if f != nil {
				fmt.Fprintf(f, "%s +%v: %s\n", time.Now().UTC().Format(time.RFC3339), time.Duration(r.AtNs).Round(time.Second), r.Words())
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (p *Proxier) addProgress(r measure.SyncProgress) {
	p.progressMu.Lock()
	defer p.progressMu.Unlock()
	p.progress = append(p.progress, r)
}

// Progress returns the readings of the first sync's progress so far
// (IPVS mode), oldest first.
func (p *Proxier) Progress() []measure.SyncProgress {
	p.progressMu.Lock()
	defer p.progressMu.Unlock()
	return append([]measure.SyncProgress(nil), p.progress...)
}

// ProgressRate says how fast the KUBE-* ipsets grew between the last two
// readings that counted them: "ipset entries +412 in the last 1m0s (146
// ms per entry, one ipset process each)"; "" without two such readings
// or without growth.
func ProgressRate(ps []measure.SyncProgress) string {
	var a, b *measure.SyncProgress
	for i := len(ps) - 1; i >= 0; i-- {
		if ps[i].IPSets == nil {
			continue
		}
		if b == nil {
			b = &ps[i]
		} else {
			a = &ps[i]
			break
		}
	}
	if a == nil {
		return ""
	}
	dn := 0
	for name, n := range b.IPSets {
		dn += n - a.IPSets[name]
	}
	dt := time.Duration(b.AtNs - a.AtNs)
	if dn <= 0 || dt <= 0 {
		return ""
	}
	return fmt.Sprintf("ipset entries +%d in the last %v (%v per entry, one ipset process each)", dn, dt.Round(time.Second), (dt / time.Duration(dn)).Round(time.Millisecond))
}

// syncMetrics are the histograms the record keeps (per IP family).
var syncMetrics = []string{MetricSync, MetricSyncFull, MetricSyncPartial, MetricProgramming}

// scrapeSync scrapes kube-proxy's sync histograms, both families.
func (p *Proxier) scrapeSync(ctx context.Context) ([]measure.Metric, error) {
	return p.scrapeSyncOf(ctx, p.kp)
}

// scrapeSyncOf scrapes kp's sync histograms, both families. When kp has
// exited, its last scrape that answered stands in (what was measured of
// it last; an error when none answered).
func (p *Proxier) scrapeSyncOf(ctx context.Context, kp *Proxy) ([]measure.Metric, error) {
	m, err := kp.Scrape(ctx)
	if err != nil {
		if done, _ := kp.Proc.Exited(); !done {
			return nil, err
		}
		if m, _ = kp.LastScrape(); m == nil {
			return nil, err
		}
	}
	var out []measure.Metric
	for _, name := range syncMetrics {
		for _, fam := range []string{"IPv4", "IPv6"} {
			if h, err := m.Histogram(name, fam); err == nil {
				out = append(out, measure.Metric{Name: name, Family: fam, Count: h.Count, Sum: h.Sum})
			}
		}
	}
	return out, nil
}

// KubeProxyRecord returns what the result records about this kube-proxy
// so far: the first sync's record, with metrics scraped now (AtEnd), its
// resource use and rule programs, and the sync lines of its log. Nil
// before the first Sync.
func (p *Proxier) KubeProxyRecord(ctx context.Context) *measure.KubeProxy {
	if p.rec == nil {
		return nil
	}
	r := *p.rec
	r.Earlier = append([]measure.KubeProxyProcess(nil), p.earlier...)
	r.AtEnd, r.Programs = nil, nil
	r.CPUNs, r.ChildCPUNs, r.PeakRSSBytes, r.ChildPeakRSSBytes = 0, 0, 0, 0
	for _, e := range p.earlier {
		r.AtEnd = measure.AddMetrics(r.AtEnd, e.AtStop)
		r.Programs = measure.AddPrograms(r.Programs, e.Programs)
		r.CPUNs += e.CPUNs
		r.ChildCPUNs += e.ChildCPUNs
		r.PeakRSSBytes = max(r.PeakRSSBytes, e.PeakRSSBytes)
		r.ChildPeakRSSBytes = max(r.ChildPeakRSSBytes, e.ChildPeakRSSBytes)
	}
	if len(p.spec.Others) > 0 {
		r.Nodes = p.nodeRecords(ctx)
		r.ControlPlane = p.controlPlaneUse(ctx)
		r.WatchDelivery = p.nodes.delivery
	}
	if p.kp == nil {
		return &r
	}
	if m, err := p.scrapeSync(ctx); err == nil {
		r.AtEnd = measure.AddMetrics(r.AtEnd, m)
	}
	u := p.kp.Usage()
	r.CPUNs += int64(u.CPU)
	r.ChildCPUNs += int64(u.ChildCPU)
	r.PeakRSSBytes = max(r.PeakRSSBytes, u.PeakRSS)
	r.ChildPeakRSSBytes = max(r.ChildPeakRSSBytes, u.ChildPeakRSS)
	r.Programs = measure.AddPrograms(r.Programs, p.kp.Programs())
	r.SyncLog = p.kp.SyncLines(40)
	r.Progress = p.Progress()
	return &r
}

// retire stops kp (SIGTERM, SIGKILL after 5 s) after scraping its sync
// metrics and adds it to the record's Earlier processes, as why. Its log
// stays where it is until a next process needs the name (keepLog).
func (p *Proxier) retire(ctx context.Context, kp *Proxy, why string) error {
	return p.retireWith(ctx, kp, why, kp.Stop)
}

// retireWith is retire with stop ending the process (kp.Stop, kp.Kill).
func (p *Proxier) retireWith(ctx context.Context, kp *Proxy, why string, stop func() error) error {
	m, serr := p.scrapeSyncOf(ctx, kp)
	err := stop()
	u := kp.Usage()
	e := measure.KubeProxyProcess{Why: why, Log: kp.LogPath, AtStop: m, CPUNs: int64(u.CPU), ChildCPUNs: int64(u.ChildCPU),
		PeakRSSBytes: u.PeakRSS, ChildPeakRSSBytes: u.ChildPeakRSS, Programs: kp.Programs()}
	if serr != nil {
		e.Why += " (metrics not scraped: " + serr.Error() + ")"
	}
	p.earlier = append(p.earlier, e)
	if err != nil {
		return fmt.Errorf("kubeproxy: stop kube-proxy: %w", err)
	}
	return nil
}

// keepLog renames the log of the last stopped process to <log>.<n>
// before a new kube-proxy writes to that name, and points its Earlier
// entry there; the record's Log is then the last process's.
func (p *Proxier) keepLog() error {
	if len(p.earlier) == 0 {
		return nil
	}
	e := &p.earlier[len(p.earlier)-1]
	if _, err := os.Stat(e.Log); err != nil || filepath.Ext(e.Log) != ".log" {
		return nil // renamed already, or gone
	}
	p.restarts++
	log := fmt.Sprintf("%s.%d", e.Log, p.restarts)
	if err := os.Rename(e.Log, log); err != nil {
		return err
	}
	e.Log = log
	return nil
}

// cleanupLockTries bounds how often `kube-proxy --cleanup` runs while it
// fails on the xtables lock: the legacy tools' /run/xtables.lock is one
// file for every namespace of the machine (docs/modes.md, "kube-proxy and
// the xtables lock"), so another run's proxy holding it fails the
// cleanup's `iptables -w 5` calls (exit 4) where a real node's lock
// would be free. Its cleanup is idempotent: a second run removes what the
// first left.
const cleanupLockTries = 6

// cleanupRules runs `kube-proxy --cleanup` with kp's config in the node
// namespace, with the PATH kp ran with (the same iptables back end: with
// the legacy one, Debian's default nft tools would remove nothing),
// again while it fails on the xtables lock (cleanupLockTries).
func (p *Proxier) cleanupRules(ctx context.Context, kp *Proxy) error {
	out, err := p.cleanupCommand(ctx, kp)
	for try := 1; err != nil && try < cleanupLockTries && ctx.Err() == nil && strings.Contains(string(out), "xtables lock"); try++ {
		out, err = p.cleanupCommand(ctx, kp)
	}
	switch {
	case err != nil && p.spec.Mode == "ipvs":
		// kube-proxy's own --cleanup fails after its IPVS mode: its
		// iptables-mode cleanup cannot delete KUBE-MARK-MASQ and
		// KUBE-PROXY-FIREWALL while the IPVS chains still jump to them
		// (CHAIN_DEL: Device or resource busy; kubernetes#109286's
		// family). The node namespace, and with it every rule, goes
		// with the testbed; the failure is kept, not fatal.
		if p.info == nil {
			p.info = map[string]string{}
		}
		p.info["cleanup"] = "kube-proxy --cleanup failed after IPVS mode (kube-proxy's own chain order); the node namespace removes the rules"
	case err != nil:
		return fmt.Errorf("kube-proxy --cleanup: %w: %s", err, out)
	}
	return nil
}

// cleanupCommand runs `kube-proxy --cleanup --config <kp's config>` in
// the node namespace with kp's PATH and xtables lock, bounded by 5 min,
// and returns its output and error.
func (p *Proxier) cleanupCommand(ctx context.Context, kp *Proxy) ([]byte, error) {
	args := []string{p.spec.KubeProxy, "--cleanup", "--config", kp.ConfigPath}
	if kp.Spec.XtablesLock != "" {
		args = append([]string{"XTABLES_LOCKFILE=" + kp.Spec.XtablesLock}, args...)
	}
	if kp.Path != "" {
		args = append([]string{"PATH=" + kp.Path}, args...)
	}
	// Bounded: after an unfinished first sync at 10k services in a
	// guest, kube-proxy's own cleanup could run for as long.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	return kp.Spec.Node.Run(ctx, nil, "env", args...)
}

// Cleanup stops kube-proxy, removes its rules from the node (`kube-proxy
// --cleanup` in the node namespace) and stops the control plane.
func (p *Proxier) Cleanup(ctx context.Context) error {
	return p.stop()
}

func (p *Proxier) stop() error {
	var errs []error
	errs = append(errs, p.stopOthers())
	kp := p.kp
	if kp == nil {
		kp = p.halted // halted without a Resume: its rules may still be there
	}
	if kp != nil {
		if p.kp != nil {
			why := "cleanup"
			seen := p.exitErr != nil
			if xerr := p.exited("cleanup", proxymodes.SyncStats{}, 0); xerr != nil {
				if !seen {
					errs = append(errs, xerr) // news to the caller
				}
				why = "exited on its own (" + p.exitRec.Status + "), then cleanup"
			}
			errs = append(errs, p.retire(context.Background(), kp, why))
		}
		errs = append(errs, p.cleanupRules(context.Background(), kp))
		p.kp, p.halted = nil, nil
	}
	errs = append(errs, p.stopPrometheus())
	errs = append(errs, p.cp.Stop())
	p.cp = nil
	return errors.Join(errs...)
}

// TestbedObjects returns what the run's control plane adds to the ruleset
// kube-proxy programs, beyond the scenario's services: the `kubernetes`
// Service's ClusterIP (kube-apiserver creates it; it has no endpoints
// here), the control plane's service range (kube-proxy's nftables mode
// drops traffic to unallocated addresses of every ServiceCIDR), and the
// node's end of its link to the control plane (169.254.0.0/16: kube-proxy's
// IPVS mode takes every local address for a node address and serves node
// ports on it too). Empty before the first Sync and after Cleanup.
func (p *Proxier) TestbedObjects() []string {
	if p.cp == nil {
		return nil
	}
	return []string{p.cp.ServiceRange.Addr().Next().String(), p.cp.ServiceRange.String(), p.cp.NodeAddr(0).String()}
}

// failedSync ends a Sync whose kube-proxy sync failed (seen at at; own is
// its duration by kube-proxy's metric): it waits for kube-proxy's next
// successful sync (its last-sync timestamp past before) for up to its
// syncPeriod and 10 s more, and returns a *proxymodes.SyncFailed with st
// and a message naming the cause (the IPv4 errors kube-proxy logged from
// byte logFrom of its log on) and what kube-proxy did next; the message
// also goes into the record (FailedSyncs) and Info["failedSync"].
// kube-proxy keeps running until Cleanup.
func (p *Proxier) failedSync(ctx context.Context, which string, own time.Duration, logFrom int, at, before time.Time, st proxymodes.SyncStats) error {
	_, period := syncPeriods(readFile(p.kp.LogPath))
	watch := 40 * time.Second
	if period > 0 {
		watch = period + 10*time.Second
	}
	recovered := p.waitRecovery(ctx, before, watch)
	msg := failureMsg(which, own, failureCause(readFile(p.kp.LogPath), logFrom), at, recovered, watch, period) + "; the row's later phases were not run"
	if p.rec != nil {
		p.rec.FailedSyncs = append(p.rec.FailedSyncs, msg)
	}
	if p.info == nil {
		p.info = map[string]string{}
	}
	p.info["failedSync"] = msg
	return &proxymodes.SyncFailed{Stats: st, Msg: msg}
}
