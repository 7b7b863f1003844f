package reports

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/proxybench/proxybench/scenarios"
)

// PhaseSoak is the soak phase's name in results and sections.
const PhaseSoak = "soak"

// SoakStreamVersion is the version of the soak stream's line layout
// (SoakHeader.Schema); a reader refuses a newer one.
const SoakStreamVersion = 1

// Soak stages: which part of the soak an interval belongs to.
const (
	// SoakIdle: before the churn, churn off (the CPU verdict's baseline).
	SoakIdle = "idle"
	// SoakChurn: churn on.
	SoakChurn = "churn"
	// SoakQuiet: after the churn, churn off (the quiet tail).
	SoakQuiet = "quiet"
)

// SoakResult is one row's soak: the stream's header, every interval's
// sample, and how the stream ended. Samples are the raw figures; the
// verdicts (SoakVerdicts) are computed from them by every reader.
type SoakResult struct {
	// Stream is the path of the JSON-lines stream the samples were
	// written to as they were measured.
	Stream  string       `json:"stream"`
	Header  SoakHeader   `json:"header"`
	Samples []SoakSample `json:"samples"`
	// End is the stream's last line (nil: the stream has none, it was
	// cut: the run was killed or crashed).
	End *SoakEnd `json:"end,omitempty"`
	// KubeProxy is a kube-proxy row's own account of the soak (as the
	// churn phase's: its histograms' growth, CPU, peak RSS, log lines),
	// read at its end; nil for a builtin row and in a stream.
	KubeProxy *ChurnKubeProxy `json:"kubeProxy,omitempty"`
	// Live is set by a reader that found the stream's run still going
	// (its namespaces in use): a stream without an end line is then not
	// cut but still being written. Not recorded.
	Live bool `json:"-"`
	// Skipped counts lines of a stream read back that were not whole
	// (a line torn by a kill or crash, at most the last) or not a soak
	// line; they are left out.
	Skipped int `json:"skipped,omitempty"`
}

// SoakHeader is a soak stream's first line: whose soak it is and what
// its samples measure.
type SoakHeader struct {
	// Schema is SoakStreamVersion.
	Schema int    `json:"schema"`
	Tool   string `json:"tool"`
	RunID  string `json:"runID"`
	// Row is the row's label ("iptables", "nftables (kube-proxy)");
	// Mode, Implementation ("" builtin), BaseMode and Kernel as in
	// ModeResult.
	Row            string `json:"row"`
	Mode           string `json:"mode"`
	Implementation string `json:"implementation,omitempty"`
	BaseMode       string `json:"baseMode,omitempty"`
	Kernel         string `json:"kernel,omitempty"`
	Services       int    `json:"services"`
	// Started is when the soak's first interval began.
	Started time.Time `json:"started"`
	Machine Machine   `json:"machine"`
	// Spec is the soak block the row ran (defaults filled).
	Spec scenarios.SoakSpec `json:"spec"`
	// Phase is the phase that wrote the stream when not the soak
	// (PhaseSliceChurn; "": the soak).
	Phase string `json:"phase,omitempty"`
	// Scenario is the effective scenario of the run, so that a stream
	// renders on its own (report STREAM).
	Scenario *scenarios.Scenario `json:"scenario,omitempty"`
	// ProxyCPU and ProxyRSS say what the samples' proxy figures measure
	// for this row (a builtin proxier runs inside proxybench: its memory
	// is not separable from proxybench's own).
	ProxyCPU string `json:"proxyCpu"`
	ProxyRSS string `json:"proxyRss"`
}

// SoakSample is one interval of a soak, written to the stream at the
// interval's end.
type SoakSample struct {
	// Index is the interval's number, from 1; AtNs the interval's end
	// from the soak's start, SpanNs its length (the last interval also
	// waits for the connections in flight), in ns.
	Index  int    `json:"i"`
	AtNs   int64  `json:"atNs"`
	SpanNs int64  `json:"spanNs"`
	Stage  string `json:"stage"`
	// ProxyCPUNs is the proxy's CPU time (user+system) in the interval,
	// ns: for a builtin row the CPU of its syncs (the syncing thread and
	// the rule programs it ran, SyncStats.CPU).
	ProxyCPUNs int64 `json:"proxyCpuNs"`
	// ProxyRSSBytes, ProxyHeapBytes and ProxyGoroutines are the proxy
	// process's resident set, Go heap and goroutines at the interval's
	// end (a proxy of its own, such as kube-proxy; 0 when not separable).
	ProxyRSSBytes   uint64 `json:"proxyRssBytes,omitempty"`
	ProxyHeapBytes  uint64 `json:"proxyHeapBytes,omitempty"`
	ProxyGoroutines int    `json:"proxyGoroutines,omitempty"`
	// SelfRSSBytes is proxybench's own resident set (/proc/self/statm),
	// SelfHeapBytes its Go heap objects and SelfGoroutines its goroutines
	// (runtime/metrics), at the interval's end; SelfCPUNs its CPU time in
	// the interval, children (rule programs) included, ns.
	SelfRSSBytes   uint64 `json:"selfRssBytes"`
	SelfHeapBytes  uint64 `json:"selfHeapBytes"`
	SelfGoroutines int    `json:"selfGoroutines"`
	SelfCPUNs      int64  `json:"selfCpuNs"`
	// Conntrack is the node namespace's conntrack entry count at the
	// interval's end (nf_conntrack_count; -1: not read).
	Conntrack int `json:"conntrack"`
	// Objects is every proxy object in the node's kernel at the
	// interval's end, read back with the kernel's tools and summed as
	// rules (leftovers.Read: the rules of the KUBE-* iptables chains and
	// the jumps into them, the chains of nft table kube-proxy, IPVS real
	// servers, KUBE-* ipset entries; -1: none read back yet, or the
	// latest read failed). The read-back runs off the sampling path at
	// its own pace (at 10k services one read takes seconds to minutes):
	// Objects is the latest read finished by the interval's end,
	// ObjectsRead its number (from 1), ObjectsReadNs how long that read
	// took and ObjectsAgeNs how long before the interval's end it
	// finished. SyncObjects are the objects of the row's last full
	// sync (SyncStats.Objects), WrittenObjects those the interval's syncs
	// wrote (a partial sync writes what changed). Syncs and FailedSyncs
	// are the syncs of the interval.
	Objects        int   `json:"objects"`
	ObjectsReadNs  int64 `json:"objectsReadNs,omitempty"`
	ObjectsAgeNs   int64 `json:"objectsAgeNs,omitempty"`
	ObjectsRead    int   `json:"objectsRead,omitempty"`
	SyncObjects    int   `json:"syncObjects,omitempty"`
	WrittenObjects int   `json:"writtenObjects,omitempty"`
	Syncs          int   `json:"syncs"`
	FailedSyncs    int   `json:"failedSyncs,omitempty"`
	// Changes are the changes made in the interval; Observed the changes
	// whose programming latency ended in it (seen in the data plane),
	// with its p50 and p99 in ns (0: none); Pending the changes not yet
	// seen at its end.
	Changes   int   `json:"changes"`
	Observed  int   `json:"observed"`
	ProgP50Ns int64 `json:"progP50Ns,omitempty"`
	ProgP99Ns int64 `json:"progP99Ns,omitempty"`
	Pending   int   `json:"pending"`
	// Attempts are the open-loop connections scheduled in the interval;
	// OK those that finished in it with an echo, Errors those that
	// failed in it, by cause (refused, timeout, reset, unreachable,
	// other); NotStarted those given up unstarted because every worker
	// was busy and the queue full (proxybench's driver behind its rate:
	// not an outcome of the proxy, and not lost; streams of session 8
	// and before counted them as the error cause "overrun"). LookupP50Ns and
	// LookupP99Ns are the successful connects' times, ns; LateMaxNs the
	// latest start of a connection after its scheduled time.
	Attempts   int            `json:"attempts"`
	OK         int            `json:"ok"`
	Errors     map[string]int `json:"errors,omitempty"`
	NotStarted int            `json:"notStarted,omitempty"`
	// AfterConnect are the Errors, by cause, of connections whose
	// connect had completed (the handshake done; the echo line did not
	// come in time, or the stream ended before it: traffic.AfterConnect).
	// A timeout there with the client namespace's kernel counting no
	// retransmission is the echo server late, and the testbed's echo
	// server runs inside proxybench: on a starved machine, proxybench's
	// own scheduling. Streams before 2026-12-03 do not have it.
	AfterConnect map[string]int `json:"afterConnect,omitempty"`
	LookupP50Ns  int64          `json:"lookupP50Ns,omitempty"`
	LookupP99Ns  int64          `json:"lookupP99Ns,omitempty"`
	LateMaxNs    int64          `json:"lateMaxNs,omitempty"`
	// Faults are the interval's readings that failed (one sentence each).
	Faults []string `json:"faults,omitempty"`
}

// soakLegacyOverrun is the error cause under which streams of session 8
// and before counted the connections never started (NotStarted now).
const soakLegacyOverrun = "overrun"

// ErrorCount is the sample's failed connections, every cause (the
// connections never started are not failures: NotStartedCount).
func (s SoakSample) ErrorCount() int {
	n := 0
	for k, v := range s.Errors {
		if k != soakLegacyOverrun {
			n += v
		}
	}
	return n
}

// NotStartedCount is the sample's connections never started (the
// driver behind), an old stream's "overrun" errors included.
func (s SoakSample) NotStartedCount() int { return s.NotStarted + s.Errors[soakLegacyOverrun] }

// errorCauses is the sample's errors by cause, without the old streams'
// "overrun" (NotStartedCount).
func (s SoakSample) errorCauses() map[string]int {
	if _, ok := s.Errors[soakLegacyOverrun]; !ok {
		return s.Errors
	}
	out := map[string]int{}
	for k, v := range s.Errors {
		if k != soakLegacyOverrun {
			out[k] = v
		}
	}
	return out
}

// SoakEnd is a soak stream's last line, written when the soak ended
// (also when it was stopped by a signal: Stopped says so). A stream
// without one was cut.
type SoakEnd struct {
	// AtNs is the soak's end from its start, ns.
	AtNs int64 `json:"atNs"`
	// Stopped says why the soak stopped before its end ("" : it ran to
	// its end).
	Stopped string `json:"stopped,omitempty"`
	// InFlight are the connections scheduled that had not finished when
	// the soak ended, after waiting for them (lost); Unobserved the
	// changes never seen in the data plane.
	InFlight   int `json:"inFlight"`
	Changes    int `json:"changes"`
	Unobserved int `json:"unobserved"`
}

// soakLine is one line of a soak stream: exactly one field set.
type soakLine struct {
	Header *SoakHeader `json:"soakHeader,omitempty"`
	Sample *SoakSample `json:"sample,omitempty"`
	End    *SoakEnd    `json:"end,omitempty"`
}

// soakMagic starts every soak stream (its header line).
var soakMagic = []byte(`{"soakHeader":`)

// SoakWriter writes a soak stream: a header, one line per sample, an end
// line, each written whole with one write(2) and synced to disk
// (fsync(2)) before the call returns, so a kill -9 or a crash of the
// machine loses at most the interval being measured.
type SoakWriter struct {
	f    *os.File
	path string
}

// CreateSoakStream creates (or truncates) the stream at path, its folder
// included, writes h as its first line and syncs the file and its
// folder.
func CreateSoakStream(path string, h SoakHeader) (*SoakWriter, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	w := &SoakWriter{f: f, path: path}
	h.Schema = SoakStreamVersion
	if err := w.line(soakLine{Header: &h}); err != nil {
		f.Close()
		return nil, err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync() // the new file's entry
		d.Close()
	}
	return w, nil
}

// Path is the stream's path.
func (w *SoakWriter) Path() string { return w.path }

func (w *SoakWriter) line(l soakLine) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	if _, err := w.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("soak stream %s: %w", w.path, err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("soak stream %s: fsync: %w", w.path, err)
	}
	return nil
}

// Sample appends one interval's sample.
func (w *SoakWriter) Sample(s SoakSample) error { return w.line(soakLine{Sample: &s}) }

// End appends the end line.
func (w *SoakWriter) End(e SoakEnd) error { return w.line(soakLine{End: &e}) }

// Close closes the stream.
func (w *SoakWriter) Close() error { return w.f.Close() }

// IsSoakStream reports whether path is a soak stream (its first bytes
// are a stream header).
func IsSoakStream(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, len(soakMagic))
	n, _ := f.Read(b)
	return bytes.Equal(b[:n], soakMagic)
}

// ReadSoakStream reads the soak stream at path up to its last whole
// line: a line cut by a kill or crash (no newline, or not JSON) is left
// out and counted in Skipped, as is a line that is not a soak line. The
// header must be whole and of a schema this build reads; the result's
// End is nil when the stream has no end line (CutNote says where it
// ends).
func ReadSoakStream(path string) (*SoakResult, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(b, soakMagic) {
		return nil, fmt.Errorf("%s: not a soak stream (its first line is not a soak header)", path)
	}
	sr := &SoakResult{Stream: path}
	lines := bytes.Split(b, []byte("\n"))
	if last := lines[len(lines)-1]; len(last) == 0 {
		lines = lines[:len(lines)-1]
	} else {
		lines = lines[:len(lines)-1] // torn: no newline
		sr.Skipped++
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("%s: the soak stream's header line is not whole", path)
	}
	for i, l := range lines {
		var sl soakLine
		if err := json.Unmarshal(l, &sl); err != nil {
			if i == 0 {
				return nil, fmt.Errorf("%s: the soak stream's header: %w", path, err)
			}
			sr.Skipped++
			continue
		}
		switch {
		case i == 0 && sl.Header != nil:
			if sl.Header.Schema < 1 || sl.Header.Schema > SoakStreamVersion {
				return nil, fmt.Errorf("%s: soak stream schema %d; this proxybench reads 1..%d", path, sl.Header.Schema, SoakStreamVersion)
			}
			sr.Header = *sl.Header
		case i == 0:
			return nil, fmt.Errorf("%s: not a soak stream (its first line is not a soak header)", path)
		case sl.Sample != nil && sr.End == nil:
			sr.Samples = append(sr.Samples, *sl.Sample)
		case sl.End != nil && sr.End == nil:
			sr.End = sl.End
		default:
			sr.Skipped++
		}
	}
	return sr, nil
}

// SoakStreams lists the soak streams in dir (a run's artifact folder:
// dir/soak/*.jsonl the soak's, dir/slicechurn/*.jsonl the
// faults.sliceChurn phase's, or dir/*.jsonl), sorted.
func SoakStreams(dir string) []string {
	var out []string
	for _, pat := range []string{filepath.Join(dir, "soak", "*.jsonl"), filepath.Join(dir, "slicechurn", "*.jsonl"), filepath.Join(dir, "*.jsonl")} {
		m, _ := filepath.Glob(pat)
		for _, p := range m {
			if IsSoakStream(p) {
				out = append(out, p)
			}
		}
	}
	sort.Strings(out)
	return out
}

// clock formats d as hh:mm:ss.
func clock(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	return fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
}

// shortDuration is d without trailing zero units ("1h1m", "6s", "1h").
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// CutNote says where a soak stream without an end line ends, "" for a
// whole one: "stream ends at 00:12:40 of 1h: the run was killed or
// crashed" (Live: "stream written up to 00:12:40 of 1h so far: run
// 3f2a1c is still going").
func (sr *SoakResult) CutNote() string {
	if sr.End != nil {
		return ""
	}
	var at time.Duration
	if n := len(sr.Samples); n > 0 {
		at = time.Duration(sr.Samples[n-1].AtNs)
	}
	if sr.Live {
		return fmt.Sprintf("stream written up to %s of %s so far: run %s is still going", clock(at), shortDuration(sr.Header.Spec.Total()), sr.Header.RunID)
	}
	return fmt.Sprintf("stream ends at %s of %s: the run was killed or crashed", clock(at), shortDuration(sr.Header.Spec.Total()))
}

// ResultFromSoakStreams builds a result to render from soak streams read
// back without their run's result (a run killed, or crashed): one row
// per stream, the run's ID, scenario and machine from the first
// header; a cut stream's row is marked partial with its CutNote, and so
// is the result.
func ResultFromSoakStreams(streams []*SoakResult) (*Result, error) {
	if len(streams) == 0 {
		return nil, errors.New("no soak stream")
	}
	h := streams[0].Header
	sc := h.Scenario
	if sc == nil {
		sc = &scenarios.Scenario{Name: "soak", Repetitions: 1}
	}
	r := &Result{SchemaVersion: SchemaVersion, Tool: h.Tool, RunID: h.RunID, Engine: "real", Started: h.Started,
		Machine: h.Machine, Scenario: sc}
	var cut []string
	for _, sr := range streams {
		hd := sr.Header
		m := ModeResult{Mode: hd.Row, Implementation: hd.Implementation, BaseMode: hd.BaseMode, Kernel: hd.Kernel,
			Services: hd.Services, Soak: sr}
		if hd.Phase == PhaseSliceChurn {
			m.Soak, m.SliceChurn = nil, sr
		}
		if note := sr.CutNote(); note != "" {
			m.Partial = "soak " + note
			cut = append(cut, hd.Row+": "+note)
		} else if sr.End.Stopped != "" {
			m.Partial = "soak stopped: " + sr.End.Stopped
		}
		if n := len(sr.Samples); n > 0 {
			r.Finished = hd.Started.Add(time.Duration(sr.Samples[n-1].AtNs))
		}
		r.Modes = append(r.Modes, m)
	}
	if len(cut) > 0 {
		r.Partial = "rendered from soak streams without their result: " + strings.Join(cut, "; ")
	} else {
		r.Partial = "rendered from soak streams without their result (the run's other phases are not in them)"
	}
	return r, nil
}

// Slope is a linear trend with its 95% confidence interval.
type Slope struct {
	// Series names what was regressed: "proxy RSS" (a proxy process of
	// its own) or "proxybench RSS" (which holds a builtin proxier).
	Series string `json:"series"`
	// N is the number of samples; PerHour the slope in MiB/h, Lo and Hi
	// its 95% confidence interval (NaN when N < 3).
	N       int     `json:"n"`
	PerHour float64 `json:"perHour"`
	Lo      float64 `json:"lo"`
	Hi      float64 `json:"hi"`
	// Span is the time the samples cover (first to last).
	Span time.Duration `json:"span"`
	// Bound is the flat bound (MiB/h); Verdict is "flat" (Lo and Hi
	// within ±Bound), "growing" (Lo > 0, not flat), "shrinking" (Hi < 0,
	// not flat), "undecided" (the interval is wider than the bound and
	// holds 0) or "too few samples".
	Bound   float64 `json:"bound"`
	Verdict string  `json:"verdict"`
}

// FitSlope fits y = α + βx by least squares (gonum's stat.LinearRegression)
// and returns β with its 95% confidence interval β ± t(0.975, n−2)·se(β),
// where se(β) = √(Σ residual² / (n−2) / Σ (x−x̄)²) (the ordinary least
// squares standard error of the slope; residuals from gonum's fit, the
// t quantile from gonum's distuv.StudentsT). With fewer than 3 points,
// or x all equal, lo and hi are NaN. The interval assumes independent
// residuals: a soak's memory samples are autocorrelated, so it is, if
// anything, too narrow.
func FitSlope(x, y []float64) (beta, lo, hi float64) {
	n := len(x)
	if n < 2 || len(y) != n {
		return math.NaN(), math.NaN(), math.NaN()
	}
	alpha, beta := stat.LinearRegression(x, y, nil, false)
	sxx := stat.Variance(x, nil) * float64(n-1)
	if n < 3 || sxx == 0 || math.IsNaN(sxx) {
		return beta, math.NaN(), math.NaN()
	}
	var rss float64
	for i := range x {
		r := y[i] - (alpha + beta*x[i])
		rss += r * r
	}
	se := math.Sqrt(rss / float64(n-2) / sxx)
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 2)}.Quantile(0.975)
	return beta, beta - t*se, beta + t*se
}

// slopeVerdict judges a slope's interval against bound (Slope.Verdict).
func slopeVerdict(lo, hi, bound float64) string {
	switch {
	case math.IsNaN(lo) || math.IsNaN(hi):
		return "too few samples"
	case lo >= -bound && hi <= bound:
		return "flat"
	case lo > 0:
		return "growing"
	case hi < 0:
		return "shrinking"
	}
	return "undecided"
}

// SoakLeakSpan is the shortest span of memory samples whose "growing"
// verdict fails the row: over a shorter one the growth is mostly the
// warm-up (the Go heap and the kernel's tables reaching their working
// size), extrapolated to an hour; the verdict is shown, marked so.
const SoakLeakSpan = 30 * time.Minute

// memoryText is the memory verdict's cell: the verdict, its bound and
// sample count, and a short span's mark.
func memoryText(m Slope) string {
	t := fmt.Sprintf("%s (±%.3g MiB/h, n=%d over %s)", m.Verdict, m.Bound, m.N, shortDuration(m.Span.Round(time.Second)))
	if m.Verdict == "growing" && m.Span < SoakLeakSpan {
		t += fmt.Sprintf("; under %s: warm-up, not judged a leak", shortDuration(SoakLeakSpan))
	}
	return t
}

// SoakCPUSettled is the CPU verdict's tolerance: the quiet tail's proxy
// CPU has settled when it exceeds the idle baseline's by at most
// max(SoakCPURelative × idle, SoakCPUAbsolute cores).
const (
	SoakCPURelative = 0.5
	SoakCPUAbsolute = 0.01
)

// SoakVerdict are a soak's verdicts, from its samples.
type SoakVerdict struct {
	// Memory is the RSS slope over the churn intervals (every interval
	// when fewer than 3 churned): the proxy's own process when it has one
	// (kube-proxy), else proxybench's, which holds the builtin proxier.
	Memory Slope `json:"memory"`
	// Attempts, OK and Errors sum the intervals; ErrorsBy splits Errors
	// by cause; NotStarted are the connections never started (every
	// worker busy, the queue full: proxybench's driver did not hold the
	// rate, a row that is not valid as a soak at its rate). Lost =
	// Attempts − OK − Errors − NotStarted: connections scheduled with no
	// outcome. LostKnown is false for a cut stream (its last
	// interval's connections in flight are unknown: Lost is then those
	// in flight at the last sample).
	Attempts int            `json:"attempts"`
	OK       int            `json:"ok"`
	Errors   int            `json:"errors"`
	ErrorsBy map[string]int `json:"errorsBy,omitempty"`
	// AfterConnect splits ErrorsBy: the errors, by cause, of connections
	// whose connect had completed (SoakSample.AfterConnect; empty for a
	// stream from before 2026-12-03, which did not tell them apart).
	AfterConnect map[string]int `json:"afterConnect,omitempty"`
	// LateMaxNs is the latest a connection started (or was given up)
	// after its scheduled time, over the soak: seconds mean proxybench's
	// driver was not running (a starved machine).
	LateMaxNs  int64 `json:"lateMaxNs,omitempty"`
	NotStarted int   `json:"notStarted"`
	Lost       int   `json:"lost"`
	LostKnown  bool  `json:"lostKnown"`
	// IdleCores and QuietCores are the proxy's CPU (cores: CPU seconds
	// per second) over the idle intervals and over the quiet tail, its
	// leading intervals that still sync the churn's last changes left
	// out (catchUp) (NaN: none); CPU is "settled" (within SoakCPURelative and
	// SoakCPUAbsolute of idle), "high" or "not measured".
	IdleCores  float64 `json:"idleCores"`
	QuietCores float64 `json:"quietCores"`
	CPU        string  `json:"cpu"`
	// SelfIdleCores and SelfQuietCores are proxybench's own CPU over the
	// same intervals (driver, probes and proxier).
	SelfIdleCores  float64 `json:"selfIdleCores"`
	SelfQuietCores float64 `json:"selfQuietCores"`
	// Changes and Observed sum the intervals.
	Changes, Observed int
}

// memorySeries is the RSS a soak's memory verdict regresses, and its name.
func memorySeries(sr *SoakResult) (func(SoakSample) uint64, string) {
	for _, s := range sr.Samples {
		if s.ProxyRSSBytes > 0 {
			return func(s SoakSample) uint64 { return s.ProxyRSSBytes }, "proxy RSS"
		}
	}
	return func(s SoakSample) uint64 { return s.SelfRSSBytes }, "proxybench RSS"
}

// catchUp is how many leading quiet intervals of samples the quiet tail
// leaves out: they sync the churn's last changes, which is the churn's
// cost, not CPU that stays high after it. The first quiet interval, and
// each after it while the interval before it ended with changes not yet
// on the data plane (Pending > 0; at 10k a builtin iptables sync of 2-4 s
// CPU carried the last 311 changes into the second quiet interval, run
// of 2026-12-02), are left out; the last quiet interval always stays in
// the tail, and a single one is kept (as before: the tail is never empty
// when there is a quiet interval).
func catchUp(samples []SoakSample) int {
	quiet := 0
	for _, s := range samples {
		if s.Stage == SoakQuiet {
			quiet++
		}
	}
	skip := 0
	for i, s := range samples {
		if s.Stage != SoakQuiet || skip >= quiet-1 {
			continue
		}
		if skip == 0 || (i > 0 && samples[i-1].Pending > 0) {
			skip++
			continue
		}
		break
	}
	return skip
}

// SoakVerdicts computes the verdicts of sr from its samples.
func SoakVerdicts(sr *SoakResult) SoakVerdict {
	v := SoakVerdict{ErrorsBy: map[string]int{}, LostKnown: sr.End != nil}
	rss, name := memorySeries(sr)
	var x, y, xa, ya []float64
	var idleCPU, idleSpan, quietCPU, quietSpan, selfIdle, selfQuiet int64
	skip := catchUp(sr.Samples)
	for _, s := range sr.Samples {
		v.Attempts += s.Attempts
		v.OK += s.OK
		for k, n := range s.errorCauses() {
			v.ErrorsBy[k] += n
			v.Errors += n
		}
		for k, n := range s.AfterConnect {
			if v.AfterConnect == nil {
				v.AfterConnect = map[string]int{}
			}
			v.AfterConnect[k] += n
		}
		v.LateMaxNs = max(v.LateMaxNs, s.LateMaxNs)
		v.NotStarted += s.NotStartedCount()
		v.Changes += s.Changes
		v.Observed += s.Observed
		if m := rss(s); m > 0 {
			h, mib := float64(s.AtNs)/float64(time.Hour), float64(m)/(1<<20)
			xa, ya = append(xa, h), append(ya, mib)
			if s.Stage == SoakChurn {
				x, y = append(x, h), append(y, mib)
			}
		}
		switch s.Stage {
		case SoakIdle:
			idleCPU, idleSpan, selfIdle = idleCPU+s.ProxyCPUNs, idleSpan+s.SpanNs, selfIdle+s.SelfCPUNs
		case SoakQuiet:
			if skip > 0 {
				skip--
				continue
			}
			quietCPU, quietSpan, selfQuiet = quietCPU+s.ProxyCPUNs, quietSpan+s.SpanNs, selfQuiet+s.SelfCPUNs
		}
	}
	v.Lost = v.Attempts - v.OK - v.Errors - v.NotStarted
	if len(x) < 3 {
		x, y = xa, ya
	}
	beta, lo, hi := FitSlope(x, y)
	v.Memory = Slope{Series: name, N: len(x), PerHour: beta, Lo: lo, Hi: hi, Bound: sr.Header.Spec.FlatBound}
	if len(x) > 1 {
		v.Memory.Span = time.Duration((x[len(x)-1] - x[0]) * float64(time.Hour))
	}
	v.Memory.Verdict = slopeVerdict(lo, hi, v.Memory.Bound)
	cores := func(cpu, span int64) float64 {
		if span <= 0 {
			return math.NaN()
		}
		return float64(cpu) / float64(span)
	}
	v.IdleCores, v.QuietCores = cores(idleCPU, idleSpan), cores(quietCPU, quietSpan)
	v.SelfIdleCores, v.SelfQuietCores = cores(selfIdle, idleSpan), cores(selfQuiet, quietSpan)
	switch {
	case math.IsNaN(v.IdleCores) || math.IsNaN(v.QuietCores):
		v.CPU = "not measured"
	case v.QuietCores-v.IdleCores <= max(SoakCPURelative*v.IdleCores, SoakCPUAbsolute):
		v.CPU = "settled"
	default:
		v.CPU = "high"
	}
	return v
}

// mibOf is bytes in MiB.
func mibOf(b uint64) float64 { return float64(b) / (1 << 20) }

// numOrMissing is a numeric cell, or "-" for NaN.
func numOrMissing(v float64, format string) Cell {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return Missing()
	}
	return Num(v, format)
}

// causes formats errors by cause ("timeout 3, refused 1"), "-" for none.
func causes(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k, n := range m {
		if n > 0 {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return "-"
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// causesAfter is causes(m), each cause with some of its errors after the
// connect (after, a subset of m) saying how many: "timeout 187 (180
// after the connect)".
func causesAfter(m, after map[string]int) string {
	if len(after) == 0 {
		return causes(m)
	}
	parts := strings.Split(causes(m), ", ")
	for i, p := range parts {
		k, _, _ := strings.Cut(p, " ")
		if n := after[k]; n > 0 {
			parts[i] = fmt.Sprintf("%s (%d after the connect)", p, n)
		}
	}
	return strings.Join(parts, ", ")
}

// SoakStatus says how a soak's stream ended: "complete", "stopped: …"
// or its CutNote.
func SoakStatus(sr *SoakResult) string {
	switch {
	case sr.End == nil:
		return sr.CutNote()
	case sr.End.Stopped != "":
		return "stopped at " + clock(time.Duration(sr.End.AtNs)) + ": " + sr.End.Stopped
	}
	return "complete"
}

// SoakReport is the soak phase's sections of one row (the shape of
// internal/runner's Phase.Report): its verdicts and its per-interval
// samples; none when mr has no soak.
func SoakReport(label string, mr *ModeResult) []Section {
	sr := mr.Soak
	if sr == nil {
		return nil
	}
	return []Section{SoakVerdictSection(label, sr), SoakSeriesSection(label, sr)}
}

// soakVerdictTitle and soakSeriesTitle are the soak sections' titles.
const (
	soakVerdictTitle = "soak: memory slope, lost connections, CPU after churn"
	soakSeriesTitle  = "soak: one sample per interval"
)

// SoakVerdictSection is one row of the soak's verdicts (SoakVerdicts).
func SoakVerdictSection(label string, sr *SoakResult) Section {
	v := SoakVerdicts(sr)
	spec := sr.Header.Spec
	s := Section{Phase: PhaseSoak, Title: soakVerdictTitle, Scope: "row",
		Intro: fmt.Sprintf("Each row soaked %s: %d idle intervals, churn at %.3g changes/s for %s, %d quiet intervals, every %s, with %.3g new connections/s (open loop) throughout. "+
			"Memory: the least-squares slope of RSS over the churn intervals with its 95%% confidence interval (t distribution, n−2 degrees of freedom), flat only when the whole interval lies within ±%.3g MiB/h. "+
			"Lost: connections scheduled with no outcome (every other one is a success, an error with its cause, or not started). "+
			"Not started: connections the open loop gave up unstarted because every worker was busy and its queue full: proxybench's driver did not hold the rate (a starved machine), not an outcome of the proxy; a row with any is not a valid soak at its rate. "+
			"CPU: the proxy's CPU over the quiet tail (but its first interval, and each next one while the interval before it ended with changes not yet seen on the data plane: they sync the churn's last changes; the last quiet interval always counts) against the idle intervals before the churn; settled when at most max(%.0f%% of idle, %.3g cores) above it.",
			shortDuration(spec.Total()), spec.Idle, spec.Churn, shortDuration(spec.Duration.Duration), spec.Quiet, shortDuration(spec.Interval.Duration), spec.Rate,
			spec.FlatBound, SoakCPURelative*100, SoakCPUAbsolute),
		Columns: []Column{{Name: "stream"}, {Name: "intervals", Unit: "count"}, {Name: "memory series"},
			{Name: "memory slope", Unit: "MiB/h", Figure: "memory.slope"}, {Name: "slope CI low", Unit: "MiB/h", Figure: "memory.slope.lo"},
			{Name: "slope CI high", Unit: "MiB/h", Figure: "memory.slope.hi"}, {Name: "memory verdict"},
			{Name: "connections", Unit: "count", Figure: "connections"}, {Name: "ok", Unit: "count", Figure: "connections.ok"},
			{Name: "errors", Unit: "count", Figure: "connections.errors"}, {Name: "errors by cause"},
			{Name: "not started", Unit: "count", Figure: "connections.notStarted"},
			{Name: "lost", Unit: "count", Figure: "lost"},
			{Name: "proxy CPU idle", Unit: "cores", Figure: "cpu.idle"}, {Name: "proxy CPU quiet tail", Unit: "cores", Figure: "cpu.quiet"},
			{Name: "CPU verdict"}, {Name: "proxybench CPU idle", Unit: "cores", Figure: "self.cpu.idle"},
			{Name: "proxybench CPU quiet tail", Unit: "cores", Figure: "self.cpu.quiet"},
			{Name: "changes", Unit: "count"}, {Name: "observed", Unit: "count"}},
	}
	s.Notes = append(s.Notes, fmt.Sprintf("%s: proxy CPU is %s; proxy memory is %s. Stream: %s.", label, sr.Header.ProxyCPU, sr.Header.ProxyRSS, sr.Stream))
	lost := Int(v.Lost)
	if !v.LostKnown {
		lost = Cell{Text: fmt.Sprintf("%d in flight at the cut", v.Lost)}
		s.Notes = append(s.Notes, label+": "+sr.CutNote()+"; lost connections are not judged (the last interval's outcomes were not written).")
	}
	if sr.Skipped > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%s: %d line(s) of the stream were not whole and were left out.", label, sr.Skipped))
	}
	if late := time.Duration(v.LateMaxNs); late >= time.Second {
		after := 0
		for _, n := range v.AfterConnect {
			after += n
		}
		s.Notes = append(s.Notes, fmt.Sprintf("%s: the open loop started connections up to %s after their scheduled time (proxybench's driver not running: a starved machine); %d of the %d errors came after the connect (the handshake done, the echo line late; the echo server runs inside proxybench).",
			label, late.Round(10*time.Millisecond), after, v.Errors))
	}
	if kp := sr.KubeProxy; kp != nil {
		s.Notes = append(s.Notes, fmt.Sprintf("%s: kube-proxy %s's own account of the soak: %d network-programming observations (p50 %s), %d syncs (mean %.3f s), %d API writes (%d failed), CPU %.1f s and %.1f s in its rule programs, peak RSS %.1f MiB.",
			label, kp.Version, kp.Programming.Count, secondsText(kp.Programming.Quantile(0.5)), kp.Syncs.Count, kp.Syncs.SumSeconds/math.Max(float64(kp.Syncs.Count), 1),
			kp.Writes, kp.WriteErrors, float64(kp.CPUNs)/1e9, float64(kp.ChildCPUNs)/1e9, float64(kp.PeakRSSBytes)/(1<<20)))
	}
	_ = s.AddRow(label, Text(SoakStatus(sr)), Int(len(sr.Samples)), Text(v.Memory.Series),
		numOrMissing(v.Memory.PerHour, "%.2f"), numOrMissing(v.Memory.Lo, "%.2f"), numOrMissing(v.Memory.Hi, "%.2f"),
		Text(memoryText(v.Memory)),
		Int(v.Attempts), Int(v.OK), Int(v.Errors), Text(causesAfter(v.ErrorsBy, v.AfterConnect)), Int(v.NotStarted), lost,
		numOrMissing(v.IdleCores, "%.4f"), numOrMissing(v.QuietCores, "%.4f"), Text(v.CPU),
		numOrMissing(v.SelfIdleCores, "%.4f"), numOrMissing(v.SelfQuietCores, "%.4f"),
		Int(v.Changes), Int(v.Observed))
	var fail []string
	if v.LostKnown && v.Lost != 0 {
		fail = append(fail, fmt.Sprintf("%d connections lost", v.Lost))
	}
	if v.NotStarted > 0 {
		fail = append(fail, fmt.Sprintf("%d of %d connections not started: the driver did not hold %.3g connections/s", v.NotStarted, v.Attempts, spec.Rate))
	}
	if v.Memory.Verdict == "growing" && v.Memory.Span >= SoakLeakSpan {
		fail = append(fail, fmt.Sprintf("memory growing %.2f MiB/h [%.2f, %.2f]", v.Memory.PerHour, v.Memory.Lo, v.Memory.Hi))
	}
	if v.CPU == "high" {
		fail = append(fail, fmt.Sprintf("proxy CPU after churn %.4f cores against %.4f idle", v.QuietCores, v.IdleCores))
	}
	s.Rows[0].Fail = strings.Join(fail, "; ")
	return s
}

// SoakSeriesSection is the soak's samples, one row per interval.
func SoakSeriesSection(label string, sr *SoakResult) Section {
	s := Section{Phase: PhaseSoak, Title: soakSeriesTitle, Scope: "row",
		Intro: "Each interval's sample as streamed: proxy CPU over the interval; memory, goroutines, conntrack entries of the node namespace and the proxy objects in its kernel (read back: KUBE-* iptables rules and jumps, nft chains of table kube-proxy, IPVS real servers, ipset entries; the read-back runs off the sampling path at its own pace, so the count is the latest read finished by the interval's end and \"objects age\" how long before it that read finished), and the objects its syncs wrote; " +
			"the changes made in it; the programming latency of the changes seen in it (p50, p99); the connections scheduled in it, and the successes and errors (by cause) that finished in it, those never started (the driver behind), with the successes' connect time (p50, p99).",
		Columns: []Column{{Name: "interval", Key: true}, {Name: "at", Unit: "s"}, {Name: "stage"},
			{Name: "proxy CPU", Unit: "cores", Figure: "proxy.cpu"}, {Name: "proxy RSS", Unit: "MiB", Figure: "proxy.rss"},
			{Name: "proxybench RSS", Unit: "MiB", Figure: "self.rss"}, {Name: "proxybench heap", Unit: "MiB", Figure: "self.heap"},
			{Name: "goroutines", Unit: "count", Figure: "self.goroutines"}, {Name: "conntrack", Unit: "count"},
			{Name: "kernel objects", Unit: "count", Figure: "objects"}, {Name: "objects age", Unit: "s"},
			{Name: "objects written", Unit: "count", Figure: "objects.written"},
			{Name: "syncs", Unit: "count"},
			{Name: "changes", Unit: "count"}, {Name: "observed", Unit: "count"},
			{Name: "programming p50", Unit: "ms", Figure: "programming.p50"}, {Name: "programming p99", Unit: "ms", Figure: "programming.p99"},
			{Name: "connections", Unit: "count"}, {Name: "ok", Unit: "count"}, {Name: "errors", Unit: "count"}, {Name: "errors by cause"},
			{Name: "not started", Unit: "count"},
			{Name: "lookup p50", Unit: "ms", Figure: "lookup.p50"}, {Name: "lookup p99", Unit: "ms", Figure: "lookup.p99"}},
	}
	ms := func(ns int64, have bool) Cell {
		if !have {
			return Missing()
		}
		return Num(float64(ns)/1e6, "%.3f")
	}
	for _, x := range sr.Samples {
		span := float64(x.SpanNs)
		cpu := Missing()
		if span > 0 {
			cpu = Num(float64(x.ProxyCPUNs)/span, "%.4f")
		}
		prss := Missing()
		if x.ProxyRSSBytes > 0 {
			prss = Num(mibOf(x.ProxyRSSBytes), "%.1f")
		}
		ct := Missing()
		if x.Conntrack >= 0 {
			ct = Int(x.Conntrack)
		}
		objs, age := Missing(), Missing()
		if x.Objects >= 0 {
			objs = Int(x.Objects)
			if x.ObjectsRead > 0 {
				age = Num(float64(x.ObjectsAgeNs)/1e9, "%.1f")
			}
		} else if x.ObjectsRead == 0 && len(x.Faults) == 0 {
			objs = Text("none yet")
		}
		_ = s.AddRow(label, Int(x.Index), Num(float64(x.AtNs)/1e9, "%.1f"), Text(x.Stage), cpu, prss,
			Num(mibOf(x.SelfRSSBytes), "%.1f"), Num(mibOf(x.SelfHeapBytes), "%.1f"), Int(x.SelfGoroutines), ct,
			objs, age, Int(x.WrittenObjects), Int(x.Syncs), Int(x.Changes), Int(x.Observed),
			ms(x.ProgP50Ns, x.Observed > 0), ms(x.ProgP99Ns, x.Observed > 0),
			Int(x.Attempts), Int(x.OK), Int(x.ErrorCount()), Text(causes(x.errorCauses())), Int(x.NotStartedCount()),
			ms(x.LookupP50Ns, x.OK > 0), ms(x.LookupP99Ns, x.OK > 0))
	}
	if note := sr.CutNote(); note != "" {
		s.Notes = append(s.Notes, label+": "+note+".")
	}
	for _, x := range sr.Samples {
		for _, f := range x.Faults {
			if len(s.Notes) < 20 {
				s.Notes = append(s.Notes, fmt.Sprintf("%s, interval %d: %s", label, x.Index, f))
			}
		}
	}
	return s
}

// SoakFinding is one sentence on a row's soak: the memory verdict with
// its slope, the lost connections and the CPU after churn.
func SoakFinding(label string, sr *SoakResult) string {
	v := SoakVerdicts(sr)
	mem := fmt.Sprintf("memory %s (%s %+.2f MiB/h, 95%% CI [%.2f, %.2f], bound ±%.3g, over %s)", v.Memory.Verdict, v.Memory.Series, v.Memory.PerHour, v.Memory.Lo, v.Memory.Hi, v.Memory.Bound, shortDuration(v.Memory.Span.Round(time.Second)))
	if v.Memory.Verdict == "growing" && v.Memory.Span < SoakLeakSpan {
		mem += fmt.Sprintf(" — under %s of samples: warm-up, not judged a leak", shortDuration(SoakLeakSpan))
	}
	lost := fmt.Sprintf("%d of %s connections lost, %d failed (%s), %d not started", v.Lost, thousands(v.Attempts), v.Errors, causesAfter(v.ErrorsBy, v.AfterConnect), v.NotStarted)
	if !v.LostKnown {
		lost = fmt.Sprintf("%s connections, %d failed (lost not judged: %s)", thousands(v.Attempts), v.Errors, sr.CutNote())
	}
	cpu := fmt.Sprintf("proxy CPU after churn %s (%.4f cores against %.4f idle)", v.CPU, v.QuietCores, v.IdleCores)
	if v.CPU == "not measured" {
		cpu = "proxy CPU after churn not measured (no idle or quiet interval)"
	}
	return fmt.Sprintf("%s soak: %s; %s; %s.", label, mem, lost, cpu)
}

// soakRows are r's rows with a soak, in order.
func soakRows(r *Result) []ModeResult {
	var out []ModeResult
	for _, m := range r.Modes {
		if m.Soak != nil && len(m.Soak.Samples) > 0 {
			out = append(out, m)
		}
	}
	return slices.Clip(out)
}

// soakStreamsOnly reports whether r holds nothing but soaks (a result
// built from soak streams, ResultFromSoakStreams): the core tables,
// which would be empty, are left out.
func (r *Result) soakStreamsOnly() bool {
	for _, m := range r.Modes {
		if (m.Soak == nil && m.SliceChurn == nil) || len(m.SyncFull) > 0 || len(m.Lookup) > 0 || len(m.Churn) > 0 {
			return false
		}
	}
	return len(r.Modes) > 0
}

// secondsText is a histogram quantile in seconds as text ("-": NaN).
func secondsText(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.3f s", v)
}
