package measure

// KubeProxyNode is one node's kube-proxy of a row that runs kube-proxy on
// several nodes (topology.nodes > 1) against one control plane: node-0
// is the row's own process (the fields of KubeProxy), the others run
// beside it, each in its node's namespace with its own hostnameOverride,
// Node object, metrics endpoint and log.
type KubeProxyNode struct {
	// Node is the Node object's name and kube-proxy's hostnameOverride
	// ("node-3"); Log its log beside the result.
	Node string `json:"node"`
	Log  string `json:"log,omitempty"`
	// FirstSyncNs is from the API objects created (every kube-proxy of
	// the row is started then, at once) to the end of this kube-proxy's
	// first IPv4 sync, by its own clock: its
	// kubeproxy_sync_proxy_rules_last_timestamp_seconds when its first
	// sync was seen counted (pkg/proxy/metrics; set when a sync ends
	// successfully). 0: it never finished one (Err says why).
	FirstSyncNs int64 `json:"firstSyncNs"`
	// FirstFullSyncNs is that first sync's own duration by kube-proxy's
	// kubeproxy_sync_full_proxy_rules_duration_seconds (its first
	// observation, IPv4; IPVS mode: kubeproxy_sync_proxy_rules_duration_seconds,
	// it has no full/partial variants), read right after the sync: the
	// rule-programming time alone, without the wait for the informers'
	// first list that FirstSyncNs includes. 0: not read (results before
	// 2026-12-03, or a scrape failed).
	FirstFullSyncNs int64 `json:"firstFullSyncNs,omitempty"`
	// CPUNs and ChildCPUNs are its own and its rule programs' user+system
	// time over the row (/proc/<pid>/stat), PeakRSSBytes its VmHWM and
	// ChildPeakRSSBytes the largest VmHWM of a rule program it ran
	// (sampled every 20 ms).
	CPUNs             int64 `json:"cpuNs"`
	ChildCPUNs        int64 `json:"childCpuNs"`
	PeakRSSBytes      int64 `json:"peakRssBytes"`
	ChildPeakRSSBytes int64 `json:"childPeakRssBytes,omitempty"`
	// ServiceEvents and EndpointSliceEvents are the watch events its
	// informers delivered to its change trackers over the row:
	// kubeproxy_sync_proxy_rules_service_changes_total and
	// ..._endpoint_changes_total (pkg/proxy/metrics: counted once per
	// Service / EndpointSlice add, update or delete its handlers
	// receive; the initial list counts one per object). Syncs is its
	// IPv4 sync count (kubeproxy_sync_proxy_rules_duration_seconds).
	ServiceEvents       float64 `json:"serviceEvents"`
	EndpointSliceEvents float64 `json:"endpointSliceEvents"`
	Syncs               uint64  `json:"syncs"`
	// Err is why a figure is missing (its first sync did not finish, a
	// scrape failed, it exited).
	Err string `json:"err,omitempty"`
}

// ControlPlaneUse is what the row's control plane used over the row, read
// when the row ends: kube-apiserver's and etcd's user+system CPU time
// (/proc/<pid>/stat) and their resident sets (VmHWM, the peak, and
// VmRSS, at the end, of /proc/<pid>/status), bytes.
type ControlPlaneUse struct {
	APIServerCPUNs        int64 `json:"apiserverCpuNs"`
	EtcdCPUNs             int64 `json:"etcdCpuNs"`
	APIServerPeakRSSBytes int64 `json:"apiserverPeakRssBytes"`
	EtcdPeakRSSBytes      int64 `json:"etcdPeakRssBytes"`
	APIServerRSSBytes     int64 `json:"apiserverRssBytes"`
	EtcdRSSBytes          int64 `json:"etcdRssBytes"`
	// WatchEvents is kube-apiserver's apiserver_watch_events_total by
	// resource (its label in v1.37; every watcher's events summed:
	// "services", "endpointslices", "nodes", ...), scraped from its /metrics when the row ends (empty
	// with WatchEventsErr when the scrape failed).
	WatchEvents    map[string]float64 `json:"watchEvents,omitempty"`
	WatchEventsErr string             `json:"watchEventsErr,omitempty"`
}

// WatchDelivery is one node's watch delivery delay, the figure the sim's
// sim.watchDelay stands for: per sample, from an EndpointSlice update
// request being sent (proxybench's clock) to that node's kube-proxy
// queuing a sync for it (its
// kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family=
// "IPv4"}, which kube-proxy sets whenever its EndpointSlice handler
// queues a sync for a change it received: pkg/proxy's Runner.sync in
// v1.37, the proxier's Sync() before; same machine, same clock). The API round trip, etcd's write and the watch cache's fan-out
// are inside it. Samples are taken on an otherwise idle cluster, one
// write at a time.
type WatchDelivery struct {
	Node string `json:"node"`
	// DelayNs are the samples in write order; a sample a node did not
	// deliver within the bound is -1.
	DelayNs []int64 `json:"delayNs"`
}
