//go:build linux

package kubeproxy

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// A failed kube-proxy sync, as its metrics show it: kube-proxy observes
// kubeproxy_sync_proxy_rules_duration_seconds for every sync, failed ones
// too (a deferred Observe in syncProxyRules of pkg/proxy/iptables,
// nftables and ipvs), and sets
// kubeproxy_sync_proxy_rules_last_timestamp_seconds only at the end of a
// successful one, before that Observe. So a sync counted by the histogram
// without the timestamp moving has failed, whatever failed in it (an
// `iptables -w 5` or `iptables-restore -w 5` that gave up on a held
// xtables lock, an nft transaction, a restore parse error). The
// failure counters (kubeproxy_sync_proxy_rules_iptables_restore_failures_total,
// ..._iptables_partial_restore_failures_total,
// ..._nftables_sync_failures_total) each count only some of these: an
// iptables full sync that fails in `iptables -N` before its restore counts
// in none.

// failedBetween reports whether a sync ended between scrapes a and b (in
// order) without succeeding: the histogram counts more syncs and the
// last-sync timestamp did not move. a must be the first scrape that
// showed its sync count (not merely the scrape before b): a successful
// sync sets the timestamp first and is counted last (the deferred
// Observe, after its healthz update, health-check and conntrack
// housekeeping), so a scrape in between shows the new timestamp with the
// old count, and the next one the new count with that same timestamp,
// which against the scrape just before looks like a failure (seen: the
// sync.incremental of TestKernelProxierIncrementalRecord failing after
// kube-proxy logged every sync complete). One scrape reads the two series
// at slightly different moments, so a caller confirms with another
// scrape (stillFailed).
func failedBetween(a, b syncView) bool {
	return b.sync.Count > a.sync.Count && b.ts.Equal(a.ts)
}

// failWatch follows the scrapes of a wait for kube-proxy's syncs and
// judges each against the first scrape that showed the current sync count
// (failedBetween's a).
type failWatch struct{ base syncView }

// see reports whether scrape v shows a failed sync since the base, and
// returns the base it was judged against (for the failed sync's duration
// and stillFailed); v becomes the base when its sync count differs.
func (w *failWatch) see(v syncView) (failed bool, base syncView) {
	base = w.base
	failed = failedBetween(base, v)
	if v.sync.Count != w.base.sync.Count {
		w.base = v
	}
	return failed, base
}

// stillFailed re-scrapes after a short pause and reports whether the
// last-sync timestamp is still that of a (the scrape before the failed
// sync): then the failure was not a scrape reading the timestamp just
// before a successful sync set it.
func (p *Proxier) stillFailed(ctx context.Context, a syncView) (syncView, bool, error) {
	select {
	case <-ctx.Done():
		return syncView{}, false, ctx.Err()
	case <-time.After(100 * time.Millisecond):
	}
	v, err := p.syncView(ctx)
	if err != nil {
		return syncView{}, false, err
	}
	return v, v.ts.Equal(a.ts), nil
}

// waitRecovery waits up to bound for kube-proxy's next successful IPv4
// sync after a failed one (the last-sync timestamp moving past since, the
// scrape before the failure) and returns when it ended, or the zero time
// when none did within bound.
func (p *Proxier) waitRecovery(ctx context.Context, since time.Time, bound time.Duration) time.Time {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	for {
		if v, err := p.syncView(ctx); err == nil && v.ts.After(since) {
			return v.ts
		}
		select {
		case <-ctx.Done():
			return time.Time{}
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// klogEntryRE matches the first line of a klog entry, e.g.
// `E1130 20:21:32.989146     225 proxier.go:688] "Failed to ensure ..."`.
var klogEntryRE = regexp.MustCompile(`^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+ `)

// failureCause returns the IPv4 error entries of kube-proxy's log (klog
// severity E, with their continuation lines, carrying ipFamily="IPv4":
// kube-proxy's proxier logs with that key) written from byte offset from
// on: the last 3, each cut at 400 characters, joined by " | "; "" when
// there is none. Start-up errors without an IP family (configuration
// warnings) are left out.
func failureCause(log []byte, from int) string {
	if from < 0 || from > len(log) {
		from = 0
	}
	var entries []string
	var cur []string
	flush := func() {
		if len(cur) > 0 && strings.HasPrefix(cur[0], "E") {
			e := strings.Join(cur, " ")
			if strings.Contains(e, `ipFamily="IPv4"`) {
				entries = append(entries, e)
			}
		}
		cur = nil
	}
	for _, l := range strings.Split(string(log[from:]), "\n") {
		if klogEntryRE.MatchString(l) {
			flush()
		} else if len(cur) == 0 {
			continue // a continuation of an entry before from
		}
		if t := strings.TrimSpace(l); t != "" {
			cur = append(cur, t)
		}
	}
	flush()
	if len(entries) > 3 {
		entries = entries[len(entries)-3:]
	}
	for i, e := range entries {
		if r := []rune(e); len(r) > 400 {
			entries[i] = string(r[:400]) + "..."
		}
	}
	return strings.Join(entries, " | ")
}

// syncParamsRE matches kube-proxy's "<mode> sync params" log line for
// IPv4 (at -v=2 and above; NewProxier of pkg/proxy/{iptables,nftables,ipvs}).
var syncParamsRE = regexp.MustCompile(`sync params" ipFamily="IPv4" minSyncPeriod="([^"]+)" syncPeriod="([^"]+)"`)

// syncPeriods returns the minSyncPeriod and syncPeriod kube-proxy logged
// at its start (0 for a value not found).
func syncPeriods(log []byte) (minSync, sync time.Duration) {
	m := syncParamsRE.FindSubmatch(log)
	if m == nil {
		return 0, 0
	}
	minSync, _ = time.ParseDuration(string(m[1]))
	sync, _ = time.ParseDuration(string(m[2]))
	return minSync, sync
}

// failureMsg words a failed sync for the row: which sync, how long it
// ran by kube-proxy's metric, why (its log), and what kube-proxy did
// next within the time proxybench watched (recovered: the end of its next
// successful sync, zero when none came within watched).
func failureMsg(which string, own time.Duration, cause string, failedAt, recovered time.Time, watched, syncPeriod time.Duration) string {
	if cause == "" {
		cause = "kube-proxy logged no IPv4 error for it"
	}
	msg := fmt.Sprintf("kube-proxy's %s failed after %v by its own metric (its log: %s)", which, own.Round(time.Millisecond), cause)
	sp := "its syncPeriod not in its log"
	if syncPeriod > 0 {
		sp = fmt.Sprintf("its syncPeriod %v", syncPeriod)
	}
	if recovered.IsZero() {
		return msg + fmt.Sprintf("; no successful sync followed within %v (%s)", watched.Round(time.Second), sp)
	}
	return msg + fmt.Sprintf("; its next successful sync ended %v after the failure was seen (%s)", recovered.Sub(failedAt).Round(time.Millisecond), sp)
}
