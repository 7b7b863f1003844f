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

	"github.com/moby/ipvs"
	"golang.org/x/sys/unix"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/scenarios"
)

func init() {
	proxymodes.Register(proxymodes.Mode{
		Name: "ipvs",
		New: func(sc *scenarios.Scenario, node proxymodes.Node) (proxymodes.Proxier, error) {
			cfg, err := ConfigFromScenario(sc)
			if err != nil {
				return nil, err
			}
			return New(cfg, node), nil
		},
		Binaries: func(*scenarios.Scenario) []string { return []string{binIPSet, binRestore, binSave} },
		Modules:  modules,
		Probe:    Probe,
	})
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
// block (scheduler, excludeCIDRs, timeouts), network.clusterCIDR and
// services.sessionAffinity(Timeout).
func ConfigFromScenario(sc *scenarios.Scenario) (Config, error) {
	_, _, _, cluster := sc.Prefixes()
	cfg := Config{
		Scheduler:       sc.IPVS.Scheduler,
		SchedulerFlags:  sc.IPVS.SchedulerFlags,
		ClusterCIDR:     cluster,
		SessionAffinity: sc.Services.SessionAffinity == "ClientIP",
		AffinityTimeout: sc.Services.SessionAffinityTimeout.Duration,
		TCPTimeout:      sc.IPVS.TCPTimeout.Duration,
		TCPFinTimeout:   sc.IPVS.TCPFinTimeout.Duration,
		UDPTimeout:      sc.IPVS.UDPTimeout.Duration,
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
