package reports

import (
	"fmt"
	"math"
	"strings"

	"gonum.org/v1/gonum/stat/distuv"
)

// shareAlpha is the significance below which an observed same-node or
// same-zone count is taken to differ from a documented share strictly
// between 0 and 1 (two-sided binomial test; a topology-aware run makes
// about a hundred such tests, so about 1% of runs show one by chance)
const shareAlpha = 1e-4

// shareDiffers says how k of n connections differ from the documented
// share p ("" when they do not): a share of 0 or 1 must be met exactly
// (kube-proxy filters the endpoints, it does not weigh them); another
// share is judged by a two-sided binomial test at shareAlpha (gonum's
// distuv.Binomial), since each connection picks an endpoint at random.
func shareDiffers(what string, k, n int, p float64) string {
	if n == 0 {
		return ""
	}
	obs := float64(k) / float64(n)
	switch {
	case p >= 1 || p <= 0:
		if obs != p {
			return fmt.Sprintf("%s share %.2f, documented %.0f", what, obs, p)
		}
		return ""
	}
	b := distuv.Binomial{N: float64(n), P: p}
	lo := b.CDF(float64(k))
	hi := 1.0
	if k > 0 {
		hi = 1 - b.CDF(float64(k-1))
	}
	if pv := math.Min(1, 2*math.Min(lo, hi)); pv < shareAlpha {
		return fmt.Sprintf("%s share %.2f, documented %.2f (binomial p=%.1g)", what, obs, p, pv)
	}
	return ""
}

// sharesDiffer checks a topology cell's same-node and same-zone counts
// against Expected.SameNode and SameZone ("" when they agree or the cell
// is no topology cell).
func (c ServiceCell) sharesDiffer() string {
	var out []string
	if c.Expected.SameNode != nil {
		if d := shareDiffers("same-node", c.SameNode, c.OK, *c.Expected.SameNode); d != "" {
			out = append(out, d)
		}
	}
	if c.Expected.SameZone != nil {
		if d := shareDiffers("same-zone", c.SameZone, c.OK, *c.Expected.SameZone); d != "" {
			out = append(out, d)
		}
	}
	return strings.Join(out, "; ")
}

// distributionLabel is a cell's trafficDistribution as reports show it.
func distributionLabel(d string) string {
	if d == "" {
		return "none"
	}
	return d
}

// TopologySections is the topology-aware routing part of the
// serviceTypes phase's report (its cells with documented shares: cluster
// IP cells of a scenario with topology.zones): per row and
// trafficDistribution, the share of answered connections that stayed on
// the client's node and in its zone, pooled over the clients, beside the
// documented share (the mean of the cells' documented shares, weighted by
// their answered connections); then one row per cell. Nil when no cell
// has documented shares.
func TopologySections(st *ServiceTypes) []Section {
	if st == nil {
		return nil
	}
	sum := Section{Phase: "serviceTypes", Title: "topology-aware routing: connections kept on the client's node and zone", Scope: "run",
		Intro: "Per mode, implementation and trafficDistribution, the share of cluster IP connections (from every pod and node client) that landed on an endpoint " +
			"of the client's own node and of its zone, pooled over the clients, against the documented share: with PreferSameNode only the node's endpoints, else " +
			"its zone's, else every endpoint; with PreferClose or PreferSameZone the zone's, else every endpoint; with none every endpoint " +
			"(Services: traffic distribution; KEP-3015; kube-proxy pkg/proxy/topology.go). The EndpointSlice hints were written by the testbed as the " +
			"EndpointSlice controller writes them (kube-controller-manager is not in the loop).",
		Columns: []Column{{Name: "trafficDistribution", Key: true}, {Name: "answered", Unit: "count", Figure: "topology.answered"},
			{Name: "same node", Unit: "ratio", Figure: "topology.samenode"}, {Name: "documented same node", Unit: "ratio", Figure: "topology.samenode.documented"},
			{Name: "same zone", Unit: "ratio", Figure: "topology.samezone"}, {Name: "documented same zone", Unit: "ratio", Figure: "topology.samezone.documented"},
			{Name: "cells differing", Unit: "count", Figure: "topology.differs"}}}
	cells := Section{Phase: "serviceTypes", Title: "topology-aware routing: per client", Scope: "run",
		Intro: "Each cluster IP cell of the topology: the client, its node's zone, the answered connections and the shares that stayed on its node and zone, " +
			"against the documented shares (0 and 1 must hold exactly; a share between is judged by a two-sided binomial test at p < 0.0001).",
		Columns: []Column{{Name: "service", Key: true}, {Name: "trafficDistribution"}, {Name: "client", Key: true}, {Name: "zone"},
			{Name: "answered", Unit: "count", Figure: "answered"}, {Name: "same node", Unit: "ratio", Figure: "samenode"}, {Name: "documented same node", Unit: "ratio"},
			{Name: "same zone", Unit: "ratio", Figure: "samezone"}, {Name: "documented same zone", Unit: "ratio"}, {Name: "differs"}}}
	type key struct{ row, dist string }
	type agg struct {
		ok, node, zone, differs int
		wantNode, wantZone      float64
	}
	pooled := map[key]*agg{}
	var order []key
	for _, c := range st.Cells {
		if c.Expected.SameNode == nil || c.Expected.SameZone == nil {
			continue
		}
		k := key{c.Row, distributionLabel(c.Distribution)}
		a := pooled[k]
		if a == nil {
			a = &agg{}
			pooled[k] = a
			order = append(order, k)
		}
		a.ok += c.OK
		a.node += c.SameNode
		a.zone += c.SameZone
		a.wantNode += *c.Expected.SameNode * float64(c.OK)
		a.wantZone += *c.Expected.SameZone * float64(c.OK)
		d := c.sharesDiffer()
		if d != "" {
			a.differs++
		}
		share := func(k int) Cell {
			if c.OK == 0 {
				return Text("—")
			}
			return Num(float64(k)/float64(c.OK), "%.2f")
		}
		cells.Rows = append(cells.Rows, SectionRow{Row: c.Row, Fail: d, Cells: []Cell{Text(c.Service), Text(distributionLabel(c.Distribution)), Text(c.Client), Text(c.Zone),
			Int(c.OK), share(c.SameNode), Num(*c.Expected.SameNode, "%.2f"), share(c.SameZone), Num(*c.Expected.SameZone, "%.2f"), Text(d)}})
	}
	if len(order) == 0 {
		return nil
	}
	for _, k := range order {
		a := pooled[k]
		ratio := func(v float64) Cell {
			if a.ok == 0 {
				return Text("—")
			}
			return Num(v/float64(a.ok), "%.2f")
		}
		r := SectionRow{Row: k.row, Cells: []Cell{Text(k.dist), Int(a.ok), ratio(float64(a.node)), ratio(a.wantNode), ratio(float64(a.zone)), ratio(a.wantZone), Int(a.differs)}}
		if a.differs > 0 {
			r.Fail = fmt.Sprintf("%d cells differ from the documented shares", a.differs)
		}
		sum.Rows = append(sum.Rows, r)
	}
	return []Section{sum, cells}
}
