//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/proxybench/proxybench/internal/lib/xtables"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/healthcheck"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/traffic"
)

// serviceTypesPhase is the serviceTypes phase (serviceTypes set) as a
// Phase: run-scoped, after every row, one pass per mode with rules and
// implementation (builtin; with serviceTypes.kubeProxy the real
// kube-proxy on every node) over the matrix of entry paths × client
// locations of every service.
var serviceTypesPhase = Phase{
	PhaseRule: scenarios.PhaseRule{Name: "serviceTypes", Field: "serviceTypes", Scope: scenarios.ScopeRun, Rules: true, TCP: true,
		Wants: func(s *scenarios.Scenario) bool { return s.ServiceTypes != nil }},
	RunAll: runServiceTypes,
	ReportRun: func(res *reports.Result) []reports.Section {
		return append(reports.ServiceTypesSections(res.ServiceTypes), reports.TopologySections(res.ServiceTypes)...)
	},
}

// lbWriter says who wrote the LoadBalancer ingress IPs.
const lbWriter = "the testbed (there is no cloud controller: builtin takes them from the scenario, kube-proxy from the Service status proxybench wrote with UpdateStatus)"

// runServiceTypes measures the matrix for every mode of sc.Modes with
// rules, builtin first, then each kube-proxy binary when
// serviceTypes.kubeProxy; a pass that cannot start is kept as an error of
// the result and the next one runs; a cancelled run stops.
func runServiceTypes(ctx context.Context, s *RunState) error {
	st := &reports.ServiceTypes{LoadBalancerWriter: lbWriter}
	s.Result.ServiceTypes = st
	addrs, err := nodeAddresses(s.Testbed)
	if err != nil {
		return err
	}
	for _, name := range s.Sc.Modes {
		m, err := modes.Lookup(name)
		if err != nil {
			return err
		}
		if m.Direct || (s.O.ServiceTypesModes != nil && !slices.Contains(s.O.ServiceTypesModes, name)) {
			continue
		}
		row := name + " (builtin)"
		s.O.Progress.Start("serviceTypes: "+row, 1)
		if err := serviceTypesBuiltin(ctx, s, m, row, addrs, st); err != nil {
			st.Errors = append(st.Errors, reports.ServiceTypesError{Row: row, Err: err.Error()})
		}
		s.O.Progress.Done()
		checkpoint(s.Result, s.O.Checkpoint)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !s.Sc.ServiceTypes.KubeProxy || !slices.Contains(scenarios.KubeProxyModes, name) || s.Checked == nil {
			continue
		}
		for _, kb := range s.Checked.kubeProxies {
			row := fmt.Sprintf("%s (kube-proxy %s)", name, kb.Version)
			s.O.Progress.Start("serviceTypes: "+row, 1)
			if err := serviceTypesKube(ctx, s, m, kb, row, addrs, st); err != nil {
				st.Errors = append(st.Errors, reports.ServiceTypesError{Row: row, Err: err.Error()})
			}
			s.O.Progress.Done()
			checkpoint(s.Result, s.O.Checkpoint)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	return nil
}

// serviceTypesBuiltin runs mode m's builtin proxier on every node (each
// with its node's name and endpoint order) and builtin's health check
// server, measures the matrix, then cleans every node up.
func serviceTypesBuiltin(ctx context.Context, s *RunState, m proxymodes.Mode, row string, addrs map[netip.Addr]string, st *reports.ServiceTypes) (err error) {
	tb := s.Testbed
	var ps []proxymodes.Proxier
	var hcs []*healthcheck.Server
	defer func() {
		for n, p := range ps {
			if cerr := p.Cleanup(context.WithoutCancel(ctx)); cerr != nil && err == nil {
				err = fmt.Errorf("node%d: cleanup: %w", n, cerr)
			}
			_ = s.Env.flush(n)
		}
		for _, h := range hcs {
			h.Close()
		}
	}()
	for n, nd := range tb.Nodes {
		p, err := m.New(s.Sc, nd)
		if err != nil {
			return fmt.Errorf("node%d: %w", n, err)
		}
		ps = append(ps, p)
		// The host's xtables lock is shared with every program on the
		// machine: a sync that found it held past -w 5 is tried again
		// (a full sync), as kube-proxy's next sync would be.
		_, err = p.Sync(ctx, nodeServices(s.Sc, s.Services, n))
		for try := 1; try < syncLockTries && xtables.LockHeld(err) && ctx.Err() == nil; try++ {
			_, err = p.Sync(ctx, nodeServices(s.Sc, s.Services, n))
		}
		if err != nil {
			return fmt.Errorf("node%d: sync: %w", n, err)
		}
		h, err := healthcheck.Start(nd, scenarios.NodeName(n), s.Services)
		if err != nil {
			return err
		}
		hcs = append(hcs, h)
	}
	return measureServiceTypes(ctx, s, m, row, addrs, st)
}

// serviceTypesKube runs kube-proxy kb in mode m on every node over one
// control plane holding the services (kubeproxy.StartCluster), measures
// the matrix, stops it and removes what it left (the mode's
// CleanupLeftovers on every node, as kube-proxy --cleanup).
func serviceTypesKube(ctx context.Context, s *RunState, m proxymodes.Mode, kb kubeBinary, row string, addrs map[netip.Addr]string, st *reports.ServiceTypes) (err error) {
	sc, tb := s.Sc, s.Testbed
	pass, err := kubeproxy.PassFromScenario(sc, m.Name)
	if err != nil {
		return err
	}
	svc, pod, nodeNet, cluster := sc.Prefixes()
	dir := filepath.Join(s.O.ArtifactDir, rowDir("serviceTypes "+row))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cl, err := kubeproxy.StartCluster(ctx, kubeproxy.ClusterSpec{RunID: s.O.RunID, Nodes: tb.Nodes, NodeIPs: tb.NodeAddrs, Mode: m.Name, Pass: pass,
		ClusterCIDR: cluster, ServiceCIDR: svc, Avoid: []netip.Prefix{svc, pod, nodeNet, cluster, sc.ClientPrefix(), sc.ExternalClientPrefix(), netip.MustParsePrefix(sc.LoadBalancerPrefixString())},
		KubeProxy: kb.Path, Bin: s.Checked.bin, Dir: dir, Services: s.Services, Zones: sc.NodeZones()})
	defer func() {
		if serr := cl.Stop(); serr != nil && err == nil {
			err = fmt.Errorf("stop kube-proxy: %w", serr)
		}
		for n, nd := range tb.Nodes {
			// kube-proxy runs the iptables tools on PATH (Debian's: the nft
			// back end) here, not the scenario's back end: clean both, or
			// its KUBE-NODEPORTS would answer the next pass's node ports.
			// A back end's cleanup can fail while the other's rules still
			// hold what it removes (IPVS: an ipset "in use by a kernel
			// component" while the nft back end's rules match it), so
			// a back end that failed is cleaned again after the other.
			if cerr := cleanupBothBackends(ctx, m, sc, nd); cerr != nil && err == nil {
				err = fmt.Errorf("node%d: %w", n, cerr)
			}
			_ = s.Env.flush(n)
		}
	}()
	if err != nil {
		return err
	}
	return measureServiceTypes(ctx, s, m, row, addrs, st)
}

// syncLockTries is how often serviceTypesBuiltin syncs a node whose sync
// failed on the host's xtables lock held elsewhere (xtables.LockHeld).
const syncLockTries = 3

// cleanupTries is how often cleanupBothBackends tries one back end in a
// round, 500 ms apart (the xtables lock's holders let go in moments).
var cleanupTries = 10

// cleanupBothBackends runs mode m's CleanupLeftovers (kube-proxy
// --cleanup) in node nd with the iptables back ends legacy and nft, in
// rounds until a round has no error (at most 3): each back end's call is
// retried while the host's xtables lock is held by another program
// (/run/xtables.lock), and a back end whose cleanup failed is cleaned
// again in the next round, after the other removed what held its objects.
// The error is the last round's, naming the back end.
func cleanupBothBackends(ctx context.Context, m proxymodes.Mode, sc *scenarios.Scenario, nd *topology.Netns) error {
	if m.CleanupLeftovers == nil {
		return nil
	}
	pending := []string{"legacy", "nft"}
	var errs []error
	for round := 0; round < 3 && len(pending) > 0; round++ {
		errs = nil
		var failed []string
		for _, be := range pending {
			c := *sc
			c.IPTables.Backend = be
			var cerr error
			for try := 0; try < cleanupTries; try++ {
				if try > 0 {
					time.Sleep(500 * time.Millisecond)
				}
				if cerr = m.CleanupLeftovers(context.WithoutCancel(ctx), &c, nd); cerr == nil {
					break
				}
			}
			if cerr != nil {
				failed = append(failed, be)
				errs = append(errs, fmt.Errorf("cleanup (%s): %w", be, cerr))
			}
		}
		pending = failed
	}
	return errors.Join(errs...)
}

// stClient is one client location of the matrix.
type stClient struct {
	label string // "pod@node-0", "host@node-1", "external"
	ns    *topology.Netns
	src   netip.Addr   // bound source (zero: the kernel's choice)
	node  int          // the node it runs on (-1: external)
	own   []netip.Addr // the addresses that count as the client's own
}

// stPath is one entry path of one service.
type stPath struct {
	kind  string // clusterIP, nodePort, localhost, loadBalancer, externalIP
	dst   netip.Addr
	port  uint16
	entry int // node the connection enters at (-1: the client's own)
}

// measureServiceTypes connects through every path of every service from
// every client it applies to, appending one cell each, then asks each
// LoadBalancer service's health check node port at every node.
func measureServiceTypes(ctx context.Context, s *RunState, m proxymodes.Mode, row string, addrs map[netip.Addr]string, st *reports.ServiceTypes) error {
	tb, spec := s.Testbed, s.Sc.ServiceTypes
	var clients []stClient
	for i, c := range tb.Clients {
		n := tb.ClientNode[i]
		src := tb.ClientSources[i][0]
		clients = append(clients, stClient{label: fmt.Sprintf("pod@%s", scenarios.NodeName(n)), ns: c, src: src, node: n, own: tb.ClientSources[i]})
	}
	for n, nd := range tb.Nodes {
		all, err := netnsAddrs(nd)
		if err != nil {
			return err
		}
		// The node's own addresses, not the one every node holds (the
		// pods' gateway 169.254.1.1, a masquerade source of any node).
		var own []netip.Addr
		for _, a := range all {
			if addrs[a] == scenarios.NodeName(n) {
				own = append(own, a)
			}
		}
		clients = append(clients, stClient{label: "host@" + scenarios.NodeName(n), ns: nd, node: n, own: own})
	}
	if tb.External != nil {
		clients = append(clients, stClient{label: "external", ns: tb.External, node: -1, own: []netip.Addr{tb.ExternalAddr}})
	}
	for i := range s.Services {
		svc := &s.Services[i]
		if len(svc.Ports) == 0 || svc.Ports[0].Protocol != "TCP" {
			continue
		}
		label := exposureLabel(svc)
		if !svc.Exposed() && !svc.InternalLocal && svc.TrafficDistribution == "" && len(s.Sc.Topology.Zones) == 0 && i > 0 {
			continue // plain ClusterIP services: the first one stands for them
		}
		port := svc.Ports[0]
		paths := []stPath{{kind: "clusterIP", dst: svc.ClusterIP, port: port.Port, entry: -1}}
		if port.NodePort != 0 {
			for n := range tb.Nodes {
				paths = append(paths, stPath{kind: "nodePort", dst: tb.NodeAddrs[n], port: port.NodePort, entry: n})
			}
			paths = append(paths, stPath{kind: "localhost", dst: netip.MustParseAddr("127.0.0.1"), port: port.NodePort, entry: -1})
		}
		for _, x := range []struct {
			kind string
			ips  []netip.Addr
		}{{"loadBalancer", svc.LoadBalancerIPs}, {"externalIP", svc.ExternalIPs}} {
			for _, ip := range x.ips {
				paths = append(paths, stPath{kind: x.kind, dst: ip, port: port.Port, entry: -1})
				for n := range tb.Nodes {
					paths = append(paths, stPath{kind: x.kind, dst: ip, port: port.Port, entry: n})
				}
			}
		}
		for _, p := range paths {
			for _, c := range clients {
				entry, ok := p.entryFor(c)
				if !ok {
					continue
				}
				if c.node < 0 && p.entry >= 0 && (p.kind == "loadBalancer" || p.kind == "externalIP") {
					if err := tb.RouteExternal(p.entry); err != nil {
						return err
					}
				}
				cell := reports.ServiceCell{Row: row, Service: svc.Name, Exposure: label, Path: p.kind, Entry: scenarios.NodeName(entry), Client: c.label,
					Expected: expectCell(m, svc, p.kind, entry, c)}
				topologyCell(s.Sc, &cell, svc, entry)
				dialCell(ctx, &cell, svc, c, p, entry, spec.Connections, spec.Timeout.Duration, addrs)
				st.Cells = append(st.Cells, cell)
				if ctx.Err() != nil {
					return ctx.Err()
				}
			}
		}
		if svc.HealthCheckNodePort != 0 && tb.External != nil {
			for n := range tb.Nodes {
				local := len(svc.LocalEndpoints(scenarios.NodeName(n)))
				want := 200
				if local == 0 {
					want = 503
				}
				a := reports.HealthAnswer{Row: row, Service: svc.Name, Node: scenarios.NodeName(n), Port: int(svc.HealthCheckNodePort), WantStatus: want, WantLocal: local}
				var err error
				a.Status, a.LocalEndpoints, err = healthcheck.Get(tb.External, tb.NodeAddrs[n].String(), svc.HealthCheckNodePort, 2*time.Second)
				if err != nil {
					a.Err = err.Error()
				}
				st.Health = append(st.Health, a)
			}
		}
	}
	return nil
}

// entryFor is the node a connection of client c through p enters at, and
// whether p applies to c: the cluster IP from pods and nodes (entering at
// their own node), the localhost node port from a node only, a node port
// from everyone, a LoadBalancer or external IP from the external client
// entering at each node (p.entry) and from pods and nodes at their own
// (captured there).
func (p stPath) entryFor(c stClient) (int, bool) {
	switch p.kind {
	case "clusterIP":
		return c.node, c.node >= 0
	case "localhost":
		return c.node, c.node >= 0 && c.ns.NodeName() != ""
	case "nodePort":
		return p.entry, true
	}
	if c.node < 0 {
		return p.entry, p.entry >= 0
	}
	return c.node, p.entry < 0
}

// dialCell makes the cell's connections (stopping after 3 failures when
// none answered), recording latency, errors, the peer's class and
// whether the endpoint sat on the entry node.
func dialCell(ctx context.Context, cell *reports.ServiceCell, svc *workload.Service, c stClient, p stPath, entry int, n int, timeout time.Duration, addrs map[netip.Addr]string) {
	nodeOf, zoneOf := map[netip.Addr]string{}, map[netip.Addr]string{}
	for _, e := range svc.Endpoints {
		nodeOf[e.IP], zoneOf[e.IP] = e.Node, e.Zone
	}
	failed := 0
	for k := 0; k < n && ctx.Err() == nil; k++ {
		if cell.OK == 0 && failed >= 3 {
			break
		}
		cell.Attempts++
		var landed, peer netip.AddrPort
		var lat time.Duration
		err := c.ns.Do(func() error {
			var err error
			landed, peer, lat, err = traffic.DialEchoPeer(c.src, p.dst, p.port, timeout)
			return err
		})
		if err != nil {
			failed++
			if cell.Errors == nil {
				cell.Errors = map[string]int{}
			}
			cell.Errors[traffic.ErrorKind(err)]++
			continue
		}
		cell.OK++
		cell.LatencyUs = append(cell.LatencyUs, float64(lat.Microseconds()))
		if cell.Sources == nil {
			cell.Sources = map[string]int{}
		}
		switch {
		case slices.Contains(c.own, peer.Addr()):
			cell.Sources["client"]++
		case addrs[peer.Addr()] != "":
			cell.Sources[addrs[peer.Addr()]]++
		default:
			cell.Sources[peer.Addr().String()]++
		}
		if nodeOf[landed.Addr()] == scenarios.NodeName(entry) {
			cell.SameNode++
		}
		if z := zoneOf[landed.Addr()]; z != "" && z == cell.Zone {
			cell.SameZone++
		}
	}
}

// expectCell is the outcome the Kubernetes documentation gives a cell
// (concepts/services-networking/service "Traffic policies",
// virtual-ips "External/Internal traffic policy", tutorials/services/source-ip):
//   - no endpoint at all: unreachable (REJECT);
//   - cluster IP: any endpoint, the client's address kept; with
//     internalTrafficPolicy Local only the client node's endpoints (none:
//     dropped);
//   - node port on 127.0.0.1: iptables mode only (localhost node ports;
//     nftables and IPVS do not support them), masqueraded to the node;
//   - node port, LoadBalancer or external IP with externalTrafficPolicy
//     Cluster: reachable at every node, the source masqueraded to a node's
//     address (but the node's own traffic, which keeps its address);
//   - with Local: traffic that a client's own node captures (a pod or the
//     node itself reaching the LoadBalancer or external IP, or its own
//     node's port) is proxied as Cluster there; traffic entering a node
//     from outside it reaches only that node's endpoints with the
//     client's address kept, and is dropped at a node without one.
func expectCell(m proxymodes.Mode, svc *workload.Service, path string, entry int, c stClient) reports.Expected {
	if len(svc.ReadyEndpoints()) == 0 {
		return reports.Expected{Why: "no endpoints: rejected"}
	}
	node := scenarios.NodeName(entry)
	local := len(svc.LocalEndpoints(node)) > 0
	host := c.node >= 0 && c.ns.NodeName() != ""
	e := expectPath(m, svc, path, entry, local, c)
	if host && e.Reachable {
		// The node's own traffic is masqueraded (its address is outside
		// clusterCIDR, or the destination is external): the backend sees
		// a node address, its own or the entry node's, either way.
		e.Source = ""
	}
	return e
}

// expectPath is expectCell before the host-network clients' source rule.
func expectPath(m proxymodes.Mode, svc *workload.Service, path string, entry int, local bool, c stClient) reports.Expected {
	switch path {
	case "clusterIP":
		if svc.InternalLocal {
			if !local {
				return reports.Expected{Why: "internalTrafficPolicy Local, no endpoint on the client's node: dropped"}
			}
			return reports.Expected{Reachable: true, Source: "client", Why: "internalTrafficPolicy Local: an endpoint of the client's node"}
		}
		return reports.Expected{Reachable: true, Source: "client", Why: "cluster IP: any endpoint, the client's address kept"}
	case "localhost":
		if !m.LocalhostNodePorts {
			return reports.Expected{Why: "localhost node ports: iptables mode only"}
		}
		return reports.Expected{Reachable: true, Source: "node", Why: "localhost node port (iptables), masqueraded to the node's own address"}
	}
	if !svc.ExternalLocal {
		return reports.Expected{Reachable: true, Source: "node", Why: "externalTrafficPolicy Cluster: any endpoint, source masqueraded to a node"}
	}
	if c.node >= 0 && c.node == entry {
		return reports.Expected{Reachable: true, Source: "client", Why: "externalTrafficPolicy Local, in-cluster traffic captured on the client's node: proxied as Cluster"}
	}
	if !local {
		return reports.Expected{Why: "externalTrafficPolicy Local, no endpoint on the entry node: dropped"}
	}
	return reports.Expected{Reachable: true, Source: "client", Why: "externalTrafficPolicy Local: the entry node's endpoint, client address kept"}
}

// exposureLabel is the service's exposure as reports show it
// (scenarios.Exposure.Label's form).
func exposureLabel(s *workload.Service) string {
	l := s.Type
	if l == "" {
		l = scenarios.TypeClusterIP
	}
	if len(s.ExternalIPs) > 0 {
		l += "+externalIPs"
	}
	if s.Exposed() {
		if s.ExternalLocal {
			l += " etp=Local"
		} else {
			l += " etp=Cluster"
		}
	}
	if s.InternalLocal {
		l += " itp=Local"
	}
	if s.TrafficDistribution != "" {
		l += " td=" + s.TrafficDistribution
	}
	return l
}

// nodeAddresses maps every address of every node namespace to its node
// name (the masquerade source a backend may see); an address every node
// holds (the isolated pods' gateway 169.254.1.1) maps to "node-shared".
func nodeAddresses(tb *topology.Testbed) (map[netip.Addr]string, error) {
	out := map[netip.Addr]string{}
	for n, nd := range tb.Nodes {
		list, err := netnsAddrs(nd)
		if err != nil {
			return nil, err
		}
		for _, ip := range list {
			if _, seen := out[ip]; seen {
				out[ip] = "node-shared"
				continue
			}
			out[ip] = scenarios.NodeName(n)
		}
	}
	return out, nil
}

// netnsAddrs lists the IPv4 addresses of ns but loopback ones.
func netnsAddrs(ns *topology.Netns) ([]netip.Addr, error) {
	h, err := ns.Netlink()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	list, err := h.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("netns %q: ip addr", ns.Name), err)
	}
	var out []netip.Addr
	for _, a := range list {
		if ip, ok := netip.AddrFromSlice(a.IP.To4()); ok && !ip.IsLoopback() {
			out = append(out, ip)
		}
	}
	return out, nil
}
