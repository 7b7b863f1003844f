package reports

import (
	"fmt"
	"strings"
)

// DualStack is the dualStack phase's figures of one row: for each IP
// family of the dual-stack services, the row's proxier for that family
// (kube-proxy runs one per family; builtin runs one per family in the
// node as well), its full sync from empty and the lookup latency through
// that family's ClusterIPs at the scenario's positions, measured back to
// back with the same connection count so the families compare.
type DualStack struct {
	// Families are IPv4 then IPv6.
	Families []FamilyResult `json:"families"`
	// Connections per position per family.
	Connections int `json:"connections"`
	// IPv6Prefix is the /96 of the IPv6 twins (network.ipv6Prefix).
	IPv6Prefix string `json:"ipv6Prefix"`
}

// FamilyResult is one family of a DualStack.
type FamilyResult struct {
	// Family is "IPv4" or "IPv6".
	Family string `json:"family"`
	// Synced says whether the family's proxier programmed its services;
	// SyncError is its error when not (the other family goes on: one
	// family can fail to sync while the other works).
	Synced    bool   `json:"synced"`
	SyncError string `json:"syncError,omitempty"`
	// Sync is each full sync from empty (repetitions of them); for IPv4
	// the row's sync.full.
	Sync []SyncSample `json:"sync,omitempty"`
	// Lookup is the connect latency per position through the family's
	// ClusterIPs (direct to the family's pod addresses for none).
	Lookup []PositionResult `json:"lookup,omitempty"`
	// LookupError is why the family's traffic did not run.
	LookupError string `json:"lookupError,omitempty"`
}

// SyncSample is one full sync: wall and CPU time in ns and the objects
// programmed (measure.SyncStats' figures).
type SyncSample struct {
	WallNs  int64 `json:"wallNs"`
	CPUNs   int64 `json:"cpuNs"`
	Objects int   `json:"objects"`
}

// DualStackReport is the dualStack phase's section of one row: one table
// row per family with its sync status, median full sync wall and CPU
// time and objects, and per position the connect p50 and p99 with its
// errors. A family whose proxier failed to sync fails its row (junit).
func DualStackReport(label string, mr *ModeResult) []Section {
	ds := mr.DualStack
	if ds == nil {
		return nil
	}
	var positions []string
	for _, f := range ds.Families {
		for _, p := range f.Lookup {
			if !containsString(positions, p.Position) {
				positions = append(positions, p.Position)
			}
		}
	}
	sec := Section{Phase: "dualStack", Title: "dual-stack: sync and lookup per IP family", Scope: "row",
		Intro: fmt.Sprintf("Each family's proxier of the row (IPv6 addresses are the RFC 6052 twins of the IPv4 plan in %s, inside 2001:2::/48, RFC 5180): "+
			"its full sync from empty (median of the syncs) and the connect time through that family's ClusterIPs, %d connections per position per family, the families back to back.", ds.IPv6Prefix, ds.Connections),
		Columns: []Column{{Name: "family", Key: true}, {Name: "synced", Unit: "bool"}, {Name: "sync.full.wall", Unit: "ms"}, {Name: "sync.full.cpu", Unit: "ms"}, {Name: "objects", Unit: "count"}},
	}
	for _, p := range positions {
		sec.Columns = append(sec.Columns, Column{Name: p + ".p50", Unit: "ms", Figure: "lookup." + p + ".p50"}, Column{Name: p + ".p99", Unit: "ms", Figure: "lookup." + p + ".p99"}, Column{Name: p + ".errors", Unit: "count"})
	}
	for _, f := range ds.Families {
		row := SectionRow{Row: label, Cells: []Cell{Text(f.Family), Bool(f.Synced)}}
		if len(f.Sync) > 0 {
			walls, cpus := make([]float64, len(f.Sync)), make([]float64, len(f.Sync))
			for i, s := range f.Sync {
				walls[i], cpus[i] = float64(s.WallNs)/1e6, float64(s.CPUNs)/1e6
			}
			row.Cells = append(row.Cells, Num(median(walls), "%.1f"), Num(median(cpus), "%.1f"), Int(f.Sync[len(f.Sync)-1].Objects))
		} else {
			row.Cells = append(row.Cells, Text("-"), Text("-"), Text("-"))
		}
		for _, p := range positions {
			var pr *PositionResult
			for i := range f.Lookup {
				if f.Lookup[i].Position == p {
					pr = &f.Lookup[i]
				}
			}
			if pr == nil || pr.Latency.Count == 0 {
				row.Cells = append(row.Cells, Text("-"), Text("-"), Text("-"))
				continue
			}
			row.Cells = append(row.Cells, Num(float64(pr.Latency.P50)/1e6, "%.3f"), Num(float64(pr.Latency.P99)/1e6, "%.3f"), Int(pr.Errors))
		}
		var why []string
		if !f.Synced {
			why = append(why, f.Family+" did not sync: "+f.SyncError)
		}
		if f.LookupError != "" {
			why = append(why, f.Family+" traffic: "+f.LookupError)
		}
		row.Fail = strings.Join(why, "; ")
		if row.Fail != "" {
			sec.Notes = append(sec.Notes, label+": "+row.Fail)
		}
		sec.Rows = append(sec.Rows, row)
	}
	return []Section{sec}
}
