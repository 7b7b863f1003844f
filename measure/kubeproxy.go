package measure

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// KubeProxy is what a result records about one kube-proxy row
// (implementation kube-proxy): the binary and how it ran, the setup kept
// apart from the figures, kube-proxy's own metrics and its resource use.
type KubeProxy struct {
	// Version is `kube-proxy --version` ("v1.37.2"); Binary its path.
	Version string `json:"version"`
	Binary  string `json:"binary"`
	// Config and Log are the node's KubeProxyConfiguration file and
	// kube-proxy's log, kept beside the result (results/<run>/...); Flags
	// its command line after the binary. With several processes in the
	// row, Log is the last one's (Earlier has the others').
	Config string   `json:"config"`
	Log    string   `json:"log"`
	Flags  []string `json:"flags"`
	// Owned are the configuration fields the testbed set (dotted path →
	// value): the scenario may not set them.
	Owned map[string]string `json:"owned"`
	// ControlPlaneNs is the time to start etcd and kube-apiserver (ready),
	// APIObjectsNs to create APIObjects objects (Services, EndpointSlices,
	// the Node and the ServiceCIDR): setup, not part of any figure.
	ControlPlaneNs int64 `json:"controlPlaneNs"`
	APIObjectsNs   int64 `json:"apiObjectsNs"`
	APIObjects     int   `json:"apiObjects"`
	// FirstSyncNs is from the API objects created to kube-proxy's first
	// IPv4 sync counted by its sync metric (its own account); the row's
	// sync.full is until every probed service answered (Probed of them).
	FirstSyncNs int64 `json:"firstSyncNs"`
	Probed      int   `json:"probed"`
	// AfterFullSync is a scrape of kube-proxy's sync metrics right after
	// sync.full (the row's first kube-proxy process); AtEnd the row's
	// total at the end of the mode: the last process's scrape plus every
	// Earlier process's last one (each process counts from zero). AtEnd
	// minus AfterFullSync is what the later syncs took (sync.incremental,
	// periodic resyncs, and the first syncs of later processes).
	AfterFullSync []Metric `json:"afterFullSync,omitempty"`
	AtEnd         []Metric `json:"atEnd,omitempty"`
	// Earlier are the row's kube-proxy processes that stopped before the
	// last one, in order: a Cleanup followed by a new first Sync (the
	// fairness phase's fresh resync starts a new control plane and
	// kube-proxy) or a Halt of the sync-disruption phase (cold start,
	// restart). The figures above are over every process of the row.
	Earlier []KubeProxyProcess `json:"earlier,omitempty"`
	// CPUNs is kube-proxy's own user+system time over the whole row,
	// ChildCPUNs that of the rule programs it ran and waited for
	// (/proc/<pid>/stat utime+stime, cutime+cstime); PeakRSSBytes and
	// ChildPeakRSSBytes the peak resident sets (VmHWM; children sampled
	// every 20 ms). Summed (CPU) or the largest (RSS) over the row's
	// processes.
	CPUNs             int64 `json:"cpuNs"`
	ChildCPUNs        int64 `json:"childCpuNs"`
	PeakRSSBytes      int64 `json:"peakRssBytes"`
	ChildPeakRSSBytes int64 `json:"childPeakRssBytes"`
	// Programs are the rule programs kube-proxy ran, grouped by command
	// (program and first argument, e.g. "nft -f" or "iptables-restore
	// -w"), from 20 ms samples of its children: a lower bound of their CPU
	// and wall time (a run shorter than a sample may be missed).
	Programs []ProgramUse `json:"programs,omitempty"`
	// SyncLog are kube-proxy's log lines about its syncs (with their
	// durations), at most the last 40.
	SyncLog []string `json:"syncLog,omitempty"`
	// Unfinished is set when kube-proxy's first sync did not finish
	// within the row's bound (kubeProxy.firstSyncTimeout): FirstSyncNs is
	// then 0 and the row's later phases were not run.
	Unfinished *Unfinished `json:"unfinished,omitempty"`
	// FailedSyncs words each failed sync proxybench saw while it waited
	// for one (kube-proxy counted a sync without moving its last-sync
	// timestamp): which sync, its own duration, the IPv4 errors of its log
	// and when kube-proxy next synced successfully. The row ends there.
	FailedSyncs []string `json:"failedSyncs,omitempty"`
	// Progress are readings of what kube-proxy had programmed in the node
	// namespace while its first sync ran (IPVS mode: virtual servers,
	// kube-ipvs0 addresses, ipset entries per set), about once a minute
	// and when the bound passed.
	Progress []SyncProgress `json:"progress,omitempty"`
	// Exit is set when the row's kube-proxy exited on its own (crashed,
	// was killed, was OOM-killed) while the row ran: the row failed
	// there (ModeResult.Failed), and every figure above is what was
	// measured before (AtEnd: its last scrape that answered).
	Exit *KubeProxyExit `json:"exit,omitempty"`
	// Nodes are every node's kube-proxy when the row runs kube-proxy on
	// several nodes (topology.nodes > 1), node-0 first; ControlPlane is
	// what the row's one control plane used; WatchDelivery each node's
	// watch delivery delays (the nodes phase's samples). Empty on one
	// node.
	Nodes         []KubeProxyNode  `json:"nodes,omitempty"`
	ControlPlane  *ControlPlaneUse `json:"controlPlane,omitempty"`
	WatchDelivery []WatchDelivery  `json:"watchDelivery,omitempty"`
}

// KubeProxyExit says how and when a row's kube-proxy exited on its own.
type KubeProxyExit struct {
	// Status is the process's wait status as Go words it ("signal:
	// killed", "exit status 255").
	Status string `json:"status"`
	// Code is its exit code, -1 when a signal ended it; Signal is then
	// the signal's name ("SIGKILL": another process, or the kernel's OOM
	// killer).
	Code   int    `json:"code"`
	Signal string `json:"signal,omitempty"`
	// During says what the row was doing when the exit was seen: "its
	// first sync", "a later sync", "its first sync after a restart",
	// "the wait before a halt", "cleanup", or "the row's phases (seen at
	// their end)" when no step that talks to kube-proxy saw it (it died
	// during traffic). The row's Failed names the phase.
	During string `json:"during"`
	// RanNs is from the process's start to the exit seen (at most a
	// scrape's poll, 50-100 ms, or a phase later).
	RanNs int64 `json:"ranNs"`
	// LastScrapeNs is from the process's start to its last metrics scrape
	// that answered, whose sync metrics the record keeps; 0 when none
	// answered.
	LastScrapeNs int64 `json:"lastScrapeNs"`
	// LogTail is the end of its log (at most 20 lines).
	LogTail []string `json:"logTail,omitempty"`
}

// Unfinished says that kube-proxy's first sync had not finished when its
// bound passed.
type Unfinished struct {
	// BoundNs is the bound, from the API objects created.
	BoundNs int64 `json:"boundNs"`
	// DataPlane says whether every probed service answered through
	// kube-proxy's rules by then (the row's sync.full is then that time).
	DataPlane bool `json:"dataPlane"`
	// Summary is the last progress reading in words, e.g. "10001 of 10001
	// virtual servers, 2314 of 10001 KUBE-CLUSTER-IP entries".
	Summary string `json:"summary"`
}

// SyncProgress is one reading of kube-proxy's state in the node
// namespace during its first sync. Counts are -1 when not read (a mode
// without them, or the tool failed). Want* are what the API objects
// call for (each ServicePort of the scenario plus the control plane's
// `kubernetes` Service).
type SyncProgress struct {
	// AtNs is from the API objects created.
	AtNs int64 `json:"atNs"`
	// VirtualServers and RealServers are the lines of /proc/net/ip_vs.
	VirtualServers     int `json:"virtualServers"`
	WantVirtualServers int `json:"wantVirtualServers"`
	RealServers        int `json:"realServers"`
	// Addresses are the IPv4 addresses on kube-ipvs0 (WantIPVSIPs).
	Addresses int `json:"addresses"`
	// IPSets are the entries of each KUBE-* set (`ipset list -t`), and
	// WantClusterIP the entries KUBE-CLUSTER-IP should hold: kube-proxy
	// adds them one `ipset add` process each on a cold start
	// (kubernetes#133773), so the count is also the ipset calls made.
	IPSets        map[string]int `json:"ipsets,omitempty"`
	WantClusterIP int            `json:"wantClusterIP"`
	// WantIPVSIPs are the ClusterIPs: the entries KUBE-IPVS-IPS should
	// hold and the addresses kube-ipvs0 should carry.
	WantIPVSIPs int `json:"wantIPVSIPs"`
	// Err is why a reading failed (the counts it could not read are -1).
	Err string `json:"err,omitempty"`
}

// Words says p in words, for the progress file, the unfinished-sync
// message and the report: "10001 of 10001 virtual servers (30000 real
// servers), 10001 of 10001 kube-ipvs0 addresses, ipset entries:
// KUBE-CLUSTER-IP 2314 of 10001 entries, KUBE-IPVS-IPS 10001 of 10001
// entries, other KUBE-* sets 3 (KUBE-LOOP-BACK 3)".
func (p SyncProgress) Words() string {
	if p.VirtualServers < 0 && p.Addresses < 0 && p.IPSets == nil {
		if p.Err != "" {
			return "state not read: " + p.Err
		}
		return "no progress counts for this mode"
	}
	var parts []string
	if p.VirtualServers >= 0 {
		vs := fmt.Sprintf("%d of %d virtual servers (%d real servers)", p.VirtualServers, p.WantVirtualServers, p.RealServers)
		if p.VirtualServers > p.WantVirtualServers {
			// node ports (one virtual server per node address) and
			// external IPs come on top of the ClusterIP ones counted
			vs = fmt.Sprintf("%d virtual servers: %d ClusterIP ServicePorts wanted, the rest node ports and external addresses (%d real servers)", p.VirtualServers, p.WantVirtualServers, p.RealServers)
		}
		parts = append(parts, vs)
	}
	if p.Addresses >= 0 {
		parts = append(parts, fmt.Sprintf("%d of %d kube-ipvs0 addresses", p.Addresses, p.WantIPVSIPs))
	}
	if p.IPSets != nil {
		s := fmt.Sprintf("ipset entries: KUBE-CLUSTER-IP %d of %d entries, KUBE-IPVS-IPS %d of %d entries",
			p.IPSets["KUBE-CLUSTER-IP"], p.WantClusterIP, p.IPSets["KUBE-IPVS-IPS"], p.WantIPVSIPs)
		var others []string
		total := 0
		for name, n := range p.IPSets {
			if name != "KUBE-CLUSTER-IP" && name != "KUBE-IPVS-IPS" && n > 0 {
				others = append(others, fmt.Sprintf("%s %d", name, n))
				total += n
			}
		}
		sort.Strings(others)
		s += fmt.Sprintf(", other KUBE-* sets %d", total)
		if len(others) > 0 {
			s += " (" + strings.Join(others, ", ") + ")"
		}
		parts = append(parts, s)
	}
	if p.Err != "" {
		parts = append(parts, "some counts not read: "+p.Err)
	}
	return strings.Join(parts, ", ")
}

// Metric is one kube-proxy histogram series: Count observations summing
// to Sum seconds.
type Metric struct {
	Name   string  `json:"name"`
	Family string  `json:"family"`
	Count  uint64  `json:"count"`
	Sum    float64 `json:"sum"`
}

// KubeProxyProcess is one kube-proxy process of a row that stopped before
// the row's last one.
type KubeProxyProcess struct {
	// Why it stopped: "cleanup" (Proxier.Cleanup), "halt" (kept its
	// rules: a restart follows) or "halt+cleanup" (kube-proxy --cleanup
	// after it: a cold start follows).
	Why string `json:"why"`
	// Log is its log, renamed <log>.<n> when the next process started.
	Log string `json:"log"`
	// AtStop is its sync metrics scraped just before it was stopped.
	AtStop []Metric `json:"atStop,omitempty"`
	// Its own CPU, its children's, and the peak resident sets.
	CPUNs             int64 `json:"cpuNs"`
	ChildCPUNs        int64 `json:"childCpuNs"`
	PeakRSSBytes      int64 `json:"peakRssBytes"`
	ChildPeakRSSBytes int64 `json:"childPeakRssBytes"`
	// Programs are its rule programs (as KubeProxy.Programs).
	Programs []ProgramUse `json:"programs,omitempty"`
}

// AddMetrics returns a plus b, series by series ((name, family) pairs in
// either; counts and sums added): the total of two kube-proxy processes,
// each of whose counters starts at zero.
func AddMetrics(a, b []Metric) []Metric {
	return mergeBy(a, b, func(x, y Metric) bool { return x.Name == y.Name && x.Family == y.Family },
		func(into *Metric, m Metric) {
			into.Count += m.Count
			into.Sum += m.Sum
		})
}

// AddPrograms returns the rule programs of a and b merged by command
// (runs, CPU and wall time added, the largest peak RSS kept), in order of
// first appearance.
func AddPrograms(a, b []ProgramUse) []ProgramUse {
	return mergeBy(a, b, func(x, y ProgramUse) bool { return x.Command == y.Command },
		func(into *ProgramUse, p ProgramUse) {
			into.Runs += p.Runs
			into.CPUNs += p.CPUNs
			into.WallNs += p.WallNs
			into.PeakRSSBytes = max(into.PeakRSSBytes, p.PeakRSSBytes)
		})
}

// mergeBy returns a copy of a with each element of b added (add) into the
// first element that is the same (same), or appended when none is, so the
// order is that of first appearance.
func mergeBy[T any](a, b []T, same func(x, y T) bool, add func(into *T, x T)) []T {
	out := append([]T(nil), a...)
	for _, x := range b {
		if i := slices.IndexFunc(out, func(o T) bool { return same(o, x) }); i >= 0 {
			add(&out[i], x)
		} else {
			out = append(out, x)
		}
	}
	return out
}

// ProgramUse is one rule program's sampled use.
type ProgramUse struct {
	Command string `json:"command"`
	Runs    int    `json:"runs"`
	CPUNs   int64  `json:"cpuNs"`
	WallNs  int64  `json:"wallNs"`
	// PeakRSSBytes is the largest VmHWM seen of one run.
	PeakRSSBytes int64 `json:"peakRssBytes"`
}

// MetricDelta returns the observations of (name, family) in end that
// start had not: count and sum (zero when absent).
func MetricDelta(start, end []Metric, name, family string) (count uint64, sum float64) {
	find := func(ms []Metric) (uint64, float64) {
		for _, m := range ms {
			if m.Name == name && m.Family == family {
				return m.Count, m.Sum
			}
		}
		return 0, 0
	}
	c0, s0 := find(start)
	c1, s1 := find(end)
	if c1 < c0 {
		return 0, 0
	}
	return c1 - c0, s1 - s0
}

// KubeProxyFailureCounters are kube-proxy's failure counters
// (k8s.io/kubernetes pkg/proxy/metrics, each with an ip_family label):
// the iptables proxier's failed iptables-restore calls, and the failed
// partial syncs (counted in a failed sync's deferred check, so also a
// partial sync that failed before its restore; each forces the next sync
// full), the nftables proxier's failed sync transactions, and its failed
// stale-chain cleanups (a transaction of its own at a sync's start,
// which does not fail the sync). The IPVS proxier has none.
var KubeProxyFailureCounters = []string{
	"kubeproxy_sync_proxy_rules_iptables_restore_failures_total",
	"kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total",
	"kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
	"kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total",
}
