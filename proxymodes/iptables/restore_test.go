package iptables

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	iptablestest "github.com/proxybench/proxybench/proxymodes/iptables/testing"
	"github.com/proxybench/proxybench/workload"
)

// This file holds test helpers: a parser of iptables-restore input and a
// packet evaluator over the parsed nat table, like the iptablesTracer of
// kube-proxy's own iptables tests (pkg/proxy/iptables/proxier_test.go,
// which traces packets through iptablestest.FakeIPTables).

// tokenize splits a restore line into arguments, honouring double quotes.
func tokenize(line string) []string { return iptablestest.Tokenize(line) }

// parsedTable is one table of restore input: chain declarations in order,
// rules per chain (the "-A chain" prefix removed), and "-X" deletions.
type parsedTable struct {
	declared []string
	rules    map[string][][]string
	deleted  []string
	nrules   int
}

// parseRestore parses iptables-restore input into tables.
func parseRestore(t testing.TB, data []byte) map[string]*parsedTable {
	t.Helper()
	tables := map[string]*parsedTable{}
	var cur *parsedTable
	for n, line := range strings.Split(string(data), "\n") {
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			cur = &parsedTable{rules: map[string][][]string{}}
			tables[line[1:]] = cur
		case line == "COMMIT":
			cur = nil
		case cur == nil:
			t.Fatalf("line %d outside a table: %q", n+1, line)
		case strings.HasPrefix(line, ":"):
			name, _, _ := strings.Cut(line[1:], " ")
			cur.declared = append(cur.declared, name)
		case strings.HasPrefix(line, "-A "):
			args := tokenize(line)
			cur.rules[args[1]] = append(cur.rules[args[1]], args[2:])
			cur.nrules++
		case strings.HasPrefix(line, "-X "):
			cur.deleted = append(cur.deleted, strings.TrimPrefix(line, "-X "))
		default:
			t.Fatalf("line %d: unexpected %q", n+1, line)
		}
	}
	return tables
}

// packet is what the evaluator traces.
type packet struct {
	src, dst netip.Addr
	proto    string
	dport    uint16
}

// trace is the result of evaluating one packet through the nat table.
type trace struct {
	dnat       map[string]float64 // "ip:port" -> probability
	masq       float64            // probability mass that reached KUBE-MARK-MASQ
	through    float64            // mass that left KUBE-SERVICES without DNAT
	walked     int                // KUBE-SERVICES rules examined up to the match
	walkedMass float64
}

// traceNAT evaluates p from nat KUBE-SERVICES: statistic rules split the
// probability mass, jumps recurse, DNAT ends the walk.
func traceNAT(t testing.TB, nat *parsedTable, p packet) *trace {
	t.Helper()
	tr := &trace{dnat: map[string]float64{}}
	tr.through = evalChain(t, nat, "KUBE-SERVICES", p, 1, tr, 0)
	return tr
}

func evalChain(t testing.TB, tb *parsedTable, chain string, p packet, mass float64, tr *trace, depth int) float64 {
	t.Helper()
	if depth > 16 {
		t.Fatalf("chain %s: jump depth over 16", chain)
	}
	rules, ok := tb.rules[chain]
	if !ok && !contains(tb.declared, chain) {
		t.Fatalf("jump to undeclared chain %s", chain)
	}
	for i, r := range rules {
		if mass < 1e-15 {
			return 0
		}
		if chain == "KUBE-SERVICES" && tr.walkedMass == 0 {
			tr.walked = i + 1
		}
		prob, target, extra, ok := matchRule(t, r, p)
		if !ok {
			continue
		}
		m := mass * prob
		mass -= m
		if chain == "KUBE-SERVICES" {
			tr.walkedMass += m
		}
		switch target {
		case "DNAT":
			tr.dnat[extra] += m
		case "RETURN":
			return mass + m
		case "MARK":
			mass += m // non-terminating
		case "KUBE-MARK-MASQ":
			tr.masq += m
			mass += evalChain(t, tb, target, p, m, tr, depth+1)
		case "REJECT", "DROP", "ACCEPT", "MASQUERADE":
		default:
			mass += evalChain(t, tb, target, p, m, tr, depth+1)
		}
	}
	return mass
}

// matchRule reports whether r matches p, the probability of the match
// (statistic), and the target.
func matchRule(t testing.TB, r []string, p packet) (prob float64, target, extra string, ok bool) {
	t.Helper()
	prob, ok = 1, true
	neg := false
	for i := 0; i < len(r); i++ {
		a := r[i]
		next := func() string {
			i++
			if i >= len(r) {
				t.Fatalf("rule %q: %s needs a value", r, a)
			}
			return r[i]
		}
		switch a {
		case "!":
			neg = true
			continue
		case "-m", "--comment", "--mode", "--or-mark", "--xor-mark", "--mark", "--ctstate":
			next()
		case "-p":
			if (next() == p.proto) == neg {
				ok = false
			}
		case "--dport":
			if (next() == strconv.Itoa(int(p.dport))) == neg {
				ok = false
			}
		case "-d", "-s":
			v := next()
			pfx, err := netip.ParsePrefix(v)
			if err != nil {
				a, err2 := netip.ParseAddr(v)
				if err2 != nil {
					t.Fatalf("rule %q: bad address %q", r, v)
				}
				pfx = netip.PrefixFrom(a, 32)
			}
			addr := p.dst
			if a == "-s" {
				addr = p.src
			}
			if pfx.Contains(addr) == neg {
				ok = false
			}
		case "--dst-type":
			next()
			// ClusterIPs and pod IPs are not local addresses of the node.
			if !neg {
				ok = false
			}
		case "--probability":
			v, err := strconv.ParseFloat(next(), 64)
			if err != nil {
				t.Fatalf("rule %q: %v", r, err)
			}
			prob = v
		case "-j":
			target = next()
		case "--to-destination":
			extra = next()
		case "--random-fully":
		default:
			t.Fatalf("rule %q: unknown argument %q", r, a)
		}
		neg = false
	}
	if target == "" {
		t.Fatalf("rule %q: no target", r)
	}
	return prob, target, extra, ok
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// genServices makes n services with eps ready endpoints each, one TCP
// port 80 -> 8080, ClusterIPs from 198.18.0.1, pods from 198.19.0.1.
func genServices(n, eps int) []workload.Service {
	out := make([]workload.Service, n)
	vip := netip.MustParseAddr("198.18.0.1")
	pod := netip.MustParseAddr("198.19.0.1")
	ports := []workload.ServicePort{{Name: "p80", Port: 80, TargetPort: 8080, Protocol: "TCP"}}
	for i := range out {
		e := make([]workload.Endpoint, eps)
		for k := range e {
			e[k] = workload.Endpoint{IP: pod, Ready: true, Weight: 1}
			pod = pod.Next()
		}
		out[i] = workload.Service{Namespace: "pb", Name: fmt.Sprintf("svc-%05d", i), ClusterIP: vip, Ports: ports, Endpoints: e}
		vip = vip.Next()
	}
	return out
}
