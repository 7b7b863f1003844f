package proxymodes

// RestoreWait are the arguments kube-proxy gives iptables-restore (and
// iptables) so that the xtables lock (/run/xtables.lock, shared by every
// network namespace of the machine, or $XTABLES_LOCKFILE) is waited for at
// most 5 s, polled every 100000 µs, instead of forever: a lock held
// elsewhere longer than that makes the tool exit non-zero ("Another app is
// currently holding the xtables lock"), which the sync records as a failed
// sync. Source: k8s.io/kubernetes pkg/util/iptables (WaitSecondsValue "5",
// WaitIntervalUsecondsValue "100000", used for iptables-restore >= 1.6.2).
var RestoreWait = []string{"-w", "5", "-W", "100000"}

// RestoreArgs is RestoreWait followed by args, as a new slice.
func RestoreArgs(args ...string) []string {
	return append(append(make([]string, 0, len(RestoreWait)+len(args)), RestoreWait...), args...)
}
