// Package reports owns the versioned result schema, the statistics that
// summarise raw samples, and the renderers. It runs nothing.
package reports

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/scenarios"
)

// SchemaVersion is the version of Result's JSON layout. It changes when a
// field changes meaning or goes away; added fields keep it.
const SchemaVersion = 1

// Result is one run: the machine, the effective scenario, and per mode the
// raw samples and their summaries.
type Result struct {
	SchemaVersion int       `json:"schemaVersion"`
	Tool          string    `json:"tool"` // "proxybench <version>"
	RunID         string    `json:"runID"`
	Engine        string    `json:"engine"` // "real", "sim" or "cluster" (EngineCluster)
	Started       time.Time `json:"started"`
	Finished      time.Time `json:"finished"`
	Machine       Machine   `json:"machine"`
	// Kernels lists every kernel the run used, in run order; each
	// ModeResult's Kernel names one of them.
	Kernels  []KernelRun         `json:"kernels,omitempty"`
	Scenario *scenarios.Scenario `json:"scenario"`
	Modes    []ModeResult        `json:"modes"`
	// Partial, when set, says why the run stopped before its end
	// (interrupted by a signal, a mode failed): Modes holds what was
	// finished, and the modes and phases missing were never measured.
	Partial string `json:"partial,omitempty"`
	// Skipped are rows the scenario asked for that this run did not make,
	// each with why (e.g. "ipvs (kube-proxy): not yet in a user-mode-linux
	// guest").
	Skipped []string `json:"skipped,omitempty"`
	// NodeSysctls are the sysctls of the node namespaces (the scenario's
	// node.sysctls over stock-node defaults), key → value as read back
	// from the first node after setting them.
	NodeSysctls map[string]string `json:"nodeSysctls,omitempty"`
	// MoreRuns are runs 2..N of `run --count N` (Modes is run 1): the
	// whole measurement repeated, so compare can judge each figure
	// across runs (Runs splits them).
	MoreRuns []Run `json:"moreRuns,omitempty"`
	// Sections are the phases' report sections (Section): rows of
	// row-scoped phases merged per phase, and run-scoped phases (a mode
	// switch spans two rows) whole. Every format renders them.
	Sections []Section `json:"sections,omitempty"`
	// ModeSwitch are the modeSwitch phase's switches (run-scoped: each spans two rows).
	ModeSwitch []ModeSwitch `json:"modeSwitch,omitempty"`
	// ServiceTypes is the serviceTypes phase's matrix (run-scoped).
	ServiceTypes *ServiceTypes `json:"serviceTypes,omitempty"`
	// Cluster is a cluster-engine run's cluster and per-node figures
	// (Engine EngineCluster; docs/cluster.md).
	Cluster *ClusterRun `json:"cluster,omitempty"`
}

// Machine identifies where a run happened; compare refuses to mix machines.
type Machine struct {
	Hostname    string `json:"hostname"`
	Kernel      string `json:"kernel"`      // uname -r
	KernelWhere string `json:"kernelWhere"` // "host" or "uml"
	// KernelWhy says how the kernel was chosen (auto's reasoning).
	KernelWhy string `json:"kernelWhy,omitempty"`
	// GuestKernel is the guest's release when some modes ran in a guest
	// and others on the host (KernelWhere "host+uml").
	GuestKernel string `json:"guestKernel,omitempty"`
	// HostKernel is the host's release when the run happened in a guest.
	HostKernel string `json:"hostKernel,omitempty"`
	// GuestBootNs is the guest's boot time (start to program), in ns.
	GuestBootNs int64 `json:"guestBootNs,omitempty"`
	// GuestInitNs is the guest's time from start to its init script, and
	// GuestElapsedNs from start to halt, in ns (a run in one guest).
	GuestInitNs    int64 `json:"guestInitNs,omitempty"`
	GuestElapsedNs int64 `json:"guestElapsedNs,omitempty"`
	// Warmup is the unrecorded traffic this kernel's run drove before its
	// first row (nil: none, or a result from before it existed).
	Warmup      *Warmup `json:"warmup,omitempty"`
	CPUModel    string  `json:"cpuModel"`
	CPUs        int     `json:"cpus"`
	MemoryBytes uint64  `json:"memoryBytes"`
	GoVersion   string  `json:"goVersion"`
}

// Warmup is the warm-up pass of a run on a guest kernel: before its
// first row (mode none, the baseline, by default) it drives one
// repetition of the scenario's traffic plan (at most 500 connections a
// position) directly to the endpoints, as mode none dials
// them, and records nothing of it but this: Connections made (Errors of
// them failed) over Ns, and the p50 connect time of its first and last
// quarter of connections, which show how cold the kernel was (a fresh
// user-mode-linux guest: mode none, measured cold, took 72.8 s at p50
// 302 µs where iptables right after it took 28.6 s at 82 µs, 2026-12-04).
type Warmup struct {
	Connections int   `json:"connections"`
	Errors      int   `json:"errors,omitempty"`
	Ns          int64 `json:"ns"`
	FirstP50Ns  int64 `json:"firstP50Ns"`
	LastP50Ns   int64 `json:"lastP50Ns"`
}

// KernelRun is one kernel of a run.
type KernelRun struct {
	// Name is "host" or the guest kernel's name ("uml:6.12", "uml:6.1",
	// "uml:debian", or a kernel binary's path), as --kernel takes it.
	Name string `json:"name"`
	// Release is the kernel's uname -r.
	Release string `json:"release"`
	// Where is "host" or "uml".
	Where string `json:"where"`
	// Source says where a guest kernel came from (make kernels' package
	// and fragment hash, or Debian's user-mode-linux package).
	Source string   `json:"source,omitempty"`
	Modes  []string `json:"modes"`
	CPUs   int      `json:"cpus,omitempty"`
	// InitNs (start to init script), BootNs (start to the program) and
	// GuestNs (start to halt) time a guest kernel, in ns.
	InitNs  int64 `json:"initNs,omitempty"`
	BootNs  int64 `json:"bootNs,omitempty"`
	GuestNs int64 `json:"guestNs,omitempty"`
	// Bridge is, for a guest kernel of a run that also ran on the host,
	// the row that ran on both to measure the guest against the host
	// (GuestFactors); Baseline the row of the guest's own baseline (mode
	// none). "" when not run.
	Bridge   string `json:"bridge,omitempty"`
	Baseline string `json:"baseline,omitempty"`
	// Warmup is this kernel's warm-up pass (its run's Machine.Warmup).
	Warmup *Warmup `json:"warmup,omitempty"`
}

// ModeResult holds one proxy mode's figures.
type ModeResult struct {
	// Mode is the row's name: the mode ("nftables"), or for another
	// implementation its label ("nftables (kube-proxy)", "nftables
	// (kube-proxy v1.36.3)").
	Mode string `json:"mode"`
	// Implementation is "kube-proxy" for a kube-proxy row ("" builtin);
	// BaseMode is then the mode it runs ("nftables").
	Implementation string `json:"implementation,omitempty"`
	BaseMode       string `json:"baseMode,omitempty"`
	// Traits is what the reports need to know of the row's mode beyond
	// its figures (the rule list its lookup walks, what its sync objects
	// count), as the engine's proxymodes.Mode gave it (reports know no
	// mode). Zero in results written before it was recorded and for modes
	// without traits; runner.FillTraits fills an older result's from the
	// build's modes.
	Traits measure.ModeTraits `json:"traits,omitzero"`
	// KubeProxy records a kube-proxy row: version, config, flags, log,
	// setup, kube-proxy's own sync metrics and its resource use.
	KubeProxy *measure.KubeProxy `json:"kubeProxy,omitempty"`
	// Monitoring is what the row's Prometheus saw and its rules gave
	// (scenario block monitoring, alerts:; kube-proxy rows).
	Monitoring *Monitoring `json:"monitoring,omitempty"`
	// Kernel is where this mode ran: "host", or a guest kernel's name
	// (KernelRun.Name; "uml" in results before kernels had names);
	// figures compare only between modes of one kernel.
	Kernel string `json:"kernel,omitempty"`
	// FellBackFrom names the mode this one replaced under `fallback:
	// iptables` (kube-proxy's downgrade when IP_VS is missing).
	FellBackFrom string            `json:"fellBackFrom,omitempty"`
	Info         map[string]string `json:"info,omitempty"` // back end, tool versions
	// Faults are failures that did not stop the mode's phases but may make
	// one of its figures invalid (a conntrack table that could not be
	// flushed between modes), one sentence each; the report shows them as
	// warnings.
	Faults []string `json:"faults,omitempty"`
	// Partial, when set, says why this mode stopped: the phases present
	// (sync.full, then sync.incremental, traffic, fairness, churn in that
	// order) were finished; the later ones are missing.
	Partial string `json:"partial,omitempty"`
	// Failed, when set, says that the row failed and why: its proxy
	// program (kube-proxy) exited on its own, e.g. killed or crashed
	// (KubeProxy.Exit says how). Its figures are what was measured before
	// (Partial says which phases were cut); the run went on.
	Failed string `json:"failed,omitempty"`
	// Services is the service count this result was measured at (one
	// ModeResult per mode and sweep size).
	Services int `json:"services"`
	// SyncFull are the raw samples of sync.full (one per repetition).
	SyncFull []measure.SyncStats `json:"syncFull"`
	// SyncFullSummary summarises SyncFull wall times.
	SyncFullSummary Summary `json:"syncFullSummary"`
	// SyncIncremental are the raw samples of sync.incremental: a Sync
	// after one endpoint change at Services services (one per repetition).
	SyncIncremental        []measure.SyncStats `json:"syncIncremental,omitempty"`
	SyncIncrementalSummary Summary             `json:"syncIncrementalSummary"`
	// Churn holds the churn phases (one per minSyncPeriod of a sweep).
	Churn []ChurnResult `json:"churn,omitempty"`
	// TrafficCPUNs is the CPU time (user+sys, self+children) of the whole
	// traffic phase, TrafficConns its connections: their ratio is CPU per
	// connection, driver and echo server included, so the difference to
	// mode none is the proxy's own cost.
	TrafficCPUNs int64 `json:"trafficCpuNs"`
	TrafficConns int   `json:"trafficConns"`
	// ICMP are the kernel's ICMP and SYN-retransmission counters over the
	// traffic phase (nil in results before they were recorded).
	ICMP *ICMPCounters `json:"icmp,omitempty"`
	// ProxyRSSBytes is the proxy process's resident memory after the
	// traffic phase, for modes whose data path is in this process.
	ProxyRSSBytes uint64 `json:"proxyRssBytes,omitempty"`
	// Lookup holds lookup.latency per service position (and
	// lookup.kernel, PositionResult.Kernel).
	Lookup []PositionResult `json:"lookup"`
	// NodePortLookup is the nodePortLookup phase (traffic.nodePorts):
	// lookup.latency per position over the services with node ports,
	// dialled at node-0's address and the node port (positions count
	// those services only).
	NodePortLookup []PositionResult `json:"nodePortLookup,omitempty"`
	// KernelTime says how lookup.kernel was measured in the traffic
	// phase, or why it was not (nil: results before it existed, and rows
	// without a traffic phase).
	KernelTime *KernelTime `json:"kernelTime,omitempty"`
	// Fairness pools the fixed-position services' hits.
	Fairness FairnessSummary `json:"fairness"`
	// Ports splits the traffic phase by ServicePort (services.ports, or
	// portsPerService): one row per port of the service spec, pooled over
	// every position and service. Set when services have more than one
	// port or any UDP port.
	Ports []PortResult `json:"ports,omitempty"`
	// FairnessRun is the fairness phase (traffic.perService > 0): every
	// service on every node, see FairnessRun.
	FairnessRun *FairnessRun `json:"fairnessRun,omitempty"`
	// Transitions are the transitions phase's figures (scenario block
	// transitions), one per transition and cleanup variant.
	Transitions []Transition `json:"transitions,omitempty"`
	// DNS checks the transitions phase's DNS-like service on both its
	// ServicePorts (53/UDP and 53/TCP) with one endpoint.
	DNS *DNSCheck `json:"dns,omitempty"`
	// SyncDisruption are the sync-disruption phase's windows (scenario
	// block syncDisruption): a cold full sync and an incremental one.
	SyncDisruption []SyncWindow `json:"syncDisruption,omitempty"`
	// Lifecycle are the lifecycle phase's changes (scenario block
	// lifecycle).
	Lifecycle []LifecycleChange `json:"lifecycle,omitempty"`
	// DualStack is the dualStack phase's per-family sync and lookup (a
	// dual-stack scenario: services.ipFamilyPolicy over two families).
	DualStack *DualStack `json:"dualStack,omitempty"`
	// ConnReuse are the conn-reuse phase's passes (scenario block
	// connReuse).
	ConnReuse []ConnReusePass `json:"connReuse,omitempty"`
	// Soak is the soak phase's samples (scenario block soak), as its
	// stream holds them.
	Soak *SoakResult `json:"soak,omitempty"`
	// KubeProxySweep is a kube-proxy row's size of sweep.services (one
	// control plane and kube-proxy over every size; nil for other rows).
	KubeProxySweep *KubeProxySweepPoint `json:"kubeProxySweep,omitempty"`
	// APIOutage, Restart and Crash are the process faults' cases
	// (scenario block faults: apiOutage, restart, crash).
	APIOutage []APIOutageCase `json:"apiOutage,omitempty"`
	Restart   []RestartCase   `json:"restart,omitempty"`
	Crash     []CrashCase     `json:"crash,omitempty"`
	// OutOfBand is the outOfBand phase's changes (scenario block
	// faults.outOfBand).
	OutOfBand *OutOfBandResult `json:"outOfBand,omitempty"`
	// SliceChurn is the sliceChurn phase's samples (scenario block
	// faults.sliceChurn), as its stream holds them.
	SliceChurn *SoakResult `json:"sliceChurn,omitempty"`
}

// isBaseline reports whether m is a row of the baseline mode
// (scenarios.BaselineMode, none: no rules), which the vsnone figures and
// the reports compare every other row with.
func (m ModeResult) isBaseline() bool { return isBaselineMode(m.Mode) }

// isBaselineMode reports whether mode names the baseline mode.
func isBaselineMode(mode string) bool { return mode == scenarios.BaselineMode }

// PortResult is the traffic phase's figures for one ServicePort of the
// service spec (such as dns 53/UDP), over every position: lookup.latency
// (a TCP connect, or a UDP exchange's round trip), errors per cause, and
// the fairness of the fixed positions that are this port.
type PortResult struct {
	// Name is the ServicePort's name ("dns"; "" when unnamed), Protocol
	// TCP or UDP, Port its port on the ClusterIP.
	Name     string `json:"name"`
	Protocol string `json:"protocol"`
	Port     int    `json:"port"`
	// Latency summarizes every recorded connection or exchange to this
	// port, in ns.
	Latency Summary `json:"latency"`
	// Errors and Misses as PositionResult; ErrorKinds counts the errors
	// per cause (refused, timeout, reset, unreachable, other).
	Errors     int            `json:"errors"`
	Misses     int            `json:"misses"`
	ErrorKinds map[string]int `json:"errorKinds,omitempty"`
	// Fairness pools the fixed positions whose ServicePort is this one
	// (nil when none is).
	Fairness *FairnessSummary `json:"fairness,omitempty"`
	// Positions lists those fixed positions.
	Positions []string `json:"positions,omitempty"`
	// SourcePorts says how UDP exchanges picked their source port
	// (traffic.udp: "kernel-chosen", "fixed 5300", "5300-5303"); empty
	// for TCP.
	SourcePorts string `json:"sourcePorts,omitempty"`
}

// PositionResult is lookup.latency (and hits) at one service position.
type PositionResult struct {
	Position string `json:"position"`
	// Service is "ns/name:port" of a fixed position; empty for random.
	Service string `json:"service,omitempty"`
	// Protocol is the fixed position's ServicePort protocol (TCP: a
	// connect; UDP: an exchange's round trip); empty for random and in
	// results before it was recorded (TCP).
	Protocol string `json:"protocol,omitempty"`
	// Index is the ServicePort's position in render order (-1 for random).
	Index   int     `json:"index"`
	Latency Summary `json:"latency"`
	// TTFB is the time to first byte (connect + the echo line), which for
	// the userspace mode includes the proxy's dial to the endpoint.
	TTFB      Summary  `json:"ttfb"`
	Errors    int      `json:"errors"`
	Misses    int      `json:"misses"`
	ErrorText []string `json:"errorSamples,omitempty"`
	// ErrorKinds counts the failed connections per cause (refused,
	// timeout, reset, unreachable, other: traffic.ErrorKind) with their
	// time from the connect to the error.
	ErrorKinds map[string]ErrorKind `json:"errorKinds,omitempty"`
	// CPS is throughput.cps: recorded connections / elapsed, at the
	// scenario's concurrency (closed loop).
	CPS float64 `json:"cps"`
	// Hits counts connections per endpoint IP of a fixed-position service.
	Hits     map[string]int `json:"hits,omitempty"`
	Fairness *Fairness      `json:"fairness,omitempty"`
	// SamplesNs are the raw connect times in ns (all repetitions), kept so
	// reports and comparisons can be recomputed without rerunning.
	SamplesNs []int64 `json:"samplesNs"`
	// TTFBSamplesNs are the raw times to first byte, in ns.
	TTFBSamplesNs []int64 `json:"ttfbSamplesNs,omitempty"`
	// Kernel is lookup.kernel at this position: the node kernel's own
	// time for each recorded connection's SYN, from netif_receive_skb on
	// the node's end of the client's veth to the SYN's input route
	// lookup (fib_table_lookup): ip_rcv, the PREROUTING hooks (conntrack
	// creating the entry, the nat table's rule walk: KUBE-SERVICES →
	// KUBE-SVC → KUBE-SEP for iptables, the verdict maps for nftables)
	// and the lookup's start, in ns, measured in the kernel by BPF
	// (internal/lib/kerneltime). Zero when not measured:
	// ModeResult.KernelTime says why.
	Kernel Summary `json:"kernel,omitzero"`
	// KernelSamplesNs are lookup.kernel's raw samples, one per SYN, ns.
	KernelSamplesNs []int64 `json:"kernelSamplesNs,omitempty"`
	// KernelOther is the same interval for the position's other packets
	// to the service (the handshake's ACK, the echo's data, FIN and RST:
	// conntrack finds their entry, no rule is walked),
	// lookup.kernel.other; KernelOtherSamplesNs its raw samples.
	KernelOther          Summary `json:"kernelOther,omitzero"`
	KernelOtherSamplesNs []int64 `json:"kernelOtherSamplesNs,omitempty"`
}

// KernelTime says how a row's lookup.kernel was measured, or why not.
type KernelTime struct {
	// Bracket names the interval timed (the two tracepoints and what lies
	// between them).
	Bracket string `json:"bracket,omitempty"`
	// Programs is the BPF program type that measured it: "tp_btf"
	// (BTF-typed raw tracepoints) or "raw_tp" (raw tracepoints reading
	// with bpf_probe_read_kernel, where the kernel refuses tp_btf).
	Programs string `json:"programs,omitempty"`
	// Absent, when set, says in words why lookup.kernel was not measured
	// ("not root: BPF programs need CAP_BPF and CAP_PERFMON (uid 1000)",
	// "turned off: traffic.kernelTime: false"); the positions then have
	// no Kernel figures.
	Absent string `json:"absent,omitempty"`
	// Lost are packets the ring buffer had no room for; Unmatched are
	// timed packets of the node that belong to no position's connections
	// (the backend's answers, packets outside a position's recorded
	// window), left out of every figure.
	Lost      uint64 `json:"lost,omitempty"`
	Unmatched int    `json:"unmatched,omitempty"`
}

// Write stores r as indented JSON at path atomically: it writes a
// temporary file in path's folder, syncs it and renames it over path, so
// path holds either the old content or the whole result, never a part.
// It creates no folder.
func (r *Result) Write(path string) (err error) {
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(append(b, '\n')); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// Read loads a result written by Write. A result of a newer schema is an error.
func Read(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: not a proxybench result: %w", path, err)
	}
	if r.SchemaVersion < 1 || r.SchemaVersion > SchemaVersion {
		return nil, fmt.Errorf("%s: result schema version %d; this proxybench reads 1..%d", path, r.SchemaVersion, SchemaVersion)
	}
	return &r, nil
}

// ErrorKind is one cause of failed connections at a position.
type ErrorKind struct {
	Count int `json:"count"`
	// TimeToError summarises SamplesNs: from the connect to the error, ns.
	TimeToError Summary `json:"timeToError"`
	SamplesNs   []int64 `json:"samplesNs"`
}

// ICMPCounters are kernel counters over a mode's traffic phase (the
// difference between after and before, summed over the namespaces; Icmp
// and TcpExt lines of /proc/net/snmp and /proc/net/netstat,
// net/ipv4/proc.c). They say why a refusal took a SYN retransmission.
type ICMPCounters struct {
	// DestUnreachSent are the ICMP destination-unreachable messages the
	// node namespaces sent (a mode's REJECT of a service without
	// endpoints; Icmp.OutDestUnreachs).
	DestUnreachSent int64 `json:"destUnreachSent"`
	// RateLimitedHost are ICMP errors the node namespaces did not send
	// because of the per-destination limit, net.ipv4.icmp_ratelimit ms
	// per message with a burst of 6, for the types in
	// net.ipv4.icmp_ratemask (Icmp.OutRateLimitHost).
	RateLimitedHost int64 `json:"rateLimitedHost"`
	// RateLimitedGlobal are those not sent because of the namespace-wide
	// limit, net.ipv4.icmp_msgs_per_sec with a burst of
	// net.ipv4.icmp_msgs_burst (Icmp.OutRateLimitGlobal).
	RateLimitedGlobal int64 `json:"rateLimitedGlobal"`
	// LockDropped are ICMP errors the client namespaces received while
	// the socket was locked by its owner (TcpExt.LockDroppedIcmps): kept
	// only as a soft error, which a blocking connect does not see.
	LockDropped int64 `json:"lockDropped"`
	// SynRetrans are the clients' SYN retransmissions
	// (TcpExt.TCPSynRetrans), 1 s after the SYN for the first.
	SynRetrans int64 `json:"synRetrans"`
}
