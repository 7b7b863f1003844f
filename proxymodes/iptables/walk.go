package iptables

import (
	"bytes"
	"fmt"
	"net/netip"
	"strconv"
)

type vipPort struct {
	vip  netip.Addr
	port uint16
}

// Walker evaluates packets against a rendered iptables ruleset as
// x_tables does: the nat table's KUBE-SERVICES chain is walked rule by
// rule until a rule's destination and port match (net/ipv4/netfilter/
// ip_tables.c, ipt_do_table: one rule after another, no index).
type Walker struct {
	index map[vipPort]int // rule position in nat KUBE-SERVICES, 0-based
	// NatServices is the number of rules of nat KUBE-SERVICES; FilterServices
	// of filter KUBE-SERVICES (REJECT rules of services without
	// endpoints), walked whole by every new connection.
	NatServices, FilterServices int
}

// NewWalker reads the KUBE-SERVICES rules of rs.Data (both
// tables). It fails on a nat KUBE-SERVICES rule it cannot parse (a jump
// to a service chain without "-d <ip>" and "--dport <port>").
func NewWalker(rs *Ruleset) (*Walker, error) {
	w := &Walker{index: map[vipPort]int{}}
	data := rs.Data
	table := ""
	prefix := []byte("-A KUBE-SERVICES ")
	for len(data) > 0 {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		if len(line) > 0 && line[0] == '*' {
			table = string(line[1:])
			continue
		}
		if !bytes.HasPrefix(line, prefix) {
			continue
		}
		if table == "filter" {
			w.FilterServices++
			continue
		}
		if table != "nat" {
			continue
		}
		pos := w.NatServices
		w.NatServices++
		d := field(line, " -d ")
		p := field(line, " --dport ")
		if d == nil && p == nil {
			continue // the KUBE-NODEPORTS rule (matches no ClusterIP)
		}
		vip, err := netip.ParseAddr(string(d))
		if err != nil {
			return nil, fmt.Errorf("iptables: rule %q: destination: %w", line, err)
		}
		port, err := strconv.ParseUint(string(p), 10, 16)
		if err != nil {
			return nil, fmt.Errorf("iptables: rule %q: port: %w", line, err)
		}
		k := vipPort{vip, uint16(port)}
		if _, dup := w.index[k]; !dup {
			w.index[k] = pos
		}
	}
	return w, nil
}

// field returns the word after key in line, or nil.
func field(line []byte, key string) []byte {
	i := bytes.Index(line, []byte(key))
	if i < 0 {
		return nil
	}
	rest := line[i+len(key):]
	if j := bytes.IndexByte(rest, ' '); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// RulesWalked returns how many nat KUBE-SERVICES rules a new connection
// to vip:port evaluates: the rules before its own plus its own (position
// + 1), or, when no rule matches, the whole chain and false.
func (w *Walker) RulesWalked(vip netip.Addr, port uint16) (int, bool) {
	if i, ok := w.index[vipPort{vip, port}]; ok {
		return i + 1, true
	}
	return w.NatServices, false
}
