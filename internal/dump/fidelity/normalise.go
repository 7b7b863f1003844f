package fidelity

import (
	"regexp"
	"sort"
	"strings"
)

// Normalise returns r with every section's text rewritten to one fact per
// line, each line self-contained (it names its table and chain, set or
// map), so that two readings of the same ruleset are equal line for line
// and a difference is a line only one side has. It removes only what must
// differ between two implementations, or what the kernel ignores:
//
//   - iptables-save: the "#" comment lines and the chain and rule
//     counters; chains in name order (the kernel lists them in creation
//     order); the hashed chain names KUBE-SVC-<hash> and KUBE-SEP-<hash>
//     replaced by what they stand for (KUBE-SVC-{ns/name:port},
//     KUBE-SEP-{ns/name:port->ip:port}); and, within a chain, each run of
//     consecutive rules that name a service port in their comment
//     stable-sorted by that name (kube-proxy writes them service port
//     by service port in its map's random order), then each run of
//     consecutive rules that match one destination address (-d a/32)
//     sorted: their matches are disjoint, so their order changes no
//     verdict (it does change how many rules a lookup walks: see
//     docs/modes.md, "Fidelity").
//   - nft list table: sets, maps and chains in name order, map and set
//     elements one per line and sorted (the kernel's hash order), the
//     8-character hash of service-, endpoint- and affinity- names replaced
//     by "#", counters and element expiry times dropped; rules keep their
//     order.
//   - ipvsadm -Sn, ipset save, ip addr: lines sorted (the kernel lists
//     them in hash order); ipset's random initval dropped; ip addr reduced
//     to "inet <addr> scope ...".
//   - every line holding one of r.Testbed (the control plane's
//     `kubernetes` Service and its range) is dropped, and such a prefix is
//     taken out of an inline set ({ a, b }; a set left with one element
//     is written without braces, as nft lists it).
func Normalise(r Reading) Reading {
	out := Reading{Mode: r.Mode, Testbed: r.Testbed}
	for _, s := range r.Sections {
		var lines []string
		switch {
		case strings.HasSuffix(s.Tool, "-save"):
			lines = normaliseIPTables(s.Text)
		case strings.HasPrefix(s.Tool, "nft "):
			lines = normaliseNFT(s.Text)
		case strings.HasPrefix(s.Tool, "ipset"):
			lines = sortedLines(initvalRE.ReplaceAllString(s.Text, ""))
		case strings.HasPrefix(s.Tool, "ip "):
			lines = normaliseAddrs(s.Text)
		default:
			lines = sortedLines(s.Text)
		}
		lines = dropTestbed(lines, r.Testbed)
		text := strings.Join(lines, "\n")
		if text != "" {
			text += "\n"
		}
		out.Sections = append(out.Sections, Section{Tool: s.Tool, Text: text})
	}
	return out
}

var (
	initvalRE   = regexp.MustCompile(` initval 0x[0-9a-f]+`)
	countersRE  = regexp.MustCompile(`^\[\d+:\d+\] `)
	iptHashRE   = regexp.MustCompile(`KUBE-(SVC|SEP|EXT|FW|SVL|XLB)-[A-Z2-7]{16}\b`)
	commentRE   = regexp.MustCompile(`--comment "?([^" ]+)`)
	dnatRE      = regexp.MustCompile(`--to-destination (\S+)`)
	jumpRE      = regexp.MustCompile(`-j (KUBE-\S+)`)
	nftHashRE   = regexp.MustCompile(`\b(service|endpoint|external|firewall|affinity)-[A-Z2-7]{8}-`)
	nftCountRE  = regexp.MustCompile(`counter packets \d+ bytes \d+`)
	nftExpireRE = regexp.MustCompile(` expires [0-9hms.]+`)
)

func sortedLines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}

// normaliseAddrs keeps "inet <addr> scope ..." of each `ip -o addr` line.
func normaliseAddrs(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		i := strings.Index(l, " inet ")
		if i < 0 {
			continue
		}
		l = l[i+1:]
		if j := strings.Index(l, `\`); j >= 0 {
			l = l[:j]
		}
		out = append(out, strings.Join(strings.Fields(l), " "))
	}
	sort.Strings(out)
	return out
}

// hasToken reports whether line holds tok not glued to more of an
// address (a digit or '.' on either side).
func hasToken(line, tok string) bool {
	for i := 0; ; {
		j := strings.Index(line[i:], tok)
		if j < 0 {
			return false
		}
		j += i
		before := j == 0 || !isAddrByte(line[j-1])
		end := j + len(tok)
		after := end == len(line) || !isAddrByte(line[end])
		if before && after {
			return true
		}
		i = j + 1
	}
}

func isAddrByte(b byte) bool { return b == '.' || (b >= '0' && b <= '9') }

func dropTestbed(lines, testbed []string) []string {
	if len(testbed) == 0 {
		return lines
	}
	var out []string
next:
	for _, l := range lines {
		for _, t := range testbed {
			was := l
			l = strings.ReplaceAll(l, t+", ", "")
			l = strings.ReplaceAll(l, ", "+t, "")
			if l != was {
				// nft lists a one-element inline set without braces.
				l = oneElementRE.ReplaceAllString(l, "$1")
			}
			if hasToken(l, t) {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}

var oneElementRE = regexp.MustCompile(`\{ ([^,{} ]+) \}`)

// normaliseIPTables rewrites iptables-save output as "*<table> :<chain>
// <policy>" and "*<table> -A <chain> ..." lines (see Normalise).
func normaliseIPTables(text string) []string {
	type chain struct {
		policy string
		rules  []string
	}
	tables := map[string]map[string]*chain{}
	var cur map[string]*chain
	get := func(name string) *chain {
		c := cur[name]
		if c == nil {
			c = &chain{}
			cur[name] = c
		}
		return c
	}
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || l[0] == '#' || l == "COMMIT":
		case l[0] == '*':
			cur = map[string]*chain{}
			tables[l[1:]] = cur
		case cur == nil:
		case l[0] == ':':
			f := strings.Fields(l[1:])
			c := get(f[0])
			if len(f) > 1 {
				c.policy = f[1]
			}
		default:
			l = countersRE.ReplaceAllString(l, "")
			if f := strings.Fields(l); len(f) > 1 && f[0] == "-A" {
				c := get(f[1])
				c.rules = append(c.rules, l)
			}
		}
	}
	// What each hashed chain stands for, from the rules themselves.
	names := map[string]string{}
	parent := map[string]string{}
	for _, chains := range tables {
		for name, c := range chains {
			for _, r := range c.rules {
				j := jumpRE.FindStringSubmatch(r)
				if j == nil {
					continue
				}
				if strings.HasPrefix(j[1], "KUBE-SEP-") {
					parent[j[1]] = name
				}
				if name == "KUBE-SERVICES" && strings.HasPrefix(j[1], "KUBE-SVC-") {
					if m := regexp.MustCompile(`--comment "([^"]+) cluster IP"`).FindStringSubmatch(r); m != nil {
						names[j[1]] = "KUBE-SVC-{" + m[1] + "}"
					}
				}
			}
		}
	}
	for _, chains := range tables {
		for name, c := range chains {
			if !strings.HasPrefix(name, "KUBE-SEP-") {
				continue
			}
			for _, r := range c.rules {
				d := dnatRE.FindStringSubmatch(r)
				if d == nil {
					continue
				}
				what := ""
				if m := commentRE.FindStringSubmatch(r); m != nil {
					what = m[1]
				} else if p, ok := names[parent[name]]; ok {
					what = strings.TrimSuffix(strings.TrimPrefix(p, "KUBE-SVC-{"), "}")
				}
				names[name] = "KUBE-SEP-{" + what + "->" + d[1] + "}"
			}
		}
	}
	rename := func(s string) string {
		return iptHashRE.ReplaceAllStringFunc(s, func(h string) string {
			if n, ok := names[h]; ok {
				return n
			}
			return h
		})
	}
	var out []string
	for _, t := range sortedKeys(tables) {
		chains := tables[t]
		byName := map[string]*chain{}
		for name, c := range chains {
			byName[rename(name)] = c
		}
		keys := sortedKeys(byName)
		for _, name := range keys {
			out = append(out, "*"+t+" :"+name+" "+byName[name].policy)
		}
		for _, name := range keys {
			rules := make([]string, len(byName[name].rules))
			for i, r := range byName[name].rules {
				rules[i] = rename(r)
			}
			sortServiceRuns(rules)
			sortDestinationRuns(rules)
			for _, r := range rules {
				out = append(out, "*"+t+" "+r)
			}
		}
	}
	return out
}

// portNameRE is the service port a rule's comment names first
// ("pb/svc-00010:p81 has no local endpoints" → pb/svc-00010:p81).
var portNameRE = regexp.MustCompile(`--comment "?([^" /]+/[^" ]+)`)

// sortServiceRuns stable-sorts each run of consecutive rules whose
// comment names a service port by that name: kube-proxy writes a chain's
// rules service port by service port in its map's order (random from one
// sync to the next: KUBE-NODEPORTS, KUBE-EXTERNAL-SERVICES, the filter
// KUBE-NODEPORTS health check ports), and the rules of one service port
// in a fixed order, which the stable sort keeps.
func sortServiceRuns(rules []string) {
	key := func(r string) string {
		if m := portNameRE.FindStringSubmatch(r); m != nil {
			return m[1]
		}
		return ""
	}
	for i := 0; i < len(rules); {
		j := i
		for j < len(rules) && key(rules[j]) != "" {
			j++
		}
		if j > i+1 {
			sort.SliceStable(rules[i:j], func(a, b int) bool { return key(rules[i+a]) < key(rules[i+b]) })
		}
		if j == i {
			j++
		}
		i = j
	}
}

var destRE = regexp.MustCompile(`(^| )-d \d+\.\d+\.\d+\.\d+/32 `)

// sortDestinationRuns sorts each run of consecutive rules matching one
// destination address.
func sortDestinationRuns(rules []string) {
	for i := 0; i < len(rules); {
		j := i
		for j < len(rules) && destRE.MatchString(rules[j]) && !strings.Contains(rules[j], "! -d ") {
			j++
		}
		if j > i+1 {
			sort.Strings(rules[i:j])
		}
		if j == i {
			j++
		}
		i = j
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// normaliseNFT rewrites `nft list table` output as "table: ...",
// "<kind> <name>: <line>", "<kind> <name> element: <element>" and
// "chain <name> rule: <rule>" lines (see Normalise).
func normaliseNFT(text string) []string {
	text = nftCountRE.ReplaceAllString(text, "counter")
	text = nftExpireRE.ReplaceAllString(text, "")
	text = nftHashRE.ReplaceAllString(text, "$1-#-")
	type object struct {
		head, elems []string
	}
	objects := map[string]*object{}
	var table []string
	var cur *object
	var curKind string
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		switch {
		case l == "":
		case strings.HasPrefix(l, "table "):
		case l == "}":
			cur = nil
		case cur == nil && strings.HasSuffix(l, "{"):
			f := strings.Fields(strings.TrimSuffix(l, "{"))
			if len(f) >= 2 {
				curKind = f[0]
				cur = &object{}
				objects[f[0]+" "+f[1]] = cur
			}
		case cur == nil:
			table = append(table, "table: "+l)
		case strings.HasPrefix(l, "elements = {"):
			// Join the element list up to its closing brace.
			all := l
			depth := strings.Count(l, "{") - strings.Count(l, "}")
			for depth > 0 && i+1 < len(lines) {
				i++
				n := strings.TrimSpace(lines[i])
				all += " " + n
				depth += strings.Count(n, "{") - strings.Count(n, "}")
			}
			all = strings.TrimPrefix(all, "elements = {")
			all = strings.TrimSuffix(strings.TrimSpace(all), "}")
			for _, e := range splitTop(all) {
				if e = strings.TrimSpace(e); e != "" {
					cur.elems = append(cur.elems, e)
				}
			}
		default:
			if curKind == "chain" && !strings.Contains(l, " hook ") && !strings.HasPrefix(l, "comment ") {
				cur.head = append(cur.head, "rule: "+l)
			} else {
				cur.head = append(cur.head, l)
			}
		}
	}
	out := append([]string{}, table...)
	for _, k := range sortedKeys(objects) {
		o := objects[k]
		for _, h := range o.head {
			if strings.HasPrefix(h, "rule: ") {
				out = append(out, k+" "+h)
			} else {
				out = append(out, k+": "+h)
			}
		}
		el := append([]string{}, o.elems...)
		sort.Strings(el)
		for _, e := range el {
			out = append(out, k+" element: "+e)
		}
	}
	return out
}

// splitTop splits s at commas outside braces and quotes.
func splitTop(s string) []string {
	var out []string
	depth, quote, start := 0, false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			quote = !quote
		case '{':
			if !quote {
				depth++
			}
		case '}':
			if !quote {
				depth--
			}
		case ',':
			if !quote && depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}
