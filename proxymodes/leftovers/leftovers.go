// Package leftovers reads back from a node namespace's kernel every
// object a proxy mode may leave there (iptables and ip6tables chains and
// the jumps into them, for both back ends; IPVS virtual servers;
// kube-ipvs0 and its addresses; ipsets; nft tables named kube-proxy),
// with the kernel's own tools, and tells which of them a mode owns: what
// a mode switch leaves behind (the modeSwitch phase, docs/modes.md "Mode
// switch"). Parsing is pure; Read runs the tools in the namespace.
package leftovers

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/proxybench/proxybench/proxymodes"
)

// Kinds of Object.
const (
	KindChain   = "iptables chain"
	KindJump    = "iptables jump"
	KindVirtual = "ipvs virtual server"
	KindDevice  = "dummy device"
	KindAddress = "kube-ipvs0 address"
	KindIPSet   = "ipset"
	KindNFT     = "nft table"
)

// Object is one proxy object in the kernel.
type Object struct {
	Kind string
	// Where is the tool and table: "iptables-legacy ip nat",
	// "iptables-nft ip6 filter", "ipvsadm", "ip link", "ipset", "nft".
	Where string
	// Table is the iptables table ("nat") or nft family ("ip"); "" else.
	Table string
	// Name: a chain ("KUBE-SVC-ABC"), a jump ("PREROUTING -> KUBE-SERVICES"),
	// a virtual server ("TCP 198.18.0.1:80"), an address, a set, a table
	// ("ip kube-proxy").
	Name string
	// Rules are a chain's rules, a virtual server's real servers, a set's
	// entries, an nft table's chains.
	Rules int
}

// Key identifies o across two readings.
func (o Object) Key() string { return o.Kind + "|" + o.Where + "|" + o.Name }

// Inventory is a reading, sorted by Key.
type Inventory []Object

// Backends are the iptables back ends read: a builtin mode programs one
// (the scenario's iptables.backend, legacy for ipvs), kube-proxy the one
// its PATH gives it.
var Backends = []string{"legacy", "nft"}

// Read returns every proxy object in node: for each back end,
// iptables-<be>-save and ip6tables-<be>-save (KUBE-* chains of every
// table with their rule counts, and the jumps from other chains into
// them); nft list tables (tables named kube-proxy, with their chain
// counts); when the kernel has IP_VS (/proc/net/ip_vs in the
// namespace), ipvsadm -Sn; ip -o addr show dev kube-ipvs0; ipset list -t
// (sets named KUBE-*). A tool that fails is an error naming it, except a
// missing kube-ipvs0.
func Read(ctx context.Context, node proxymodes.Node) (Inventory, error) {
	var inv Inventory
	run := func(name string, args ...string) (string, error) {
		out, err := node.Run(ctx, nil, name, args...)
		if err != nil {
			return string(out), fmt.Errorf("leftovers: %s %s: %w", name, strings.Join(args, " "), err)
		}
		return string(out), nil
	}
	for _, be := range Backends {
		for _, fam := range []string{"iptables", "ip6tables"} {
			out, err := run(fam + "-" + be + "-save")
			if err != nil {
				return nil, err
			}
			family := "ip"
			if fam == "ip6tables" {
				family = "ip6"
			}
			inv = append(inv, ParseIPTablesSave(out, "iptables-"+be+" "+family)...)
		}
	}
	tables, err := run("nft", "list", "tables")
	if err != nil {
		return nil, err
	}
	for _, t := range ParseNFTTables(tables) {
		out, err := run("nft", "list", "table", t, "kube-proxy")
		if err != nil {
			return nil, err
		}
		inv = append(inv, Object{Kind: KindNFT, Where: "nft", Table: t, Name: t + " kube-proxy", Rules: strings.Count(out, "\tchain ")})
	}
	hasIPVS := false
	_ = node.Do(func() error {
		_, err := os.Stat("/proc/net/ip_vs")
		hasIPVS = err == nil
		return nil
	})
	if hasIPVS {
		out, err := run("ipvsadm", "-Sn")
		if err != nil {
			return nil, err
		}
		inv = append(inv, ParseIPVSSave(out)...)
	}
	if out, err := run("ip", "-o", "addr", "show", "dev", "kube-ipvs0"); err == nil {
		inv = append(inv, ParseDeviceAddrs(out)...)
	} else if !strings.Contains(out+err.Error(), "does not exist") {
		return nil, err
	}
	out, err := run("ipset", "list", "-t")
	if err != nil {
		return nil, err
	}
	inv = append(inv, ParseIPSetTerse(out)...)
	inv.sort()
	return inv, nil
}

func (inv Inventory) sort() {
	slices.SortFunc(inv, func(a, b Object) int { return strings.Compare(a.Key(), b.Key()) })
}

// ParseIPTablesSave reads iptables-save output: every KUBE-* chain of
// every table with its rule count, and every rule of another chain that
// jumps (-j or -g) to a KUBE-* chain, as a jump "CHAIN -> KUBE-X" (several
// such rules are one object with Rules their count). where prefixes the
// table ("iptables-legacy ip" → "iptables-legacy ip nat").
func ParseIPTablesSave(text, where string) []Object {
	var out []Object
	table := ""
	chains := map[string]int{} // index in out, by table/chain
	jumps := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "*"):
			table = l[1:]
		case strings.HasPrefix(l, ":KUBE-"):
			name, _, _ := strings.Cut(l[1:], " ")
			chains[table+"/"+name] = len(out)
			out = append(out, Object{Kind: KindChain, Where: where + " " + table, Table: table, Name: name})
		case strings.HasPrefix(l, "-A "):
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			if i, ok := chains[table+"/"+f[1]]; ok {
				out[i].Rules++
				continue
			}
			target := jumpTarget(f)
			if !strings.HasPrefix(target, "KUBE-") {
				continue
			}
			name := f[1] + " -> " + target
			if i, ok := jumps[table+"/"+name]; ok {
				out[i].Rules++
				continue
			}
			jumps[table+"/"+name] = len(out)
			out = append(out, Object{Kind: KindJump, Where: where + " " + table, Table: table, Name: name, Rules: 1})
		}
	}
	return out
}

// jumpTarget is the chain a rule's -j or -g names ("" without one).
func jumpTarget(f []string) string {
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "-j" || f[i] == "-g" || f[i] == "--jump" || f[i] == "--goto" {
			return f[i+1]
		}
	}
	return ""
}

// ParseNFTTables returns the families of the tables named kube-proxy in
// `nft list tables` output ("ip", "ip6").
func ParseNFTTables(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		f := strings.Fields(l)
		if len(f) == 3 && f[0] == "table" && f[2] == "kube-proxy" {
			out = append(out, f[1])
		}
	}
	return out
}

// ParseIPVSSave reads `ipvsadm -Sn` output: one object per virtual server
// ("-A -t 198.18.0.1:80 -s rr" → "TCP 198.18.0.1:80") with its real
// servers ("-a -t 198.18.0.1:80 -r ...") counted.
func ParseIPVSSave(text string) []Object {
	var out []Object
	idx := map[string]int{}
	proto := map[string]string{"-t": "TCP", "-u": "UDP", "--sctp-service": "SCTP", "-f": "FWM"}
	for _, l := range strings.Split(text, "\n") {
		f := strings.Fields(l)
		if len(f) < 3 {
			continue
		}
		p, ok := proto[f[1]]
		if !ok {
			continue
		}
		name := p + " " + f[2]
		switch f[0] {
		case "-A":
			idx[name] = len(out)
			out = append(out, Object{Kind: KindVirtual, Where: "ipvsadm", Name: name})
		case "-a":
			if i, ok := idx[name]; ok {
				out[i].Rules++
			}
		}
	}
	return out
}

// ParseDeviceAddrs reads `ip -o addr show dev kube-ipvs0`: the device
// and each of its addresses.
func ParseDeviceAddrs(text string) []Object {
	out := []Object{{Kind: KindDevice, Where: "ip link", Name: "kube-ipvs0"}}
	for _, l := range strings.Split(text, "\n") {
		f := strings.Fields(l)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "inet" || f[i] == "inet6" {
				out = append(out, Object{Kind: KindAddress, Where: "ip addr", Name: f[i+1]})
			}
		}
	}
	return out
}

// ParseIPSetTerse reads `ipset list -t`: each set named KUBE-* with its
// entry count.
func ParseIPSetTerse(text string) []Object {
	var out []Object
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, "Name: "); ok {
			name := strings.TrimSpace(v)
			if strings.HasPrefix(name, "KUBE-") {
				out = append(out, Object{Kind: KindIPSet, Where: "ipset", Name: name})
			} else {
				out = append(out, Object{}) // a set of someone else: skipped below
			}
			continue
		}
		if v, ok := strings.CutPrefix(l, "Number of entries: "); ok && len(out) > 0 {
			out[len(out)-1].Rules, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return slices.DeleteFunc(out, func(o Object) bool { return o.Kind == "" })
}

// Owner says whether a mode owns an object: the mode writes it, so it is
// no leftover of another mode (proxymodes.Mode.Owns).
type Owner func(kind, table, name string) bool

// Left returns the objects of before still in after that owns does not
// claim (nil owns: every one): what the mode that wrote before left
// behind, once another (owns) took over. An object is the same in both
// readings when its Key is (its rule count may differ).
func Left(before, after Inventory, owns Owner) Inventory {
	had := map[string]bool{}
	for _, o := range before {
		had[o.Key()] = true
	}
	var out Inventory
	for _, o := range after {
		if had[o.Key()] && (owns == nil || !owns(o.Kind, o.Table, o.Name)) {
			out = append(out, o)
		}
	}
	return out
}

// Group is a group of objects with one name pattern: hashed chain names
// (KUBE-SVC-<hash>, KUBE-SEP-, KUBE-SVL-, KUBE-EXT-, KUBE-FW-) become
// "KUBE-SVC-*"; every virtual server of a tool, every address of
// kube-ipvs0 is one group; each other object is its own.
type Group struct {
	Kind, Where, Name string
	Count, Rules      int
}

// hashedPrefixes are the chain name prefixes kube-proxy follows with a
// hash (pkg/proxy/iptables: servicePortPolicyClusterChainNamePrefix and
// the others of isServiceChainName).
var hashedPrefixes = []string{"KUBE-SVC-", "KUBE-SVL-", "KUBE-SEP-", "KUBE-EXT-", "KUBE-FW-"}

// Groups groups inv (in inv's order of first appearance).
func Groups(inv Inventory) []Group {
	var out []Group
	idx := map[string]int{}
	for _, o := range inv {
		name := o.Name
		switch o.Kind {
		case KindChain:
			for _, p := range hashedPrefixes {
				if strings.HasPrefix(name, p) {
					name = p + "*"
				}
			}
		case KindVirtual:
			name = "virtual servers"
		case KindAddress:
			name = "kube-ipvs0 addresses"
		}
		k := o.Kind + "|" + o.Where + "|" + name
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, Group{Kind: o.Kind, Where: o.Where, Name: name})
		}
		out[i].Count++
		out[i].Rules += o.Rules
	}
	return out
}

// Chains is an Owner of iptables chains, and of the jumps into them: the
// chains named per table (byTable["nat"]), and those starting with one
// of prefixes in any table. Other kinds are not claimed.
func Chains(byTable map[string][]string, prefixes ...string) Owner {
	return func(kind, table, name string) bool {
		switch kind {
		case KindJump:
			_, dst, ok := strings.Cut(name, " -> ")
			if !ok {
				return false
			}
			name = dst
		case KindChain:
		default:
			return false
		}
		if slices.Contains(byTable[table], name) {
			return true
		}
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				return true
			}
		}
		return false
	}
}

// HashedPrefixes are the prefixes of kube-proxy's hashed service and
// endpoint chain names (isServiceChainName of pkg/proxy/iptables).
func HashedPrefixes() []string { return slices.Clone(hashedPrefixes) }

// Without returns the objects of inv not in other (by Key).
func (inv Inventory) Without(other Inventory) Inventory {
	skip := map[string]bool{}
	for _, o := range other {
		skip[o.Key()] = true
	}
	var out Inventory
	for _, o := range inv {
		if !skip[o.Key()] {
			out = append(out, o)
		}
	}
	return out
}
