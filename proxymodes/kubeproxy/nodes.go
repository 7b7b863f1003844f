//go:build linux

package kubeproxy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/apiobjects"
)

// Many nodes (topology.nodes > 1): the row's Proxier runs one kube-proxy
// per node against its one control plane, as a cluster's DaemonSet does.
// node-0's kube-proxy is the Proxier's own (every single-node figure is
// its); the others (ProxierSpec.Others) are started beside it, right after
// the API objects exist, each in its node's namespace with its own
// hostnameOverride and Node object (NodeName(i)), kubeconfig (the API
// server over its node's link, controlplane.NodeServer(i)), metrics
// endpoint (127.0.0.1:10249 of its namespace) and log. The first Sync
// returns when every node finished its first sync; Cleanup stops them
// all and runs kube-proxy --cleanup on every node.

// otherNode is one of the row's other nodes and its kube-proxy.
type otherNode struct {
	ns   *topology.Netns
	ip   netip.Addr
	name string
	kp   *Proxy
	// first is from the API objects created to its first sync's end (0:
	// not finished; err says why); firstFull that sync's own duration by
	// kube-proxy's full-sync metric (firstFullOf; 0: not read).
	first, firstFull time.Duration
	err              error
	// churn is its state at BeginChurn.
	churnBefore Metrics
	churnU0     Usage
}

// nodeState is the per-node part of a Proxier (one node: empty).
type nodeState struct {
	others []*otherNode
	// first0 is node-0's first sync by the same clock as the others',
	// firstFull0 its own duration by its full-sync metric.
	first0, firstFull0 time.Duration
	// final are the nodes' records when their processes stopped
	// (Cleanup), for a KubeProxyRecord after it.
	final []measure.KubeProxyNode
	// delivery are the watch delivery samples (MeasureWatchDelivery).
	delivery []measure.WatchDelivery
	// cpBefore is the control plane's CPU at BeginChurn.
	cpBefore [2]time.Duration
}

// NodeCount is how many nodes run kube-proxy in this row (1 + Others).
func (p *Proxier) NodeCount() int { return 1 + len(p.spec.Others) }

// allNodes are node-0's namespace and the others'.
func (p *Proxier) allNodes() []*topology.Netns {
	return append([]*topology.Netns{p.spec.Node}, p.spec.Others...)
}

// startOthers starts kube-proxy on every other node (node i+1 of
// ProxierSpec.Others) with node-0's settings and returns a wait that
// ends when each has finished its first sync (or failed, or bound
// passed: its error). Their first syncs are timed from created.
func (p *Proxier) startOthers(ctx context.Context, created time.Time, bound time.Duration) (wait func() error, err error) {
	p.nodes.others = nil
	for i, ns := range p.spec.Others {
		name := NodeName(i + 1)
		o := &otherNode{ns: ns, ip: p.spec.OtherIPs[i], name: name}
		p.nodes.others = append(p.nodes.others, o)
		kc := filepath.Join(p.spec.Dir, name+".kubeconfig")
		if err := p.cp.WriteKubeconfig(i+1, kc); err != nil {
			return nil, err
		}
		o.kp, err = Start(ctx, Spec{RunID: p.runID, Node: ns, Binary: p.spec.KubeProxy, Version: p.spec.Version, Dir: p.spec.Dir, Verbosity: p.spec.Verbosity,
			IPTablesBackend: p.spec.IPTablesBackend, XtablesLock: p.xtablesLock(name),
			Config: ConfigSpec{Mode: p.spec.Mode, Pass: p.spec.Pass, ClusterCIDR: p.spec.ClusterCIDR, ClusterCIDR6: p.spec.clusterCIDR6(), NodeName: name, NodeIP: o.ip, Kubeconfig: kc}})
		if err != nil {
			return nil, fmt.Errorf("kube-proxy on %s: %w", name, err)
		}
	}
	var wg sync.WaitGroup
	for _, o := range p.nodes.others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := o.kp.WaitSynced(ctx, bound); err != nil {
				o.err = err
				return
			}
			o.first, o.firstFull = firstSyncOf(ctx, o.kp, created)
		}()
	}
	return func() error {
		wg.Wait()
		var errs []error
		for _, o := range p.nodes.others {
			if o.err != nil {
				errs = append(errs, o.err)
			}
		}
		return errors.Join(errs...)
	}, nil
}

// xtablesLock is the xtables lock file of node name's kube-proxy:
// ProxierSpec.XtablesLock when set; else a file of its own beside its
// log (one lock per node, as a real node has one /run/xtables.lock for
// its one set of tables); "" (the machine's /run/xtables.lock) only
// without a Dir. The legacy iptables tools lock /run/xtables.lock, one
// file for every namespace of the machine, though each namespace has
// tables of its own: 20 kube-proxies starting at once waited for it past
// their 5 s (-w 5) and exited ("iptables is not available on this host:
// ... Can't lock /run/xtables.lock", run e80afb, 2026-12-02), and a
// one-node row's first full sync took 23.5 s instead of 0.91 s while
// other runs on the machine held it (sim calibrate, 2026-12-03).
func (p *Proxier) xtablesLock(name string) string {
	if p.spec.XtablesLock != "" || p.spec.Dir == "" {
		return p.spec.XtablesLock
	}
	return filepath.Join(p.spec.Dir, name+".xtables.lock")
}

// firstSyncOf is kp's first sync, from created to its end by kube-proxy's
// own last-sync timestamp (read right after WaitSynced saw the sync; the
// time of the call when the timestamp cannot be read), and its own
// duration by its full-sync metric (firstFullOf). kube-proxy observes
// its sync histograms in the sync's deferred function, the overall one
// first, so the full-sync one is polled for up to 10 s (full 0 when it
// never shows: a scrape failed, or kube-proxy had not observed it).
func firstSyncOf(ctx context.Context, kp *Proxy, created time.Time) (first, full time.Duration) {
	seen := time.Since(created)
	for wait := time.Now().Add(10 * time.Second); ; {
		m, err := kp.Scrape(ctx)
		if err == nil {
			if first == 0 {
				if ts, _ := lastSyncOf(m); ts.After(created) {
					first = ts.Sub(created)
				}
			}
			if d, ok := firstFullOf(m); ok {
				full = d
			}
		}
		if full > 0 || time.Now().After(wait) || ctx.Err() != nil {
			if first == 0 { // no scrape read the timestamp: when WaitSynced saw it
				first = seen
			}
			return first, full
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// firstFullOf is a kube-proxy's first full sync by its own metric, from a
// scrape m read right after that sync: the IPv4
// kubeproxy_sync_full_proxy_rules_duration_seconds (the iptables and
// nftables proxiers observe every full sync there, pkg/proxy/metrics),
// or in IPVS mode, which has no full/partial variants, its one
// kubeproxy_sync_proxy_rules_duration_seconds. Read after the first sync
// the histogram holds that one observation (its sum); with more (a later
// full sync ran before the scrape) it is their mean. false: no
// observation yet.
func firstFullOf(m Metrics) (time.Duration, bool) {
	h, err := m.Histogram(MetricSyncFull, "IPv4")
	if err != nil { // IPVS mode: no full-sync family
		if h, err = m.Histogram(MetricSync, "IPv4"); err != nil {
			return 0, false
		}
	}
	if h.Count == 0 {
		return 0, false
	}
	return time.Duration(h.Sum / float64(h.Count) * float64(time.Second)), true
}

// stopOthers records, then stops, every other node's kube-proxy and runs
// kube-proxy --cleanup on its node, all nodes at once.
func (p *Proxier) stopOthers() error {
	if len(p.nodes.others) == 0 {
		return nil
	}
	ctx := context.Background()
	p.nodes.final = p.nodeRecords(ctx)
	errs := make([]error, len(p.nodes.others))
	var wg sync.WaitGroup
	for i, o := range p.nodes.others {
		if o.kp == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := o.kp.Stop()
			if out, cerr := p.cleanupCommand(ctx, o.kp); cerr != nil && p.spec.Mode != "ipvs" {
				err = errors.Join(err, fmt.Errorf("kube-proxy --cleanup on %s: %w: %s", o.name, cerr, out))
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	p.nodes.others = nil
	return errors.Join(errs...)
}

// nodeRecords reads every node's kube-proxy now (node-0 first): its
// first sync, CPU, peak resident set, sync count and the watch events
// it received. Nil on one node; the records kept at Cleanup after it.
func (p *Proxier) nodeRecords(ctx context.Context) []measure.KubeProxyNode {
	if len(p.spec.Others) == 0 {
		return nil
	}
	if p.kp == nil || len(p.nodes.others) == 0 {
		return p.nodes.final
	}
	type nk struct {
		kp          *Proxy
		first, full time.Duration
		err         error
	}
	all := []nk{{p.kp, p.nodes.first0, p.nodes.firstFull0, nil}}
	for _, o := range p.nodes.others {
		all = append(all, nk{o.kp, o.first, o.firstFull, o.err})
	}
	out := make([]measure.KubeProxyNode, len(all))
	var wg sync.WaitGroup
	for i, n := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := measure.KubeProxyNode{Node: NodeName(i), FirstSyncNs: int64(n.first), FirstFullSyncNs: int64(n.full)}
			if n.err != nil {
				r.Err = n.err.Error()
			}
			if n.kp == nil {
				out[i] = r
				return
			}
			r.Log = n.kp.LogPath
			u := n.kp.Usage()
			r.CPUNs, r.ChildCPUNs, r.PeakRSSBytes, r.ChildPeakRSSBytes = int64(u.CPU), int64(u.ChildCPU), u.PeakRSS, u.ChildPeakRSS
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			m, err := n.kp.Scrape(sctx)
			if err != nil {
				if m, _ = n.kp.LastScrape(); m == nil {
					r.Err = joinText(r.Err, err.Error())
					out[i] = r
					return
				}
			}
			r.ServiceEvents, _ = counter(m, "kubeproxy_sync_proxy_rules_service_changes_total")
			r.EndpointSliceEvents, _ = counter(m, "kubeproxy_sync_proxy_rules_endpoint_changes_total")
			if h, err := m.Histogram(MetricSync, "IPv4"); err == nil {
				r.Syncs = h.Count
			}
			out[i] = r
		}()
	}
	wg.Wait()
	return out
}

func joinText(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// counter is the value of family name's first series (a counter, a
// gauge or untyped); false when the family is not in m.
func counter(m Metrics, name string) (float64, bool) {
	f, ok := m[name]
	if !ok || len(f.GetMetric()) == 0 {
		return 0, false
	}
	s := f.GetMetric()[0]
	switch {
	case s.GetCounter() != nil:
		return s.GetCounter().GetValue(), true
	case s.GetGauge() != nil:
		return s.GetGauge().GetValue(), true
	default:
		return s.GetUntyped().GetValue(), true
	}
}

// controlPlaneUse reads what the control plane used so far: CPU and
// resident sets of kube-apiserver and etcd, and kube-apiserver's
// apiserver_watch_events_total by kind. Nil without a control plane.
func (p *Proxier) controlPlaneUse(ctx context.Context) *measure.ControlPlaneUse {
	if p.cp == nil || p.cp.APIServer == nil || p.cp.Etcd == nil {
		return nil
	}
	u := &measure.ControlPlaneUse{APIServerCPUNs: int64(p.cp.APIServer.CPU()), EtcdCPUNs: int64(p.cp.Etcd.CPU())}
	u.APIServerPeakRSSBytes, u.APIServerRSSBytes = vmMem(p.cp.APIServer.Pid())
	u.EtcdPeakRSSBytes, u.EtcdRSSBytes = vmMem(p.cp.Etcd.Pid())
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	body, err := p.cp.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(sctx)
	if err != nil {
		u.WatchEventsErr = "kube-apiserver /metrics: " + err.Error()
		return u
	}
	m, err := ParseMetrics(body)
	if err != nil {
		u.WatchEventsErr = "kube-apiserver /metrics: " + err.Error()
		return u
	}
	u.WatchEvents = map[string]float64{}
	if f, ok := m["apiserver_watch_events_total"]; ok {
		for _, s := range f.GetMetric() {
			kind := ""
			for _, l := range s.GetLabel() {
				if l.GetName() == "kind" || l.GetName() == "resource" {
					kind = l.GetValue()
				}
			}
			u.WatchEvents[kind] += s.GetCounter().GetValue()
		}
	} else {
		u.WatchEventsErr = "kube-apiserver exposes no apiserver_watch_events_total"
	}
	return u
}

// NodeProxiers returns a proxier per other node (node-1 first), for the
// runner's per-node list: each stands for its node's kube-proxy, which
// this Proxier starts and stops. Their Sync waits for that kube-proxy to
// have finished a sync after the API holds the services (this Proxier's
// Sync wrote them); their Cleanup does nothing (this Proxier's stops
// every node's).
func (p *Proxier) NodeProxiers() []proxymodes.Proxier {
	var out []proxymodes.Proxier
	for i := range p.spec.Others {
		out = append(out, &nodeProxier{p: p, i: i})
	}
	return out
}

// nodeProxier is node i+1's kube-proxy as a proxymodes.Proxier.
type nodeProxier struct {
	p *Proxier
	i int
}

func (n *nodeProxier) Mode() string { return n.p.Mode() }

func (n *nodeProxier) Info() map[string]string {
	return map[string]string{"implementation": "kube-proxy", "node": NodeName(n.i + 1), "controlPlane": "node-0's row"}
}

func (n *nodeProxier) Cleanup(context.Context) error { return nil }

// Sync returns once node i+1's kube-proxy is running and has finished a
// sync after the Proxier's last write (node-0's Sync writes to the API;
// the first Sync waited for every node's first sync already).
func (n *nodeProxier) Sync(ctx context.Context, _ []workload.Service) (proxymodes.SyncStats, error) {
	if n.i >= len(n.p.nodes.others) || n.p.nodes.others[n.i].kp == nil {
		return proxymodes.SyncStats{}, fmt.Errorf("kubeproxy: %s has no kube-proxy running (node-0's proxier starts it with its first Sync)", NodeName(n.i+1))
	}
	o := n.p.nodes.others[n.i]
	if o.err != nil {
		return proxymodes.SyncStats{}, o.err
	}
	t0 := time.Now()
	_, err := o.kp.WaitSynced(ctx, time.Minute)
	return proxymodes.SyncStats{Kind: "full", Wall: time.Since(t0)}, err
}

// WatchDeliveryBound bounds each watch delivery sample (a node that has
// not queued a sync for the write by then records -1).
const WatchDeliveryBound = 10 * time.Second

// MeasureWatchDelivery times how long one EndpointSlice write takes to
// reach every node's kube-proxy (measure.WatchDelivery): samples writes,
// one at a time, alternately removing the last endpoint of one service
// (the first by name with an endpoint) and putting it back; each write
// carries its trigger time, as the EndpointSlice controller's. For each
// node the sample is that kube-proxy's last-queued timestamp minus the
// moment the update request was sent. It returns once every node's
// kube-proxy has synced after the last write (the service is as before),
// and keeps the samples for KubeProxyRecord. Errors: no kube-proxy
// running, a failed write or scrape.
func (p *Proxier) MeasureWatchDelivery(ctx context.Context, samples int) ([]measure.WatchDelivery, error) {
	if p.kp == nil || p.cp == nil {
		return nil, errors.New("kubeproxy: MeasureWatchDelivery with no kube-proxy running")
	}
	p.lastMu.Lock()
	names := make([]string, 0, len(p.last))
	for name, s := range p.last {
		if len(s.Endpoints) > 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var orig workload.Service
	if len(names) > 0 {
		orig = p.last[names[0]]
	}
	p.lastMu.Unlock()
	if len(names) == 0 {
		return nil, errors.New("kubeproxy: no service with an endpoint to time watch delivery with")
	}
	kps := []*Proxy{p.kp}
	for _, o := range p.nodes.others {
		kps = append(kps, o.kp)
	}
	out := make([]measure.WatchDelivery, len(kps))
	for i := range out {
		out[i].Node = NodeName(i)
	}
	short := orig
	short.Endpoints = append([]workload.Endpoint(nil), orig.Endpoints[:len(orig.Endpoints)-1]...)
	var lastQueued []time.Time
	for k := range samples {
		s := short
		if k%2 == 1 {
			s = orig
		}
		sent := time.Now()
		if err := apiobjects.ReplaceSlice(ctx, p.cp.Client, s, sent); err != nil {
			return out, fmt.Errorf("kubeproxy: watch delivery write %d: %w", k+1, err)
		}
		queued := queuedAfter(ctx, kps, sent, WatchDeliveryBound)
		for i, q := range queued {
			d := int64(-1)
			if !q.IsZero() {
				d = int64(q.Sub(sent))
			}
			out[i].DelayNs = append(out[i].DelayNs, d)
		}
		lastQueued = queued
	}
	if samples%2 == 1 { // the last write removed the endpoint: put it back
		sent := time.Now()
		if err := apiobjects.ReplaceSlice(ctx, p.cp.Client, orig, sent); err != nil {
			return out, fmt.Errorf("kubeproxy: watch delivery write back: %w", err)
		}
		lastQueued = queuedAfter(ctx, kps, sent, WatchDeliveryBound)
	}
	// The samples are kept whatever follows (a measurement made is not
	// thrown away). The rules of every node hold the service as before
	// when this returns: each kube-proxy's last sync ended after its last
	// queue, within settleBound.
	p.nodes.delivery = out
	if err := syncedAfter(ctx, kps, lastQueued, p.settleBound()); err != nil {
		return out, err
	}
	return out, nil
}

// settleBound is how long MeasureWatchDelivery waits for every node's
// sync after its last write: 30 s, or twice the slowest node's first
// sync when that was longer (64 kube-proxies at 1k on 2 cores at load
// ~100 took up to 57 s to a first sync, and half of them missed a fixed
// 30 s here: run 9cac54, 2026-12-02).
func (p *Proxier) settleBound() time.Duration {
	bound := 30 * time.Second
	for _, o := range p.nodes.others {
		if 2*o.first > bound {
			bound = 2 * o.first
		}
	}
	return bound
}

// queuedAfter polls every kube-proxy of kps (each in its goroutine, every
// 10 ms) until its IPv4 last-queued timestamp is after sent, and returns
// that timestamp per kube-proxy (zero: not within bound).
func queuedAfter(ctx context.Context, kps []*Proxy, sent time.Time, bound time.Duration) []time.Time {
	out := make([]time.Time, len(kps))
	var wg sync.WaitGroup
	for i, kp := range kps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for end := time.Now().Add(bound); time.Now().Before(end) && ctx.Err() == nil; time.Sleep(10 * time.Millisecond) {
				if st, err := scrapeChanges(ctx, kp); err == nil && st.queued.After(sent) {
					out[i] = st.queued
					return
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// syncedAfter waits until each kube-proxy of kps has a last-sync
// timestamp after its entry of queued (a zero entry: any), bounded.
func syncedAfter(ctx context.Context, kps []*Proxy, queued []time.Time, bound time.Duration) error {
	errs := make([]error, len(kps))
	var wg sync.WaitGroup
	for i, kp := range kps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			end := time.Now().Add(bound)
			for {
				st, err := scrapeChanges(ctx, kp)
				if err == nil && st.synced.After(queued[i]) {
					return
				}
				if time.Now().After(end) || ctx.Err() != nil {
					errs[i] = fmt.Errorf("kube-proxy on %s did not sync within %v of the last watch delivery write (last: %v)", kp.Spec.Config.NodeName, bound, err)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ChurnNode is one other node's kube-proxy over a churn phase (node-0's
// is ChurnAccount's own figures).
type ChurnNode struct {
	Node string
	// Programming is its kubeproxy_network_programming_duration_seconds
	// (IPv4) growth over the phase.
	Programming Histogram
	// CPU, ChildCPU and PeakRSS as ChurnAccount's.
	CPU, ChildCPU time.Duration
	PeakRSS       int64
	// Events are the Service and EndpointSlice watch events it received
	// over the phase (its ..._service_changes_total and
	// ..._endpoint_changes_total growth).
	Events float64
	// Unsettled, when set, says it had not observed every trigger time
	// when the phase stopped waiting; Err why a figure is missing.
	Unsettled, Err string
}

// beginChurnNodes starts the other nodes' account of a churn phase.
func (p *Proxier) beginChurnNodes(ctx context.Context) {
	if p.cp != nil && p.cp.APIServer != nil && p.cp.Etcd != nil {
		p.nodes.cpBefore = [2]time.Duration{p.cp.APIServer.CPU(), p.cp.Etcd.CPU()}
	}
	var wg sync.WaitGroup
	for _, o := range p.nodes.others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o.churnBefore, _ = o.kp.Scrape(ctx)
			o.churnU0 = o.kp.Usage()
			o.kp.StartRSSWindow()
		}()
	}
	wg.Wait()
}

// endChurnNodes waits, until deadline, for each other node's kube-proxy
// to have observed triggers trigger times since beginChurnNodes, then
// returns each one's account and the control plane's CPU over the phase.
func (p *Proxier) endChurnNodes(ctx context.Context, triggers int, deadline time.Time) (nodes []ChurnNode, apiCPU, etcdCPU time.Duration) {
	nodes = make([]ChurnNode, len(p.nodes.others))
	var wg sync.WaitGroup
	for i, o := range p.nodes.others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := ChurnNode{Node: o.name}
			h0, _ := o.churnBefore.Histogram(MetricProgramming, "IPv4")
			var m Metrics
			var err error
			for {
				m, err = o.kp.Scrape(ctx)
				if err == nil {
					h1, _ := m.Histogram(MetricProgramming, "IPv4")
					if h1.Count-h0.Count >= uint64(triggers) {
						break
					}
				}
				if time.Now().After(deadline) || ctx.Err() != nil {
					if err == nil {
						h1, _ := m.Histogram(MetricProgramming, "IPv4")
						n.Unsettled = fmt.Sprintf("%s had observed %d of the phase's %d trigger times when the phase stopped waiting", o.name, h1.Count-h0.Count, triggers)
					}
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil {
				n.Err = err.Error()
				nodes[i] = n
				return
			}
			h1, _ := m.Histogram(MetricProgramming, "IPv4")
			n.Programming = h1.Sub(h0)
			e0, _ := counter(o.churnBefore, "kubeproxy_sync_proxy_rules_endpoint_changes_total")
			s0, _ := counter(o.churnBefore, "kubeproxy_sync_proxy_rules_service_changes_total")
			e1, _ := counter(m, "kubeproxy_sync_proxy_rules_endpoint_changes_total")
			s1, _ := counter(m, "kubeproxy_sync_proxy_rules_service_changes_total")
			n.Events = e1 - e0 + s1 - s0
			u := o.kp.Usage()
			n.CPU, n.ChildCPU, n.PeakRSS = u.CPU-o.churnU0.CPU, u.ChildCPU-o.churnU0.ChildCPU, u.WindowPeakRSS
			nodes[i] = n
		}()
	}
	wg.Wait()
	if p.cp != nil && p.cp.APIServer != nil && p.cp.Etcd != nil {
		apiCPU, etcdCPU = p.cp.APIServer.CPU()-p.nodes.cpBefore[0], p.cp.Etcd.CPU()-p.nodes.cpBefore[1]
	}
	return nodes, apiCPU, etcdCPU
}
