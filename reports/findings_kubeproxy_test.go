package reports

import (
	"bytes"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/scenarios"
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
		{Mode: "iptables", Services: 10000, Lookup: lookup},
		{Mode: "iptables (kube-proxy)", Implementation: "kube-proxy", Services: 10000, Lookup: lookup},
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
		{Mode: "iptables (kube-proxy v1.36.3)", BaseMode: "iptables", Implementation: "kube-proxy", Services: 1000, Lookup: lookup},
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
