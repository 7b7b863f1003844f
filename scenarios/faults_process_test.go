package scenarios

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestProcessFaultsDefaults: empty fault blocks get the documented defaults,
// and the crash back-offs follow the kubelet's CrashLoopBackOff (10 s
// doubled, capped at the maximum).
func TestProcessFaultsDefaults(t *testing.T) {
	sc, err := Parse([]byte("services: {count: 100}\nmodes: [iptables]\nimplementation: [kube-proxy]\nfaults: {apiOutage: {}, restart: {}, crash: {}}\n"), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a, r, c := sc.Faults.APIOutage, sc.Faults.Restart, sc.Faults.Crash
	if !slices.Equal(a.Components, []string{"kube-apiserver", "etcd"}) || a.Duration.Duration != 10*time.Second || a.Services != 20 || a.Probes != 4 {
		t.Errorf("apiOutage defaults %+v", *a)
	}
	if !slices.Equal(r.Cases, []string{"plain", "changes"}) || r.Services != 10 || r.Gap.Duration != 2*time.Second || r.SourcePort != 5400 {
		t.Errorf("restart defaults %+v", *r)
	}
	if got, want := c.Backoffs(), []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second}; !slices.Equal(got, want) {
		t.Errorf("crash back-offs %v, want %v", got, want)
	}
	c.Crashes, c.Backoff.Duration, c.MaxBackoff.Duration = 7, 10*time.Second, 300*time.Second
	if got := c.Backoffs(); got[5] != 300*time.Second || got[6] != 300*time.Second || got[4] != 160*time.Second {
		t.Errorf("capped back-offs %v", got)
	}
	// Fewer services than the default: all of them.
	sc, err = Parse([]byte("services: {count: 5}\nfaults: {crash: {}}\n"), "f.yaml")
	if err != nil || sc.Faults.Crash.Services != 5 {
		t.Errorf("crash.services with 5 services: %v, %v", sc.Faults.Crash, err)
	}
}

// TestProcessFaultsProblems: a fault on a mode or an implementation that
// cannot have it, and each bad value, is refused at its own field and
// line with a fix.
func TestProcessFaultsProblems(t *testing.T) {
	const kube = "modes: [iptables]\nimplementation: [kube-proxy]\n"
	for _, tc := range []struct {
		name, body, field, msg string
		line                   int
	}{
		{"outage on builtin", "modes: [iptables]\nfaults:\n  apiOutage: {}\n", "faults.apiOutage", "no API server", 4},
		{"outage on a builtin row beside kube-proxy", "modes: [iptables, nftables]\nimplementation: [builtin, kube-proxy]\nfaults:\n  apiOutage: {}\n", "faults.apiOutage", "[iptables nftables] rows run with implementation builtin", 5},
		{"restart of userspace", "modes: [userspace]\nfaults:\n  restart: {}\n", "faults.restart", "mode userspace", 4},
		{"unknown component", kube + "faults:\n  apiOutage:\n    components: [kube-scheduler]\n", "faults.apiOutage.components[0]", "unknown", 6},
		{"component twice", kube + "faults:\n  apiOutage:\n    components: [etcd, etcd]\n", "faults.apiOutage.components[1]", "twice", 6},
		{"no components", kube + "faults:\n  apiOutage:\n    components: []\n", "faults.apiOutage.components", "empty", 6},
		{"outage too short", kube + "faults:\n  apiOutage:\n    duration: 100ms\n", "faults.apiOutage.duration", "out of range", 6},
		{"more services than exist", "faults:\n  crash:\n    services: 11\n", "faults.crash.services", "more than services.count", 4},
		{"unknown case", "faults:\n  restart:\n    cases: [reboot]\n", "faults.restart.cases[0]", "unknown", 4},
		{"max back-off under the first", "faults:\n  crash:\n    backoff: 20s\n    maxBackoff: 10s\n", "faults.crash.maxBackoff", "out of range", 5},
		{"too many crashes", "faults:\n  crash:\n    crashes: 11\n", "faults.crash.crashes", "out of range", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte("services: {count: 10}\n"+tc.body), "f.yaml")
			if err == nil {
				t.Fatal("accepted")
			}
			fes := fieldErrors(t, err)
			if len(fes) != 1 {
				t.Fatalf("%d errors, want 1: %v", len(fes), err)
			}
			fe := fes[0]
			if fe.Field != tc.field || fe.Line != tc.line || fe.Fix == "" || !strings.Contains(fe.Msg, tc.msg) {
				t.Errorf("got %v; want %s at line %d saying %q, with a fix", fe, tc.field, tc.line, tc.msg)
			}
		})
	}
	// The shipped shapes are accepted.
	for _, body := range []string{kube + "faults: {apiOutage: {components: [etcd]}}\n", "modes: [none, iptables, nftables]\nimplementation: [builtin, kube-proxy]\nfaults: {restart: {}, crash: {}}\n"} {
		if _, err := Parse([]byte("services: {count: 10}\n"+body), "f.yaml"); err != nil {
			t.Errorf("refused %q: %v", body, err)
		}
	}
}
