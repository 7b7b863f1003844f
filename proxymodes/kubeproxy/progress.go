//go:build linux

package kubeproxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
)

// DefaultFirstSyncTimeout bounds the wait for kube-proxy's first sync
// (and for the data plane) when the scenario sets no
// kubeProxy.firstSyncTimeout.
const DefaultFirstSyncTimeout = 10 * time.Minute

// Want is what kube-proxy's IPVS mode programs for a service set, the
// control plane's `kubernetes` Service included: Ports virtual servers
// and KUBE-CLUSTER-IP entries (one per ServicePort), IPs KUBE-IPVS-IPS
// entries and kube-ipvs0 addresses (one per ClusterIP).
type Want struct{ Ports, IPs int }

// WantIPVS returns what kube-proxy's IPVS mode programs for services.
func WantIPVS(services []workload.Service) Want {
	w := Want{Ports: 1, IPs: 1}
	ips := map[string]bool{}
	for _, s := range services {
		w.Ports += len(s.Ports)
		ips[s.ClusterIP.String()] = true
	}
	w.IPs += len(ips)
	return w
}

// ReadProgress reads what kube-proxy has programmed in node so far. For
// mode ipvs: the virtual and real servers in /proc/net/ip_vs (read on a
// thread in the namespace, no program started), the IPv4 addresses on
// kube-ipvs0 (netlink), and the entries of every KUBE-* ipset (`ipset
// list -t`, one program). Other modes have no such counts: every field
// is -1. A reading that fails leaves its counts at -1 and says why in
// Err; it is never an error of its own.
func ReadProgress(ctx context.Context, node *topology.Netns, mode string, want Want) measure.SyncProgress {
	p := measure.SyncProgress{VirtualServers: -1, RealServers: -1, Addresses: -1, WantVirtualServers: want.Ports, WantClusterIP: want.Ports, WantIPVSIPs: want.IPs}
	if mode != "ipvs" {
		return p
	}
	var errs []error
	err := node.Do(func() error {
		b, err := os.ReadFile("/proc/thread-self/net/ip_vs")
		if err != nil {
			return err
		}
		p.VirtualServers, p.RealServers = countIPVS(b)
		return nil
	})
	errs = append(errs, err)
	errs = append(errs, node.Do(func() error {
		l, err := netlink.LinkByName("kube-ipvs0")
		if err != nil {
			var nf netlink.LinkNotFoundError
			if errors.As(err, &nf) {
				p.Addresses = 0 // not created yet
				return nil
			}
			return err
		}
		a, err := netlink.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		p.Addresses = len(a)
		return nil
	}))
	out, err := node.Run(ctx, nil, "ipset", "list", "-t")
	if err == nil {
		p.IPSets = countIPSets(out)
	}
	errs = append(errs, err)
	if e := errors.Join(errs...); e != nil {
		p.Err = e.Error()
	}
	return p
}

// countIPVS counts the virtual servers (lines starting with a protocol or
// FWM) and real servers ("  -> addr:port" lines after the header) of
// /proc/net/ip_vs (net/netfilter/ipvs/ip_vs_ctl.c, ip_vs_info_seq_show).
func countIPVS(b []byte) (virtual, real int) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for line := 0; sc.Scan(); line++ {
		t := sc.Text()
		switch {
		case line < 3:
			// version, "Prot LocalAddress:Port ...", "  -> RemoteAddress:Port ..."
		case strings.HasPrefix(t, "  -> "):
			real++
		case strings.HasPrefix(t, "TCP ") || strings.HasPrefix(t, "UDP ") || strings.HasPrefix(t, "SCTP ") || strings.HasPrefix(t, "FWM "):
			virtual++
		}
	}
	return virtual, real
}

// countIPSets reads `ipset list -t` (headers only): the "Number of
// entries" of each set, by name.
func countIPSets(b []byte) map[string]int {
	out := map[string]int{}
	name := ""
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Name: "); ok {
			name = strings.TrimSpace(v)
		} else if v, ok := strings.CutPrefix(line, "Number of entries: "); ok && name != "" {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				out[name] = n
			}
		}
	}
	return out
}
