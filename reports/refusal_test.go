package reports

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/perf/benchfmt"
)

// TestRefusalNoteNamesTheLimitThatFired: the note on slow refusals names
// the sysctl whose counter rose (per destination: icmp_ratelimit; per
// namespace: icmp_msgs_per_sec), says when neither did, and names both
// for results without counters.
func TestRefusalNoteNamesTheLimitThatFired(t *testing.T) {
	r := &Result{NodeSysctls: map[string]string{"net.ipv4.icmp_ratelimit": "1000", "net.ipv4.icmp_msgs_per_sec": "1000", "net.ipv4.icmp_msgs_burst": "50"}}
	e := ErrorKind{Count: 3, SamplesNs: []int64{300e3, 1.02e9, 1.03e9}}
	for _, tt := range []struct {
		name      string
		icmp      *ICMPCounters
		want, not []string
	}{
		{"host", &ICMPCounters{DestUnreachSent: 3, RateLimitedHost: 2}, []string{"2 of 3 refusals", "withheld 2 by the per-destination limit net.ipv4.icmp_ratelimit = 1000 ms"}, []string{"icmp_msgs_per_sec"}},
		{"global", &ICMPCounters{DestUnreachSent: 3, RateLimitedGlobal: 5}, []string{"withheld 5 by the namespace-wide limit net.ipv4.icmp_msgs_per_sec = 1000 (net.ipv4.icmp_msgs_burst = 50)"}, []string{"icmp_ratelimit ="}},
		{"neither", &ICMPCounters{DestUnreachSent: 5, LockDropped: 5, SynRetrans: 2}, []string{"withheld none", "neither icmp_ratelimit nor icmp_msgs_per_sec"}, nil},
		{"old result", nil, []string{"icmp_ratelimit = 1000 ms", "icmp_msgs_per_sec = 1000"}, nil},
	} {
		got := refusalNote(r, ModeResult{Mode: "iptables", ICMP: tt.icmp}, "random", "refused", e)
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", tt.name, got, w)
			}
		}
		for _, n := range tt.not {
			if strings.Contains(got, n) {
				t.Errorf("%s: %q names %q", tt.name, got, n)
			}
		}
	}
	if got := refusalNote(r, ModeResult{Mode: "iptables"}, "random", "refused", ErrorKind{Count: 1, SamplesNs: []int64{300e3}}); got != "" {
		t.Errorf("fast refusals got a note: %q", got)
	}
}

// TestTimeToErrorInEveryFormat: a position's failed connections per cause
// (count and time to error) reach every report format.
func TestTimeToErrorInEveryFormat(t *testing.T) {
	r := loadFixture(t)
	m := &r.Modes[len(r.Modes)-1]
	p := &m.Lookup[len(m.Lookup)-1]
	p.ErrorKinds = map[string]ErrorKind{
		"refused": {Count: 3, SamplesNs: []int64{250e3, 1.02e9, 1.03e9}},
		"timeout": {Count: 1, SamplesNs: []int64{2.004e9}},
	}
	want := map[string][]string{
		"md":          {"| refused | 3 |"},
		"html":        {"lookup.refused.timetoerror.p50", "lookup.timeout.count"},
		"csv":         {",lookup.refused.count,3,count,3", ",lookup.refused.timetoerror.max,1.03", ",lookup.timeout.timetoerror.p50,"},
		"junit":       {"lookup.refused.timetoerror.p99{", "lookup.timeout.count{"},
		"gobench":     {"BenchmarkTimeToError/mode=" + m.Mode, "/cause=refused/", "\t3\t"},
		"openmetrics": {"proxybench_lookup_time_to_error_seconds_bucket{", `cause="refused"`, "proxybench_lookup_refused_timetoerror_p50_seconds{", "proxybench_lookup_timeout_count{"},
	}
	for _, format := range Formats {
		var b bytes.Buffer
		if err := WriteFormat(&b, r, format, ReportOptions{}); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		ws, ok := want[format]
		if !ok {
			t.Errorf("format %s: no expectation; add one", format)
		}
		for _, w := range ws {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s lacks %q", format, w)
			}
		}
	}
}

// TestTimeToErrorGoBenchParses: benchstat's reader takes the
// BenchmarkTimeToError lines: a result per cause with its count and units.
func TestTimeToErrorGoBenchParses(t *testing.T) {
	r := loadFixture(t)
	m := &r.Modes[len(r.Modes)-1]
	m.Lookup[0].ErrorKinds = map[string]ErrorKind{"refused": {Count: 2, SamplesNs: []int64{300e3, 1.02e9}}}
	var b bytes.Buffer
	if err := WriteGoBench(&b, r); err != nil {
		t.Fatal(err)
	}
	rd := benchfmt.NewReader(&b, "gobench")
	found := false
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.SyntaxError:
			t.Errorf("benchfmt: %v", rec)
		case *benchfmt.Result:
			if strings.HasPrefix(string(rec.Name), "TimeToError/") {
				found = true
				if rec.Iters != 2 || len(rec.Values) != 4 || rec.Values[0].OrigUnit != "ns/op" {
					t.Errorf("TimeToError result %+v", rec)
				}
			}
		}
	}
	if !found {
		t.Errorf("no TimeToError result in:\n%s", b.String())
	}
}
