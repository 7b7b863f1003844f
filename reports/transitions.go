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
	// restart-1to0to1's count is over both its syncs (to 0 endpoints,
	// then to the new one). On a kube-proxy row ConntrackDeleted is
	// kube-proxy's own count
	// (KubeProxy.Deleted, its counter; its log's when it has none).
	ConntrackDeleted int      `json:"conntrackDeleted"`
	FlowsBefore      []string `json:"flowsBefore,omitempty"`
	// FlowsAfter are the client's UDP flows in the node's conntrack table
	// right after that sync (reply source): what the cleanup left.
	FlowsAfter []string `json:"flowsAfter,omitempty"`
	// SyncNs is the wall time of that sync.
	SyncNs int64 `json:"syncNs"`
	// KubeProxy, on a kube-proxy row, is kube-proxy's own account of its
	// conntrack cleanup over that sync.
	KubeProxy *TransitionKubeProxy `json:"kubeProxy,omitempty"`
}

// TransitionKubeProxy is what kube-proxy says its stale UDP conntrack
// cleanup (pkg/proxy/conntrack.CleanStaleEntries, run at the end of a
// sync whose endpoint changes touched a UDP ServicePort) did over one
// transition's sync.
type TransitionKubeProxy struct {
	// Runs is the cleanups it ran, by
	// kubeproxy_conntrack_reconciler_sync_duration_seconds' count;
	// Deleted the entries they deleted by
	// kubeproxy_conntrack_reconciler_deleted_entries_total (-1: no such
	// counter, kube-proxy before v1.33).
	Runs    int `json:"runs"`
	Deleted int `json:"deleted"`
	// LogRuns and LogDeleted are the same by its log's "Finished
	// reconciling conntrack entries" lines (-v 4) and their
	// entriesDeleted; Errors its cleanup's error lines.
	LogRuns    int      `json:"logRuns"`
	LogDeleted int      `json:"logDeleted"`
	Errors     []string `json:"errors,omitempty"`
	// Log says at which -v kube-proxy logged (without -v 4 its log has
	// no cleanup lines: LogRuns 0).
	Log string `json:"log,omitempty"`
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
	b.WriteString("\n### " + transitionsTitle + "\n\n")
	b.WriteString(transitionsIntro + "\n\n")
	b.WriteString("| mode | transition | conntrack cleanup | traffic reaches a live endpoint after | sent | live | stale | lost | entries deleted | kube-proxy cleanups (metric) | deleted by its log | flows before (reply src) | flows after (reply src) | sync |\n")
	b.WriteString("|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|---|--:|\n")
	var notes []string
	for _, m := range r.Modes {
		name := m.Mode
		if m.Kernel == "uml" {
			name += " (uml)"
		}
		for _, t := range m.Transitions {
			runs, logged := "-", "-"
			if kp := t.KubeProxy; kp != nil {
				runs, logged = fmt.Sprint(kp.Runs), kubeProxyLogged(kp)
				notes = transitionNotes(notes, name, t)
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %d | %d | %d | %d | %d | %s | %s | %s | %s | %.1f ms |\n",
				name, t.Name, cleanupText(t), t.Recovery(), t.Sent, t.Live, t.Stale, t.Lost, t.ConntrackDeleted, runs, logged,
				flowsText(t.FlowsBefore), flowsText(t.FlowsAfter), float64(t.SyncNs)/1e6)
		}
	}
	for _, n := range notes {
		b.WriteString("\n- " + n)
	}
	if len(notes) > 0 {
		b.WriteString("\n")
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

const (
	transitionsTitle = "UDP endpoint transitions (fixed-source-port client, kubernetes#48370)"
	transitionsIntro = "Seconds from the end of the sync that made the change until a datagram of the client reaches a live endpoint; " +
		"after the change: datagrams sent, answered by a live endpoint, answered by a removed endpoint's address (stale " +
		"conntrack entry), unanswered (black-holed or refused); conntrack entries that sync deleted (a kube-proxy row: " +
		"kube-proxy's own kubeproxy_conntrack_reconciler_deleted_entries_total, with its cleanups run and what its log's " +
		"-v 4 lines say it deleted) and the client's flows in the node's conntrack table before and right after it (reply source)."
)

// cleanupText is a transition's "conntrack cleanup" cell: builtin's
// reproduction of kube-proxy's cleanup ("on (kube-proxy)") or the run
// without it ("off"); a kube-proxy row's own cleanup.
func cleanupText(t Transition) string {
	switch {
	case t.KubeProxy != nil:
		return "on (kube-proxy's own)"
	case !t.Cleanup:
		return "off"
	}
	return "on (kube-proxy)"
}

// flowsText joins reply sources ("-" for none).
func flowsText(fs []string) string {
	if len(fs) == 0 {
		return "-"
	}
	return strings.Join(fs, " ")
}

// kubeProxyLogged is what kube-proxy's log says its cleanup deleted
// ("-" when its log has no cleanup line: below -v 4).
func kubeProxyLogged(kp *TransitionKubeProxy) string {
	if kp.LogRuns == 0 {
		return "-"
	}
	return fmt.Sprintf("%d (%d lines)", kp.LogDeleted, kp.LogRuns)
}

// transitionNotes adds the notes of a kube-proxy row's transition t to
// notes: how its log was read, its cleanup's errors, and where its
// counter and its log disagree.
func transitionNotes(notes []string, label string, t Transition) []string {
	kp := t.KubeProxy
	if kp.Log != "" {
		notes = appendNote(notes, label+": "+kp.Log)
	}
	for _, e := range kp.Errors {
		notes = appendNote(notes, fmt.Sprintf("%s %s: kube-proxy logged %s", label, t.Name, e))
	}
	if kp.LogRuns > 0 && kp.Deleted >= 0 && kp.LogDeleted != kp.Deleted {
		notes = appendNote(notes, fmt.Sprintf("%s %s: kube-proxy's counter says %d entries deleted, its log %d", label, t.Name, kp.Deleted, kp.LogDeleted))
	}
	if kp.Deleted < 0 {
		notes = appendNote(notes, label+": kube-proxy has no kubeproxy_conntrack_reconciler_deleted_entries_total (before v1.33): entries deleted are its log's")
	}
	return notes
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
	s := Section{Phase: PhaseTransitions, Title: transitionsTitle, Scope: "row", Intro: transitionsIntro,
		Columns: []Column{
			{Name: "transition", Key: true},
			{Name: "conntrack cleanup", Key: true},
			{Name: "live endpoint after", Unit: "s", Figure: "recovery"},
			{Name: "sent", Unit: "count", Figure: "sent"},
			{Name: "live", Unit: "count", Figure: "live"},
			{Name: "stale", Unit: "count", Figure: "stale"},
			{Name: "lost", Unit: "count", Figure: "lost"},
			{Name: "entries deleted", Unit: "count", Figure: "conntrack.deleted"},
			{Name: "kube-proxy cleanups", Unit: "count", Figure: "kubeproxy.cleanups"},
			{Name: "deleted by its log", Unit: "count", Figure: "kubeproxy.logdeleted"},
			{Name: "flows before (reply src)"},
			{Name: "flows after (reply src)"},
			{Name: "sync", Unit: "ms", Figure: "sync.wall"},
		}}
	for _, t := range ts {
		rec := Cell{Text: t.Recovery()}
		if t.RecoveryNs >= 0 {
			rec = Num(float64(t.RecoveryNs)/1e9, "%.3f")
		}
		flows := func(fs []string) Cell {
			if len(fs) == 0 {
				return Missing()
			}
			return Text(strings.Join(fs, " "))
		}
		runs, logged := Missing(), Missing()
		if kp := t.KubeProxy; kp != nil {
			runs = Int(kp.Runs)
			if kp.LogRuns > 0 {
				logged = Int(kp.LogDeleted)
			}
			s.Notes = transitionNotes(s.Notes, label, t)
		}
		s.Rows = append(s.Rows, SectionRow{Row: label, Cells: []Cell{Text(t.Name), Text(cleanupText(t)), rec, Int(t.Sent), Int(t.Live), Int(t.Stale),
			Int(t.Lost), Int(t.ConntrackDeleted), runs, logged, flows(t.FlowsBefore), flows(t.FlowsAfter), Num(float64(t.SyncNs)/1e6, "%.1f")}})
	}
	if dns != nil {
		s.Notes = append(s.Notes, fmt.Sprintf("%s: the DNS-like service on both ServicePorts (one endpoint), answered / sent: 53/UDP %d/%d, 53/TCP %d/%d",
			label, dns.UDPOK, dns.UDPSent, dns.TCPOK, dns.TCPSent))
	}
	return s
}
