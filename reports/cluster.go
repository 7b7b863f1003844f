package reports

import (
	"fmt"
	"sort"
	"time"
)

// EngineCluster is Result.Engine of a cluster-engine run (docs/cluster.md).
const EngineCluster = "cluster"

// ClusterRun is what a cluster-engine run records of the cluster and
// measured per node (Result.Cluster).
type ClusterRun struct {
	// Server is the API server's URL, Context the kubeconfig context.
	Server  string `json:"server"`
	Context string `json:"context,omitempty"`
	// ServerVersion is the API server's gitVersion.
	ServerVersion string `json:"serverVersion,omitempty"`
	// Namespace is the run's namespace (proxybench-<runid>).
	Namespace string `json:"namespace"`
	// Image is the agent image the pods ran.
	Image string `json:"image"`
	// KubeProxy is what the cluster's kube-proxy ConfigMap and DaemonSet
	// (kube-system/kube-proxy) say; Absent says why not when they could
	// not be read (no kube-proxy: another service proxy, or none).
	KubeProxy ClusterKubeProxy `json:"kubeProxy"`
	// Nodes are the nodes with an agent, sorted by name.
	Nodes []ClusterNode `json:"nodes"`
	// Pool are the backend pods' addresses every service's endpoints
	// were taken from.
	Pool []string `json:"pool"`
	// ModeSwitch is what --allow-mode-switch did (nil without it).
	ModeSwitch *ClusterModeSwitch `json:"modeSwitch,omitempty"`
	// Modes are the per-node figures of each mode measured after a switch
	// (the cluster's own mode's are in Nodes), in the order measured.
	Modes []ClusterModeRun `json:"modes,omitempty"`
}

// ClusterModeSwitch records a run's mode switches: the original
// configuration saved before the first change, each switch, and the
// restore at the end (also on failure and SIGINT).
type ClusterModeSwitch struct {
	// Original is ConfigMap kube-system/kube-proxy's config.conf before
	// the first change, OriginalMode its mode.
	Original     string          `json:"original"`
	OriginalMode string          `json:"originalMode"`
	Switches     []ClusterSwitch `json:"switches"`
	// Restored is true once the original configuration was written back
	// and every node reported the original mode again; RestoreError says
	// what failed otherwise.
	Restored     bool   `json:"restored"`
	RestoreError string `json:"restoreError,omitempty"`
}

// ClusterSwitch is one switch: From and To modes, when it started, and
// the time until every node's kube-proxy reported To on /proxyMode
// (ReadyNs), or the error.
type ClusterSwitch struct {
	From    string    `json:"from"`
	To      string    `json:"to"`
	Started time.Time `json:"started"`
	ReadyNs int64     `json:"readyNs,omitempty"`
	// RolledDaemonSet: DaemonSet kube-system/kube-proxy was rolled (false:
	// the cluster has none; its kube-proxies follow the ConfigMap
	// otherwise, as `proxybench cluster up`'s holder restarts them).
	RolledDaemonSet bool   `json:"rolledDaemonSet"`
	Restore         bool   `json:"restore,omitempty"`
	Error           string `json:"error,omitempty"`
}

// ClusterModeRun is one switched-to mode's per-node figures, as Nodes
// holds the cluster's own mode's.
type ClusterModeRun struct {
	Mode  string        `json:"mode"`
	Row   string        `json:"row"`
	Nodes []ClusterNode `json:"nodes"`
}

// ClusterKubeProxy is the cluster's kube-proxy as its objects say.
type ClusterKubeProxy struct {
	// Mode is KubeProxyConfiguration.mode ("" in the config is the
	// platform default, iptables on Linux: recorded as "iptables").
	Mode string `json:"mode,omitempty"`
	// Version is the kube-proxy DaemonSet's image tag.
	Version string `json:"version,omitempty"`
	Image   string `json:"image,omitempty"`
	// Config is the ConfigMap's configuration as it stands (config.conf).
	Config string `json:"config,omitempty"`
	Absent string `json:"absent,omitempty"`
}

// ClusterNode is one node: its facts (Node.status.nodeInfo) and its
// agent's lookups per position (raw samples inside, as a row's Lookup).
type ClusterNode struct {
	Name             string           `json:"name"`
	Kernel           string           `json:"kernel"`
	OSImage          string           `json:"osImage,omitempty"`
	ContainerRuntime string           `json:"containerRuntime,omitempty"`
	Kubelet          string           `json:"kubelet,omitempty"`
	Agent            string           `json:"agent"` // the agent pod
	Lookup           []PositionResult `json:"lookup,omitempty"`
	// Direct are the same positions' connections straight to an
	// endpoint's pod IP (no proxy: the baseline, as mode none).
	Direct []PositionResult `json:"direct,omitempty"`
	// ProgrammingNs are the black-box programming latencies seen from
	// this node, in ns: from each EndpointSlice write to the agent's
	// first connection that reached the new endpoints.
	ProgrammingNs []int64 `json:"programmingNs,omitempty"`
	// ProgrammingOwn is kube-proxy's own
	// kubeproxy_network_programming_duration_seconds on this node over
	// the same changes (its growth between a scrape before and after),
	// read through the API server's node proxy; ProgrammingOwnAbsent says
	// why not where it could not be read.
	ProgrammingOwn       *KubeProxyHistogram `json:"programmingOwn,omitempty"`
	ProgrammingOwnAbsent string              `json:"programmingOwnAbsent,omitempty"`
	// SyncOwn is kube-proxy's kubeproxy_sync_proxy_rules_duration_seconds
	// (IPv4) on this node over the same changes: the syncs that
	// programmed them (absent with ProgrammingOwn).
	SyncOwn *KubeProxyHistogram `json:"syncOwn,omitempty"`
}

// ClusterSections are a cluster run's sections: the cluster's facts per
// node, and lookup latency per node and position.
// ClusterSections renders a cluster run: its nodes' facts, then per
// measured mode (row, the cluster's own mode, then each mode switched
// to) the lookups and programming latency per node, and the mode
// switches when there were any.
func ClusterSections(c *ClusterRun, row string) []Section {
	if c == nil {
		return nil
	}
	out := clusterModeSections(c, c.Nodes, row)
	for _, m := range c.Modes {
		for _, sec := range clusterModeSections(c, m.Nodes, m.Row) {
			if sec.Title == "cluster nodes" {
				continue
			}
			out = mergeSection(out, sec)
		}
	}
	if ms := c.ModeSwitch; ms != nil {
		sw := Section{Phase: "cluster", Title: "mode switches", Scope: "run",
			Intro:   fmt.Sprintf("--allow-mode-switch: mode set in ConfigMap kube-system/kube-proxy, the DaemonSet rolled, then every node's kube-proxy waited for until its /proxyMode reported the new mode (through the node proxy). The original configuration (mode %s) was saved in the result before the first change.", ms.OriginalMode),
			Columns: []Column{{Name: "switch", Key: true}, {Name: "from"}, {Name: "to"}, {Name: "every node reports it", Unit: "s", Figure: "modeSwitch.ready"}, {Name: "DaemonSet rolled"}, {Name: "error"}}}
		for i, x := range ms.Switches {
			name := fmt.Sprint(i + 1)
			if x.Restore {
				name += " (restore)"
			}
			ready := Text("-")
			if x.ReadyNs > 0 {
				ready = Num(time.Duration(x.ReadyNs).Seconds(), "%.1f")
			}
			sw.Rows = append(sw.Rows, SectionRow{Row: "cluster", Cells: []Cell{Text(name), Text(x.From), Text(x.To), ready, Text(fmt.Sprint(x.RolledDaemonSet)), Text(x.Error)}})
		}
		if ms.Restored {
			sw.Notes = append(sw.Notes, "the original configuration is restored: every node reports mode "+ms.OriginalMode+" again")
		} else {
			sw.Notes = append(sw.Notes, "NOT RESTORED: "+ms.RestoreError+"; the original configuration is in the result (cluster.modeSwitch.original)")
		}
		out = append(out, sw)
	}
	return out
}

// sumHistograms sums two histograms with the same bounds (a's empty: b).
func sumHistograms(a, b KubeProxyHistogram) KubeProxyHistogram {
	if len(a.Buckets) == 0 {
		b.Buckets = append([]Bucket(nil), b.Buckets...)
		return b
	}
	a.Count += b.Count
	a.SumSeconds += b.SumSeconds
	for i := range a.Buckets {
		if i < len(b.Buckets) && a.Buckets[i].LE == b.Buckets[i].LE {
			a.Buckets[i].Count += b.Buckets[i].Count
		}
	}
	return a
}

// ownMsCell is a histogram estimate in seconds as milliseconds.
func ownMsCell(s float64) Cell { return Num(s*1e3, "%.1f") }

func clusterModeSections(c *ClusterRun, nodes []ClusterNode, row string) []Section {
	facts := Section{Phase: "cluster", Title: "cluster nodes", Scope: "run",
		Intro: fmt.Sprintf("The cluster at %s (%s), kube-proxy mode %s %s; every node with an agent.", c.Server, c.ServerVersion,
			orAbsent(c.KubeProxy.Mode, c.KubeProxy.Absent), c.KubeProxy.Version),
		Columns: []Column{{Name: "node", Key: true}, {Name: "kernel"}, {Name: "runtime"}, {Name: "kubelet"}, {Name: "agent"}}}
	lk := Section{Phase: "cluster", Title: "lookup latency per node", Scope: "row",
		Intro: "TCP connect time through the ClusterIP at each position, from each node's agent pod; direct is the same connections to an endpoint's pod IP (no proxy).",
		Columns: []Column{{Name: "node", Key: true}, {Name: "position", Key: true}, {Name: "p50", Unit: "ms", Figure: "lookup.p50"},
			{Name: "p99", Unit: "ms", Figure: "lookup.p99"}, {Name: "direct p50", Unit: "ms", Figure: "lookup.direct.p50"},
			{Name: "samples", Unit: "count"}, {Name: "errors", Unit: "count"}, {Name: "misses", Unit: "count"}}}
	nodes = append([]ClusterNode(nil), nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for _, n := range nodes {
		facts.Rows = append(facts.Rows, SectionRow{Row: "cluster", Cells: []Cell{Text(n.Name), Text(n.Kernel), Text(n.ContainerRuntime), Text(n.Kubelet), Text(n.Agent)}})
		direct := map[string]PositionResult{}
		for _, d := range n.Direct {
			direct[d.Position] = d
		}
		for _, p := range n.Lookup {
			d := Text("")
			if dp, ok := direct[p.Position]; ok && dp.Latency.Count > 0 {
				d = Num(float64(dp.Latency.P50)/1e6, "%.3f")
			}
			lk.Rows = append(lk.Rows, SectionRow{Row: row, Cells: []Cell{Text(n.Name), Text(p.Position),
				Num(float64(p.Latency.P50)/1e6, "%.3f"), Num(float64(p.Latency.P99)/1e6, "%.3f"), d, Int(len(p.SamplesNs)), Int(p.Errors), Int(p.Misses)}})
		}
	}
	prog := Section{Phase: "cluster", Title: "programming latency per node", Scope: "row",
		Intro: "From an EndpointSlice write (its endpoints swapped to other pods) to the first connection from the node's agent that reached the new endpoints: black-box, per node; all pools every node's changes, slowest is the node with the highest p99.",
		Columns: []Column{{Name: "node", Key: true}, {Name: "changes", Unit: "count"}, {Name: "p50", Unit: "ms", Figure: "programming.p50"},
			{Name: "p99", Unit: "ms", Figure: "programming.p99"}, {Name: "max", Unit: "ms", Figure: "programming.max"},
			{Name: "kube-proxy's own p50", Unit: "ms", Figure: "programming.kubeproxy.p50"}, {Name: "kube-proxy's own p99", Unit: "ms", Figure: "programming.kubeproxy.p99"},
			{Name: "own mean", Unit: "ms", Figure: "programming.kubeproxy.mean"}, {Name: "own count", Unit: "count"},
			{Name: "kube-proxy sync mean", Unit: "ms", Figure: "programming.kubeproxy.sync.mean"}, {Name: "syncs", Unit: "count"}}}
	var own, syncs KubeProxyHistogram
	ownAll := true
	var pooled []int64
	slowest, slowP99 := "", int64(-1)
	for _, n := range nodes {
		if len(n.ProgrammingNs) == 0 {
			continue
		}
		s := Summarize(n.ProgrammingNs)
		pooled = append(pooled, n.ProgrammingNs...)
		if s.P99 > slowP99 {
			slowest, slowP99 = n.Name, s.P99
		}
		o50, o99, om, oc, sm, sc := Text("-"), Text("-"), Text("-"), Text("-"), Text("-"), Text("-")
		if h := n.ProgrammingOwn; h != nil {
			o50, o99, om, oc = ownMsCell(h.Quantile(0.5)), ownMsCell(h.Quantile(0.99)), ownMsCell(h.Mean()), Int(int(h.Count))
			own = sumHistograms(own, *h)
			if y := n.SyncOwn; y != nil {
				sm, sc = ownMsCell(y.Mean()), Int(int(y.Count))
				syncs = sumHistograms(syncs, *y)
			}
		} else {
			ownAll = false
			if n.ProgrammingOwnAbsent != "" {
				prog.Notes = append(prog.Notes, fmt.Sprintf("%s: kube-proxy's own histogram absent: %s", n.Name, n.ProgrammingOwnAbsent))
			}
		}
		prog.Rows = append(prog.Rows, SectionRow{Row: row, Cells: []Cell{Text(n.Name), Int(s.Count), msCell(s.P50), msCell(s.P99), msCell(s.Max), o50, o99, om, oc, sm, sc}})
	}
	if len(pooled) == 0 {
		return []Section{facts, lk}
	}
	s := Summarize(pooled)
	o50, o99, om, oc, sm, sc := Text("-"), Text("-"), Text("-"), Text("-"), Text("-"), Text("-")
	if ownAll && own.Count > 0 {
		o50, o99, om, oc = ownMsCell(own.Quantile(0.5)), ownMsCell(own.Quantile(0.99)), ownMsCell(own.Mean()), Int(int(own.Count))
	}
	if ownAll && syncs.Count > 0 {
		sm, sc = ownMsCell(syncs.Mean()), Int(int(syncs.Count))
	}
	prog.Rows = append(prog.Rows, SectionRow{Row: row, Cells: []Cell{Text("all"), Int(s.Count), msCell(s.P50), msCell(s.P99), msCell(s.Max), o50, o99, om, oc, sm, sc}})
	prog.Notes = append(prog.Notes, "each change waits until every node's kube-proxy is idle (its minSyncPeriod over since its last sync ended, by kubeproxy_sync_proxy_rules_last_timestamp_seconds), as the namespace engine's sync.incremental does")
	if ownAll {
		prog.Notes = append(prog.Notes, "kube-proxy's own: kubeproxy_network_programming_duration_seconds over the same changes, scraped per node through the API server's node proxy (p50/p99 bucket estimates, as histogram_quantile; the mean exact, sum over count); sync: kubeproxy_sync_proxy_rules_duration_seconds over them")
	}
	prog.Notes = append(prog.Notes, fmt.Sprintf("slowest node (%s): %s", row, slowest))
	return []Section{facts, lk, prog}
}

func msCell(ns int64) Cell { return Num(float64(ns)/1e6, "%.3f") }

func orAbsent(v, absent string) string {
	if v != "" {
		return v
	}
	if absent != "" {
		return "unknown (" + absent + ")"
	}
	return "unknown"
}
