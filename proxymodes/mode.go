package proxymodes

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proxybench/proxybench/internal/lib/xtables"
	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// Node is what a mode needs of the node namespace it programs: running a
// function or a program inside it (satisfied by *topology.Netns).
type Node interface {
	Do(fn func() error) error
	Run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error)
}

// NodeNamer is implemented by a Node that knows its name in the API
// (*topology.Netns of a node namespace: scenarios.NodeName of its index),
// the hostname a proxier compares an endpoint's node with for the Local
// traffic policies.
type NodeNamer interface {
	NodeName() string
}

// NodeNameOf returns node's NodeName, or fallback when node has none
// (a fake node, a scratch namespace).
func NodeNameOf(node Node, fallback string) string {
	if n, ok := node.(NodeNamer); ok {
		if name := n.NodeName(); name != "" {
			return name
		}
	}
	return fallback
}

// NodeIPer is implemented by a Node that knows its primary addresses
// (*topology.Netns of a node namespace: its fabric address, the Node
// object's InternalIP and the node IP kube-proxy rows run with, then its
// IPv6 twin): the addresses kube-proxy v1.37's default nodePortAddresses
// ("primary" in nftables mode) accepts node ports on.
type NodeIPer interface {
	NodeIPs() []netip.Addr
}

// NodeIPsOf returns node's NodeIPs of family ("IPv4", "IPv6",
// scenarios.FamilyName), or nil when node has none.
func NodeIPsOf(node Node, family string) []netip.Addr {
	n, ok := node.(NodeIPer)
	if !ok {
		return nil
	}
	var out []netip.Addr
	for _, a := range n.NodeIPs() {
		if scenarios.AddrFamily(a) == family {
			out = append(out, a)
		}
	}
	return out
}

// Sysctler is implemented by a Node that writes its own per-namespace
// sysctls (*topology.Netns.Sysctl, which refuses anything but net/ keys).
// A mode writes the sysctls kube-proxy writes in its node (iptables:
// net/ipv4/conf/all/route_localnet=1 for localhost node ports) only
// through it, so a fake node never reaches the root namespace's.
type Sysctler interface {
	Sysctl(key, value string) error
}

// Mode is everything proxybench knows about one proxy mode, in one value:
// the runner, the sim engine, doctor, scenario validation and the reports
// ask it, never a switch on the mode's name. Each mode's package exports
// its Mode; package proxymodes/modes lists them (docs/architecture.md,
// "Adding a mode").
//
// New and Render take their configuration from the scenario with one and
// the same function of the mode's package (ConfigFromScenario), so the
// real run and the sim model the same rules.
type Mode struct {
	// Name as written in scenarios ("iptables"); for another
	// implementation's variant of a mode, its row label ("nftables
	// (kube-proxy)").
	Name string
	// Base is, for a variant, the name of the builtin mode it implements
	// ("nftables"); "" for a builtin mode (BaseName returns Name then).
	Base string
	// Implementation is "" for proxybench's own proxier (builtin), else
	// the implementation the variant runs ("kube-proxy": package
	// proxymodes/kubeproxy makes it from the builtin Mode).
	Implementation string
	// SingleFullSync: sync.full is measured once per run, on the node, not
	// repeated in scratch namespaces (a kube-proxy full sync starts a
	// control plane and creates every API object).
	SingleFullSync bool
	// New builds the mode's proxier for sc, programming node. It touches
	// no kernel until the first Sync.
	New func(sc *scenarios.Scenario, node Node) (Proxier, error)
	// Render renders services as New's proxier programs them on a full
	// sync, with no kernel (the sim engine, rule comparisons). It fails
	// where the proxier's Sync would fail on the same input.
	Render func(sc *scenarios.Scenario, services []workload.Service) (*Rendering, error)
	// Sim says how the sim engine models the mode's data plane.
	Sim SimModel
	// SyncPeriods returns the mode's minSyncPeriod and syncPeriod from its
	// KubeProxyConfiguration block of sc (nil: the mode has no sync loop
	// settings, and ChurnSyncPeriods fails for it).
	SyncPeriods func(sc *scenarios.Scenario) (minSync, period time.Duration)
	// MaxSyncInterval is the longest time the mode's sync loop goes
	// without a sync when nothing changed and no sync failed: kube-proxy's
	// BoundedFrequencyRunner maxInterval. v1.36 and v1.37 build the
	// iptables and nftables runners with FullSyncPeriod (1 h,
	// pkg/proxy/util) and the IPVS one with syncPeriod
	// (pkg/proxy/{iptables,nftables,ipvs}/proxier.go); a failed sync is
	// retried after syncPeriod in every mode. 0: syncPeriod.
	MaxSyncInterval time.Duration
	// Fairness returns what the mode's endpoint choice promises with sc's
	// settings (scheduler, session affinity), for the fairness verdicts.
	Fairness func(sc *scenarios.Scenario) measure.Expectation
	// Binaries lists the programs the mode needs on PATH with sc's settings.
	Binaries func(sc *scenarios.Scenario) []string
	// Modules lists the kernel modules the mode needs with sc's settings
	// (sc nil: with any setting, for doctor), loaded by the
	// user-mode-linux guest before a run (the host kernel has no loadable
	// modules; built-in ones are skipped). Nil: none beyond
	// uml.BaseModules.
	Modules func(sc *scenarios.Scenario) []string
	// KernelOptions lists the kernel build options (CONFIG_X, as Kconfig
	// names them in net/netfilter/Kconfig, net/ipv4/netfilter/Kconfig,
	// net/netfilter/ipvs/Kconfig) the mode needs with sc's settings (sc
	// nil: with any setting). A user-mode-linux kernel runs the mode only
	// when its --showconfig has each as =y (or =m in a modular kernel);
	// make kernels' fragment (internal/uml/kconfig/proxybench.config)
	// builds every one in. Nil: no options beyond a network namespace.
	KernelOptions func(sc *scenarios.Scenario) []string
	// Protocols lists the ServicePort protocols the mode proxies ("TCP",
	// "UDP", "SCTP"), as its Render and Sync accept them; scenario
	// validation refuses a port of another protocol (exit 2) through
	// modes.Catalog.
	Protocols []string
	// LocalhostNodePorts: the mode answers node ports on 127.0.0.1 from
	// the node itself (kube-proxy's iptables.localhostNodePorts, default
	// true; the nftables and IPVS modes do not support them), which the
	// serviceTypes phase's documented outcome follows.
	LocalhostNodePorts bool
	// IPv6: the mode programs IPv6 as kube-proxy's IPv6 proxier does:
	// New and Render take the scenario's IPv6 view
	// (scenarios.Scenario.ForFamily(IPv6): Family IPv6, the IPv6 twins
	// of its CIDRs) and IPv6 services (workload.Twin6). A dual-stack
	// scenario naming a mode without it is refused (modes.Catalog).
	IPv6 bool
	// NodePorts: the builtin mode programs NodePort services' node ports
	// (iptables KUBE-NODEPORTS, nftables service-nodeports), which the
	// nodePortLookup phase dials; a kube-proxy variant programs them in
	// every mode (its Base is set).
	NodePorts bool
	// TopologyHints: the builtin mode programs each node's cluster
	// endpoints narrowed by the EndpointSlice hints (trafficDistribution)
	// as kube-proxy v1.37 does on that node (pkg/proxy/topology.go
	// CategorizeEndpoints, which every kube-proxy proxier calls, iptables,
	// nftables and ipvs alike; workload.Service.KubeProxyOrderAt), so the
	// topology shares it gives are kube-proxy's. A scenario that sets
	// trafficDistribution and runs a builtin mode without it is refused
	// (modes.Catalog); a kube-proxy variant follows the hints itself.
	TopologyHints bool
	// Direct makes the traffic driver dial endpoints directly instead of
	// ClusterIPs (mode none, the baseline).
	Direct bool
	// UsesIPTables: the mode programs iptables rules (iptables; ipvs's
	// nat rules beside its virtual servers; userspace's portals), so its
	// KernelOptions follow the scenario's iptables.backend
	// (IPTablesKernelOptionsFor: a kernel without nf_tables' ip family
	// runs it with backend legacy), and its kube-proxy variant gets that
	// back end's iptables on its PATH.
	UsesIPTables bool
	// VSSysctls: the mode's connections go through the kernel's IP
	// Virtual Server, so the net.ipv4.vs.* sysctls govern them
	// (conn_reuse_mode, expire_nodest_conn, expire_quiescent_template:
	// the kernel's Documentation/networking/ipvs-sysctl.rst); the
	// connReuse phase runs one pass per connReuse.reuseModes value.
	VSSysctls bool
	// FallsBackTo names the mode that replaces this one on a kernel that
	// cannot run it, under the scenario's `fallback: <that mode>`
	// (kube-proxy's downgrade from ipvs to iptables when IP_VS is
	// missing; reports.ModeResult.FellBackFrom records it). "": the run
	// fails on such a kernel instead.
	FallsBackTo string
	// SplitBaseline: when kernel auto splits a run between the host and
	// a guest kernel (the host runs the modes it can, the guest the
	// others), the guest's group runs this mode too if the host ran it
	// and the guest can, so each kernel's rows have it to compare with:
	// none (the vsnone figures) and iptables (kube-proxy's default mode,
	// the bridge that gives the guest's factor against the host:
	// runner.BridgeMode).
	SplitBaseline bool
	// ReadBack lists, in order, the commands that read back inside a
	// node namespace what the mode installs beyond iptables rules and
	// nft tables (dump and proxymodes/fidelity read those for every
	// mode): ipvs's ipvsadm -Sn, ipset save and kube-ipvs0's addresses.
	ReadBack []ReadCommand
	// Endpoints reads back from a node's kernel the endpoint addresses
	// new connections can be sent to in the mode's rules (the fault
	// phases' convergence check, internal/runner/fault.go). Nil: the
	// mode's rules are not read back and those phases refuse it.
	Endpoints *EndpointReadBack
	// KubeProxyResync says how kube-proxy v1.37's proxier of this mode
	// resyncs without an API change (its sync runner's intervals, its
	// canary), from pkg/proxy/<mode>/proxier.go: the text the
	// out-of-band phase records beside its repair times. "": kube-proxy
	// has no such proxier.
	KubeProxyResync string
	// Traits is what the reports need to know of the mode beyond its
	// figures (the rule list a lookup walks, what sync objects count);
	// every row records it (reports.ModeResult.Traits).
	Traits measure.ModeTraits
	// Probe checks, in a throwaway namespace, that the kernel has what the
	// mode needs; it returns whether it does and why (for doctor).
	Probe func(ctx context.Context, node Node) (ok bool, why string)
	// CleanupLeftovers removes from node what kube-proxy v1.37's
	// CleanupLeftovers of the mode removes (pkg/proxy/<mode>/cleanup.go),
	// whoever wrote it, with the node's iptables back end (sc's
	// iptables.backend); best effort: every step runs, the error joins
	// the failed ones. Nil: kube-proxy has none for the mode (userspace,
	// none).
	CleanupLeftovers func(ctx context.Context, sc *scenarios.Scenario, node Node) error
	// CleansAtStart names the modes whose CleanupLeftovers a proxier of
	// this mode runs before its first sync after a mode switch, as
	// kube-proxy v1.37 does at start (platformCleanup of
	// cmd/kube-proxy/app/server_linux.go).
	CleansAtStart []string
	// Owns says whether the mode writes an object of the kernel (a
	// proxymodes/leftovers Kind, the iptables table or nft family, its
	// name), so that what a mode switch leaves is told from what the new
	// mode wrote. Nil: the mode writes nothing.
	Owns func(kind, table, name string) bool
}

// BaseName is the builtin mode m implements: Base, or Name for a builtin
// mode.
func (m Mode) BaseName() string {
	if m.Base != "" {
		return m.Base
	}
	return m.Name
}

// HasScheduler reports whether m's endpoint choice is a scheduler the
// scenario names (Sim.Choice ChoiceScheduler: IPVS, the ipvs block's
// scheduler and schedulerFlags): sweep.schedulers runs m once per value
// (Scenario.IPVS.Scheduler set to it), and its rows, messages and
// fairness verdicts name the scheduler.
func (m Mode) HasScheduler() bool { return m.Sim.Choice == ChoiceScheduler }

// ReadCommand is one command of Mode.ReadBack: Name and Args as run in
// the node namespace; an Optional one may fail (a device the mode has
// not created yet), and its reading is then left out.
type ReadCommand struct {
	Name     string
	Args     []string
	Optional bool
}

// EndpointReadBack is Mode.Endpoints: Commands run in order inside the
// node namespace (an Optional one that fails adds nothing: a table not
// written yet), and Parse adds the endpoint addresses (pod IPs) each
// command's output names to out.
type EndpointReadBack struct {
	Commands []ReadCommand
	Parse    func(text string, out map[netip.Addr]bool)
}

// ImplementationName is "builtin" or the variant's implementation.
func (m Mode) ImplementationName() string {
	if m.Implementation == "" {
		return "builtin"
	}
	return m.Implementation
}

// ChurnSyncPeriods returns, for m, the minSyncPeriod values its churn
// phase runs with (sweep.minSyncPeriod when set, else the mode's own
// SyncPeriods) and its syncPeriod. It fails for a mode without
// SyncPeriods (mode none has no sync loop).
func (m Mode) ChurnSyncPeriods(sc *scenarios.Scenario) (minSyncs []time.Duration, period time.Duration, err error) {
	if m.SyncPeriods == nil {
		return nil, 0, fmt.Errorf("mode %s has no sync periods (it runs no sync loop)", m.Name)
	}
	min, period := m.SyncPeriods(sc)
	if len(sc.Sweep.MinSyncPeriod) == 0 {
		return []time.Duration{min}, period, nil
	}
	for _, d := range sc.Sweep.MinSyncPeriod {
		minSyncs = append(minSyncs, d.Duration)
	}
	return minSyncs, period, nil
}

// Expectation returns m.Fairness(sc), or, for a mode without one, an
// expectation of equal shares per connection named after the mode.
func (m Mode) Expectation(sc *scenarios.Scenario) measure.Expectation {
	if m.Fairness == nil {
		return measure.Expectation{Unit: measure.UnitConnection, Source: m.Name}
	}
	return m.Fairness(sc)
}

// Rendering is a mode's full ruleset for one service set, rendered
// without a kernel by Mode.Render.
type Rendering struct {
	// Objects and Bytes are what a full sync programs and sends, as the
	// proxier's SyncStats counts them (sim estimates for modes whose
	// proxier counts netlink messages).
	Objects, Bytes int
	// Rules is the ruleset as text, in the form of the mode's tool
	// (iptables-restore input, nft commands, the IPVS table and its
	// settings); equal Rules mean the same rules in the kernel.
	Rules []byte
	// Walk, for a mode whose lookup walks a list of rules, returns how
	// many rules a new connection to services[t.Service].Ports[t.Port]
	// evaluates (its own included). Nil for a lookup of fixed cost.
	Walk func(t workload.Target) int
	// Scheduler is the IPVS scheduler (ChoiceScheduler) and
	// SchedulerFlags its flags (sh-port, ...), which the sim does not
	// model.
	Scheduler      string
	SchedulerFlags []string
	// AffinityTimeout, when > 0, pins a client address to its first
	// endpoint for that long (ClientIP session affinity).
	AffinityTimeout time.Duration
	// Info is the mode's description for the result (ModeResult.Info):
	// its back end and settings, as the proxier's Info gives them.
	Info map[string]string
}

// Lookup and choice models of the sim engine (SimModel).
const (
	// LookupDirect: no rules; traffic dials the pod (mode none).
	LookupDirect = "direct"
	// LookupLinear: a new connection walks Rendering.Walk rules.
	LookupLinear = "linear"
	// LookupHash: one lookup whatever the number of services (a verdict
	// map, the IPVS service table).
	LookupHash = "hash"

	// ChoiceStatistic: iptables' "-m statistic --mode random
	// --probability 1/(n-i)" rules, walked in order.
	ChoiceStatistic = "statistic"
	// ChoiceNumgen: nftables' "numgen random mod n" verdict map.
	ChoiceNumgen = "numgen"
	// ChoiceScheduler: the IPVS scheduler Rendering.Scheduler.
	ChoiceScheduler = "scheduler"
	// ChoiceRoundRobin: the legacy userspace proxy's round robin over a
	// shuffled endpoint list.
	ChoiceRoundRobin = "round-robin"
)

// SimModel says how the sim engine evaluates the mode's data plane: how a
// new connection finds its service (Lookup*) and how an endpoint is
// picked (Choice*; unused with LookupDirect). The sim fails on a value it
// does not know.
type SimModel struct {
	Lookup, Choice string
	// PartialRewritesWalk: an incremental sync rewrites the walked list
	// whole besides the changed service's chains (iptables: a partial
	// sync of pkg/proxy/iptables writes KUBE-SERVICES, one rule per
	// service plus the nodeports jump, every time); the calibration
	// takes those size+1 rules off a measured incremental sync's objects
	// for the objects one change adds (sim.ModeCost.ObjectsPerChange).
	PartialRewritesWalk bool
	// Estimate is the mode's cost model when a calibration did not
	// measure it (sim.EstimateMissing); nil: the sim needs the mode
	// calibrated (a direct mode needs no costs).
	Estimate *SimEstimate
}

// SimEstimate is the sim's cost model of a mode a calibration did not
// measure (sim.ModeCost with Measured false), from what is known of the
// mode's proxier elsewhere; Note says so in every sim result.
type SimEstimate struct {
	Note string
	// LookupOverheadNs is the connect time the mode adds over mode none's,
	// in ns. With LookupAsSameModel, the overhead of another mode of the
	// same Lookup model that the calibration has (ipvs: nftables', both
	// one hash lookup plus conntrack and NAT) replaces it.
	LookupOverheadNs  float64
	LookupAsSameModel bool
	// FullNs + FullPerObjectNs per object is a full sync's wall time (a
	// linear fit), IncrementalNs an incremental sync's fixed part.
	FullNs, FullPerObjectNs, IncrementalNs float64
	// PerChangedObjectNs, ObjectsPerChange, CPUPerWall and SyncCV are
	// sim.ModeCost's.
	PerChangedObjectNs, ObjectsPerChange, CPUPerWall, SyncCV float64
}

// CPUTime returns user+system CPU time consumed so far by this process and
// its waited-for children (getrusage(2) RUSAGE_SELF + RUSAGE_CHILDREN).
// The difference across a Sync is SyncStats.CPU.
func CPUTime() time.Duration {
	var self, kids unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &self)
	_ = unix.Getrusage(unix.RUSAGE_CHILDREN, &kids)
	tv := func(t unix.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

// ProbeIPTablesBackends loads rules (iptables-restore input, applied with
// --noflush, -w 5 as every iptables-restore of a run: without it
// iptables-legacy-restore 1.8.9 waits for a held xtables lock forever)
// with each iptables back end in node, legacy then nft, and
// returns the back ends that took them and, for the others, "backend:
// first line of the error". Modes that program through iptables-restore
// (iptables, userspace) use it in their Probe.
func ProbeIPTablesBackends(ctx context.Context, node Node, rules string) (ok, bad []string) {
	for _, be := range []string{"legacy", "nft"} {
		if _, err := node.Run(ctx, []byte(rules), xtables.Binary(be, "restore"), xtables.RestoreArgs("--noflush")...); err != nil {
			msg, _, _ := strings.Cut(err.Error(), "\n")
			bad = append(bad, be+": "+msg)
			continue
		}
		ok = append(ok, be)
	}
	return ok, bad
}

// iptablesBackends returns sc's iptables back end, or both when sc is nil
// (any setting).
func iptablesBackends(sc *scenarios.Scenario) []string {
	if sc == nil {
		return []string{"legacy", "nft"}
	}
	return []string{sc.IPTables.Backend}
}

// IPTablesKernelOptionsFor is xtables.KernelOptions of sc's back end, or
// of both back ends when sc is nil, without repeats: a Mode.KernelOptions
// for the modes that program iptables.
func IPTablesKernelOptionsFor(sc *scenarios.Scenario) []string {
	var out []string
	for _, b := range iptablesBackends(sc) {
		for _, o := range xtables.KernelOptions(b) {
			if !slices.Contains(out, o) {
				out = append(out, o)
			}
		}
	}
	return out
}

// NewFrom builds a Mode.New from a mode's scenario-to-config function and
// its proxier constructor, so every mode's New takes its configuration the
// same way Render does (one ConfigFromScenario for real runs and the sim).
func NewFrom[C any, P Proxier](config func(*scenarios.Scenario) (C, error), mk func(C, Node) P) func(*scenarios.Scenario, Node) (Proxier, error) {
	return func(sc *scenarios.Scenario, node Node) (Proxier, error) {
		cfg, err := config(sc)
		if err != nil {
			return nil, err
		}
		return mk(cfg, node), nil
	}
}

// RenderFrom builds a Mode.Render from the same config function and the
// mode's pure rendering of services under that config.
func RenderFrom[C any](config func(*scenarios.Scenario) (C, error), render func(C, []workload.Service) (*Rendering, error)) func(*scenarios.Scenario, []workload.Service) (*Rendering, error) {
	return func(sc *scenarios.Scenario, services []workload.Service) (*Rendering, error) {
		cfg, err := config(sc)
		if err != nil {
			return nil, err
		}
		return render(cfg, services)
	}
}
