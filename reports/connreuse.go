package reports

import (
	"fmt"
	"strings"
)

// ConnReusePass is one pass of the conn-reuse phase: connections made one
// at a time from a narrow source-port range, each closed by the client
// with FIN, so later connects reuse ports in TIME_WAIT (kubernetes#70747:
// IPVS with conn_reuse_mode=1 dropped such a SYN on kernels before 5.9,
// a 1 s retransmit stall).
type ConnReusePass struct {
	// ReuseMode is net.ipv4.vs.conn_reuse_mode of the pass (-1: not IPVS).
	ReuseMode int `json:"reuseMode"`
	// Kernel is the release the pass ran on (the guest's under uml).
	Kernel string `json:"kernel"`
	// Connections attempted, Ports in the source range, Errors failed;
	// Slow those whose connect took longer than 1 s; P50Ns, P99Ns and MaxNs
	// the connect times of the others; Endpoints the distinct endpoints
	// reached.
	Connections int   `json:"connections"`
	Ports       int   `json:"ports"`
	Errors      int   `json:"errors"`
	Slow        int   `json:"slow"`
	P50Ns       int64 `json:"p50Ns"`
	P99Ns       int64 `json:"p99Ns"`
	MaxNs       int64 `json:"maxNs"`
	Endpoints   int   `json:"endpoints"`
	// Reused counts connections from a source port used before in the
	// pass; ReusedSameEndpoint those that reached the same endpoint as that
	// port's previous connection (conn_reuse_mode=0 reuses the old IPVS
	// connection, so its real server; 1 schedules anew).
	Reused             int `json:"reused"`
	ReusedSameEndpoint int `json:"reusedSameEndpoint"`
	// ErrorSamples holds up to 3 errors.
	ErrorSamples []string `json:"errorSamples,omitempty"`
	// Sysctls are the node's net.ipv4.vs.* sysctls during an IPVS pass,
	// read back (node.sysctls with the pass's conn_reuse_mode).
	Sysctls map[string]string `json:"sysctls,omitempty"`
}

func writeConnReuseMarkdown(b *strings.Builder, r *Result) {
	have := false
	for _, m := range r.Modes {
		have = have || len(m.ConnReuse) > 0
	}
	if !have {
		return
	}
	b.WriteString("\n### connection reuse from TIME_WAIT (FIN close, narrow source-port range, kubernetes#70747)\n\n")
	b.WriteString("| mode | kernel | conn_reuse_mode | expire_nodest_conn | expire_quiescent_template | connections | source ports | errors | connects > 1 s | share > 1 s | p50 | p99 | max | endpoints reached | reused port → same endpoint |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, m := range r.Modes {
		name := m.Mode
		if m.Kernel == "uml" {
			name += " (uml)"
		}
		for _, p := range m.ConnReuse {
			mode := "-"
			if p.ReuseMode >= 0 {
				mode = fmt.Sprint(p.ReuseMode)
			}
			share := 0.0
			if p.Connections > 0 {
				share = float64(p.Slow) / float64(p.Connections)
			}
			same := "-"
			if p.Reused > 0 {
				same = fmt.Sprintf("%.1f%% of %d", 100*float64(p.ReusedSameEndpoint)/float64(p.Reused), p.Reused)
			}
			knob := func(k string) string {
				if v, ok := p.Sysctls["net.ipv4.vs."+k]; ok {
					return v
				}
				return "-"
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %d | %d | %d | %d | %.2f%% | %.2f ms | %.2f ms | %.1f ms | %d | %s |\n",
				name, p.Kernel, mode, knob("expire_nodest_conn"), knob("expire_quiescent_template"), p.Connections, p.Ports, p.Errors, p.Slow, 100*share, float64(p.P50Ns)/1e6, float64(p.P99Ns)/1e6, float64(p.MaxNs)/1e6, p.Endpoints, same)
		}
	}
}

// PhaseConnReuse is the conn-reuse phase's name (scenario block
// connReuse) in Section.Phase.
const PhaseConnReuse = "connReuse"

// ConnReuseSection is the conn-reuse phase's section for one result row
// (label: the ModeResult's row label): one row per pass of ps, keyed by
// its kernel and conn_reuse_mode ("-" when not IPVS), with
// writeConnReuseMarkdown's figures: the IPVS expire sysctls read back,
// connections, source ports, errors, connects over 1 s and their share
// (%), the other connects' p50/p99/max (ms), endpoints reached, and the
// share of reused source ports that reached the same endpoint again (%;
// Missing when no port was reused).
func ConnReuseSection(label string, ps []ConnReusePass) Section {
	s := Section{Phase: PhaseConnReuse, Title: "connection reuse from TIME_WAIT (FIN close, narrow source-port range, kubernetes#70747)", Scope: "row",
		Intro: "Connections made one at a time from a narrow source-port range, each closed by the client with FIN, so later " +
			"connects reuse ports in TIME_WAIT: IPVS with conn_reuse_mode=1 dropped such a SYN on kernels before 5.9, " +
			"a 1 s retransmit stall.",
		Columns: []Column{
			{Name: "kernel", Key: true},
			{Name: "conn_reuse_mode", Key: true},
			{Name: "expire_nodest_conn"},
			{Name: "expire_quiescent_template"},
			{Name: "connections", Unit: "count", Figure: "connections"},
			{Name: "source ports", Unit: "count", Figure: "ports"},
			{Name: "errors", Unit: "count", Figure: "errors"},
			{Name: "connects > 1 s", Unit: "count", Figure: "slow"},
			{Name: "share > 1 s", Unit: "%", Figure: "slow.share"},
			{Name: "p50", Unit: "ms", Figure: "connect.p50"},
			{Name: "p99", Unit: "ms", Figure: "connect.p99"},
			{Name: "max", Unit: "ms", Figure: "connect.max"},
			{Name: "endpoints reached", Unit: "count", Figure: "endpoints"},
			{Name: "reused ports", Unit: "count", Figure: "reused"},
			{Name: "reused port → same endpoint", Unit: "%", Figure: "reused.sameendpoint"},
		}}
	msc := func(ns int64, f string) Cell { return Num(float64(ns)/1e6, f) }
	for _, p := range ps {
		mode := Missing()
		if p.ReuseMode >= 0 {
			mode = Text(fmt.Sprint(p.ReuseMode))
		}
		knob := func(k string) Cell {
			if v, ok := p.Sysctls["net.ipv4.vs."+k]; ok {
				return Text(v)
			}
			return Missing()
		}
		share := 0.0
		if p.Connections > 0 {
			share = 100 * float64(p.Slow) / float64(p.Connections)
		}
		same := Missing()
		if p.Reused > 0 {
			same = Num(100*float64(p.ReusedSameEndpoint)/float64(p.Reused), "%.1f")
		}
		s.Rows = append(s.Rows, SectionRow{Row: label, Cells: []Cell{Text(p.Kernel), mode, knob("expire_nodest_conn"), knob("expire_quiescent_template"),
			Int(p.Connections), Int(p.Ports), Int(p.Errors), Int(p.Slow), Num(share, "%.2f"),
			msc(p.P50Ns, "%.2f"), msc(p.P99Ns, "%.2f"), msc(p.MaxNs, "%.1f"), Int(p.Endpoints), Int(p.Reused), same}})
	}
	return s
}
