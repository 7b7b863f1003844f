package measure

// ModeTraits is what a report needs to know of a row's mode beyond its
// figures. Each mode sets it in its proxymodes.Mode (Mode.Traits; a
// kube-proxy row has its base mode's, with what kube-proxy does
// differently), and every row records it (reports.ModeResult.Traits), so
// the reports read it without knowing the modes. The zero value is a
// mode with none of these traits (none, nftables, ipvs).
type ModeTraits struct {
	// Walk names the list of rules a new connection walks in order, for
	// a mode whose lookup is linear: "KUBE-SERVICES" (iptables, one rule
	// per ServicePort), "KUBE-PORTALS-CONTAINER" (userspace, one portal
	// per ServicePort). Its connect latency grows with the service's
	// place in that list. "": a lookup of fixed cost (a verdict map, the
	// IPVS service table, no rules).
	Walk string `json:"walk,omitempty"`
	// Unordered: the services sit in Walk in no fixed order, so the
	// scenario's first and last services say nothing about the walk: a
	// kube-proxy iptables row (pkg/proxy/iptables writes KUBE-SERVICES in
	// its service map's iteration order, new at every sync).
	Unordered bool `json:"unordered,omitempty"`
	// Objects names what SyncStats.Objects counts when it is not
	// "objects": "rules" for iptables (the restore input's "-A" lines,
	// kube-proxy's sync_proxy_rules_iptables_total; a kube-proxy row's
	// KUBE- rules read back).
	Objects string `json:"objects,omitempty"`
	// Terminates: the proxy accepts the client's connection itself and
	// dials the endpoint (the legacy userspace proxy's listeners, and its
	// own UDP client table), so the TCP handshake ends at the proxy and
	// its own cost shows in the time to first byte, not in connect time.
	Terminates bool `json:"terminates,omitempty"`
	// IPTablesBackend: the mode's back end is its iptables back end
	// (legacy or nft), as for iptables: its rules are iptables rules and
	// nothing else. A kube-proxy row written before Info["backend"] was
	// recorded shows Info["iptablesBackend"] as its back end only then.
	IPTablesBackend bool `json:"iptablesBackend,omitempty"`
}
