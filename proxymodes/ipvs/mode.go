//go:build linux

package ipvs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/moby/ipvs"
	"golang.org/x/sys/unix"

	"github.com/proxybench/proxybench/internal/lib/xtables"
	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// Mode is the ipvs mode: kube-proxy's IPVS proxier (pkg/proxy/ipvs),
// programmed over netlink with ipset and iptables-restore beside it.
var Mode = proxymodes.Mode{
	Name: "ipvs",
	// IPVS has SCTP virtual servers, but this build programs TCP and UDP.
	Protocols: []string{"TCP", "UDP"},
	New:       proxymodes.NewFrom(ConfigFromScenario, New),
	// Virtual servers on every node address for node ports
	// (Config.NodeIPs, KUBE-NODE-PORT-* ipsets), which the
	// nodePortLookup phase dials.
	NodePorts: true,
	// Render's KubeProxyOrderAt per node (Config.NodeName, Config.Zones):
	// kube-proxy's IPVS proxier takes its real servers from the same
	// CategorizeEndpoints as iptables and nftables (TestRenderTopology).
	TopologyHints: true,
	// kube-proxy's IPv6 IPVS proxier (Config.IPv6): AF_INET6 virtual
	// servers, KUBE-6-* ipsets, ip6tables-legacy-restore.
	IPv6: true,
	Render: func(sc *scenarios.Scenario, services []workload.Service) (*proxymodes.Rendering, error) {
		cfg, err := ConfigFromScenario(sc)
		if err != nil {
			return nil, err
		}
		r, err := Rendering(cfg, services)
		if err != nil {
			return nil, err
		}
		// The result names the scenario's scheduler as written ("" is rr).
		r.Info = map[string]string{"scheduler": sc.IPVS.Scheduler, "backend": "ipvs"}
		return r, nil
	},
	Sim: proxymodes.SimModel{Lookup: proxymodes.LookupHash, Choice: proxymodes.ChoiceScheduler, Estimate: &proxymodes.SimEstimate{
		Note:             "estimated: the calibration kernel has no IP_VS; lookup as nftables' (one hash lookup), 8 µs per netlink object (proxymodes/ipvs batched full sync in UML); run proxybench calibrate --kernel uml",
		LookupOverheadNs: 6000, LookupAsSameModel: true,
		// A 10k-service full sync (~60k objects) took 0.5 s with batched
		// netlink in UML: 8 µs per object; an incremental sync 5 ms
		// plus the same per object.
		FullNs: 5e6, FullPerObjectNs: 8000, IncrementalNs: 5e6,
		PerChangedObjectNs: 8000, ObjectsPerChange: 2, CPUPerWall: 0.5, SyncCV: 0.05,
	}},
	// The nat rules beside the virtual servers (KUBE-MARK-MASQ, the
	// ipset matches).
	UsesIPTables: true,
	VSSysctls:    true,
	// kube-proxy's downgrade when IP_VS is missing.
	FallsBackTo: "iptables",
	ReadBack: []proxymodes.ReadCommand{
		{Name: "ipvsadm", Args: []string{"-Sn"}},
		{Name: binIPSet, Args: []string{"save"}},
		{Name: "ip", Args: []string{"-4", "-o", "addr", "show", "dev", DummyDevice}, Optional: true},
	},
	SyncPeriods: func(sc *scenarios.Scenario) (time.Duration, time.Duration) {
		return sc.IPVS.MinSyncPeriod.Duration, sc.IPVS.SyncPeriod.Duration
	},
	Fairness: func(sc *scenarios.Scenario) measure.Expectation {
		return Expectation(sc.IPVS.Scheduler, sc.IPVS.SchedulerFlags...).WithAffinity(sc.Services.SessionAffinity == "ClientIP")
	},
	Binaries: func(sc *scenarios.Scenario) []string {
		b := sc.IPTables.Backend
		out := []string{binIPSet, xtables.Binary(b, "restore"), xtables.Binary(b, "save")}
		if sc.DualStack() {
			out = append(out, xtables.Binary6(b, "restore"), xtables.Binary6(b, "save")) // the IPv6 proxier's
		}
		return out
	},
	Modules:          modules,
	KernelOptions:    kernelOptions,
	Probe:            Probe,
	CleanupLeftovers: cleanupLeftovers,
	CleansAtStart:    []string{"nftables"},
	Owns:             owns,
	Endpoints:        endpointReadBack,
	// kube-proxy's resync without an API change (pkg/proxy/ipvs/proxier.go).
	KubeProxyResync: "kube-proxy ipvs: a full sync every syncPeriod (its runner's maxInterval is syncPeriod: 30 s by default in v1.37.2, not 1 h), which re-adds missing real servers and deletes virtual servers it does not want outside ipvs.excludeCIDRs (cleanLegacyService)",
}

// kernelOptions lists what the IPVS proxier needs (net/netfilter/ipvs/Kconfig):
// iptables beside it (its nat and filter rules, sc's back end), IP_VS
// over TCP, the ipset types of its sets and the matches and targets of
// its rules (baseModules), with both families (or sc nil) ip6tables'
// filter, nat and REJECT target, and CONFIG_IP_VS_<SCHEDULER> for sc's scheduler and every scheduler of its
// sweep ("" is rr); with sc nil, every scheduler of Schedulers.
func kernelOptions(sc *scenarios.Scenario) []string {
	out := append(proxymodes.IPTablesKernelOptionsFor(sc), "CONFIG_IP_VS", "CONFIG_IP_VS_PROTO_TCP", "CONFIG_IP_SET",
		"CONFIG_IP_SET_HASH_IPPORT", "CONFIG_IP_SET_HASH_IPPORTIP", "CONFIG_IP_SET_HASH_IPPORTNET", "CONFIG_IP_SET_HASH_IP",
		"CONFIG_IP_SET_BITMAP_PORT", "CONFIG_NETFILTER_XT_SET", "CONFIG_NETFILTER_XT_MATCH_ADDRTYPE",
		"CONFIG_NETFILTER_XT_MATCH_CONNTRACK", "CONFIG_NETFILTER_XT_MATCH_PHYSDEV", "CONFIG_IP_NF_FILTER", "CONFIG_IP_NF_TARGET_REJECT")
	if sc == nil || sc.DualStack() {
		// The IPv6 proxier's ip6tables rules (with sc nil, every setting
		// includes a dual-stack one). KUBE-IPVS-FILTER's REJECT is the xt
		// target ip6t_REJECT (CONFIG_IP6_NF_TARGET_REJECT) with either
		// back end (ip6tables-nft-restore sends it through nft_compat);
		// without it every IPv6 restore fails at that line, kube-proxy
		// v1.37.2's as builtin's, so a dual-stack ipvs row needs it: a
		// guest kernel without it (uml:6.12 built before fragment
		// 5f15100c6a48) is never chosen for one (docs/kernels.md).
		out = append(out, "CONFIG_IP6_NF_IPTABLES", "CONFIG_IP6_NF_FILTER", "CONFIG_IP6_NF_NAT", "CONFIG_IP6_NF_TARGET_REJECT")
	}
	scheds := Schedulers
	if sc != nil {
		scheds = append([]string{sc.IPVS.Scheduler}, sc.Sweep.Schedulers...)
	}
	for _, s := range scheds {
		if s == "" {
			s = "rr"
		}
		if o := "CONFIG_IP_VS_" + strings.ToUpper(s); !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

// Expectation returns what scheduler (IPVS_SCHEDULERS; "" is rr) promises,
// from its kernel file: rr equal shares (ip_vs_rr.c skips weight-0
// servers only); wrr weighted (ip_vs_wrr.c); lc equal active connections
// (ip_vs_lc.c); wlc, sed, nq active connections proportional to weight
// (ip_vs_wlc.c, ip_vs_sed.c, ip_vs_nq.c); sh, mh source-address hash,
// buckets proportional to weight (ip_vs_sh.c puts a server weight times
// in the table; ip_vs_mh.c weights its permutation turns); dh, lblc,
// lblcr destination hash/locality, one server per ClusterIP (ip_vs_dh.c,
// ip_vs_lblc.c, ip_vs_lblcr.c). With flag sh-port or mh-port (ipvsadm
// -b, Config.SchedulerFlags) the hash covers the source port, a new one
// per connection, so every connection is a draw. Session affinity is
// applied by the caller (measure.Expectation.WithAffinity).
func Expectation(scheduler string, flags ...string) measure.Expectation {
	portHash := slices.Contains(flags, "sh-port") || slices.Contains(flags, "mh-port")
	e := measure.Expectation{Unit: measure.UnitConnection}
	switch scheduler {
	case "", "rr":
		e.Source = "ip_vs_rr.c: rotation, weights ignored (0 skips)"
	case "wrr":
		e.Weighted, e.Source = true, "ip_vs_wrr.c: interleaved weighted rotation"
	case "lc":
		e.Unit, e.Source = measure.UnitActive, "ip_vs_lc.c: fewest active (×256) + inactive connections"
	case "wlc":
		e.Unit, e.Weighted, e.Source = measure.UnitActive, true, "ip_vs_wlc.c: fewest (active×256+inactive)/weight"
	case "sed":
		e.Unit, e.Weighted, e.Source = measure.UnitActive, true, "ip_vs_sed.c: fewest (active+1)/weight"
	case "nq":
		e.Unit, e.Weighted, e.Source = measure.UnitActive, true, "ip_vs_nq.c: an idle server first, else fewest (active+1)/weight"
	case "sh":
		e.Unit, e.Weighted, e.Source = measure.UnitSource, true, "ip_vs_sh.c: source hash over 256 buckets, weight buckets per server"
		if portHash {
			e.Unit, e.Source = measure.UnitConnection, "ip_vs_sh.c with sh-port: hash of source address and port over 256 buckets, weight buckets per server"
		}
	case "mh":
		e.Unit, e.Weighted, e.Source = measure.UnitSource, true, "ip_vs_mh.c: Maglev hash of the source, weighted turns"
		if portHash {
			e.Unit, e.Source = measure.UnitConnection, "ip_vs_mh.c with mh-port: Maglev hash of source address and port, weighted turns"
		}
	case "dh":
		e.Unit, e.Source = measure.UnitDestination, "ip_vs_dh.c: destination hash over 256 buckets"
	case "lblc":
		e.Unit, e.Source = measure.UnitDestination, "ip_vs_lblc.c: one server per destination until overloaded"
	case "lblcr":
		e.Unit, e.Source = measure.UnitDestination, "ip_vs_lblcr.c: a server set per destination"
	}
	return e
}

// Rendering renders services under cfg for Mode.Render: the IPVS table,
// ipset and nat rules (Ruleset.Dump) followed by the settings a sync
// applies besides them (timeouts, excludeCIDRs); objects are virtual and
// real servers, addresses, set entries and nat rules.
func Rendering(cfg Config, services []workload.Service) (*proxymodes.Rendering, error) {
	rs, err := Render(cfg, services)
	if err != nil {
		return nil, err
	}
	objects := len(rs.Virtual) + rs.RealServers + len(rs.Addresses) + rs.Members() + rs.IPTablesRules
	rules := rs.Dump() + fmt.Sprintf("# settings\ntimeouts tcp %s tcpfin %s udp %s\nexcludeCIDRs %v\n",
		cfg.TCPTimeout, cfg.TCPFinTimeout, cfg.UDPTimeout, cfg.ExcludeCIDRs)
	r := &proxymodes.Rendering{
		Objects: objects, Bytes: len(rs.IPTables) + 64*(objects-rs.IPTablesRules), Rules: []byte(rules),
		Scheduler: cfg.scheduler(), SchedulerFlags: cfg.SchedulerFlags, Info: map[string]string{"scheduler": cfg.scheduler(), "backend": "ipvs"},
	}
	if cfg.SessionAffinity {
		r.AffinityTimeout = cfg.AffinityTimeout
	}
	return r, nil
}

// modules lists the kernel modules of sc's scheduler, or of every
// scheduler when sc is nil (doctor).
func modules(sc *scenarios.Scenario) []string {
	if sc == nil {
		return KernelModules("")
	}
	return KernelModules(sc.IPVS.Scheduler)
}

// ConfigFromScenario maps a validated scenario to a Config: the ipvs
// block (scheduler, excludeCIDRs, timeouts), iptables.backend, network.clusterCIDR,
// services.sessionAffinity(Timeout), the zones of topology.zones, and
// node-0 as the node (New takes the node's own name from the namespace);
// for the scenario's IPv6 view (Scenario.ForFamily) an IPv6 proxier with
// the IPv6 clusterCIDR.
func ConfigFromScenario(sc *scenarios.Scenario) (Config, error) {
	_, _, _, cluster := sc.Prefixes()
	cfg := Config{
		Scheduler:          sc.IPVS.Scheduler,
		SchedulerFlags:     sc.IPVS.SchedulerFlags,
		NoConntrackCleanup: sc.NoConntrackCleanup,
		ClusterCIDR:        cluster,
		NodeName:           scenarios.NodeName(0),
		Zones:              sc.NodeZones(),
		SessionAffinity:    sc.Services.SessionAffinity == "ClientIP",
		AffinityTimeout:    sc.Services.SessionAffinityTimeout.Duration,
		TCPTimeout:         sc.IPVS.TCPTimeout.Duration,
		TCPFinTimeout:      sc.IPVS.TCPFinTimeout.Duration,
		UDPTimeout:         sc.IPVS.UDPTimeout.Duration,
		IPv6:               sc.IsIPv6(),
		Backend:            sc.IPTables.Backend,
	}
	for _, c := range sc.IPVS.ExcludeCIDRs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return Config{}, fmt.Errorf("ipvs: excludeCIDRs: %w", err)
		}
		cfg.ExcludeCIDRs = append(cfg.ExcludeCIDRs, p)
	}
	return cfg, cfg.Validate()
}

// Probe reports whether node's kernel has IP_VS (/proc/net/ip_vs exists in
// the namespace), for example "host kernel 6.18.0 has no IP_VS
// (CONFIG_IP_VS not set); available with --kernel uml", and, when node
// exposes its namespace (NamespaceHandle), which schedulers work (see
// ProbeSchedulers): "IP Virtual Server version 1.2.1 (size=4096);
// schedulers rr wrr lc ...; missing: mh (module ip_vs_mh not loaded)".
// It is ok when IP_VS and at least rr (kube-proxy's default) work.
func Probe(ctx context.Context, node proxymodes.Node) (bool, string) {
	if ok, why := hasIPVS(node); !ok {
		return false, why
	}
	var line string
	_ = node.Do(func() error {
		line = ipvsVersion()
		return nil
	})
	nh, ok := node.(NamespaceHandle)
	if !ok {
		return true, line
	}
	avail, missing, err := ProbeSchedulers(nh)
	if err != nil {
		return false, line + "; " + err.Error()
	}
	why := line + "; schedulers " + strings.Join(avail, " ")
	if len(missing) > 0 {
		why += "; missing: " + strings.Join(missing, " ") + " (modules ip_vs_<name> not loaded)"
	}
	return slices.Contains(avail, "rr"), why
}

// ProbeSchedulers creates and deletes one virtual server per scheduler of
// Schedulers in ns (which must be a throwaway namespace: it uses
// 127.255.255.254:1..11) and returns the schedulers the kernel accepted and
// those it rejected (ENOENT: module ip_vs_<name> not loaded or not built).
func ProbeSchedulers(ns NamespaceHandle) (avail, missing []string, err error) {
	h, err := newMobyHandle(ns.Handle())
	if err != nil {
		return nil, nil, fmt.Errorf("open IPVS netlink socket: %w", err)
	}
	defer h.Close()
	for i, s := range Schedulers {
		svc := &ipvs.Service{
			Address: net.IPv4(127, 255, 255, 254).To4(), Protocol: unix.IPPROTO_TCP, Port: uint16(i + 1),
			SchedName: s, AddressFamily: unix.AF_INET, Netmask: 0xffffffff,
		}
		if err := h.NewService(svc); err != nil {
			if !errors.Is(err, unix.ENOENT) {
				return avail, missing, fmt.Errorf("virtual server with scheduler %s: %w", s, err)
			}
			missing = append(missing, s)
			continue
		}
		avail = append(avail, s)
		if err := h.DelService(svc); err != nil {
			return avail, missing, fmt.Errorf("delete probe virtual server: %w", err)
		}
	}
	return avail, missing, nil
}

// Rendering renders services with the proxier's own Config, as its next
// full Sync programs them (proxymodes.Renderer).
func (p *Proxier) Rendering(services []workload.Service) (*proxymodes.Rendering, error) {
	return Rendering(p.cfg, services)
}
