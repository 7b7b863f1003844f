package kubeproxy

import "time"

// idleMargin is added to minSyncPeriod when waiting for kube-proxy to be
// idle: its runner's timer fires at the period's end, not before.
const idleMargin = 10 * time.Millisecond

// LastSync is the end of the IPv4 sync kube-proxy finished last, by one
// scrape (kubeproxy_sync_proxy_rules_last_timestamp_seconds, which each
// proxier's syncProxyRules sets when a sync succeeds); zero when the
// series is absent (no sync yet).
func (m Metrics) LastSync() time.Time {
	ts, _ := lastSyncOf(m)
	return ts
}

// IdleAt is the earliest time a change sent to kube-proxy is synced
// without waiting out minSyncPeriod, given the end of its last sync:
// kube-proxy starts at most one sync per minSyncPeriod (its
// BoundedFrequencyRunner counts from the last sync's start; the end is
// the safe side), so a change made sooner is held in kube-proxy until the
// period is over and its programming latency includes that hold. The
// namespace engine's kube-proxy rows (sync.incremental, grow) and the
// cluster engine's programming probes both wait until IdleAt before each
// change. A zero last (no sync seen) is zero: no wait.
func IdleAt(last time.Time, minSync time.Duration) time.Time {
	if last.IsZero() {
		return time.Time{}
	}
	return last.Add(minSync + idleMargin)
}
