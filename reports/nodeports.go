package reports

import "fmt"

// NodePortLookupSections is the nodePortLookup phase's report for one
// row: per position, the connect time through node-0's node port (over
// the services with node ports: their first, middle and last) beside the
// row's own lookup through cluster IPs at the same position (over every
// service), p50, p90 and p99 in ms, the ratio of the p50s, and the node
// port connections' errors. Nil when the row has no node port lookup.
func NodePortLookupSections(label string, mr *ModeResult) []Section {
	if mr == nil || len(mr.NodePortLookup) == 0 {
		return nil
	}
	sec := Section{Phase: "nodePortLookup", Title: "lookup.latency via node ports beside cluster IPs", Scope: "row",
		Intro: "TCP connect time from the client pods through node-0's address and each service's node port, at the first, middle and last of the services " +
			"that have node ports (the position in KUBE-NODEPORTS; iptables walks every KUBE-SERVICES rule before its last one jumps there), beside the same " +
			"row's connect time through the cluster IP at that position of every service, in one run.",
		Columns: []Column{{Name: "position", Key: true}, {Name: "node port service"}, {Name: "node port index", Unit: "count"},
			{Name: "node port p50", Unit: "ms", Figure: "nodeport.p50"}, {Name: "node port p90", Unit: "ms", Figure: "nodeport.p90"},
			{Name: "node port p99", Unit: "ms", Figure: "nodeport.p99"}, {Name: "node port errors", Unit: "count", Figure: "nodeport.errors"},
			{Name: "cluster IP service"}, {Name: "cluster IP p50", Unit: "ms", Figure: "clusterip.p50"}, {Name: "cluster IP p99", Unit: "ms", Figure: "clusterip.p99"},
			{Name: "p50 node port / cluster IP", Unit: "ratio", Figure: "nodeport.vsclusterip.p50"}}}
	ms := func(ns int64, n int) Cell {
		if n == 0 {
			return Missing()
		}
		return Num(float64(ns)/1e6, "%.3f")
	}
	for _, np := range mr.NodePortLookup {
		var cip *PositionResult
		for i := range mr.Lookup {
			if mr.Lookup[i].Position == np.Position {
				cip = &mr.Lookup[i]
			}
		}
		row := SectionRow{Row: label, Cells: []Cell{Text(np.Position), Text(np.Service), Int(np.Index),
			ms(np.Latency.P50, np.Latency.Count), ms(np.Latency.P90, np.Latency.Count), ms(np.Latency.P99, np.Latency.Count), Int(np.Errors)}}
		if cip == nil {
			row.Cells = append(row.Cells, Missing(), Missing(), Missing(), Missing())
		} else {
			ratio := Missing()
			if cip.Latency.P50 > 0 && np.Latency.Count > 0 {
				ratio = Num(float64(np.Latency.P50)/float64(cip.Latency.P50), "%.2f")
			}
			row.Cells = append(row.Cells, Text(cip.Service), ms(cip.Latency.P50, cip.Latency.Count), ms(cip.Latency.P99, cip.Latency.Count), ratio)
		}
		if np.Errors > 0 {
			row.Fail = fmt.Sprintf("%d node port connections failed", np.Errors)
		}
		sec.Rows = append(sec.Rows, row)
	}
	return []Section{sec}
}
