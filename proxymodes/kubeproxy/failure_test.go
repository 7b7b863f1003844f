//go:build linux

package kubeproxy

import (
	"strings"
	"testing"
	"time"
)

// failedLog is kube-proxy v1.37.2's log (-v=2) around a first sync whose
// `iptables -w 5 -N KUBE-FORWARD` gave up on a held xtables lock (from a
// kube-proxy-versions run, 2026-11-30), with a start-up error before and
// an IPv6 error after.
const failedLog = `E1130 20:21:26.001000     225 server.go:256] "Kube-proxy configuration may be incomplete or incorrect" err="nodePortAddresses is unset"
I1130 20:21:26.100000     225 proxier.go:301] "Iptables sync params" ipFamily="IPv4" minSyncPeriod="1s" syncPeriod="30s" maxSyncPeriod="1h0m0s"
I1130 20:21:27.697892     225 proxier.go:655] "Syncing iptables rules" ipFamily="IPv4" fullSync=true
E1130 20:21:32.989146     225 proxier.go:688] "Failed to ensure chain exists" err=<
	error creating chain "KUBE-FORWARD": exit status 4: Can't lock /run/xtables.lock: Resource temporarily unavailable
	Another app is currently holding the xtables lock. Stopped waiting after 5s.
 > ipFamily="IPv4" table="filter" chain="KUBE-FORWARD"
I1130 20:21:32.989222     225 proxier.go:660] "Sync failed" ipFamily="IPv4" retryingTime="30s"
I1130 20:21:32.989262     225 proxier.go:649] "SyncProxyRules complete" ipFamily="IPv4" elapsed="5.304875138s"
E1130 20:21:38.189865     225 proxier.go:688] "Failed to ensure chain exists" err=<
	exit status 4: Another app is currently holding the xtables lock. Stopped waiting after 5s.
 > ipFamily="IPv6" table="filter" chain="KUBE-FORWARD"
`

// TestFailureCause: the IPv4 sync error with its continuation lines, not
// the start-up error (no IP family) nor the IPv6 one; an offset past it
// leaves nothing; an offset inside an entry skips its continuation.
func TestFailureCause(t *testing.T) {
	got := failureCause([]byte(failedLog), 0)
	for _, want := range []string{`"Failed to ensure chain exists"`, "Another app is currently holding the xtables lock. Stopped waiting after 5s.", `ipFamily="IPv4" table="filter"`} {
		if !strings.Contains(got, want) {
			t.Errorf("cause %q lacks %q", got, want)
		}
	}
	for _, not := range []string{"nodePortAddresses", `ipFamily="IPv6"`, "retryingTime"} {
		if strings.Contains(got, not) {
			t.Errorf("cause %q holds %q", got, not)
		}
	}
	after := strings.Index(failedLog, "I1130 20:21:32.989222")
	if got := failureCause([]byte(failedLog), after); got != "" {
		t.Errorf("cause from after the failure %q, want none", got)
	}
	inside := strings.Index(failedLog, "\terror creating chain")
	if got := failureCause([]byte(failedLog), inside); got != "" {
		t.Errorf("cause from inside the entry %q, want none (its first line is before the offset)", got)
	}
	long := "E1130 20:21:32.989146     225 proxier.go:1565] \"Failed to execute iptables-restore\" err=<\n\t" + strings.Repeat("x", 1000) + "\n > ipFamily=\"IPv4\"\n"
	if got := failureCause([]byte(long), 0); len([]rune(got)) != 403 || !strings.HasSuffix(got, "...") {
		t.Errorf("a long entry gave %d characters, want it cut at 400 and marked", len([]rune(got)))
	}
}

func TestSyncPeriods(t *testing.T) {
	minSync, sync := syncPeriods([]byte(failedLog))
	if minSync != time.Second || sync != 30*time.Second {
		t.Errorf("syncPeriods = %v, %v; want 1s, 30s", minSync, sync)
	}
	if a, b := syncPeriods([]byte("no such line")); a != 0 || b != 0 {
		t.Errorf("syncPeriods without the line = %v, %v; want 0, 0", a, b)
	}
}

// TestFailedBetween: a sync counted without the last-sync timestamp
// moving is a failure; one that moved it, or no new sync, is not.
func TestFailedBetween(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := syncView{ts: t0, sync: Histogram{Count: 4, Sum: 1}}
	for _, tc := range []struct {
		b    syncView
		want bool
	}{
		{syncView{ts: t0, sync: Histogram{Count: 5, Sum: 6}}, true},
		{syncView{ts: t0.Add(time.Second), sync: Histogram{Count: 5, Sum: 1.2}}, false},
		{syncView{ts: t0, sync: Histogram{Count: 4, Sum: 1}}, false},
		{syncView{ts: t0.Add(time.Second), sync: Histogram{Count: 6, Sum: 7}}, false}, // a failure, then a success: the success covers
	} {
		if got := failedBetween(a, tc.b); got != tc.want {
			t.Errorf("failedBetween(%+v, %+v) = %v, want %v", a, tc.b, got, tc.want)
		}
	}
	// Before any sync: no timestamp yet, and a first sync that failed.
	if !failedBetween(syncView{}, syncView{sync: Histogram{Count: 1, Sum: 5.3}}) {
		t.Error("a first sync counted without a timestamp is not a failure")
	}
}

// TestFailWatchSuccessCountedLast: kube-proxy sets the last-sync
// timestamp before it counts the sync, so a scrape can show the new
// timestamp with the old count and the next one the new count with that
// timestamp: a success, not a failure. A sync counted with the timestamp
// of the first scrape at the old count failed.
func TestFailWatchSuccessCountedLast(t *testing.T) {
	t0, t1 := time.Unix(1000, 0), time.Unix(1001, 0)
	view := func(n uint64, ts time.Time) syncView {
		return syncView{ts: ts, sync: Histogram{Count: n, Sum: float64(n)}}
	}
	for _, tc := range []struct {
		name    string
		scrapes []syncView
		want    []bool
	}{
		{"success seen between timestamp and count", []syncView{view(4, t0), view(4, t1), view(5, t1)}, []bool{false, false}},
		{"success", []syncView{view(4, t0), view(4, t0), view(5, t1)}, []bool{false, false}},
		{"failure", []syncView{view(4, t0), view(4, t0), view(5, t0)}, []bool{false, true}},
		{"success, then a failure", []syncView{view(4, t0), view(4, t1), view(5, t1), view(5, t1), view(6, t1)}, []bool{false, false, false, true}},
	} {
		fw := failWatch{base: tc.scrapes[0]}
		for i, v := range tc.scrapes[1:] {
			if got, _ := fw.see(v); got != tc.want[i] {
				t.Errorf("%s: scrape %d %+v judged failed=%v, want %v", tc.name, i+1, v, got, tc.want[i])
			}
		}
	}
}

func TestFailureMsg(t *testing.T) {
	at := time.Unix(2000, 0)
	got := failureMsg("incremental sync", 5012*time.Millisecond, "lock held", at, at.Add(30*time.Second), 40*time.Second, 30*time.Second)
	for _, want := range []string{"incremental sync failed after 5.012s", "lock held", "ended 30s after the failure", "syncPeriod 30s"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	got = failureMsg("first sync", time.Second, "", at, time.Time{}, 40*time.Second, 0)
	for _, want := range []string{"logged no IPv4 error", "no successful sync followed within 40s", "syncPeriod not in its log"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
}
