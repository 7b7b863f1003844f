package reports

import (
	"fmt"
	"sort"
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
}

// ClusterSections are a cluster run's sections: the cluster's facts per
// node, and lookup latency per node and position.
func ClusterSections(c *ClusterRun, row string) []Section {
	if c == nil {
		return nil
	}
	facts := Section{Phase: "cluster", Title: "cluster nodes", Scope: "run",
		Intro: fmt.Sprintf("The cluster at %s (%s), kube-proxy mode %s %s; every node with an agent.", c.Server, c.ServerVersion,
			orAbsent(c.KubeProxy.Mode, c.KubeProxy.Absent), c.KubeProxy.Version),
		Columns: []Column{{Name: "node", Key: true}, {Name: "kernel"}, {Name: "runtime"}, {Name: "kubelet"}, {Name: "agent"}}}
	lk := Section{Phase: "cluster", Title: "lookup latency per node", Scope: "row",
		Intro: "TCP connect time through the ClusterIP at each position, from each node's agent pod; direct is the same connections to an endpoint's pod IP (no proxy).",
		Columns: []Column{{Name: "node", Key: true}, {Name: "position", Key: true}, {Name: "p50", Unit: "ms", Figure: "lookup.p50"},
			{Name: "p99", Unit: "ms", Figure: "lookup.p99"}, {Name: "direct p50", Unit: "ms", Figure: "lookup.direct.p50"},
			{Name: "samples", Unit: "count"}, {Name: "errors", Unit: "count"}, {Name: "misses", Unit: "count"}}}
	nodes := append([]ClusterNode(nil), c.Nodes...)
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
			{Name: "p99", Unit: "ms", Figure: "programming.p99"}, {Name: "max", Unit: "ms", Figure: "programming.max"}}}
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
		prog.Rows = append(prog.Rows, SectionRow{Row: row, Cells: []Cell{Text(n.Name), Int(s.Count), msCell(s.P50), msCell(s.P99), msCell(s.Max)}})
	}
	if len(pooled) == 0 {
		return []Section{facts, lk}
	}
	s := Summarize(pooled)
	prog.Rows = append(prog.Rows, SectionRow{Row: row, Cells: []Cell{Text("all"), Int(s.Count), msCell(s.P50), msCell(s.P99), msCell(s.Max)}})
	prog.Notes = append(prog.Notes, "slowest node: "+slowest)
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
