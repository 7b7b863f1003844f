//go:build linux

package kubeproxy

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/measure"
)

// TestRulesetFiguresUnfinished: the objects and bytes of a first sync
// that did not finish (or whose kube-proxy exited) are what was read back
// from the node, with when; a failed read and IPVS (nothing read) give 0,
// which the reports show as "-", never a count taken from the services.
func TestRulesetFiguresUnfinished(t *testing.T) {
	when := " when kubeProxy.firstSyncTimeout (40m0s) passed, its first sync not finished"
	for _, c := range []struct {
		name          string
		rs            Ruleset
		err           error
		objects, byts int
		info          string
	}{
		{"iptables read back", Ruleset{Tool: "iptables-save", Objects: 17, Bytes: 1234}, nil, 17, 1234, "17 objects, 1234 bytes (iptables-save)" + when},
		{"nothing installed yet", Ruleset{Tool: "nft -j list table ip kube-proxy"}, nil, 0, 0, "0 objects, 0 bytes (nft -j list table ip kube-proxy)" + when},
		{"read failed", Ruleset{}, errors.New("nft: no such table"), 0, 0, "not read" + when + ": nft: no such table"},
		{"ipvs, not read", Ruleset{}, nil, 0, 0, ""},
	} {
		o, b, info := rulesetFigures(c.rs, c.err, when)
		if o != c.objects || b != c.byts || info != c.info {
			t.Errorf("%s: objects %d, bytes %d, info %q; want %d, %d, %q", c.name, o, b, info, c.objects, c.byts, c.info)
		}
		if c.err != nil && !strings.HasPrefix(info, "not read") {
			t.Errorf("%s: info %q must start \"not read\" (the reports' sign for \"-\")", c.name, info)
		}
	}
}

// TestExitMessage: the failure names the step, the status (with the OOM
// killer as a possible sender of SIGKILL), the time since the start and
// the log's last line.
func TestExitMessage(t *testing.T) {
	e := &measure.KubeProxyExit{Status: "signal: killed", Code: -1, Signal: "SIGKILL", During: "a later sync", RanNs: int64(8123456789 * time.Nanosecond),
		LogTail: []string{"I1201 started", "I1201 SyncProxyRules complete elapsed=\"12ms\""}}
	got := ExitMessage(e)
	for _, want := range []string{"during a later sync", "signal: killed (SIGKILL: another process, or the kernel's OOM killer)", "8.123s after its start", `its log ends: I1201 SyncProxyRules complete elapsed="12ms"`} {
		if !strings.Contains(got, want) {
			t.Errorf("message %q lacks %q", got, want)
		}
	}
	e = &measure.KubeProxyExit{Status: "exit status 255", Code: 255, During: "its first sync", RanNs: int64(time.Second)}
	if got := ExitMessage(e); strings.Contains(got, "OOM") || !strings.Contains(got, "exit status 255") || strings.Contains(got, "log ends") {
		t.Errorf("message %q: want the exit status, no signal note and no log line", got)
	}
}
