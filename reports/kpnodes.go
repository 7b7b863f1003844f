package reports

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/proxybench/proxybench/measure"
)

// PhaseNodes is the nodes phase's name in Section.Phase.
const PhaseNodes = "nodes"

// The titles of KubeProxyNodesSections.
const (
	nodesSummaryTitle = "kube-proxy on many nodes: first syncs, programming latency per node, control plane"
	nodesTableTitle   = "kube-proxy per node: first sync, CPU, memory, watch events and delivery"
)

// KubeProxyNodesReport is the nodes phase's sections of one row: for a
// row that ran kube-proxy on several nodes (its record's Nodes),
// KubeProxyNodesSections; none otherwise (builtin rows, one node).
func KubeProxyNodesReport(label string, mr *ModeResult) []Section {
	if mr.KubeProxy == nil || len(mr.KubeProxy.Nodes) == 0 {
		return nil
	}
	return KubeProxyNodesSections(label, mr)
}

// NodeProgramming is one node's kubeproxy_network_programming_duration_
// seconds over a row's first churn phase: node-0's is the phase's own
// (ChurnKubeProxy.Programming), the others' their Nodes entries.
func NodeProgramming(c *ChurnKubeProxy) map[string]KubeProxyHistogram {
	out := map[string]KubeProxyHistogram{"node-0": c.Programming}
	for _, n := range c.Nodes {
		out[n.Node] = n.Programming
	}
	return out
}

// AddHistograms sums histograms of one metric (the same bounds): counts,
// sums and every bucket. Histograms whose bounds differ from the first's
// are left out of the buckets (their count and sum still add).
func AddHistograms(hs ...KubeProxyHistogram) KubeProxyHistogram {
	var out KubeProxyHistogram
	for _, h := range hs {
		out.Count += h.Count
		out.SumSeconds += h.SumSeconds
		if len(h.Buckets) == 0 {
			continue
		}
		if out.Buckets == nil {
			out.Buckets = append([]Bucket(nil), h.Buckets...)
			continue
		}
		if len(h.Buckets) != len(out.Buckets) {
			continue
		}
		for i := range h.Buckets {
			if h.Buckets[i].LE == out.Buckets[i].LE {
				out.Buckets[i].Count += h.Buckets[i].Count
			}
		}
	}
	return out
}

// KubeProxyNodesSections are two sections of a row that ran kube-proxy on
// several nodes against one control plane. The summary (one line per
// row): the time from the API objects created to each node's first sync
// (first, median and last node); per-node programming latency under the
// row's first churn phase by each kube-proxy's own histogram (p50 and
// p99 over every node's observations, interpolated in the summed
// buckets, and the worst node by its p99) beside the data plane's p50 and
// p99 (probes from clients on several nodes); the control plane's CPU
// over the churn phase and over the row, and its peak resident sets;
// kube-proxy's CPU and resident set summed over the nodes; the watch
// delivery delay over every node's samples (median and p99: from an
// EndpointSlice write sent to a node's kube-proxy queuing a sync for
// it, measure.WatchDelivery) and the mean extra delay of the other
// nodes over node-0 for the same write (WatchDelayOf: what
// sim.watchDelay stands for). The per-node table: each node's first
// sync, CPU, peak RSS, syncs, the Service and EndpointSlice watch events
// it received (over the row and over the churn phase), its programming
// latency under churn (n, p50, p99) and its watch delivery (median,
// max). Durations in ms but first syncs (s), CPU in s, memory in MiB.
func KubeProxyNodesSections(label string, mr *ModeResult) []Section {
	kp := mr.KubeProxy
	sum := Section{Phase: PhaseNodes, Title: nodesSummaryTitle, Scope: "row",
		Intro: "One kube-proxy per node against the row's one control plane, all started when the API objects existed. First sync: from the objects created to each kube-proxy's first IPv4 sync's end (its last-sync timestamp). Programming latency: each node's kubeproxy_network_programming_duration_seconds over the first churn phase, summed over the nodes (p50/p99 interpolated in the buckets as histogram_quantile does), and the worst node by its own p99; the data plane's from the churn probes, which follow every change on each node they dial from (client pods on several nodes): p50/p99 over those nodes and changes, and the worst node by its p99. Control plane: kube-apiserver's and etcd's CPU (/proc/<pid>/stat) over the churn phase and over the row, and their peak resident sets (VmHWM). Watch delivery: from an EndpointSlice write sent to a node's kube-proxy queuing a sync for it (its last-queued timestamp), one write at a time on an idle cluster, every node's samples; the watch delay over node-0 (what sim.watchDelay stands for) is the mean of each other node's sample minus node-0's for the same write.",
		Columns: []Column{{Name: "nodes", Unit: "count"},
			{Name: "first sync first", Unit: "s", Figure: "firstsync.first"}, {Name: "first sync median", Unit: "s", Figure: "firstsync.median"},
			{Name: "first sync last", Unit: "s", Figure: "firstsync.last"},
			{Name: "programming n", Unit: "count", Figure: "programming.n"},
			{Name: "programming p50", Unit: "ms", Figure: "programming.p50"}, {Name: "programming p99", Unit: "ms", Figure: "programming.p99"},
			{Name: "worst node"}, {Name: "worst node p99", Unit: "ms", Figure: "programming.worst.p99"},
			{Name: "data plane p50", Unit: "ms", Figure: "dataplane.p50"}, {Name: "data plane p99", Unit: "ms", Figure: "dataplane.p99"},
			{Name: "data plane worst node"}, {Name: "data plane worst node p99", Unit: "ms", Figure: "dataplane.worst.p99"},
			{Name: "apiserver CPU churn", Unit: "s", Figure: "apiserver.cpu.churn"}, {Name: "etcd CPU churn", Unit: "s", Figure: "etcd.cpu.churn"},
			{Name: "apiserver CPU row", Unit: "s", Figure: "apiserver.cpu"}, {Name: "etcd CPU row", Unit: "s", Figure: "etcd.cpu"},
			{Name: "apiserver peak RSS", Unit: "MiB", Figure: "apiserver.rss"}, {Name: "etcd peak RSS", Unit: "MiB", Figure: "etcd.rss"},
			{Name: "kube-proxy CPU all nodes", Unit: "s", Figure: "kubeproxy.cpu"}, {Name: "kube-proxy peak RSS all nodes", Unit: "MiB", Figure: "kubeproxy.rss"},
			{Name: "watch delivery p50", Unit: "ms", Figure: "watchdelivery.p50"}, {Name: "watch delivery p99", Unit: "ms", Figure: "watchdelivery.p99"},
			{Name: "watch delay over node-0 mean", Unit: "ms", Figure: "watchdelay"}}}
	tab := Section{Phase: PhaseNodes, Title: nodesTableTitle, Scope: "row",
		Intro: "Each node's kube-proxy: its first sync (from the API objects created), CPU (own + rule programs) and peak resident set over the row, its IPv4 syncs, the watch events its informers delivered to its change trackers (kubeproxy_sync_proxy_rules_service_changes_total and ..._endpoint_changes_total) over the row and over the first churn phase, its own programming latency under that churn, and its watch delivery delay (median and largest sample).",
		Columns: []Column{{Name: "node", Key: true},
			{Name: "first sync", Unit: "s", Figure: "firstsync"}, {Name: "CPU", Unit: "s", Figure: "cpu"}, {Name: "rule programs CPU", Unit: "s", Figure: "programs.cpu"},
			{Name: "peak RSS", Unit: "MiB", Figure: "rss"}, {Name: "syncs", Unit: "count"},
			{Name: "Service events", Unit: "count", Figure: "events.service"}, {Name: "EndpointSlice events", Unit: "count", Figure: "events.endpointslice"},
			{Name: "events in churn", Unit: "count", Figure: "events.churn"},
			{Name: "programming n", Unit: "count", Figure: "programming.n"}, {Name: "programming p50", Unit: "ms", Figure: "programming.p50"},
			{Name: "programming p99", Unit: "ms", Figure: "programming.p99"},
			{Name: "data plane n", Unit: "count", Figure: "dataplane.n"}, {Name: "data plane p50", Unit: "ms", Figure: "dataplane.p50"},
			{Name: "data plane p99", Unit: "ms", Figure: "dataplane.p99"},
			{Name: "watch delivery median", Unit: "ms", Figure: "watchdelivery.p50"}, {Name: "watch delivery max", Unit: "ms", Figure: "watchdelivery.max"}}}
	ms := func(seconds float64) Cell {
		if math.IsNaN(seconds) {
			return Missing()
		}
		return Num(seconds*1e3, "%.1f")
	}
	sec := func(ns int64) Cell { return Num(float64(ns)/1e9, "%.2f") }
	mib := func(b int64) Cell {
		if b <= 0 {
			return Missing()
		}
		return Num(float64(b)/(1<<20), "%.1f")
	}
	var churn *ChurnKubeProxy
	// The data plane per node: each probed node's latencies (the churn
	// probes follow every change on every node they dial from).
	nodeDP := map[string][]float64{}
	var allDP []float64
	if len(mr.Churn) > 0 {
		c := &mr.Churn[0]
		churn = c.KubeProxy
		for _, smp := range c.Samples {
			for k, v := range smp.NodeLatencyNs {
				if v >= 0 && k < len(c.ProbeNodes) {
					name := fmt.Sprintf("node-%d", c.ProbeNodes[k])
					nodeDP[name] = append(nodeDP[name], float64(v)/1e9)
					allDP = append(allDP, float64(v)/1e9)
				}
			}
		}
		if len(c.ProbeNodes) > 0 {
			names := make([]string, len(c.ProbeNodes))
			for i, n := range c.ProbeNodes {
				names[i] = fmt.Sprintf("node-%d", n)
			}
			sum.Notes = appendNote(sum.Notes, fmt.Sprintf("%s: the churn probes dialled from client pods on %d nodes (%s); each change was followed on each of them", label, len(names), strings.Join(names, ", ")))
		}
	}
	delivery := map[string][]float64{}
	var allDelivery []float64
	for _, d := range kp.WatchDelivery {
		for _, v := range d.DelayNs {
			if v >= 0 {
				delivery[d.Node] = append(delivery[d.Node], float64(v)/1e9)
				allDelivery = append(allDelivery, float64(v)/1e9)
			}
		}
	}
	prog := map[string]KubeProxyHistogram{}
	churnEvents := map[string]float64{}
	if churn != nil {
		prog = NodeProgramming(churn)
		churnEvents["node-0"] = churn.Events
		for _, n := range churn.Nodes {
			churnEvents[n.Node] = n.Events
			if n.Unsettled != "" || n.Err != "" {
				sum.Notes = appendNote(sum.Notes, label+": "+n.Node+": "+joinNonEmpty(n.Unsettled, n.Err))
			}
		}
	}
	var firsts []float64
	var cpu, rss int64
	for _, n := range kp.Nodes {
		if n.FirstSyncNs > 0 {
			firsts = append(firsts, float64(n.FirstSyncNs)/1e9)
		}
		cpu += n.CPUNs + n.ChildCPUNs
		rss += n.PeakRSSBytes
		if n.Err != "" {
			sum.Notes = appendNote(sum.Notes, label+": "+n.Node+": "+n.Err)
		}
		h, hasProg := prog[n.Node]
		pn, p50, p99 := Missing(), Missing(), Missing()
		if hasProg {
			pn, p50, p99 = Int(int(h.Count)), ms(h.Quantile(0.5)), ms(h.Quantile(0.99))
		}
		ev := Missing()
		if v, ok := churnEvents[n.Node]; ok {
			ev = Num(v, "%.0f")
		}
		d := delivery[n.Node]
		dmed, dmax := Missing(), Missing()
		if len(d) > 0 {
			dmed, dmax = ms(sortedQuantile(0.5, d)), ms(slices.Max(d))
		}
		first := Missing()
		if n.FirstSyncNs > 0 {
			first = Num(float64(n.FirstSyncNs)/1e9, "%.2f")
		}
		dn, d50, d99 := Missing(), Missing(), Missing()
		if v := nodeDP[n.Node]; len(v) > 0 {
			dn, d50, d99 = Int(len(v)), ms(sortedQuantile(0.5, v)), ms(sortedQuantile(0.99, v))
		}
		_ = tab.AddRow(label, Text(n.Node), first, sec(n.CPUNs), sec(n.ChildCPUNs), mib(n.PeakRSSBytes), Int(int(n.Syncs)),
			Num(n.ServiceEvents, "%.0f"), Num(n.EndpointSliceEvents, "%.0f"), ev, pn, p50, p99, dn, d50, d99, dmed, dmax)
	}
	slices.Sort(firsts)
	ff, fm, fl := Missing(), Missing(), Missing()
	if len(firsts) > 0 {
		ff, fm, fl = Num(firsts[0], "%.2f"), Num(sortedQuantile(0.5, firsts), "%.2f"), Num(firsts[len(firsts)-1], "%.2f")
	}
	if len(firsts) < len(kp.Nodes) {
		sum.Notes = appendNote(sum.Notes, fmt.Sprintf("%s: %d of %d nodes finished a first sync", label, len(firsts), len(kp.Nodes)))
	}
	pn, p50, p99, worst, worst99 := Missing(), Missing(), Missing(), Missing(), Missing()
	if len(prog) > 0 {
		names := make([]string, 0, len(prog))
		hs := make([]KubeProxyHistogram, 0, len(prog))
		for name := range prog {
			names = append(names, name)
		}
		slices.SortFunc(names, nodeOrder)
		w, wq := "", math.Inf(-1)
		for _, name := range names {
			h := prog[name]
			hs = append(hs, h)
			if q := h.Quantile(0.99); !math.IsNaN(q) && q > wq {
				w, wq = name, q
			}
		}
		all := AddHistograms(hs...)
		pn, p50, p99 = Int(int(all.Count)), ms(all.Quantile(0.5)), ms(all.Quantile(0.99))
		if w != "" {
			worst, worst99 = Text(w), ms(wq)
		}
	}
	dp50, dp99, dpw, dpw99 := Missing(), Missing(), Missing(), Missing()
	if len(allDP) > 0 {
		dp50, dp99 = ms(sortedQuantile(0.5, allDP)), ms(sortedQuantile(0.99, allDP))
		w, wq := "", math.Inf(-1)
		names := make([]string, 0, len(nodeDP))
		for name := range nodeDP {
			names = append(names, name)
		}
		slices.SortFunc(names, nodeOrder)
		for _, name := range names {
			if q := sortedQuantile(0.99, nodeDP[name]); q > wq {
				w, wq = name, q
			}
		}
		dpw, dpw99 = Text(w), ms(wq)
	}
	apiChurn, etcdChurn := Missing(), Missing()
	if churn != nil && (churn.APIServerCPUNs > 0 || churn.EtcdCPUNs > 0) {
		apiChurn, etcdChurn = sec(churn.APIServerCPUNs), sec(churn.EtcdCPUNs)
	}
	api, etcd, apiRSS, etcdRSS := Missing(), Missing(), Missing(), Missing()
	if cp := kp.ControlPlane; cp != nil {
		api, etcd, apiRSS, etcdRSS = sec(cp.APIServerCPUNs), sec(cp.EtcdCPUNs), mib(cp.APIServerPeakRSSBytes), mib(cp.EtcdPeakRSSBytes)
		if cp.WatchEventsErr != "" {
			sum.Notes = appendNote(sum.Notes, label+": "+cp.WatchEventsErr)
		}
		if len(cp.WatchEvents) > 0 {
			sum.Notes = appendNote(sum.Notes, label+": kube-apiserver's apiserver_watch_events_total by resource at the row's end (every watcher): "+watchEventsText(cp.WatchEvents))
		}
	}
	wd50, wd99 := Missing(), Missing()
	if len(allDelivery) > 0 {
		wd50, wd99 = ms(sortedQuantile(0.5, allDelivery)), ms(sortedQuantile(0.99, allDelivery))
	}
	wrel := Missing()
	if rel, _, ok := WatchDelayOf(kp.WatchDelivery); ok {
		wrel = Num(float64(rel)/1e6, "%.1f")
	}
	_ = sum.AddRow(label, Int(len(kp.Nodes)), ff, fm, fl, pn, p50, p99, worst, worst99, dp50, dp99, dpw, dpw99,
		apiChurn, etcdChurn, api, etcd, apiRSS, etcdRSS, sec(cpu), mib(rss), wd50, wd99, wrel)
	return []Section{sum, tab}
}

// nodeOrder sorts "node-2" before "node-10".
func nodeOrder(a, b string) int {
	na, ea := strconv.Atoi(strings.TrimPrefix(a, "node-"))
	nb, eb := strconv.Atoi(strings.TrimPrefix(b, "node-"))
	if ea != nil || eb != nil {
		if a < b {
			return -1
		}
		if a > b {
			return 1
		}
		return 0
	}
	return na - nb
}

func joinNonEmpty(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// watchEventsText lists watch events by resource, largest first:
// "endpointslices 61234, services 20480".
func watchEventsText(ev map[string]float64) string {
	kinds := make([]string, 0, len(ev))
	for k := range ev {
		kinds = append(kinds, k)
	}
	slices.SortFunc(kinds, func(a, b string) int {
		if ev[a] != ev[b] {
			if ev[a] > ev[b] {
				return -1
			}
			return 1
		}
		if a < b {
			return -1
		}
		return 1
	})
	out := ""
	for i, k := range kinds {
		if i > 0 {
			out += ", "
		}
		name := k
		if name == "" {
			name = "(no kind)"
		}
		out += fmt.Sprintf("%s %.0f", name, ev[k])
	}
	return out
}

// WatchDelayOf is the mean watch delivery delay of every node's samples
// relative to node-0's sample of the same write (the sim's sim.watchDelay:
// the mean extra delay of a node over node 0, which has none), and over
// every node's own samples from the write (absolute); ok is false without
// two nodes' samples. Samples a node missed (-1) are left out.
func WatchDelayOf(ds []measure.WatchDelivery) (relative, absolute time.Duration, ok bool) {
	var base []int64
	for _, d := range ds {
		if d.Node == "node-0" {
			base = d.DelayNs
		}
	}
	var rel, abs []float64
	for _, d := range ds {
		for i, v := range d.DelayNs {
			if v < 0 {
				continue
			}
			abs = append(abs, float64(v))
			if d.Node != "node-0" && i < len(base) && base[i] >= 0 {
				rel = append(rel, float64(v-base[i]))
			}
		}
	}
	if len(rel) == 0 {
		return 0, 0, false
	}
	return time.Duration(stat.Mean(rel, nil)), time.Duration(stat.Mean(abs, nil)), true
}

// sortedQuantile is quantileOf over a sorted copy of xs (gonum's
// stat.Quantile wants sorted input).
func sortedQuantile(q float64, xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return quantileOf(q, s)
}
