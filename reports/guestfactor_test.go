package reports

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/scenarios"
)

// hostAndGuest is a run split by --kernel auto on a host without IP_VS:
// none and iptables on the host; none, iptables (the bridge) and ipvs in
// uml:6.12. Every sample of a position is the same, so the factors are
// exact (within the HDR histogram's precision): the guest's iptables full sync is 4.6× the host's (9.2 s / 2 s),
// its rule walk 2.7× (370 − 100 µs against 125 − 25 µs), none's connect
// 4.0× (80 µs against 20 µs).
func hostAndGuest() *Result {
	sc := &scenarios.Scenario{Name: "split", Modes: []string{"none", "iptables", "ipvs"}, Services: scenarios.ServicesSpec{Count: 10000}, Repetitions: 3}
	sc.SetDefaults()
	same := func(v int64) []int64 {
		out := make([]int64, 100)
		for i := range out {
			out[i] = v
		}
		return out
	}
	row := func(mode, kernel string, first, last int64, sync time.Duration) ModeResult {
		m := ModeResult{Mode: mode, Kernel: kernel, Services: 10000}
		for _, p := range []struct {
			pos string
			v   int64
		}{{"first", first}, {"last", last}} {
			pr := PositionResult{Position: p.pos, SamplesNs: same(p.v)}
			pr.Latency = Summarize(pr.SamplesNs)
			m.Lookup = append(m.Lookup, pr)
		}
		for range 3 {
			m.SyncFull = append(m.SyncFull, measure.SyncStats{Kind: "full", Wall: sync, Objects: 40000})
		}
		m.SyncFullSummary = Summarize(syncWalls(m))
		return m
	}
	return &Result{RunID: "split1", Engine: "real", Scenario: sc,
		Machine: Machine{Kernel: "6.18.0", KernelWhere: "host+uml:6.12", KernelWhy: "auto: the host kernel lacks ipvs"},
		Kernels: []KernelRun{{Name: "host", Release: "6.18.0", Where: "host", Modes: []string{"none", "iptables"}},
			{Name: "uml:6.12", Release: "6.12.117", Where: "uml", Modes: []string{"none", "iptables", "ipvs"}, Bridge: "iptables", Baseline: "none"}},
		Modes: []ModeResult{
			row("none", "host", 20000, 20000, time.Millisecond),
			row("iptables", "host", 25000, 125000, 2*time.Second),
			row("none", "uml:6.12", 80000, 80000, time.Millisecond),
			row("iptables", "uml:6.12", 100000, 370000, 9200*time.Millisecond),
			row("ipvs", "uml:6.12", 90000, 90000, time.Second),
		}}
}

// TestGuestFactors: the guest's factor against the host comes from the
// bridge row on both kernels (sync, rule walk) and the baseline (connect);
// the rows that ran only in the guest are named; the findings lead with
// it, and the Markdown and HTML reports state it beside the guest's
// figures.
func TestGuestFactors(t *testing.T) {
	r := hostAndGuest()
	gs := GuestFactors(r)
	if len(gs) != 1 {
		t.Fatalf("factors %+v, want one (uml:6.12)", gs)
	}
	g := gs[0]
	near := func(got, want float64) bool { return got > want*0.99 && got < want*1.01 } // HDR histogram precision
	if g.Kernel != "uml:6.12" || g.Bridge != "iptables" || g.Services != 10000 || !near(g.Sync, 4.6) || !near(g.Walk, 2.7) || !near(g.Connect, 4.0) ||
		strings.Join(g.Only, ",") != "ipvs" {
		t.Errorf("factor %+v, want uml:6.12 via iptables at 10000: sync 4.6, walk 2.7, connect 4.0, only ipvs", g)
	}
	want := "ipvs ran in a user-mode-linux guest (uml:6.12, 6.12.117), where iptables' full sync took 4.6× and its rule walk 2.7× the host's, a connect without rules (none) 4.0×"
	if s := g.Sentence(); !strings.HasPrefix(s, want) {
		t.Errorf("sentence %q, want it to start %q", s, want)
	}
	f := Findings(r)
	if len(f) == 0 || !strings.HasPrefix(f[0], want) {
		t.Errorf("findings do not lead with the guest factor: %q", f)
	}
	for _, s := range f {
		if strings.HasPrefix(s, "ipvs (uml:6.12):") && !strings.Contains(s, "a guest figure: in uml:6.12 iptables' full sync took 4.6×") {
			t.Errorf("ipvs's finding does not carry the factor: %q", s)
		}
		if strings.HasPrefix(s, "iptables (host):") && strings.Contains(s, "guest figure") {
			t.Errorf("a host row carries the guest factor: %q", s)
		}
	}
	var md bytes.Buffer
	if err := WriteReportMarkdown(&md, r, DefaultBudgets); err != nil {
		t.Fatal(err)
	}
	guestSec := md.String()[strings.Index(md.String(), "## kernel uml:6.12"):]
	hostSec := md.String()[strings.Index(md.String(), "## kernel host"):strings.Index(md.String(), "## kernel uml:6.12")]
	if !strings.Contains(guestSec, "**Guest figures: in this user-mode-linux guest iptables' full sync took 4.6× and its rule walk 2.7× the host's") || strings.Contains(hostSec, "Guest figures") {
		t.Errorf("the guest note is not at the guest's section alone:\n%s", md.String())
	}
	if !strings.Contains(md.String(), "- guest factor of uml:6.12 against the host, measured on iptables (it ran on both kernels, at 10,000 services): sync.full p50 4.6×, rule walk (p50 at the last service − the first) 2.7×, none's connect p50 at the last service 4.0×") {
		t.Errorf("the across-kernels table lacks the factor line:\n%s", md.String())
	}
	var h bytes.Buffer
	if err := WriteHTML(&h, r, DefaultBudgets); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(h.String(), "Guest figures: in this user-mode-linux guest iptables&#39; full sync took 4.6×"); n < 3 {
		t.Errorf("HTML states the guest factor %d times, want beside each of the guest's lookup, CDF and sync sections", n)
	}

	// A flat host lookup gives no walk factor, and the wording drops it;
	// without a bridge there is no factor at all.
	r.Modes[1].Lookup[1].SamplesNs = r.Modes[1].Lookup[0].SamplesNs
	if g := GuestFactors(r)[0]; g.Walk != 0 || strings.Contains(g.Sentence(), "walk") || !strings.Contains(g.Sentence(), "iptables' full sync took 4.6× the host's") {
		t.Errorf("flat host lookup: walk %v, sentence %q", g.Walk, g.Sentence())
	} else if !strings.HasPrefix(g.WalkWhy, "the host's lookup is flat") {
		t.Errorf("flat host lookup: why %q, want the host named", g.WalkWhy)
	}
	r.Kernels[1].Bridge = ""
	if gs := GuestFactors(r); gs != nil {
		t.Errorf("no bridge: factors %+v, want none", gs)
	}
}

// TestSuspectBaseline: a guest's mode none measured cold (500 µs against
// its iptables' 100-370 µs: a ClusterIP path faster than direct-to-pod,
// as uml:6.12's none at 302 µs against iptables' 82 µs was) is a suspect
// baseline: every ratio against it is marked in the lookup and
// across-kernels tables, the findings give no overhead over
// direct-to-pod for its rows, the guest factor gives no connect factor
// and says why, and the warning explains it; the host's rows, whose none
// is not slower, keep their figures unmarked.
func TestSuspectBaseline(t *testing.T) {
	r := hostAndGuest()
	for i := range r.Modes[2].Lookup {
		p := &r.Modes[2].Lookup[i]
		for j := range p.SamplesNs {
			p.SamplesNs[j] = 500000
		}
		p.Latency = Summarize(p.SamplesNs)
	}
	g := GuestFactors(r)[0]
	if g.Connect != 0 || !strings.Contains(g.ConnectWhy, "the guest's none (500") || !strings.Contains(g.ConnectWhy, "slower than its iptables (370") {
		t.Errorf("connect %v, why %q: want no factor, the guest's none named", g.Connect, g.ConnectWhy)
	}
	if m := g.Measured(); strings.Contains(m, "a connect without rules (none)") || !strings.Contains(m, "the host's; a connect without rules not compared: the guest's none") {
		t.Errorf("measured %q: want the connect factor left out, with why", m)
	}
	var md bytes.Buffer
	if err := WriteReportMarkdown(&md, r, DefaultBudgets); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	guestSec := out[strings.Index(out, "## kernel uml:6.12"):strings.Index(out, "## across kernels")]
	hostSec := out[strings.Index(out, "## kernel host"):strings.Index(out, "## kernel uml:6.12")]
	for _, w := range []string{"| iptables | first | 0 | 100 | 100.0 |", "| 0.20×: none slower, suspect |", "| ipvs | last | 0 | 100 | 90.0 |", "| 0.18×: none slower, suspect |",
		"none's baseline is suspect"} {
		if !strings.Contains(guestSec, w) {
			t.Errorf("the guest's section lacks %q:\n%s", w, guestSec)
		}
	}
	if strings.Contains(hostSec, "suspect") || !strings.Contains(hostSec, "| 6.25× |") {
		t.Errorf("the host's section (none not slower) is marked, or lost its ratio:\n%s", hostSec)
	}
	if !strings.Contains(out, "0.74×: none slower, suspect (370.2 µs)") {
		t.Errorf("the across-kernels table does not mark guest iptables' last:\n%s", out)
	}
	if !strings.Contains(out, "none's connect p50 at the last service - (the guest's none") {
		t.Errorf("the factor line does not say why there is no connect factor:\n%s", out)
	}
	if strings.Contains(out, "a connect without rules (none) ") {
		t.Errorf("a connect factor over a suspect baseline is stated:\n%s", out)
	}
	for _, f := range Findings(r) {
		switch {
		case strings.HasPrefix(f, "iptables (uml:6.12):") || strings.HasPrefix(f, "ipvs (uml:6.12):"):
			if strings.Contains(f, "over direct-to-pod at the last service") || !strings.Contains(f, "no overhead over direct-to-pod given: mode none's p50 at the last service (500") {
				t.Errorf("a guest row's finding over a suspect baseline: %q", f)
			}
		case strings.HasPrefix(f, "iptables (host):"):
			if !strings.Contains(f, "+525% over direct-to-pod at the last service") {
				t.Errorf("the host row's finding lost its overhead: %q", f)
			}
		}
	}
}

// TestWarmupNote: a kernel's warm-up pass (KernelRun.Warmup) is stated
// at the top of that kernel's section, with its connections, time and
// the p50 of its first and last quarter, and not in another kernel's.
func TestWarmupNote(t *testing.T) {
	r := hostAndGuest()
	r.Kernels[1].Warmup = &Warmup{Connections: 24600, Ns: 72_800_000_000, FirstP50Ns: 302_000, LastP50Ns: 85_000}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	guestSec := out[strings.Index(out, "## kernel uml:6.12"):strings.Index(out, "## across kernels")]
	hostSec := out[strings.Index(out, "## kernel host"):strings.Index(out, "## kernel uml:6.12")]
	want := "Warm-up before the first mode, not recorded: 24,600 connections direct to the pods in 72.8 s, p50 302.0 µs in its first quarter and 85.0 µs in its last, so mode none, the baseline, is not measured on a cold kernel."
	if !strings.Contains(guestSec, want) || strings.Contains(hostSec, "Warm-up") {
		t.Errorf("the warm-up note is not in the guest's section alone (want %q):\n%s", want, out)
	}
	// The HTML page states it too, once, in the guest's lookup section
	// (the new-user check found it only in Markdown).
	var page bytes.Buffer
	if err := WriteHTML(&page, r, DefaultBudgets); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(page.String(), "Warm-up before the first mode, not recorded: 24,600 connections"); n != 1 {
		t.Errorf("the HTML page states the warm-up %d times, want once", n)
	}
}
