package reports

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/gonum/stat"
)

// ServiceTypes is the serviceTypes phase's result: one ServiceCell per
// (mode × implementation × service × entry path × entry node × client
// location), the health check node port's answer per node, and who wrote
// the LoadBalancer ingress IPs (LoadBalancerWriter: the testbed; there is
// no cloud).
type ServiceTypes struct {
	Cells              []ServiceCell       `json:"cells"`
	Health             []HealthAnswer      `json:"health,omitempty"`
	LoadBalancerWriter string              `json:"loadBalancerWriter,omitempty"`
	Errors             []ServiceTypesError `json:"errors,omitempty"`
}

// ServiceTypesError is a (mode × implementation) whose cells could not be
// measured (its proxiers or kube-proxy did not start), with why.
type ServiceTypesError struct {
	Row    string `json:"row"`
	Err    string `json:"err"`
	Kernel string `json:"kernel,omitempty"`
}

// SetKernel records kernel (a run target's name: "host", "uml:6.12") on
// every cell, health answer and error of st, so a split run's merged
// matrix says where each row ran.
func (st *ServiceTypes) SetKernel(kernel string) {
	for i := range st.Cells {
		st.Cells[i].Kernel = kernel
	}
	for i := range st.Health {
		st.Health[i].Kernel = kernel
	}
	for i := range st.Errors {
		st.Errors[i].Kernel = kernel
	}
}

// Merge is st with o's cells, health answers and errors after its own
// (another kernel's target of the same run); either may be nil.
func (st *ServiceTypes) Merge(o *ServiceTypes) *ServiceTypes {
	if st == nil {
		return o
	}
	if o == nil {
		return st
	}
	st.Cells = append(st.Cells, o.Cells...)
	st.Health = append(st.Health, o.Health...)
	st.Errors = append(st.Errors, o.Errors...)
	if st.LoadBalancerWriter == "" {
		st.LoadBalancerWriter = o.LoadBalancerWriter
	}
	return st
}

// rowLabel is a row's label in the report: Row, with the kernel it ran
// on when that is not the host's (a split run's guest rows).
func rowLabel(row, kernel string) string {
	if kernel == "" || kernel == "host" {
		return row
	}
	return row + " on " + kernel
}

// ServiceCell is one cell of the matrix. Row is "iptables (builtin)" or
// "nftables (kube-proxy v1.37.2)"; Exposure the service's
// scenarios.Exposure.Label; Path clusterIP, nodePort, localhost,
// loadBalancer or externalIP; Entry the node the connection enters at
// ("node-1"; for clusterIP and localhost the client's own); Client
// "pod@node-0", "host@node-1" or "external". Sources counts the peer
// address each answered connection's backend saw: "client" (the client's
// own address), "node-N" (an address of node N: masqueraded) or the
// address; SameNode counts the answered connections that landed on an
// endpoint of the entry node. LatencyUs are the answered connections'
// connect times in µs (raw samples), Errors the failed ones by kind.
type ServiceCell struct {
	Row       string         `json:"row"`
	Service   string         `json:"service"`
	Exposure  string         `json:"exposure"`
	Path      string         `json:"path"`
	Entry     string         `json:"entry"`
	Client    string         `json:"client"`
	Attempts  int            `json:"attempts"`
	OK        int            `json:"ok"`
	Errors    map[string]int `json:"errors,omitempty"`
	Sources   map[string]int `json:"sources,omitempty"`
	SameNode  int            `json:"sameNode"`
	LatencyUs []float64      `json:"latencyUs,omitempty"`
	Expected  Expected       `json:"expected"`
	// Distribution is the service's trafficDistribution ("" none), Zone
	// the entry node's zone ("" without topology.zones), SameZone the
	// answered connections that landed on an endpoint in Zone
	// (topology.go).
	Distribution string `json:"trafficDistribution,omitempty"`
	Zone         string `json:"zone,omitempty"`
	SameZone     int    `json:"sameZone,omitempty"`
	// Kernel is the run target the cell was measured on ("host",
	// "uml:6.12"; "" in results before it was recorded).
	Kernel string `json:"kernel,omitempty"`
}

// Expected is the outcome the Kubernetes documentation gives a cell:
// whether it is reachable and whose address the backend sees (Source:
// "client" preserved, "node" masqueraded to a node's address, "" when
// unreachable or either), and Why, the documented rule it follows.
type Expected struct {
	Reachable bool   `json:"reachable"`
	Source    string `json:"source,omitempty"`
	Why       string `json:"why"`
	// SameNode and SameZone, when set, are the documented shares (0..1)
	// of connections landing on an endpoint of the entry node and of its
	// zone (topology-aware routing, topology.go); nil: not a topology cell.
	SameNode *float64 `json:"sameNode,omitempty"`
	SameZone *float64 `json:"sameZone,omitempty"`
}

// Reachable is the observed outcome: every attempt answered (true), none
// (false); a cell with some of each is reachable=false with Mixed.
func (c ServiceCell) Reachable() (ok, mixed bool) {
	return c.OK > 0 && c.OK == c.Attempts, c.OK > 0 && c.OK < c.Attempts
}

// Source is the observed source class: "client", "node" (every peer a
// node's address), "mixed", or "" with no answer.
func (c ServiceCell) Source() string {
	if len(c.Sources) == 0 {
		return ""
	}
	kinds := map[string]bool{}
	for k := range c.Sources {
		switch {
		case k == "client":
			kinds["client"] = true
		case strings.HasPrefix(k, "node-"):
			kinds["node"] = true
		default:
			kinds["other"] = true
		}
	}
	if len(kinds) > 1 {
		return "mixed"
	}
	for k := range kinds {
		return k
	}
	return ""
}

// Differs says how the observed outcome differs from Expected ("" when it
// does not).
func (c ServiceCell) Differs() string {
	ok, mixed := c.Reachable()
	switch {
	case mixed:
		return fmt.Sprintf("%d of %d answered", c.OK, c.Attempts)
	case ok != c.Expected.Reachable:
		if ok {
			return "reachable, documented unreachable"
		}
		return "unreachable, documented reachable"
	case ok && c.Expected.Source != "" && c.Source() != c.Expected.Source:
		return fmt.Sprintf("source %s, documented %s", c.Source(), c.Expected.Source)
	}
	return c.sharesDiffer()
}

// HealthAnswer is one node's answer on a service's healthCheckNodePort,
// asked by the external client: the HTTP status (0: no answer, Err says
// why) and the body's localEndpoints (-1: not kube-proxy's JSON).
type HealthAnswer struct {
	Row            string `json:"row"`
	Service        string `json:"service"`
	Node           string `json:"node"`
	Port           int    `json:"port"`
	Status         int    `json:"status"`
	LocalEndpoints int    `json:"localEndpoints"`
	// Want is what kube-proxy's health server gives that node: 200 with
	// the node's endpoint count, 503 with 0.
	WantStatus, WantLocal int
	Err                   string `json:"err,omitempty"`
	// Kernel is as ServiceCell's.
	Kernel string `json:"kernel,omitempty"`
}

// ServiceTypesSections is the phase's report: the matrix (one row per
// cell, its outcome beside the documented one), the cells where they
// differ per implementation, and the health check answers.
func ServiceTypesSections(st *ServiceTypes) []Section {
	if st == nil {
		return nil
	}
	m := Section{Phase: "serviceTypes", Title: "service types: entry path × client × policy", Scope: "run",
		Intro: "Per mode and implementation, every entry path of every service (its cluster IP; its node port on each node, and on 127.0.0.1 from the node itself; " +
			"its LoadBalancer and external IPs, the external client entering at each node, pods and nodes at their own) from every client location " +
			"(a pod on each node, each node's host network, the external client outside the cluster): reachability, connect time, whose address the backend saw " +
			"(client: the client's own; node-N: masqueraded to node N's address) and how many connections stayed on the entry node, against the outcome the Kubernetes " +
			"documentation gives (Services: traffic policies; Source IP tutorial; Virtual IPs and service proxies).",
		Columns: []Column{{Name: "service", Key: true}, {Name: "exposure"}, {Name: "path", Key: true}, {Name: "entry", Key: true}, {Name: "client", Key: true},
			{Name: "answered", Unit: "count", Figure: "answered"}, {Name: "attempts", Unit: "count", Figure: "attempts"}, {Name: "errors"},
			{Name: "connect p50", Unit: "ms", Figure: "connect.p50"}, {Name: "source seen"}, {Name: "same node", Unit: "ratio", Figure: "samenode"},
			{Name: "documented"}, {Name: "differs"}}}
	if st.LoadBalancerWriter != "" {
		m.Notes = append(m.Notes, "LoadBalancer ingress IPs were written into status.loadBalancer.ingress by "+st.LoadBalancerWriter+".")
	}
	for _, e := range st.Errors {
		m.Notes = append(m.Notes, rowLabel(e.Row, e.Kernel)+": error (its cells, if any, are those measured before it): "+e.Err)
	}
	diff := Section{Phase: "serviceTypes", Title: "service types: cells where observed and documented differ", Scope: "run",
		Intro:   "Each cell of the matrix whose outcome is not the documented one, with the implementations that show it.",
		Columns: []Column{{Name: "mode"}, {Name: "cell", Key: true}, {Name: "observed"}, {Name: "documented"}, {Name: "builtin"}, {Name: "kube-proxy"}}}
	type key struct{ mode, cell string }
	seen := map[key]map[string]string{}
	var order []key
	// measured[mode][impl]: the implementation has cells of the mode, so
	// "no" in the differences means it matched, not that it did not run.
	measured := map[string]map[string]bool{}
	implOf := func(row, kernel string) (mode, impl string) {
		mode, impl, _ = strings.Cut(row, " (")
		if strings.HasPrefix(impl, "kube-proxy") {
			return rowLabel(mode, kernel), "kube-proxy"
		}
		return rowLabel(mode, kernel), "builtin"
	}
	for _, c := range st.Cells {
		mode, impl := implOf(c.Row, c.Kernel)
		if measured[mode] == nil {
			measured[mode] = map[string]bool{}
		}
		measured[mode][impl] = true
	}
	for _, c := range st.Cells {
		ok, _ := c.Reachable()
		obs := "unreachable"
		if ok {
			obs = "reachable, source " + c.Source()
		}
		if _, mixed := c.Reachable(); mixed {
			obs = fmt.Sprintf("%d of %d answered", c.OK, c.Attempts)
		}
		doc := "unreachable"
		if c.Expected.Reachable {
			doc = "reachable"
			if c.Expected.Source != "" {
				doc += ", source " + c.Expected.Source
			}
		}
		doc += " (" + c.Expected.Why + ")"
		p50 := Text("—")
		if len(c.LatencyUs) > 0 {
			v := slices.Clone(c.LatencyUs)
			sort.Float64s(v)
			p50 = Num(stat.Quantile(0.5, stat.Empirical, v, nil)/1000, "%.3f")
		}
		same := Text("—")
		if c.OK > 0 {
			same = Num(float64(c.SameNode)/float64(c.OK), "%.2f")
		}
		d := c.Differs()
		row := SectionRow{Row: rowLabel(c.Row, c.Kernel), Cells: []Cell{Text(c.Service), Text(c.Exposure), Text(c.Path), Text(c.Entry), Text(c.Client),
			Int(c.OK), Int(c.Attempts), Text(errorsText(c.Errors)), p50, Text(sourcesText(c.Sources)), same, Text(doc), Text(d)}}
		if d != "" {
			row.Fail = d
			mode, impl := implOf(c.Row, c.Kernel)
			k := key{mode, c.Exposure + " · " + c.Path + " @" + c.Entry + " from " + c.Client}
			if seen[k] == nil {
				seen[k] = map[string]string{"observed": obs, "documented": doc}
				order = append(order, k)
			}
			seen[k][impl] = "yes (" + obs + ")"
		}
		m.Rows = append(m.Rows, row)
	}
	for _, k := range order {
		v := seen[k]
		for _, impl := range []string{"builtin", "kube-proxy"} {
			switch {
			case v[impl] != "":
			case measured[k.mode][impl]:
				v[impl] = "no"
			default:
				v[impl] = "not measured"
			}
		}
		diff.Rows = append(diff.Rows, SectionRow{Row: k.mode, Cells: []Cell{Text(k.mode), Text(k.cell), Text(v["observed"]), Text(v["documented"]), Text(v["builtin"]), Text(v["kube-proxy"])}})
	}
	if len(diff.Rows) == 0 {
		diff.Notes = append(diff.Notes, "Every cell measured matches the documented outcome.")
	}
	out := []Section{m, diff}
	if len(st.Health) > 0 {
		h := Section{Phase: "serviceTypes", Title: "service types: health check node port per node", Scope: "run",
			Intro: "The external client's GET on each LoadBalancer service's healthCheckNodePort at each node's address: HTTP status and the body's localEndpoints, " +
				"against kube-proxy's service health server (200 with the node's endpoint count, 503 when the node has none).",
			Columns: []Column{{Name: "service", Key: true}, {Name: "node", Key: true}, {Name: "port", Unit: "count"}, {Name: "status", Unit: "count", Figure: "health.status"},
				{Name: "localEndpoints", Unit: "count", Figure: "health.local"}, {Name: "want"}, {Name: "error"}}}
		for _, a := range st.Health {
			r := SectionRow{Row: rowLabel(a.Row, a.Kernel), Cells: []Cell{Text(a.Service), Text(a.Node), Int(a.Port), Int(a.Status), Int(a.LocalEndpoints),
				Text(fmt.Sprintf("%d, %d", a.WantStatus, a.WantLocal)), Text(a.Err)}}
			if a.Status != a.WantStatus || a.LocalEndpoints != a.WantLocal {
				r.Fail = fmt.Sprintf("answered %d with %d local endpoints, want %d with %d", a.Status, a.LocalEndpoints, a.WantStatus, a.WantLocal)
			}
			h.Rows = append(h.Rows, r)
		}
		out = append(out, h)
	}
	return out
}

func errorsText(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func sourcesText(m map[string]int) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
