//go:build linux

package kubeproxy

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/topology/controlplane"
	"github.com/proxybench/proxybench/workload"
)

// VariantSpec is one kube-proxy binary run as a row of a run.
type VariantSpec struct {
	// Binary is the kube-proxy program and Version what its --version
	// said (Version checks it); the row's kube-proxy processes are started
	// without asking it again.
	Binary, Version string
	// Label is the row's name: "nftables (kube-proxy)", or with the
	// version when a run has several binaries (RowLabel).
	Label string
	// Dir keeps the row's config, kubeconfig and log (a folder per row,
	// beside the result).
	Dir string
	// Bin are the control plane's binaries.
	Bin controlplane.Binaries
	// DataPlane is ProxierSpec.DataPlane (nil: sync.full ends at /healthz).
	DataPlane func(ctx context.Context, services []workload.Service) (time.Time, int, error)
	// Guest is ProxierSpec.Guest: the row runs inside a user-mode-linux
	// guest (the runner says so from Options.Where).
	Guest bool
	// Monitor is ProxierSpec.Monitor (nil: no Prometheus).
	Monitor *Monitor
	// PathFirst is ProxierSpec.PathFirst: a folder first on kube-proxy's
	// PATH (the runner's failure.syncErrors wrappers; "": none).
	PathFirst string
	// Nodes are the testbed's node namespaces when the scenario has
	// several (topology.nodes > 1): New on the first of them runs
	// kube-proxy on every one (ProxierSpec.Others), against one control
	// plane. Empty, or New on another namespace: that node alone.
	Nodes []*topology.Netns
}

// RowLabel names the kube-proxy row of mode: "nftables (kube-proxy)", or
// "nftables (kube-proxy v1.36.3)" with withVersion (a run of several
// binaries).
func RowLabel(mode, version string, withVersion bool) string {
	if withVersion {
		return mode + " (kube-proxy " + version + ")"
	}
	return mode + " (kube-proxy)"
}

// Variant returns base's kube-proxy variant: the same mode run by the real
// kube-proxy (v.Binary) instead of proxybench's own proxier. Its New
// returns a *Proxier (control plane, API objects and kube-proxy in the
// node namespace); it has no Render (the sim models builtin only), its
// full sync is measured once (SingleFullSync), and the rest (sync periods,
// fairness promise, kernel modules, probes and traits) is base's, since
// it programs the same kind of rules, except that a list a lookup walks
// is in no fixed order (Traits.Unordered: pkg/proxy/iptables writes
// KUBE-SERVICES in its service map's iteration order).
func Variant(base proxymodes.Mode, v VariantSpec) proxymodes.Mode {
	m := base
	m.Name = v.Label
	m.Base = base.Name
	m.Implementation = scenarios.ImplKubeProxy
	m.SingleFullSync = true
	m.Render = nil
	m.Traits.Unordered = base.Traits.Walk != ""
	m.Binaries = func(*scenarios.Scenario) []string { return ModeBinaries[base.Name] }
	m.New = func(sc *scenarios.Scenario, node proxymodes.Node) (proxymodes.Proxier, error) {
		ns, ok := node.(*topology.Netns)
		if !ok {
			return nil, fmt.Errorf("kube-proxy runs in a testbed namespace, not %T", node)
		}
		svc, pod, nodeNet, cluster := sc.Prefixes()
		ip, err := NodeIP(ns, nodeNet)
		if err != nil {
			return nil, err
		}
		pass, err := PassFromScenario(sc, base.Name)
		if err != nil {
			return nil, err
		}
		backend := ""
		if base.UsesIPTables {
			backend = sc.IPTables.Backend // the same iptables back end as builtin
		}
		var others []*topology.Netns
		var otherIPs []netip.Addr
		if len(v.Nodes) > 1 && v.Nodes[0] == ns {
			for _, o := range v.Nodes[1:] {
				oip, err := NodeIP(o, nodeNet)
				if err != nil {
					return nil, err
				}
				others, otherIPs = append(others, o), append(otherIPs, oip)
			}
		}
		var ip6 netip.Prefix
		if sc.DualStack() {
			ip6 = sc.IPv6Prefix() // one kube-proxy programs both families
		}
		return NewProxier(ProxierSpec{Mode: base.Name, Others: others, OtherIPs: otherIPs, IPTablesBackend: backend, Node: ns, NodeIP: ip, ClusterCIDR: cluster, ServiceCIDR: svc,
			Avoid: []netip.Prefix{svc, pod, nodeNet, cluster, sc.ClientPrefix()}, Pass: pass, KubeProxy: v.Binary, Version: v.Version, Bin: v.Bin,
			Dir: v.Dir, Verbosity: sc.KubeProxy.Verbosity, Label: v.Label, DataPlane: v.DataPlane,
			SessionAffinity: SessionAffinityOf(sc), Zones: sc.NodeZones(), FirstSyncTimeout: sc.KubeProxy.FirstSyncTimeout.Duration, Guest: v.Guest, Monitor: v.Monitor, PathFirst: v.PathFirst,
			IPv6: ip6, FamilyPolicy: sc.FamilyPolicy()})
	}
	return m
}

// SessionAffinityOf is the ClientIP affinity timeout the scenario gives
// every Service (services.sessionAffinity ClientIP), 0 for None: the
// builtin modes apply it to every service, so kube-proxy's Services carry
// it too (ProxierSpec.SessionAffinity).
func SessionAffinityOf(sc *scenarios.Scenario) time.Duration {
	if sc.Services.SessionAffinity == "ClientIP" {
		return sc.Services.SessionAffinityTimeout.Duration
	}
	return 0
}

// ModeBinaries are the programs kube-proxy runs in each mode (on PATH in
// the node namespace): iptables through Debian's alternatives (the nft
// back end unless legacy is selected), ipset and iptables for ipvs, nft
// for nftables.
var ModeBinaries = map[string][]string{
	"iptables": {"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"},
	"ipvs":     {"iptables", "iptables-save", "iptables-restore", "ipset"},
	"nftables": {"nft"},
}

// NodeIP returns node's address inside nodeNet (its link to the backend
// host): the Node object's InternalIP and kube-proxy's bindAddress.
func NodeIP(node *topology.Netns, nodeNet netip.Prefix) (netip.Addr, error) {
	h, err := node.Netlink()
	if err != nil {
		return netip.Addr{}, err
	}
	defer h.Close()
	addrs, err := h.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("kubeproxy: addresses of %s: %w", node.Name, err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP.To4()); ok && nodeNet.Contains(ip) {
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("kubeproxy: node %s has no address in %s", node.Name, nodeNet)
}

// PassFromScenario is the KubeProxyConfiguration sc gives kube-proxy in
// mode: the scenario's block of that mode, spelt as kube-proxy spells it
// (iptables/nftables: syncPeriod, minSyncPeriod; ipvs: scheduler,
// excludeCIDRs, the timeouts, syncPeriod, minSyncPeriod), with
// kubeProxy.config merged over it verbatim. A scenario with churn (the
// churn phase, or a soak's) gets enableProfiling: true unless
// kubeProxy.config sets it, so the phase can raise kube-proxy's -v for
// its per-change log lines (BeginChurn), and so does one with
// transitions, for its conntrack cleanup's lines (RaiseVerbosity;
// profiling only adds /debug handlers to the metrics endpoint in the
// node namespace). An owned field is an error
// (CheckPass).
func PassFromScenario(sc *scenarios.Scenario, mode string) (map[string]any, error) {
	out := map[string]any{}
	dur := func(d scenarios.Duration) string { return d.Duration.String() }
	switch mode {
	case "iptables":
		out["iptables"] = map[string]any{"syncPeriod": dur(sc.IPTables.SyncPeriod), "minSyncPeriod": dur(sc.IPTables.MinSyncPeriod)}
	case "nftables":
		out["nftables"] = map[string]any{"syncPeriod": dur(sc.NFTables.SyncPeriod), "minSyncPeriod": dur(sc.NFTables.MinSyncPeriod)}
	case "ipvs":
		v := map[string]any{"scheduler": sc.IPVS.Scheduler, "syncPeriod": dur(sc.IPVS.SyncPeriod), "minSyncPeriod": dur(sc.IPVS.MinSyncPeriod),
			"tcpTimeout": dur(sc.IPVS.TCPTimeout), "tcpFinTimeout": dur(sc.IPVS.TCPFinTimeout), "udpTimeout": dur(sc.IPVS.UDPTimeout)}
		if len(sc.IPVS.ExcludeCIDRs) > 0 {
			v["excludeCIDRs"] = append([]string(nil), sc.IPVS.ExcludeCIDRs...)
		}
		out["ipvs"] = v
	}
	if sc.Churn.Rate > 0 || sc.Soak != nil && sc.Soak.Churn > 0 || sc.Transitions != nil {
		out["enableProfiling"] = true
	}
	merge(out, deepCopy(sc.KubeProxy.Config))
	if err := CheckPass(out); err != nil {
		return nil, err
	}
	return out, nil
}

// merge writes src over dst, recursing into maps both have.
func merge(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				merge(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

var semverRE = regexp.MustCompile(`^v(\d+)\.(\d+)\.`)

// MinorOf returns the major and minor of a kube-proxy version ("v1.36.3"
// → 1, 36); ok is false for a version it cannot read.
func MinorOf(version string) (major, minor int, ok bool) {
	m := semverRE.FindStringSubmatch(version)
	if m == nil {
		return 0, 0, false
	}
	major, _ = strconv.Atoi(m[1])
	minor, _ = strconv.Atoi(m[2])
	return major, minor, true
}

// CheckModeVersion says why kube-proxy version cannot run mode with the
// feature gates of config (sc.KubeProxy.Config); nil when it can. The
// nftables mode appeared in v1.29 behind the NFTablesProxyMode feature
// gate (alpha, off by default in v1.29 and v1.30; beta and on from v1.31,
// GA in v1.33: KEP-3866). The ipvs mode is deprecated since v1.35 and
// planned to be off by default from v1.40 (feature gate KubeProxyIPVS)
// and removed in v1.43 (KEP-5495).
func CheckModeVersion(mode, version string, config map[string]any) error {
	major, minor, ok := MinorOf(version)
	if !ok {
		return fmt.Errorf("kube-proxy version %q: not vMAJOR.MINOR.PATCH", version)
	}
	gate := func(name string) bool {
		g, _ := config["featureGates"].(map[string]any)
		b, _ := g[name].(bool)
		return b
	}
	v := major*1000 + minor
	switch mode {
	case "nftables":
		switch {
		case v < 1029:
			return fmt.Errorf("kube-proxy %s has no nftables mode (it came in v1.29); fix: use kube-proxy v1.29 or later, or kubeProxy.modes without nftables", version)
		case v < 1031 && !gate("NFTablesProxyMode"):
			return fmt.Errorf("kube-proxy %s runs the nftables mode only with the alpha feature gate NFTablesProxyMode (on by default from v1.31); fix: set kubeProxy.config: {featureGates: {NFTablesProxyMode: true}}", version)
		}
	case "ipvs":
		switch {
		case v >= 1043:
			return fmt.Errorf("kube-proxy %s has no ipvs mode (removed in v1.43, KEP-5495); fix: use an older kube-proxy, or kubeProxy.modes without ipvs", version)
		case v >= 1040 && !gate("KubeProxyIPVS"):
			return fmt.Errorf("kube-proxy %s runs the ipvs mode only with the feature gate KubeProxyIPVS (off by default from v1.40, KEP-5495); fix: set kubeProxy.config: {featureGates: {KubeProxyIPVS: true}}", version)
		}
	case "iptables":
	default:
		return fmt.Errorf("kube-proxy has no mode %q (it has %s)", mode, strings.Join(scenarios.KubeProxyModes, ", "))
	}
	return nil
}
