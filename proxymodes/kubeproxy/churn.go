//go:build linux

package kubeproxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/apiobjects"
)

// The churn phase with a kube-proxy row: the runner makes the changes
// (the generator and the probes are its own) and hands each to
// WriteChange, which writes it through the API as a cluster would; the
// phase never syncs kube-proxy itself. BeginChurn and EndChurn bracket
// the phase and return kube-proxy's own account of it (ChurnAccount):
// its histograms' growth, its CPU and memory, and its log's per-sync and
// per-change lines.

// ChurnVerbosity is the -v at which kube-proxy logs one "Network
// programming" line per trigger time a sync programmed (its service and
// latency; pkg/proxy/{iptables,nftables,ipvs}/proxier.go, V(4)) and, in
// IPVS mode, its syncs (V(3) start, V(4) end). The iptables and nftables
// modes log their syncs from -v 2 on.
const ChurnVerbosity = 4

// ChurnAccount is kube-proxy's own account of one churn phase, from
// BeginChurn to EndChurn.
type ChurnAccount struct {
	// Version is kube-proxy's version.
	Version string
	// Programming is kubeproxy_network_programming_duration_seconds
	// (IPv4) over the phase: the scrape at EndChurn minus the one at
	// BeginChurn (observations, their sum in seconds, cumulative
	// buckets with kube-proxy's bounds). Each observation is one
	// trigger time (an EndpointSlice write carrying
	// endpoints.kubernetes.io/last-change-trigger-time) from that time to
	// the end of the rule write of the sync that programmed it.
	Programming Histogram
	// Syncs is kubeproxy_sync_proxy_rules_duration_seconds (IPv4) over
	// the phase; Full and Partial are its
	// kubeproxy_sync_full_proxy_rules_duration_seconds and
	// ..._partial_... variants, which only the iptables and nftables
	// proxiers observe (HasFullPartial false for IPVS).
	Syncs, Full, Partial Histogram
	HasFullPartial       bool
	// Programmed are the IPv4 "Network programming" lines of kube-proxy's
	// log over the phase, in order: one per programmed trigger time,
	// with its service and latency (empty below -v 4: PerChange says
	// why).
	Programmed []Programmed
	// Logged are kube-proxy's IPv4 syncs over the phase by its log (the
	// "Syncing ... rules" and "SyncProxyRules complete" lines), in order.
	Logged []LoggedSync
	// PerChange says how kube-proxy's log came to have per-change lines
	// ("kube-proxy's -v raised from 2 to 4 for the phase ...") or why it
	// has none.
	PerChange string
	// CPU and ChildCPU are kube-proxy's own CPU time and that of the rule
	// programs it ran (user+sys, /proc/<pid>/stat) over the phase;
	// PeakRSS its largest resident set sampled (VmRSS, every 20 ms) over
	// the phase, bytes.
	CPU, ChildCPU time.Duration
	PeakRSS       int64
	// MinSyncPeriod and SyncPeriod are kube-proxy's, as its log's "sync
	// params" line gives them (0 when absent).
	MinSyncPeriod, SyncPeriod time.Duration
	// Settle is how long EndChurn waited for kube-proxy to finish the
	// syncs of the phase's writes; Unsettled, when set, says it stopped
	// waiting first (ChurnSettle) and how far kube-proxy had got.
	Settle    time.Duration
	Unsettled string
	// Failures is the growth over the phase of kube-proxy's IPv4 failure
	// counters (measure.KubeProxyFailureCounters) it serves, by name.
	Failures map[string]float64
	// Events are the Service and EndpointSlice watch events kube-proxy
	// received over the phase (the growth of
	// kubeproxy_sync_proxy_rules_{service,endpoint}_changes_total).
	Events float64
	// Nodes are the other nodes' kube-proxies over the phase
	// (topology.nodes > 1; node-1 first), and APIServerCPU and EtcdCPU
	// the control plane's CPU over it (0 on one node).
	Nodes        []ChurnNode
	APIServerCPU time.Duration
	EtcdCPU      time.Duration
}

// Programmed is one "Network programming" line of kube-proxy's log: the
// service (namespace/name) whose trigger time a sync programmed, when
// the line was logged and the latency kube-proxy observed (from the
// trigger time to the end of that sync's rule write).
type Programmed struct {
	Service string
	At      time.Time
	Elapsed time.Duration
}

// LoggedSync is one IPv4 sync of kube-proxy by its log: Start is its
// "Syncing ... rules" line, End its "SyncProxyRules complete" line and
// Elapsed that line's elapsed (from the sync's own start, before it
// read the pending changes). Kind is "full" or "partial" (iptables and
// nftables: fullSync), "sync" for IPVS (no partial syncs), "" when the
// start line came before the phase. Failed: kube-proxy logged "Sync
// failed" for it.
type LoggedSync struct {
	Start, End time.Time
	Elapsed    time.Duration
	Kind       string
	Failed     bool
}

// churnState is what BeginChurn keeps for EndChurn.
type churnState struct {
	before  Metrics
	view    syncView // before, as Sync's waits read it
	logFrom int
	// logAt is how far ReadChurnLog has read kube-proxy's log (a byte
	// offset, from logFrom on): EndChurn returns the lines after it.
	logAt int
	u0    Usage
	// restore puts kube-proxy's -v back at EndChurn (RaiseVerbosity).
	restore   func(context.Context) error
	perChange string
}

// BeginChurn starts kube-proxy's account of a churn phase: a scrape of
// its metrics, its log's size, its CPU, and a window for its resident
// set. Below ChurnVerbosity it raises kube-proxy's -v to it for the
// phase (PUT /debug/flags/v on its metrics endpoint, which kube-proxy
// serves with enableProfiling: PassFromScenario sets it for a churn
// scenario unless kubeProxy.config does). Errors: no kube-proxy
// running, a failed scrape.
func (p *Proxier) BeginChurn(ctx context.Context) error {
	if p.kp == nil {
		return errors.New("kubeproxy: BeginChurn with no kube-proxy running")
	}
	m, err := p.kp.Scrape(ctx)
	if err != nil {
		return p.orExited(err, "the start of the churn phase")
	}
	ts, h := lastSyncOf(m)
	from := p.kp.logSize()
	st := &churnState{before: m, view: syncView{ts: ts, sync: h, programmed: programmedOf(m)}, logFrom: from, logAt: from, u0: p.kp.Usage()}
	st.perChange, st.restore = p.RaiseVerbosity(ctx, ChurnVerbosity, "a \"Network programming\" line per programmed change")
	p.kp.StartRSSWindow()
	p.churn = st
	p.beginChurnNodes(ctx)
	return nil
}

// profiling reports whether kube-proxy's configuration pass turns on
// enableProfiling (its /debug/flags/v handler).
func profiling(pass map[string]any) bool {
	b, _ := pass["enableProfiling"].(bool)
	return b
}

// setVerbosity sets kube-proxy's -v while it runs (PUT /debug/flags/v,
// served with enableProfiling: k8s.io/apiserver's routes.DebugFlags with
// klog's setter).
func (p *Proxy) setVerbosity(ctx context.Context, v int) error {
	code, body, err := p.do(ctx, http.MethodPut, MetricsPort, "/debug/flags/v", strings.NewReader(strconv.Itoa(v)))
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("PUT /debug/flags/v: HTTP %d: %s", code, bytes.TrimSpace(body))
	}
	return nil
}

// WriteChange writes one churn change through the API as a cluster
// makes it, stamped with trigger (the time of the change, as the
// EndpointSlice controller sets endpoints.kubernetes.io/last-change-trigger-time):
// an endpoint added, removed, turned ready or not ready is s's
// EndpointSlice written whole with its endpoints' conditions
// (apiobjects.ReplaceSlice); a service created is its Service then its
// EndpointSlice (apiobjects.CreateService); a service deleted its
// Service then its EndpointSlice (apiobjects.DeleteService, no trigger
// time). s is the service after the change (a deleted one as it was).
// Later Syncs start from what was written. Safe for concurrent use.
func (p *Proxier) WriteChange(ctx context.Context, ch workload.Change, s workload.Service, trigger time.Time) error {
	if p.cp == nil {
		return errors.New("kubeproxy: WriteChange with no control plane")
	}
	c := p.cp.Client
	var err error
	switch ch.Kind {
	case workload.ServiceCreate:
		err = apiobjects.CreateService(ctx, c, s, p.spec.SessionAffinity, trigger)
	case workload.ServiceDelete:
		err = apiobjects.DeleteService(ctx, c, s)
	default:
		err = apiobjects.ReplaceSlice(ctx, c, s, trigger)
	}
	if err != nil {
		return err
	}
	p.lastMu.Lock()
	defer p.lastMu.Unlock()
	if ch.Kind == workload.ServiceDelete {
		delete(p.last, s.Name)
	} else {
		p.last[s.Name] = s
	}
	return nil
}

// SliceHolds reports whether the API holds s's EndpointSlice as
// WriteChange wrote it with trigger (apiobjects.SliceHolds): how a
// writer whose request timed out learns that the API server committed
// it anyway. Errors: no control plane, or the GET's.
func (p *Proxier) SliceHolds(ctx context.Context, s workload.Service, trigger time.Time) (bool, error) {
	if p.cp == nil {
		return false, errors.New("kubeproxy: SliceHolds with no control plane")
	}
	return apiobjects.SliceHolds(ctx, p.cp.Client, s, trigger)
}

// ChurnSettle bounds EndChurn's wait for kube-proxy to finish the syncs
// that program the phase's last writes.
const ChurnSettle = time.Minute

// EndChurn ends kube-proxy's account of the churn phase BeginChurn
// started. It first waits, up to ChurnSettle, until kube-proxy has
// observed triggers network-programming latencies since BeginChurn (the
// phase's writes that carried a trigger time) and ended the sync that
// observed the last of them (Sync's programmedWait): the data plane
// shows a change when the rules are committed, a moment before
// kube-proxy's rule program returns and its sync ends, so a phase that
// ended on the data plane's word would miss its last syncs. Then it puts
// kube-proxy's -v back, scrapes its metrics and returns the growth of its
// histograms, its CPU and peak resident set over the phase (the wait
// included), and the syncs and per-change lines its log has since.
func (p *Proxier) EndChurn(ctx context.Context, triggers int) (ChurnAccount, error) {
	st := p.churn
	p.churn = nil
	if st == nil || p.kp == nil {
		return ChurnAccount{}, errors.New("kubeproxy: EndChurn without BeginChurn")
	}
	a := ChurnAccount{Version: p.kp.Version, PerChange: st.perChange}
	t0 := time.Now()
	pw := newProgrammedWait(st.view, triggers)
	c0 := changesOf(st.before)
	for triggers > 0 {
		m, err := p.kp.Scrape(ctx)
		if err != nil && ctx.Err() != nil {
			a.Unsettled = "the run was cancelled while the phase waited for kube-proxy's last syncs"
			break
		}
		if err != nil {
			return a, p.orExited(err, "the end of the churn phase")
		}
		ts, h := lastSyncOf(m)
		v := syncView{ts: ts, sync: h, programmed: programmedOf(m)}
		if pw.done(v) {
			break
		}
		// A failed sync drops the trigger times it took (its change
		// tracker was drained), so after one the observations never
		// reach triggers: then kube-proxy is done when it has received
		// the phase's changes, none is pending, and its last successful
		// sync ended after the last change was queued.
		if c := changesOf(m); c.ok && c0.ok && c.total >= c0.total+float64(triggers) && c.pending == 0 &&
			!c.synced.Before(c.queued) && c.synced.After(st.view.ts) && p.failedSince(st.logFrom) {
			break
		}
		if time.Since(t0) > ChurnSettle || ctx.Err() != nil {
			a.Unsettled = fmt.Sprintf("kube-proxy had observed %d of the phase's %d trigger times when the phase stopped waiting for it after %v",
				v.programmed-st.view.programmed, triggers, time.Since(t0).Round(time.Millisecond))
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The other nodes (topology.nodes > 1) get the rest of the same
	// bound to observe them too.
	a.Nodes, a.APIServerCPU, a.EtcdCPU = p.endChurnNodes(ctx, triggers, t0.Add(ChurnSettle))
	a.Settle = time.Since(t0)
	// The rest also when the run was cancelled meanwhile: kube-proxy's -v
	// goes back, and what it measured is kept.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := st.restore(ctx); err != nil {
		a.PerChange += "; " + err.Error()
	}
	m, err := p.kp.Scrape(ctx)
	if err != nil {
		return a, p.orExited(err, "the end of the churn phase")
	}
	delta := func(name string) (Histogram, bool) {
		h1, err := m.Histogram(name, "IPv4")
		if err != nil {
			return Histogram{}, false
		}
		h0, _ := st.before.Histogram(name, "IPv4")
		return h1.Sub(h0), true
	}
	a.Programming, _ = delta(MetricProgramming)
	a.Syncs, _ = delta(MetricSync)
	var okF, okP bool
	a.Full, okF = delta(MetricSyncFull)
	a.Partial, okP = delta(MetricSyncPartial)
	a.HasFullPartial = okF || okP
	for _, name := range []string{"kubeproxy_sync_proxy_rules_endpoint_changes_total", "kubeproxy_sync_proxy_rules_service_changes_total"} {
		v1, _ := counter(m, name)
		v0, _ := counter(st.before, name)
		a.Events += v1 - v0
	}
	u := p.kp.Usage()
	a.CPU, a.ChildCPU, a.PeakRSS = u.CPU-st.u0.CPU, u.ChildCPU-st.u0.ChildCPU, u.WindowPeakRSS
	log := readFile(p.kp.LogPath)
	a.Failures = failureGrowth(st.before, m)
	a.MinSyncPeriod, a.SyncPeriod = syncPeriods(log)
	if st.logAt <= len(log) {
		log = log[st.logAt:]
	}
	a.Programmed, a.Logged = ParseChurnLog(log, time.Now(), time.Local)
	return a, nil
}

// ReadChurnLog reads the churn phase's log as it goes (the soak phase,
// which would otherwise keep an hour of changes for EndChurn): the IPv4
// "Network programming" lines and syncs (ParseChurnLog) that kube-proxy's
// log has since BeginChurn or the last ReadChurnLog, up to the end of
// its last whole sync (the "SyncProxyRules complete" line, which comes
// after the "Network programming" lines of its sync), so that every
// line read has its sync beside it; the rest is read next time or by
// EndChurn, which then returns only what was not read. Errors: no churn
// phase begun, the log unreadable (nothing is consumed).
func (p *Proxier) ReadChurnLog() ([]Programmed, []LoggedSync, error) {
	st := p.churn
	if st == nil || p.kp == nil {
		return nil, nil, errors.New("kubeproxy: ReadChurnLog without BeginChurn")
	}
	chunk, err := readFrom(p.kp.LogPath, int64(st.logAt))
	if err != nil {
		return nil, nil, fmt.Errorf("kube-proxy's log: %w", err)
	}
	n := WholeSyncs(chunk)
	st.logAt += n
	programmed, syncs := ParseChurnLog(chunk[:n], time.Now(), time.Local)
	return programmed, syncs, nil
}

// WholeSyncs is the length of log's prefix that ends with its last IPv4
// "SyncProxyRules complete" line (its newline included; 0: none).
func WholeSyncs(log []byte) int {
	end := 0
	for off := 0; off < len(log); {
		i := bytes.IndexByte(log[off:], '\n')
		if i < 0 {
			break // a line kube-proxy is still writing
		}
		line := log[off : off+i]
		off += i + 1
		if !bytes.Contains(line, []byte("omplete")) {
			continue
		}
		m := klogRE.FindSubmatch(line)
		if m == nil || !strings.EqualFold(string(m[7]), "SyncProxyRules complete") {
			continue
		}
		if f := kvFamily.FindSubmatch(m[8]); f != nil && string(f[1]) != "IPv4" {
			continue
		}
		end = off
	}
	return end
}

// failedSince reports whether kube-proxy's log has an IPv4 "Sync
// failed" line from byte offset from on.
func (p *Proxier) failedSince(from int) bool {
	log := readFile(p.kp.LogPath)
	if from < 0 || from > len(log) {
		from = 0
	}
	_, syncs := ParseChurnLog(log[from:], time.Now(), time.Local)
	for _, s := range syncs {
		if s.Failed {
			return true
		}
	}
	return false
}

// failureGrowth is the growth from scrape a to scrape b of kube-proxy's
// IPv4 failure counters (measure.KubeProxyFailureCounters) that b has,
// by name.
func failureGrowth(a, b Metrics) map[string]float64 {
	out := map[string]float64{}
	for _, name := range measure.KubeProxyFailureCounters {
		v1, ok := b.Counter(name, "IPv4")
		if !ok {
			continue
		}
		v0, _ := a.Counter(name, "IPv4")
		out[name] = v1 - v0
	}
	return out
}

// klogRE matches a klog text header and message: severity, month, day,
// time to the microsecond, thread, file:line, the quoted message and the
// key=value pairs after it.
var klogRE = regexp.MustCompile(`^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6})\s+\d+ [^\]]*\] "((?:[^"\\]|\\.)*)"(.*)$`)

var (
	kvFamily   = regexp.MustCompile(`\bipFamily="([^"]*)"`)
	kvEndpoint = regexp.MustCompile(`\bendpoint="([^"]*)"`)
	kvElapsed  = regexp.MustCompile(`\belapsed=("[^"]*"|\S+)`)
	kvFullSync = regexp.MustCompile(`\bfullSync=(true|false)`)
)

// ParseChurnLog reads kube-proxy's IPv4 per-change and per-sync lines
// from log (klog's text format; a line of another format or family is
// skipped): each "Network programming" line (service, latency) and each
// sync ("Syncing iptables rules" / "Syncing nftables rules" with its
// fullSync, "Syncing ipvs proxier rules", "Sync failed", then
// "SyncProxyRules complete" / "syncProxyRules complete" with its
// elapsed). klog's header has no year and is in local time: each line's
// time is taken in loc in the year that puts it nearest ref.
func ParseChurnLog(log []byte, ref time.Time, loc *time.Location) (programmed []Programmed, syncs []LoggedSync) {
	var cur *LoggedSync
	eachIPv4Line(log, func(m [][]byte) {
		rest := m[8]
		at := klogTime(m, ref, loc)
		switch msg := string(m[7]); {
		case msg == "Network programming":
			e := kvEndpoint.FindSubmatch(rest)
			d, ok := elapsedOf(rest)
			if e != nil && ok {
				programmed = append(programmed, Programmed{Service: string(e[1]), At: at, Elapsed: d})
			}
		case msg == "Syncing iptables rules" || msg == "Syncing nftables rules":
			kind := "partial"
			if f := kvFullSync.FindSubmatch(rest); f != nil && string(f[1]) == "true" {
				kind = "full"
			}
			cur = &LoggedSync{Start: at, Kind: kind}
		case msg == "Syncing ipvs proxier rules":
			cur = &LoggedSync{Start: at, Kind: "sync"}
		case msg == "Sync failed":
			if cur != nil {
				cur.Failed = true
			}
		case strings.EqualFold(msg, "SyncProxyRules complete"):
			d, _ := elapsedOf(rest)
			s := LoggedSync{Start: at.Add(-d)}
			if cur != nil {
				s = *cur
			}
			s.End, s.Elapsed = at, d
			syncs = append(syncs, s)
			cur = nil
		}
	})
	return programmed, syncs
}

// eachIPv4Line calls fn with the klogRE match of each line of log in
// klog's text format that is not of another IP family than IPv4 (a line
// without ipFamily counts).
func eachIPv4Line(log []byte, fn func(m [][]byte)) {
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		m := klogRE.FindSubmatch(sc.Bytes())
		if m == nil {
			continue
		}
		if f := kvFamily.FindSubmatch(m[8]); f != nil && string(f[1]) != "IPv4" {
			continue
		}
		fn(m)
	}
}

// elapsedOf reads an elapsed= value: a quoted Go duration
// ("285.735901ms", a time.Duration) or bare seconds (0.512, a float64 as
// the programming latency is logged).
func elapsedOf(kv []byte) (time.Duration, bool) {
	m := kvElapsed.FindSubmatch(kv)
	if m == nil {
		return 0, false
	}
	v := string(m[1])
	if strings.HasPrefix(v, `"`) {
		d, err := time.ParseDuration(strings.Trim(v, `"`))
		return d, err == nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(math.Round(f * float64(time.Second))), true
}

// klogTime is the time of a klogRE match in loc, in the year that puts it
// nearest ref.
func klogTime(m [][]byte, ref time.Time, loc *time.Location) time.Time {
	n := func(i int) int { v, _ := strconv.Atoi(string(m[i])); return v }
	ref = ref.In(loc)
	best := time.Time{}
	for _, y := range []int{ref.Year() - 1, ref.Year(), ref.Year() + 1} {
		t := time.Date(y, time.Month(n(1)), n(2), n(3), n(4), n(5), n(6)*1000, loc)
		if best.IsZero() || absDur(t.Sub(ref)) < absDur(best.Sub(ref)) {
			best = t
		}
	}
	return best
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// UseMinSyncPeriod makes kube-proxy run with minSyncPeriod d (the churn
// phase's sweep.minSyncPeriod value): when the running kube-proxy's
// (its log's) differs, it is restarted as a DaemonSet rollout would
// restart it after a ConfigMap edit (SIGTERM, a new process with d in
// its mode's block over the scenario's and kubeProxy.config's, over the
// same control plane and API objects; its rules stay), and st is that
// restart's first sync (Resume). d = 0 in iptables and nftables modes is
// written as 1ns: kube-proxy's defaulting turns 0 into 1 s there
// (pkg/proxy/apis/config/v1alpha1), and 1ns is no minimum interval in
// effect. restarted is false when kube-proxy already ran with it.
func (p *Proxier) UseMinSyncPeriod(ctx context.Context, d time.Duration) (restarted bool, st proxymodes.SyncStats, err error) {
	want := KubeProxyMinSync(p.spec.Mode, d)
	if p.kp != nil && p.minSyncPeriodLogged() == want {
		return false, st, nil
	}
	pass := deepCopy(p.spec.Pass)
	block, _ := pass[p.spec.Mode].(map[string]any)
	if block == nil {
		block = map[string]any{}
		pass[p.spec.Mode] = block
	}
	block["minSyncPeriod"] = want.String()
	if _, _, err := Config(ConfigSpec{Mode: p.spec.Mode, Pass: pass}); err != nil {
		return false, st, err
	}
	_, st, err = p.restart(ctx, p.spec.Mode, pass, "restart with minSyncPeriod "+want.String()+" (churn sweep.minSyncPeriod)")
	return true, st, err
}

// KubeProxyMinSync is the minSyncPeriod kube-proxy is given for a wanted
// d in mode: d, but 1ns for 0 in iptables and nftables modes (whose
// defaulting reads 0 as unset, 1 s).
func KubeProxyMinSync(mode string, d time.Duration) time.Duration {
	if d == 0 && mode != "ipvs" {
		return time.Nanosecond
	}
	return d
}

// minSyncPeriodLogged is the running kube-proxy's minSyncPeriod by its
// log's sync params line (-1 when the line is absent).
func (p *Proxier) minSyncPeriodLogged() time.Duration {
	log := readFile(p.kp.LogPath)
	if !syncParamsRE.Match(log) {
		return -1
	}
	min, _ := syncPeriods(log)
	return min
}

// SyncPeriods are the running kube-proxy's minSyncPeriod and syncPeriod
// as its log's sync params line gives them (0, 0 when absent or no
// kube-proxy runs).
func (p *Proxier) SyncPeriods() (minSync, sync time.Duration) {
	if p.kp == nil {
		return 0, 0
	}
	return syncPeriods(readFile(p.kp.LogPath))
}
