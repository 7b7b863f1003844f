//go:build linux

package main

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/topology"
)

// soakBody is a small soak scenario: 100 services × 3 endpoints,
// iptables, a short traffic phase, then the soak block given.
func soakBody(soak string) string {
	return "name: soak-kernel\nservices: {count: 100, endpoints: {count: 3}}\nmodes: [iptables]\nrepetitions: 1\n" +
		"traffic: {connections: 50, positions: [first]}\niptables: {minSyncPeriod: 200ms}\nsoak: " + soak + "\n"
}

// streamLines counts the whole lines of the file at path (0 when it is
// not there yet).
func streamLines(path string) int {
	b, _ := os.ReadFile(path)
	return bytes.Count(b, []byte("\n"))
}

// TestKernelSoakKilled: `proxybench run` of a short soak (100 services,
// iptables, 6 s of churn in intervals of 1 s) killed with kill -9 at a
// random moment after its first interval was written, then
// `proxybench cleanup --run <id>` and `proxybench report` of the run's
// result path (never written) and of the stream: nothing of the run is
// left (no pb-<id>-* namespace, folder or process), the stream holds
// every interval finished before the kill but at most the last, numbered
// from 1 without a gap, and both reports render it marked cut.
func TestKernelSoakKilled(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore")
	id := topology.NewRunID()
	dir := t.TempDir()
	out := filepath.Join(dir, "r.json")
	stream := filepath.Join(dir, "r", "soak", "iptables.jsonl")
	r := streamRun(t, "--run-id", id, "--output", out, writeFile(t, soakBody("{duration: 6s, interval: 1s, rate: 50, churn: 5, idle: 0, quiet: 1}")))
	for deadline := time.Now().Add(time.Minute); streamLines(stream) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no interval in %s within a minute", stream)
		}
	}
	time.Sleep(time.Duration(rand.Int64N(int64(4 * time.Second))))
	killed := time.Now()
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r.cmd.Wait()

	stdout, stderr, code := run(t, nil, "cleanup", "--run", id)
	if code != 0 {
		t.Fatalf("cleanup --run %s: exit %d\n%s%s", id, code, stdout, stderr)
	}
	if left := leftOf(id, nil); len(left) > 0 {
		t.Errorf("left after kill -9 and cleanup: %v", left)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a result at %s: the run was killed before writing it", out)
	}

	sr, err := reports.ReadSoakStream(stream)
	if err != nil {
		t.Fatal(err)
	}
	finished := int(killed.Sub(sr.Header.Started) / sr.Header.Spec.Interval.Duration)
	n := len(sr.Samples)
	t.Logf("killed %.2f s into the soak: %d intervals finished, %d in the stream", killed.Sub(sr.Header.Started).Seconds(), finished, n)
	if n < finished-1 || n > finished || sr.End != nil {
		t.Errorf("the stream has %d intervals (end line %v), want %d finished before the kill, or one fewer, and no end", n, sr.End, finished)
	}
	for i, s := range sr.Samples {
		if s.Index != i+1 {
			t.Fatalf("sample %d is interval %d: a gap", i, s.Index)
		}
	}
	for _, arg := range []string{out, stream} {
		md, errOut, code := run(t, nil, "report", arg)
		if code != 0 {
			t.Fatalf("report %s: exit %d: %s", arg, code, errOut)
		}
		for _, want := range []string{"soak: memory slope", "stream ends at 00:00:0", "the run was killed or crashed", "in flight at the cut"} {
			if !strings.Contains(md, want) {
				t.Errorf("report %s lacks %q:\n%s", arg, want, md)
			}
		}
	}
}

// TestKernelSoakLosesNothing: an uninterrupted short soak (100 services,
// iptables, 3 s of churn between an idle and a quiet interval of 1 s)
// ends its stream whole, holds the same samples in its result, loses
// no connection (each of about 250 is a success or a counted error),
// sees its changes in the data plane, and gives every verdict a figure.
func TestKernelSoakLosesNothing(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore")
	out := filepath.Join(t.TempDir(), "r.json")
	stdout, stderr, code := run(t, nil, "run", "--quiet", "--output", out, writeFile(t, soakBody("{duration: 3s, interval: 1s, rate: 50, churn: 5, idle: 1, quiet: 1}")))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	res, err := reports.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Modes) != 1 || res.Modes[0].Soak == nil {
		t.Fatalf("no soak in the result: %d rows", len(res.Modes))
	}
	sr := res.Modes[0].Soak
	back, err := reports.ReadSoakStream(sr.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if len(sr.Samples) != 5 || sr.End == nil || sr.End.Stopped != "" || len(back.Samples) != 5 || back.End == nil || back.Skipped != 0 {
		t.Fatalf("result: %d samples, end %+v; stream: %d samples, end %+v: want 5 and a whole end in both", len(sr.Samples), sr.End, len(back.Samples), back.End)
	}
	v := reports.SoakVerdicts(sr)
	t.Logf("%d connections (%d ok, %v), lost %d; %d changes, %d seen; memory %+v; CPU idle %.4f quiet %.4f (%s)",
		v.Attempts, v.OK, v.ErrorsBy, v.Lost, v.Changes, v.Observed, v.Memory, v.IdleCores, v.QuietCores, v.CPU)
	if v.Lost != 0 || !v.LostKnown || v.Attempts < 200 || v.OK+v.Errors != v.Attempts {
		t.Errorf("%d connections, %d ok, %d failed (%v), %d lost: want every one of about 250 accounted for", v.Attempts, v.OK, v.Errors, v.ErrorsBy, v.Lost)
	}
	if v.Changes < 3 || v.Observed == 0 {
		t.Errorf("%d changes, %d seen in the data plane", v.Changes, v.Observed)
	}
	if v.Memory.N < 3 || math.IsNaN(v.Memory.PerHour) || math.IsNaN(v.Memory.Lo) || math.IsNaN(v.Memory.Hi) || v.Memory.Verdict == "" ||
		math.IsNaN(v.IdleCores) || math.IsNaN(v.QuietCores) || v.CPU == "not measured" {
		t.Errorf("a verdict without its figure: memory %+v, CPU idle %v quiet %v %q", v.Memory, v.IdleCores, v.QuietCores, v.CPU)
	}
	for _, x := range sr.Samples {
		if x.Conntrack < 0 || x.Objects < 400 || x.SelfRSSBytes == 0 || len(x.Faults) > 0 {
			t.Errorf("interval %d: conntrack %d, kernel objects %d (100 services × 3 endpoints: over 400 KUBE-* rules), RSS %d, faults %v: want each read", x.Index, x.Conntrack, x.Objects, x.SelfRSSBytes, x.Faults)
		}
	}
	for _, want := range []string{"soak: memory slope, lost connections, CPU after churn", "| iptables | complete | 5 |", "soak: one sample per interval"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the run's summary lacks %q", want)
		}
	}
}

// TestKernelSoakKubeProxy: a short soak of a kube-proxy row (100
// services, iptables, 4 s of churn through the API server) samples
// kube-proxy's own process every interval (RSS, Go heap and goroutines
// from its metrics endpoint), regresses kube-proxy's RSS, loses no
// connection, sees its changes, and keeps kube-proxy's own account of
// the soak. About 15 s (the control plane's start): behind
// PROXYBENCH_SLOW.
func TestKernelSoakKubeProxy(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore")
	testenv.RequireSlow(t, "a control plane and kube-proxy for a 7 s soak: about 15 s")
	kb := testenv.RequireKube(t)
	env := []string{"PROXYBENCH_KUBE_BIN=" + filepath.Dir(kb.KubeProxy)}
	out := filepath.Join(t.TempDir(), "r.json")
	body := strings.Replace(soakBody("{duration: 4s, interval: 1s, rate: 50, churn: 5, idle: 1, quiet: 2}"), "modes: [iptables]\n", "modes: [iptables]\nimplementation: [kube-proxy]\n", 1)
	if _, stderr, code := run(t, env, "run", "--quiet", "--output", out, writeFile(t, body)); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	res, err := reports.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Modes) != 1 || res.Modes[0].Soak == nil || res.Modes[0].Implementation != "kube-proxy" {
		t.Fatalf("no kube-proxy soak in the result: %+v", res.Modes)
	}
	sr := res.Modes[0].Soak
	for _, x := range sr.Samples {
		if x.ProxyRSSBytes < 10<<20 || x.ProxyHeapBytes == 0 || x.ProxyGoroutines == 0 || len(x.Faults) > 0 {
			t.Errorf("interval %d: kube-proxy RSS %d, heap %d, goroutines %d, faults %v", x.Index, x.ProxyRSSBytes, x.ProxyHeapBytes, x.ProxyGoroutines, x.Faults)
		}
	}
	v := reports.SoakVerdicts(sr)
	t.Logf("%d connections, lost %d; %d changes, %d seen; memory %+v; CPU idle %.3f quiet %.3f; kube-proxy %+v", v.Attempts, v.Lost, v.Changes, v.Observed, v.Memory, v.IdleCores, v.QuietCores, sr.KubeProxy)
	if v.Lost != 0 || v.Attempts < 300 || v.Changes < 5 || v.Observed != v.Changes || v.Memory.Series != "proxy RSS" {
		t.Errorf("%d connections, %d lost; %d changes, %d seen; memory series %q", v.Attempts, v.Lost, v.Changes, v.Observed, v.Memory.Series)
	}
	if kp := sr.KubeProxy; kp == nil || kp.Writes != v.Changes || kp.Programming.Count == 0 {
		t.Errorf("kube-proxy's own account %+v: want every change written and its programming observed", kp)
	}
}
