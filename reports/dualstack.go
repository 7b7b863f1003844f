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
	// Shared says one process programs both families (a kube-proxy row:
	// one kube-proxy runs an IPv4 and an IPv6 proxier over one first
	// sync): each family's Sync is that first sync seen from its own
	// data plane, and the CPU is the process's, counted in IPv4's.
	Shared bool `json:"shared,omitempty"`
}

// SyncSample is one full sync: wall and CPU time in ns and the objects
// programmed (measure.SyncStats' figures).
type SyncSample struct {
	WallNs  int64 `json:"wallNs"`
	CPUNs   int64 `json:"cpuNs"`
	Objects int   `json:"objects"`
	// KubeProxyNs is a kube-proxy row's own full-sync duration of the
	// family (kubeproxy_sync_full_proxy_rules_duration_seconds with its
	// ip_family label); 0 for builtin.
	KubeProxyNs int64 `json:"kubeProxyNs,omitempty"`
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
	// Every row's section has the same columns (the report merges the
	// rows' sections of one title into one table): kube-proxy's own sync
	// metric is "-" on a builtin row.
	shared := false
	for _, f := range ds.Families {
		shared = shared || f.Shared
	}
	sec := Section{Phase: "dualStack", Title: "dual-stack: sync and lookup per IP family", Scope: "row",
		Intro: fmt.Sprintf("Each family's proxier of the row (IPv6 addresses are the RFC 6052 twins of the IPv4 plan in %s, inside 2001:2::/48, RFC 5180): "+
			"its full sync from empty (median of the syncs) and the connect time through that family's ClusterIPs, %d connections per position per family, the families back to back.", ds.IPv6Prefix, ds.Connections),
		Columns: []Column{{Name: "family", Key: true}, {Name: "synced", Unit: "bool"}, {Name: "sync.full.wall", Unit: "ms"}, {Name: "sync.full.cpu", Unit: "ms"}, {Name: "objects", Unit: "count"},
			{Name: "kube-proxy sync.full", Unit: "ms"}},
	}
	if shared {
		sec.Notes = append(sec.Notes, label+": one kube-proxy programs both families (an IPv4 and an IPv6 proxier) from one first sync over a dual-stack control plane: "+
			"each family's sync.full.wall runs from the API objects created to that family's probed ServicePorts answering, kube-proxy sync.full is its own full-sync metric for the family (ip_family label), "+
			"and the CPU is the process's for both, shown on IPv4")
	}
	for _, p := range positions {
		sec.Columns = append(sec.Columns, Column{Name: p + ".p50", Unit: "ms", Figure: "lookup." + p + ".p50"}, Column{Name: p + ".p99", Unit: "ms", Figure: "lookup." + p + ".p99"}, Column{Name: p + ".errors", Unit: "count"})
	}
	for _, f := range ds.Families {
		row := SectionRow{Row: label, Cells: []Cell{Text(f.Family), Bool(f.Synced)}}
		if len(f.Sync) > 0 {
			walls, cpus, own := make([]float64, len(f.Sync)), make([]float64, len(f.Sync)), make([]float64, len(f.Sync))
			for i, s := range f.Sync {
				walls[i], cpus[i], own[i] = float64(s.WallNs)/1e6, float64(s.CPUNs)/1e6, float64(s.KubeProxyNs)/1e6
			}
			cpu := Num(median(cpus), "%.1f")
			if f.Shared && median(cpus) == 0 {
				cpu = Text("-") // counted in the other family's
			}
			kp := Text("-") // builtin: no kube-proxy metric
			objects := Int(f.Sync[len(f.Sync)-1].Objects)
			if f.Shared {
				kp = Num(median(own), "%.1f")
				if median(own) == 0 {
					kp = Text("not observed") // its family's sync metric never showed within the first sync's bound
				}
				if f.Sync[len(f.Sync)-1].Objects == 0 {
					objects = Text("not read") // a kube-proxy row's IPVS objects are not read back
				}
			}
			row.Cells = append(row.Cells, Num(median(walls), "%.1f"), cpu, objects, kp)
		} else {
			row.Cells = append(row.Cells, Text("-"), Text("-"), Text("-"), Text("-"))
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
