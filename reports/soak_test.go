package reports

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proxybench/proxybench/scenarios"
)

// soakSpec is a small soak: 2 idle, 6 churn, 2 quiet intervals of 1 s.
func soakSpec() scenarios.SoakSpec {
	return scenarios.SoakSpec{Duration: scenarios.Duration{Duration: 6 * time.Second}, Interval: scenarios.Duration{Duration: time.Second},
		Rate: 50, Churn: 5, Idle: 2, Quiet: 2, Probes: 2, FlatBound: 5}
}

// synthSamples are a soak's samples over spec: RSS rising by perHour
// MiB/h from 100 MiB with Gaussian noise of sd MiB (seeded), proxy CPU
// idle and quiet per interval as given (cores), every connection ok but
// one timeout per interval.
func synthSamples(spec scenarios.SoakSpec, perHour, sd, idleCores, quietCores float64, seed uint64) []SoakSample {
	rng := rand.New(rand.NewPCG(seed, 1))
	iv := spec.Interval.Duration
	var out []SoakSample
	for i := 1; i <= spec.Intervals(); i++ {
		at := time.Duration(i) * iv
		stage := SoakChurn
		cores := 0.2
		switch {
		case i <= spec.Idle:
			stage, cores = SoakIdle, idleCores
		case i > spec.Idle+int(spec.Duration.Duration/iv):
			stage, cores = SoakQuiet, quietCores
		}
		rss := 1000 + perHour*at.Hours() + rng.NormFloat64()*sd
		out = append(out, SoakSample{Index: i, AtNs: int64(at), SpanNs: int64(iv), Stage: stage,
			ProxyCPUNs: int64(cores * float64(iv)), SelfRSSBytes: uint64(rss * (1 << 20)), SelfHeapBytes: 40 << 20, SelfGoroutines: 30,
			SelfCPUNs: int64(iv / 2), Conntrack: 500, Objects: 120, Syncs: 1, Changes: 5, Observed: 5, ProgP50Ns: 2e6, ProgP99Ns: 9e6,
			Attempts: 50, OK: 49, Errors: map[string]int{"timeout": 1}, LookupP50Ns: 1e5, LookupP99Ns: 4e5})
	}
	return out
}

func soakHeader(spec scenarios.SoakSpec) SoakHeader {
	return SoakHeader{Tool: "proxybench test", RunID: "abc123", Row: "iptables", Mode: "iptables", Services: 100,
		Started: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Spec: spec,
		Scenario: &scenarios.Scenario{Name: "soak-test", Repetitions: 1, Soak: &spec},
		ProxyCPU: "its syncs' CPU", ProxyRSS: "not separable"}
}

// writeStream writes a whole stream of samples (end line included when
// end is set) and returns its path.
func writeStream(t *testing.T, h SoakHeader, samples []SoakSample, end *SoakEnd) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "soak", "iptables.jsonl")
	w, err := CreateSoakStream(path, h)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		if err := w.Sample(s); err != nil {
			t.Fatal(err)
		}
	}
	if end != nil {
		if err := w.End(*end); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSoakStreamRoundTrip: what the writer wrote reads back equal, one
// JSON object a line, the header first.
func TestSoakStreamRoundTrip(t *testing.T) {
	spec := soakSpec()
	h := soakHeader(spec)
	samples := synthSamples(spec, 0, 0.1, 0.001, 0.001, 1)
	end := &SoakEnd{AtNs: samples[len(samples)-1].AtNs, Changes: 30}
	path := writeStream(t, h, samples, end)
	if !IsSoakStream(path) {
		t.Fatal("IsSoakStream: false for a stream")
	}
	b, _ := os.ReadFile(path)
	if n := bytes.Count(b, []byte("\n")); n != len(samples)+2 {
		t.Errorf("%d lines, want header + %d samples + end", n, len(samples))
	}
	sr, err := ReadSoakStream(path)
	if err != nil {
		t.Fatal(err)
	}
	h.Schema = SoakStreamVersion
	if !reflect.DeepEqual(sr.Header, h) || !reflect.DeepEqual(sr.Samples, samples) || !reflect.DeepEqual(sr.End, end) || sr.Skipped != 0 {
		t.Errorf("read back differs:\nheader %+v\nwant   %+v\n%d samples (want %d), end %+v, skipped %d", sr.Header, h, len(sr.Samples), len(samples), sr.End, sr.Skipped)
	}
	if sr.CutNote() != "" || SoakStatus(sr) != "complete" {
		t.Errorf("a whole stream: cut note %q, status %q", sr.CutNote(), SoakStatus(sr))
	}
	if got := SoakStreams(filepath.Dir(filepath.Dir(path))); len(got) != 1 || got[0] != path {
		t.Errorf("SoakStreams of the artifact folder = %v, want [%s]", got, path)
	}
	if fake := filepath.Join(t.TempDir(), "r.json"); os.WriteFile(fake, []byte(`{"schemaVersion":1}`), 0o644) == nil && IsSoakStream(fake) {
		t.Error("IsSoakStream: true for a result")
	}
}

// TestSoakStreamCut: a stream cut anywhere in a line (a kill -9 or a
// crash mid-write) reads up to its last whole line, without its end;
// one cut in its header is an error.
func TestSoakStreamCut(t *testing.T) {
	spec := soakSpec()
	samples := synthSamples(spec, 0, 0.1, 0.001, 0.001, 2)
	path := writeStream(t, soakHeader(spec), samples, &SoakEnd{AtNs: samples[len(samples)-1].AtNs})
	whole, _ := os.ReadFile(path)
	lines := bytes.SplitAfter(whole, []byte("\n"))
	lines = lines[:len(lines)-1] // after the last newline
	for _, tc := range []struct {
		name    string
		keep    int // whole lines kept
		extra   int // bytes of the next line kept
		samples int
		skipped int
	}{
		{"in the 4th sample", 4, 17, 3, 1},
		{"after the 4th sample", 5, 0, 4, 0},
		{"in the end line", len(lines) - 1, 5, len(samples), 1},
		{"its newline missing", len(lines) - 1, len(lines[len(lines)-1]) - 1, len(samples), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cut := bytes.Join(lines[:tc.keep], nil)
			cut = append(cut, lines[tc.keep][:tc.extra]...)
			p := filepath.Join(t.TempDir(), "cut.jsonl")
			if err := os.WriteFile(p, cut, 0o644); err != nil {
				t.Fatal(err)
			}
			sr, err := ReadSoakStream(p)
			if err != nil {
				t.Fatal(err)
			}
			if len(sr.Samples) != tc.samples || sr.Skipped != tc.skipped || sr.End != nil {
				t.Fatalf("%d samples, %d skipped, end %v: want %d, %d, none", len(sr.Samples), sr.Skipped, sr.End, tc.samples, tc.skipped)
			}
			if !reflect.DeepEqual(sr.Samples, samples[:tc.samples]) {
				t.Error("the whole lines read back differ from those written")
			}
			last := clock(time.Duration(samples[tc.samples-1].AtNs))
			if note := sr.CutNote(); note != "stream ends at "+last+" of 10s: the run was killed or crashed" {
				t.Errorf("cut note %q", note)
			}
			sr.Live = true // its run still going: not cut, still being written
			if note := sr.CutNote(); note != "stream written up to "+last+" of 10s so far: run abc123 is still going" {
				t.Errorf("live note %q", note)
			}
		})
	}
	p := filepath.Join(t.TempDir(), "header.jsonl")
	if err := os.WriteFile(p, lines[0][:len(lines[0])-9], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSoakStream(p); err == nil {
		t.Error("a stream cut in its header read without error")
	}
}

// TestFitSlope: a noiseless line gives its slope with a zero-width
// interval; with Gaussian noise, the 95% interval holds the true slope
// in about 95% of 400 synthetic series (binomial: 93..97% but for a
// chance of about 1 in 100), and it narrows with more samples.
func TestFitSlope(t *testing.T) {
	x := []float64{0, 1, 2, 3, 4}
	b, lo, hi := FitSlope(x, []float64{10, 13, 16, 19, 22})
	if math.Abs(b-3) > 1e-9 || math.Abs(lo-3) > 1e-9 || math.Abs(hi-3) > 1e-9 {
		t.Errorf("noiseless: slope %v [%v, %v], want 3 [3, 3]", b, lo, hi)
	}
	if _, lo, hi := FitSlope(x[:2], []float64{1, 2}); !math.IsNaN(lo) || !math.IsNaN(hi) {
		t.Errorf("two points: interval [%v, %v], want NaN", lo, hi)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	const trials, slope = 400, -2.5
	covered := 0
	var width20, width200 float64
	for k := range trials {
		n := 20
		if k%2 == 1 {
			n = 200
		}
		xs, ys := make([]float64, n), make([]float64, n)
		for i := range xs {
			xs[i] = float64(i) / float64(n)
			ys[i] = 50 + slope*xs[i] + rng.NormFloat64()
		}
		_, lo, hi := FitSlope(xs, ys)
		if lo <= slope && slope <= hi {
			covered++
		}
		if n == 20 {
			width20 += hi - lo
		} else {
			width200 += hi - lo
		}
	}
	if c := float64(covered) / trials; c < 0.925 || c > 0.975 {
		t.Errorf("the 95%% interval held the true slope in %.1f%% of %d series", c*100, trials)
	}
	if width200 >= width20/2 {
		t.Errorf("mean interval width with 200 samples %.3g, with 20 %.3g: want it much narrower", width200/trials*2, width20/trials*2)
	}
}

// TestSoakVerdicts: synthetic soaks with a known memory slope and CPU
// tail get the verdicts their figures call for, and the connection
// counts add up (lost 0 when every attempt has an outcome).
func TestSoakVerdicts(t *testing.T) {
	spec := soakSpec()
	spec.Duration.Duration = 2 * time.Hour // 7200 churn intervals of 1 s
	for _, tc := range []struct {
		name                 string
		perHour, sd          float64
		idle, quiet          float64
		memory, cpu          string
		loAbove, hiBelow     float64
		loseOne, cutLastLine bool
	}{
		{name: "flat", perHour: 0.5, sd: 2, idle: 0.002, quiet: 0.0025, memory: "flat", cpu: "settled", loAbove: -5, hiBelow: 5},
		{name: "growing", perHour: 40, sd: 2, idle: 0.002, quiet: 0.2, memory: "growing", cpu: "high", loAbove: 30, hiBelow: 50},
		{name: "shrinking", perHour: -40, sd: 2, idle: 0.1, quiet: 0.12, memory: "shrinking", cpu: "settled", loAbove: -50, hiBelow: -30},
		{name: "too noisy", perHour: 0, sd: 200, idle: 0, quiet: 0.005, memory: "undecided", cpu: "settled", loAbove: -100, hiBelow: 100},
		{name: "lost one", perHour: 0, sd: 1, idle: 0, quiet: 0, memory: "flat", cpu: "settled", loAbove: -5, hiBelow: 5, loseOne: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sr := &SoakResult{Header: soakHeader(spec), Samples: synthSamples(spec, tc.perHour, tc.sd, tc.idle, tc.quiet, 3), End: &SoakEnd{}}
			if tc.loseOne {
				sr.Samples[10].Attempts++
			}
			// The first quiet interval syncs the churn's last changes: not
			// part of the quiet tail's CPU.
			for i, x := range sr.Samples {
				if x.Stage == SoakQuiet {
					sr.Samples[i].ProxyCPUNs = 3 * x.SpanNs
					break
				}
			}
			v := SoakVerdicts(sr)
			if v.Memory.Verdict != tc.memory || v.Memory.Lo < tc.loAbove || v.Memory.Hi > tc.hiBelow || !(v.Memory.Lo <= v.Memory.PerHour && v.Memory.PerHour <= v.Memory.Hi) {
				t.Errorf("memory %+v, want %s within [%v, %v]", v.Memory, tc.memory, tc.loAbove, tc.hiBelow)
			}
			if v.Memory.N != 7200 || !strings.HasPrefix(v.Memory.Series, "proxybench RSS") {
				t.Errorf("regressed %d samples of %q, want the 7200 churn intervals of proxybench's RSS", v.Memory.N, v.Memory.Series)
			}
			if math.Abs(v.IdleCores-tc.idle) > 1e-6 || math.Abs(v.QuietCores-tc.quiet) > 1e-6 || v.CPU != tc.cpu {
				t.Errorf("CPU idle %v quiet %v %s, want %v %v %s", v.IdleCores, v.QuietCores, v.CPU, tc.idle, tc.quiet, tc.cpu)
			}
			n := len(sr.Samples)
			wantLost := 0
			if tc.loseOne {
				wantLost = 1
			}
			if v.Attempts != 50*n+wantLost || v.OK != 49*n || v.Errors != n || v.ErrorsBy["timeout"] != n || v.Lost != wantLost || !v.LostKnown {
				t.Errorf("connections %d ok %d errors %d (%v) lost %d (known %v), want %d %d %d, lost %d", v.Attempts, v.OK, v.Errors, v.ErrorsBy, v.Lost, v.LostKnown, 50*n+wantLost, 49*n, n, wantLost)
			}
			sec := SoakVerdictSection("iptables", sr)
			if fail := sec.Rows[0].Fail; (fail != "") != (tc.memory == "growing" || tc.cpu == "high" || tc.loseOne) {
				t.Errorf("verdict row check %q for memory %s, CPU %s, lost %d", fail, tc.memory, tc.cpu, wantLost)
			}
		})
	}
	// A sync that carries the churn's last changes into the second quiet
	// interval (the first ended with changes pending) is catch-up, not
	// CPU that stays high; high CPU once nothing is pending is.
	for _, tc := range []struct {
		name    string
		pending int
		cpu     string
	}{{"catch-up in the second quiet interval", 311, "settled"}, {"high once caught up", 0, "high"}} {
		spec4 := spec
		spec4.Quiet = 4
		sr := &SoakResult{Header: soakHeader(spec4), Samples: synthSamples(spec4, 0, 1, 0.002, 0.002, 3), End: &SoakEnd{}}
		q := 0
		for i, x := range sr.Samples {
			if x.Stage != SoakQuiet {
				continue
			}
			switch q {
			case 0:
				sr.Samples[i].ProxyCPUNs, sr.Samples[i].Pending = 3*x.SpanNs, tc.pending
			case 1:
				sr.Samples[i].ProxyCPUNs = 3 * x.SpanNs
			}
			q++
		}
		if q < 3 {
			t.Fatalf("%s: %d quiet intervals, want 3 or more", tc.name, q)
		}
		if v := SoakVerdicts(sr); v.CPU != tc.cpu {
			t.Errorf("%s: CPU %s (quiet %v cores, idle %v), want %s", tc.name, v.CPU, v.QuietCores, v.IdleCores, tc.cpu)
		}
	}
	// Growth over a short soak is shown, marked as warm-up, and does not
	// fail the row.
	short := soakSpec()
	short.Duration.Duration = 5 * time.Minute
	sr5 := &SoakResult{Header: soakHeader(short), Samples: synthSamples(short, 40, 0.05, 0, 0, 6), End: &SoakEnd{}}
	sec := SoakVerdictSection("iptables", sr5)
	if v := SoakVerdicts(sr5); v.Memory.Verdict != "growing" || sec.Rows[0].Fail != "" || !strings.Contains(sec.Rows[0].Cells[6].Text, "warm-up, not judged a leak") {
		t.Errorf("5 min at 40 MiB/h: %+v, check %q, cell %q", v.Memory, sec.Rows[0].Fail, sec.Rows[0].Cells[6].Text)
	}
	// A kube-proxy row's own RSS is the series regressed.
	sr := &SoakResult{Header: soakHeader(spec), Samples: synthSamples(spec, 0, 1, 0, 0, 4)}
	for i := range sr.Samples {
		sr.Samples[i].ProxyRSSBytes = uint64(60+20*time.Duration(sr.Samples[i].AtNs).Hours()) << 20
	}
	if v := SoakVerdicts(sr); v.Memory.Series != "proxy RSS" || v.Memory.Verdict != "growing" || v.LostKnown {
		t.Errorf("kube-proxy RSS at 20 MiB/h, a cut stream: %+v, lost known %v", v.Memory, v.LostKnown)
	}
}

// TestSoakStreamReportsInEveryFormat: a cut stream read back renders in
// every format, marked cut ("stream ends at … : the run was killed or
// crashed"), with the verdicts and the series; the HTML has a plot of
// every series.
func TestSoakStreamReportsInEveryFormat(t *testing.T) {
	spec := soakSpec()
	samples := synthSamples(spec, 3, 0.5, 0.001, 0.002, 5)
	path := writeStream(t, soakHeader(spec), samples[:7], nil)
	sr, err := ReadSoakStream(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ResultFromSoakStreams([]*SoakResult{sr})
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range Formats {
		var b bytes.Buffer
		if err := WriteFormat(&b, r, format, ReportOptions{Budgets: DefaultBudgets}); err != nil {
			t.Errorf("%s: %v", format, err)
			continue
		}
		out := b.String()
		if !strings.Contains(out, "soak") {
			t.Errorf("%s: no soak figure", format)
		}
		switch format {
		case "md", "html":
			for _, want := range []string{"stream ends at 00:00:07 of 10s: the run was killed or crashed", soakVerdictTitle, soakSeriesTitle, "in flight at the cut"} {
				if !strings.Contains(out, want) {
					t.Errorf("%s: no %q", format, want)
				}
			}
		}
		if format == "html" {
			sec := out[strings.Index(out, `<h2 id="soak">`):]
			sec = sec[:strings.Index(sec[1:], "<h2")+1]
			if n := strings.Count(sec, `<svg class="plot"`); n != len(soakPlots) {
				t.Errorf("html: %d plots, want one per series (%d)", n, len(soakPlots))
			}
		}
	}
}

// BenchmarkSoakSample is the stream's cost per interval: one sample
// marshalled, written and fsync'd (a soak at interval 10 s pays it once
// every 10 s).
func BenchmarkSoakSample(b *testing.B) {
	spec := soakSpec()
	w, err := CreateSoakStream(filepath.Join(b.TempDir(), "s.jsonl"), soakHeader(spec))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	x := synthSamples(spec, 0, 1, 0, 0, 1)[3]
	b.ResetTimer()
	for range b.N {
		if err := w.Sample(x); err != nil {
			b.Fatal(err)
		}
	}
}

// TestShortDuration: trailing zero units go, others stay.
func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{time.Hour: "1h", time.Hour + time.Minute: "1h1m", 4*time.Minute + 50*time.Second: "4m50s",
		7 * time.Minute: "7m", 6 * time.Second: "6s", 90 * time.Minute: "1h30m", time.Hour + 5*time.Second: "1h0m5s"} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// BenchmarkSoakStreamCPU: the process CPU (user+system, getrusage(2):
// the JSON encoding, the write(2) and the fsync(2)) one streamed sample
// costs, as cpu-ns/sample and as a share of one core over the default
// 10 s interval (stream-%core); the bound is 1% of the run's
// CPU.
func BenchmarkSoakStreamCPU(b *testing.B) {
	spec := soakSpec()
	w, err := CreateSoakStream(filepath.Join(b.TempDir(), "s.jsonl"), soakHeader(spec))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	x := synthSamples(spec, 0, 1, 0, 0, 1)[3]
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b.ResetTimer()
	c0 := cpu()
	for range b.N {
		if err := w.Sample(x); err != nil {
			b.Fatal(err)
		}
	}
	per := float64(cpu()-c0) / float64(b.N)
	b.ReportMetric(per, "cpu-ns/sample")
	b.ReportMetric(per/float64(10*time.Second)*100, "stream-%core")
}

// TestSoakAfterConnect: errors after the connect (the handshake done,
// the echo line late) sum into the verdict beside their cause, and a
// driver that started connections seconds late says so in a note with
// that split; a stream without the split reads as before.
func TestSoakAfterConnect(t *testing.T) {
	spec := soakSpec()
	sr := &SoakResult{Header: soakHeader(spec), Samples: synthSamples(spec, 0, 1, 0, 0, 5), End: &SoakEnd{}}
	plain := SoakVerdictSection("iptables", sr)
	sr.Samples[3].AfterConnect = map[string]int{"timeout": 1}
	sr.Samples[4].AfterConnect = map[string]int{"timeout": 1}
	sr.Samples[4].LateMaxNs = int64(12300 * time.Millisecond)
	v := SoakVerdicts(sr)
	n := len(sr.Samples)
	if v.AfterConnect["timeout"] != 2 || v.ErrorsBy["timeout"] != n || v.LateMaxNs != int64(12300*time.Millisecond) {
		t.Fatalf("after connect %v of %v, late %v: want 2 of %d timeouts, 12.3 s", v.AfterConnect, v.ErrorsBy, time.Duration(v.LateMaxNs), n)
	}
	sec := SoakVerdictSection("iptables", sr)
	want := fmt.Sprintf("timeout %d (2 after the connect)", n)
	found := false
	for _, c := range sec.Rows[0].Cells {
		found = found || c.Text == want
	}
	if !found {
		t.Errorf("verdict row %+v: no cell %q", sec.Rows[0].Cells, want)
	}
	note := strings.Join(sec.Notes, "\n")
	if !strings.Contains(note, "up to 12.3s after their scheduled time") || !strings.Contains(note, fmt.Sprintf("2 of the %d errors came after the connect", n)) {
		t.Errorf("notes %q: want the lateness and the split", note)
	}
	for _, c := range plain.Rows[0].Cells {
		if strings.Contains(c.Text, "after the connect") {
			t.Errorf("a stream without the split: cell %q", c.Text)
		}
	}
	if strings.Contains(strings.Join(plain.Notes, "\n"), "scheduled time") {
		t.Errorf("no lateness, yet a note: %q", plain.Notes)
	}
}
