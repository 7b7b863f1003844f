package reports

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/scenarios"
)

// The traits the engines record for an iptables row (iptables.Mode's) and
// a kube-proxy iptables row (kubeproxy.Variant's: the same, unordered).
var (
	builtinIPTables   = measure.ModeTraits{Walk: "KUBE-SERVICES", Objects: "rules", IPTablesBackend: true}
	kubeProxyIPTables = measure.ModeTraits{Walk: "KUBE-SERVICES", Unordered: true, Objects: "rules", IPTablesBackend: true}
)

// TestFindingsKubeProxyIPTablesPositions: kube-proxy writes KUBE-SERVICES in
// map order, so a kube-proxy iptables row's first and last services sit at
// random places in the chain; the finding must not call its lookup flat (as
// kube-proxy-10k's 25.4 / 26.7 µs did) and must point at the random position.
// A builtin row with the same figures still gets the first/last claim.
func TestFindingsKubeProxyIPTablesPositions(t *testing.T) {
	pos := func(p string, p50 int64) PositionResult {
		return PositionResult{Position: p, Latency: Summary{Count: 3000, P50: p50}}
	}
	lookup := []PositionResult{pos("first", 25400), pos("last", 26700), pos("random", 137700)}
	r := &Result{Modes: []ModeResult{
		{Mode: "iptables", Services: 10000, Lookup: lookup, Traits: builtinIPTables},
		{Mode: "iptables (kube-proxy)", Implementation: "kube-proxy", Services: 10000, Lookup: lookup, Traits: kubeProxyIPTables},
	}}
	f := Findings(r)
	var builtin, kp string
	for _, s := range f {
		switch {
		case strings.HasPrefix(s, "iptables (kube-proxy):"):
			kp = s
		case strings.HasPrefix(s, "iptables:"):
			builtin = s
		}
	}
	if !strings.Contains(builtin, "is flat across") {
		t.Errorf("builtin finding lost its first/last claim: %q (all: %q)", builtin, f)
	}
	if kp == "" || strings.Contains(kp, "flat") || strings.Contains(kp, "rises") {
		t.Fatalf("kube-proxy iptables finding claims a first/last shape: %q (all: %q)", kp, f)
	}
	if !strings.Contains(kp, "random places") || !strings.Contains(kp, "137.7") {
		t.Errorf("kube-proxy iptables finding does not point at the random position: %q", kp)
	}
}

// TestMarkdownKubeProxyIPTablesFirstLast: the Markdown report gives a
// builtin iptables row its "p50 at the last service is N× the first" line
// with the bootstrap interval, but no such ratio for a kube-proxy iptables
// row (its first and last services are at random places in KUBE-SERVICES)
// nor for any kube-proxy iptables row named with a version; a kube-proxy
// nftables row keeps it.
func TestMarkdownKubeProxyIPTablesFirstLast(t *testing.T) {
	samples := func(med int64) []int64 {
		out := make([]int64, 200)
		for i := range out {
			out[i] = med + int64(i%20)*100
		}
		return out
	}
	pos := func(p string, p50 int64) PositionResult {
		s := samples(p50)
		return PositionResult{Position: p, Latency: Summarize(s), SamplesNs: s}
	}
	lookup := []PositionResult{pos("first", 25400), pos("last", 46700), pos("random", 137700)}
	r := &Result{Scenario: &scenarios.Scenario{Name: "t", Services: scenarios.ServicesSpec{Count: 1000}}, Modes: []ModeResult{
		{Mode: "iptables", Services: 1000, Lookup: lookup},
		{Mode: "iptables (kube-proxy v1.36.3)", BaseMode: "iptables", Implementation: "kube-proxy", Services: 1000, Lookup: lookup, Traits: kubeProxyIPTables},
		{Mode: "nftables (kube-proxy v1.36.3)", BaseMode: "nftables", Implementation: "kube-proxy", Services: 1000, Lookup: lookup},
	}}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, r); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	lines := map[string]string{}
	for _, l := range strings.Split(md, "\n") {
		for _, m := range r.Modes {
			if strings.HasPrefix(l, "- "+r.label(m)+": p50 ") {
				lines[m.Mode] = l
			}
		}
	}
	if l := lines["iptables"]; !strings.Contains(l, "× the first") || !strings.Contains(l, "bootstrap CI") {
		t.Errorf("builtin iptables line: %q", l)
	}
	if l := lines["nftables (kube-proxy v1.36.3)"]; !strings.Contains(l, "× the first") {
		t.Errorf("kube-proxy nftables line: %q", l)
	}
	l := lines["iptables (kube-proxy v1.36.3)"]
	if l == "" || strings.Contains(l, "×") || strings.Contains(l, "bootstrap") {
		t.Errorf("kube-proxy iptables line gives a first/last ratio: %q", l)
	}
	if !strings.Contains(l, "random places") || !strings.Contains(l, "p50 first ") {
		t.Errorf("kube-proxy iptables line does not say why: %q", l)
	}
}

// TestMarkdownKubeProxySyncFullColumns: the sync.full table's back end,
// objects and bytes of kube-proxy rows say what is true: the read-back
// ruleset's objects and bytes ("-" where not seen, as nftables' bytes),
// the back end kube-proxy ran with; a row of a result written before the
// read-back (objects = service count) shows "-", never the service count
// or a 0.
func TestMarkdownKubeProxySyncFullColumns(t *testing.T) {
	full := func(objects, bytes int) []measure.SyncStats {
		return []measure.SyncStats{{Kind: "full", Wall: time.Second, Objects: objects, Bytes: bytes}}
	}
	kp := &measure.KubeProxy{Version: "v1.37.2"}
	r := &Result{Scenario: &scenarios.Scenario{Name: "t", Services: scenarios.ServicesSpec{Count: 1000}}, Modes: []ModeResult{
		{Mode: "iptables", Services: 1000, SyncFull: full(4015, 612345), Info: map[string]string{"backend": "legacy"}},
		{Mode: "iptables (kube-proxy)", BaseMode: "iptables", Implementation: "kube-proxy", Services: 1000, KubeProxy: kp, Traits: kubeProxyIPTables,
			SyncFull: full(5021, 700001), Info: map[string]string{"backend": "legacy", "ruleset": "5021 objects, 700001 bytes (iptables-legacy-save)"}},
		{Mode: "nftables (kube-proxy)", BaseMode: "nftables", Implementation: "kube-proxy", Services: 1000, KubeProxy: kp,
			SyncFull: full(3210, 0), Info: map[string]string{"backend": "knftables", "ruleset": "3210 objects, 0 bytes (nft -j list table ip kube-proxy)"}},
		{Mode: "iptables (kube-proxy old)", BaseMode: "iptables", Implementation: "kube-proxy", Services: 1000, KubeProxy: kp, Traits: kubeProxyIPTables,
			SyncFull: full(1000, 0), Info: map[string]string{"iptablesBackend": "nft"}},
	}}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, r); err != nil {
		t.Fatal(err)
	}
	row := map[string][]string{}
	for _, l := range strings.Split(b.String(), "\n") {
		if !strings.HasPrefix(l, "| ") || !strings.Contains(l, " s |") {
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) == 10 {
			if _, seen := row[cells[0]]; !seen {
				row[cells[0]] = cells
			}
		}
	}
	check := func(mode, backend, objs, bytes string) {
		t.Helper()
		c := row[mode]
		if c == nil {
			t.Fatalf("no sync.full row %q in:\n%s", mode, b.String())
		}
		if c[1] != backend || c[7] != objs || c[8] != bytes {
			t.Errorf("%s: back end %q, objects %q, bytes %q; want %q, %q, %q", mode, c[1], c[7], c[8], backend, objs, bytes)
		}
	}
	check("iptables", "legacy", "4015", "612345")
	check("iptables (kube-proxy)", "legacy", "5021", "700001")
	check("nftables (kube-proxy)", "knftables", "3210", "-")
	check("iptables (kube-proxy old)", "nft", "-", "-")
	for _, f := range Findings(r) {
		if strings.HasPrefix(f, "iptables (kube-proxy old):") && strings.Contains(f, "1,000") {
			t.Errorf("finding counts the old row's service count as rules: %q", f)
		}
	}
}
