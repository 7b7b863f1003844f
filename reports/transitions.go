package reports

import (
	"fmt"
	"strings"
	"time"
)

// Transition is what a fixed-source-port UDP client saw across one
// endpoint transition of the DNS-like service (kubernetes#48370): the
// client sends one datagram every interval and waits for the echo, which
// names the endpoint that answered.
type Transition struct {
	// Name is "0to1-new-service" (the service appears with one endpoint
	// while the client already sends to its ClusterIP), "endpoint-removal"
	// (the endpoint the client's flow uses is removed, another stays) or
	// "restart-1to0to1" (the only endpoint goes, the service sits at 0,
	// a new endpoint at a new address comes).
	Name string `json:"name"`
	// Cleanup is whether the mode's stale UDP conntrack cleanup ran (as
	// kube-proxy); false is the comparison run without it.
	Cleanup bool `json:"cleanup"`
	// RecoveryNs is the time from the end of the sync that made the change
	// to the first answer from a live endpoint; -1: none within Observe.
	RecoveryNs int64         `json:"recoveryNs"`
	Observe    time.Duration `json:"observeNs"`
	// Sent counts the datagrams sent after the change; Live the answers
	// from a live endpoint, Stale those from a removed endpoint's address
	// (the flow still DNATed to it), Lost those without an answer
	// (black-holed, dropped or refused).
	Sent  int `json:"sent"`
	Live  int `json:"live"`
	Stale int `json:"stale"`
	Lost  int `json:"lost"`
	// ConntrackDeleted is the entries the change's sync deleted;
	// FlowsBefore the client's UDP flows in the node's conntrack table just
	// before it, as "reply source" addresses.
	ConntrackDeleted int      `json:"conntrackDeleted"`
	FlowsBefore      []string `json:"flowsBefore,omitempty"`
	// SyncNs is the wall time of that sync.
	SyncNs int64 `json:"syncNs"`
}

// DNSCheck counts answers through both ServicePorts of the DNS-like
// service (53/UDP + 53/TCP, one endpoint): datagrams and connections sent,
// and those answered by the endpoint.
type DNSCheck struct {
	UDPSent int `json:"udpSent"`
	UDPOK   int `json:"udpOK"`
	TCPSent int `json:"tcpSent"`
	TCPOK   int `json:"tcpOK"`
}

// Recovery formats RecoveryNs: "0.004 s" or "never (3 s)".
func (t Transition) Recovery() string {
	if t.RecoveryNs < 0 {
		return fmt.Sprintf("never (%s)", t.Observe)
	}
	return fmt.Sprintf("%.3f s", float64(t.RecoveryNs)/1e9)
}

func writeTransitionsMarkdown(b *strings.Builder, r *Result) {
	have := false
	for _, m := range r.Modes {
		have = have || len(m.Transitions) > 0
	}
	if !have {
		return
	}
	b.WriteString("\n### UDP endpoint transitions (fixed-source-port client, kubernetes#48370)\n\n")
	b.WriteString("Seconds from the end of the sync that made the change until a datagram of the client reaches a live endpoint; after the change: datagrams sent, answered by a live endpoint, answered by a removed endpoint's address (stale conntrack entry), unanswered (black-holed or refused); conntrack entries that sync deleted and the client's flows before it (reply source).\n\n")
	b.WriteString("| mode | transition | conntrack cleanup | traffic reaches a live endpoint after | sent | live | stale | lost | entries deleted | flows before (reply src) | sync |\n")
	b.WriteString("|---|---|---|--:|--:|--:|--:|--:|--:|---|--:|\n")
	for _, m := range r.Modes {
		name := m.Mode
		if m.Kernel == "uml" {
			name += " (uml)"
		}
		for _, t := range m.Transitions {
			clean := "on (kube-proxy)"
			if !t.Cleanup {
				clean = "off"
			}
			flows := strings.Join(t.FlowsBefore, " ")
			if flows == "" {
				flows = "-"
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %d | %d | %d | %d | %d | %s | %.1f ms |\n",
				name, t.Name, clean, t.Recovery(), t.Sent, t.Live, t.Stale, t.Lost, t.ConntrackDeleted, flows, float64(t.SyncNs)/1e6)
		}
	}
	b.WriteString("\nThe DNS-like service on both ServicePorts (one endpoint): answered / sent.\n\n")
	for _, m := range r.Modes {
		if d := m.DNS; d != nil {
			name := m.Mode
			if m.Kernel == "uml" {
				name += " (uml)"
			}
			fmt.Fprintf(b, "- %s: 53/UDP %d/%d, 53/TCP %d/%d\n", name, d.UDPOK, d.UDPSent, d.TCPOK, d.TCPSent)
		}
	}
}

// PhaseTransitions is the transitions phase's name (scenario block
// transitions) in Section.Phase.
const PhaseTransitions = "transitions"

// TransitionsSection is the transitions phase's section for one result
// row (label: the ModeResult's row label): one row per transition of ts,
// keyed by its name and whether conntrack cleanup ran, with
// writeTransitionsMarkdown's figures: seconds from the end of the sync
// that made the change to the first answer from a live endpoint ("never
// (<observe>)" has no value), datagrams sent, answered live, answered
// stale, lost, the conntrack entries the sync deleted, the client's
// flows before it, and the sync's wall time (ms). dns, when set, is a
// note: the DNS-like service's answers on 53/UDP and 53/TCP.
func TransitionsSection(label string, ts []Transition, dns *DNSCheck) Section {
	s := Section{Phase: PhaseTransitions, Title: "UDP endpoint transitions (fixed-source-port client, kubernetes#48370)", Scope: "row",
		Intro: "Seconds from the end of the sync that made the change until a datagram of the client reaches a live endpoint; " +
			"after the change: datagrams sent, answered by a live endpoint, answered by a removed endpoint's address (stale " +
			"conntrack entry), unanswered (black-holed or refused); conntrack entries that sync deleted and the client's flows " +
			"before it (reply source).",
		Columns: []Column{
			{Name: "transition", Key: true},
			{Name: "conntrack cleanup", Key: true},
			{Name: "live endpoint after", Unit: "s", Figure: "recovery"},
			{Name: "sent", Unit: "count", Figure: "sent"},
			{Name: "live", Unit: "count", Figure: "live"},
			{Name: "stale", Unit: "count", Figure: "stale"},
			{Name: "lost", Unit: "count", Figure: "lost"},
			{Name: "entries deleted", Unit: "count", Figure: "conntrack.deleted"},
			{Name: "flows before (reply src)"},
			{Name: "sync", Unit: "ms", Figure: "sync.wall"},
		}}
	for _, t := range ts {
		clean := "on (kube-proxy)"
		if !t.Cleanup {
			clean = "off"
		}
		rec := Cell{Text: t.Recovery()}
		if t.RecoveryNs >= 0 {
			rec = Num(float64(t.RecoveryNs)/1e9, "%.3f")
		}
		flows := Missing()
		if len(t.FlowsBefore) > 0 {
			flows = Text(strings.Join(t.FlowsBefore, " "))
		}
		s.Rows = append(s.Rows, SectionRow{Row: label, Cells: []Cell{Text(t.Name), Text(clean), rec, Int(t.Sent), Int(t.Live), Int(t.Stale),
			Int(t.Lost), Int(t.ConntrackDeleted), flows, Num(float64(t.SyncNs)/1e6, "%.1f")}})
	}
	if dns != nil {
		s.Notes = append(s.Notes, fmt.Sprintf("%s: the DNS-like service on both ServicePorts (one endpoint), answered / sent: 53/UDP %d/%d, 53/TCP %d/%d",
			label, dns.UDPOK, dns.UDPSent, dns.TCPOK, dns.TCPSent))
	}
	return s
}
