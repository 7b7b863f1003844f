package kubeproxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/proxybench/proxybench/scenarios"
)

// Ruleset is what kube-proxy installed in its node namespace, read back
// after its first full sync with the kernel's own tools (not timed: the
// row's sync.full ends before it).
type Ruleset struct {
	// Tool is the command that read it ("iptables-legacy-save", "nft -j
	// list table ip kube-proxy").
	Tool string
	// Objects counts kernel objects as builtin's SyncStats.Objects does:
	// iptables, the rules of kube-proxy's KUBE-* chains and the rules
	// jumping to them; nftables, the chains, rules and set/map elements of
	// table ip kube-proxy.
	Objects int
	// Bytes is, for iptables, the size of those rules and KUBE-* chain
	// declarations in iptables-save's format (what an iptables-restore of
	// them reads); 0 for nftables, whose netlink bytes are not seen.
	Bytes int
}

// readBack reads kube-proxy's IPv4 ruleset in the node namespace. IPVS
// (in the guest) is not read: zero Ruleset, no error.
func (p *Proxier) readBack(ctx context.Context) (Ruleset, error) {
	return p.readBackFamily(ctx, scenarios.IPv4)
}

// readBackFamily is readBack for family fam's proxier: IPv6 reads
// ip6tables-<back end>-save and table ip6 kube-proxy (a dual-stack row's
// IPv6 side).
func (p *Proxier) readBackFamily(ctx context.Context, fam string) (Ruleset, error) {
	ip, table := "ip", "ip"
	if fam == scenarios.IPv6 {
		ip, table = "ip6", "ip6"
	}
	switch p.spec.Mode {
	case "iptables":
		tool := ip + "tables-save"
		if p.spec.IPTablesBackend != "" {
			tool = ip + "tables-" + p.spec.IPTablesBackend + "-save"
		}
		out, err := p.spec.Node.Run(ctx, nil, tool)
		if err != nil {
			return Ruleset{}, fmt.Errorf("%s: %w", tool, err)
		}
		rs := CountIPTablesSave(string(out))
		rs.Tool = tool
		return rs, nil
	case "nftables":
		out, err := p.spec.Node.Run(ctx, nil, "nft", "-j", "list", "table", table, "kube-proxy")
		if err != nil {
			return Ruleset{}, fmt.Errorf("nft -j list table %s kube-proxy: %w", table, err)
		}
		rs, err := CountNFTJSON(out)
		rs.Tool = "nft -j list table " + table + " kube-proxy"
		return rs, err
	}
	return Ruleset{}, nil
}

// CountIPTablesSave counts, in iptables-save output, the rules of KUBE-*
// chains and the rules jumping to one (-A lines naming KUBE-), and the
// bytes of those lines and of the KUBE-* chain declarations (with their
// newlines).
func CountIPTablesSave(text string) Ruleset {
	var rs Ruleset
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "-A ") && strings.Contains(l, "KUBE-"):
			rs.Objects++
			rs.Bytes += len(l) + 1
		case strings.HasPrefix(l, ":KUBE-"):
			rs.Bytes += len(l) + 1
		}
	}
	return rs
}

// CountNFTJSON counts the chains, rules and set/map elements in `nft -j
// list table` output (libnftables' JSON schema: {"nftables": [{"chain":
// …}, {"rule": …}, {"set": {"elem": […]}}, {"map": {"elem": […]}}]}).
func CountNFTJSON(b []byte) (Ruleset, error) {
	var doc struct {
		Nftables []map[string]json.RawMessage `json:"nftables"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return Ruleset{}, fmt.Errorf("nft JSON: %w", err)
	}
	var rs Ruleset
	for _, o := range doc.Nftables {
		for k, v := range o {
			switch k {
			case "chain", "rule":
				rs.Objects++
			case "set", "map":
				var s struct {
					Elem []json.RawMessage `json:"elem"`
				}
				if err := json.Unmarshal(v, &s); err != nil {
					return Ruleset{}, fmt.Errorf("nft JSON %s: %w", k, err)
				}
				rs.Objects += len(s.Elem)
			}
		}
	}
	return rs, nil
}

// backend is the row's "back end" (Info["backend"], as builtin's): the
// iptables back end kube-proxy ran with (its PATH's iptables: legacy or
// nft), "knftables" for nftables (kube-proxy's nftables proxier drives nft
// through sigs.k8s.io/knftables, as builtin does), and for IPVS "ipvs +
// ipset, iptables-<back end>".
func (p *Proxier) backend() string {
	be := p.spec.IPTablesBackend
	if be == "" {
		be = "default"
	}
	switch p.spec.Mode {
	case "iptables":
		return be
	case "nftables":
		return "knftables"
	case "ipvs":
		return "ipvs + ipset, iptables-" + be
	}
	return ""
}
