//go:build linux

package topology

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/proxybench/proxybench/scenarios"
)

// podGateway is the link-local next hop of every isolated pod, as in
// Calico; every node holds it on lo and so answers ARP for it.
var podGateway = netip.MustParseAddr("169.254.1.1")

// addrAt returns p's base address plus off.
func addrAt(p netip.Prefix, off int) netip.Addr {
	b := p.Masked().Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(off)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// ClientBlock returns client pod i's block of ClientCIDR for n source
// addresses: the i-th aligned block of the next power of two >= n.
func ClientBlock(clientCIDR netip.Prefix, i, n int) netip.Prefix {
	size := 1
	for size < n {
		size <<= 1
	}
	bits := 32
	for s := size; s > 1; s >>= 1 {
		bits--
	}
	return netip.PrefixFrom(addrAt(clientCIDR, i*size), bits)
}

// Build creates the namespaces, veth pairs, addresses, routes and sysctls
// of spec: Nodes node namespaces (one joined to the backend host by a
// veth; more joined by a bridge "br0" in namespace pb-<id>-fabric), the
// AnyIP backend host or one namespace per isolated pod, and client pods
// spread over the nodes with their source addresses. NodeCIDR starts with
// the fabric block (scenarios.FabricSize(Nodes) addresses; with one node
// the /30 node-backend link), then client pod i's /30 link at offset
// FabricSize + 4i. Routes:
// clients send the service and pod CIDRs to their node; a node sends pod
// addresses to the backend host (shared) or to the pod's veth or node
// (isolated), and other nodes' clients to those nodes; the backend host
// and pods send client addresses back through the client's node, so the
// node that translated a connection sees its replies. No namespace gets a
// default route. On any error it removes what it created and returns the
// error; ctx cancellation is checked between steps.
func Build(ctx context.Context, spec Spec) (tb *Testbed, err error) {
	nodes := max(spec.Nodes, 1)
	if spec.ClientPods < 1 {
		return nil, fmt.Errorf("topology: clientPods must be >= 1, got %d", spec.ClientPods)
	}
	fab := int(scenarios.FabricSize(nodes))
	if need := fab + 4*spec.ClientPods; 1<<(32-spec.NodeCIDR.Bits()) < need {
		return nil, fmt.Errorf("topology: nodeCIDR %s has fewer than the %d addresses %d nodes and %d client pods need", spec.NodeCIDR, need, nodes, spec.ClientPods)
	}
	if spec.ClientAddresses > 1 && !spec.ClientCIDR.IsValid() {
		return nil, fmt.Errorf("topology: %d client addresses need a ClientCIDR", spec.ClientAddresses)
	}
	tb = &Testbed{RunID: spec.RunID}
	defer func() {
		if err != nil {
			_ = tb.Teardown()
			tb = nil
		}
	}()
	defer func() {
		// Runs before the teardown above: a failed IPv6 twin tears the
		// whole testbed down.
		if err == nil && spec.IPv6.IsValid() {
			err = tb.AddIPv6(spec.IPv6)
		}
	}()
	shared := len(spec.IsolatedPods) == 0
	if err = tb.buildNodes(nodes); err != nil {
		return tb, err
	}
	backendAddr, err := tb.buildFabric(spec, fab, shared)
	if err != nil {
		return tb, err
	}
	routes, err := tb.buildClients(ctx, spec, fab)
	if err != nil {
		return tb, err
	}
	if err = tb.routeOtherNodesClients(routes); err != nil {
		return tb, err
	}
	if spec.ExternalCIDR.IsValid() {
		if err = tb.buildExternal(spec, fab); err != nil {
			return tb, err
		}
	}
	if shared {
		return tb, tb.routeBackend(spec, routes, backendAddr)
	}
	back := []netip.Prefix{spec.NodeCIDR}
	if spec.ClientCIDR.IsValid() {
		back = append(back, spec.ClientCIDR)
	}
	if spec.ExternalCIDR.IsValid() {
		// ExternalVia too (LoadBalancer and external IPs), as a pod's
		// default route takes them: IPVS binds those addresses to the
		// node's kube-ipvs0, so a node's own connection to one leaves with
		// it as its source, unmasqueraded under externalTrafficPolicy
		// Local, and the endpoint answers it through its node.
		back = append(append(back, spec.ExternalCIDR), spec.ExternalVia...)
	}
	return tb, tb.buildPods(ctx, spec, nodes, back)
}

// buildExternal creates the external client (Spec.ExternalCIDR): a port
// of the fabric bridge with the first address of ExternalCIDR (/32),
// on-link routes to the fabric block, ExternalVia through node 0; on
// every node an on-link route to ExternalCIDR and NodeVia through the
// external client. No namespace gets a default route.
func (tb *Testbed) buildExternal(spec Spec, fab int) error {
	if tb.Fabric == nil {
		return fmt.Errorf("topology: the external client joins the fabric bridge, which needs 2 or more nodes")
	}
	ext, err := tb.create("ext")
	if err != nil {
		return err
	}
	tb.External = ext
	tb.ExternalAddr = spec.ExternalCIDR.Masked().Addr().Next()
	tb.externalVia = spec.ExternalVia
	if err := fabricPort(tb.Fabric, fmt.Sprintf("pb%s-fx", spec.RunID), ext, "eth0", netip.PrefixFrom(tb.ExternalAddr, 32)); err != nil {
		return err
	}
	block := netip.PrefixFrom(spec.NodeCIDR.Masked().Addr(), 32-log2(fab))
	if err := ext.withNetlink(func(h *netlink.Handle) error {
		eth, err := h.LinkByName("eth0")
		if err != nil {
			return err
		}
		if err := h.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Dst: ipnet(block), Scope: netlink.SCOPE_LINK}); err != nil {
			return fmt.Errorf("route %s dev eth0: %w", block, err)
		}
		for _, dst := range spec.ExternalVia {
			if err := h.RouteAdd(&netlink.Route{Dst: ipnet(dst), Gw: net.IP(tb.NodeAddrs[0].AsSlice())}); err != nil {
				return fmt.Errorf("route %s via node0: %w", dst, err)
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("netns %q: %w", ext.Name, err)
	}
	if err := ext.Sysctl("net/ipv4/ip_local_port_range", "1024 65535"); err != nil {
		return err
	}
	for _, nd := range tb.Nodes {
		if err := nd.withNetlink(func(h *netlink.Handle) error {
			fab0, err := h.LinkByName("fab0")
			if err != nil {
				return err
			}
			if err := h.RouteAdd(&netlink.Route{LinkIndex: fab0.Attrs().Index, Dst: ipnet(spec.ExternalCIDR), Scope: netlink.SCOPE_LINK}); err != nil {
				return fmt.Errorf("route %s dev fab0: %w", spec.ExternalCIDR, err)
			}
			for _, dst := range spec.NodeVia {
				if err := h.RouteAdd(&netlink.Route{Dst: ipnet(dst), Gw: net.IP(tb.ExternalAddr.AsSlice()), LinkIndex: fab0.Attrs().Index, Flags: int(netlink.FLAG_ONLINK)}); err != nil {
					return fmt.Errorf("route %s via the external client: %w", dst, err)
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("netns %q: %w", nd.Name, err)
		}
	}
	return nil
}

// RouteExternal sends the external client's traffic to every
// Spec.ExternalVia prefix through node n (`ip route replace <dst> via
// <node n>` in the external namespace), as a load balancer or a router
// picks the node an external connection enters at.
func (tb *Testbed) RouteExternal(n int) error {
	if tb.External == nil {
		return fmt.Errorf("topology: no external client")
	}
	if n < 0 || n >= len(tb.NodeAddrs) {
		return fmt.Errorf("topology: node %d of %d", n, len(tb.NodeAddrs))
	}
	return tb.External.withNetlink(func(h *netlink.Handle) error {
		for _, dst := range tb.externalVia {
			if err := h.RouteReplace(&netlink.Route{Dst: ipnet(dst), Gw: net.IP(tb.NodeAddrs[n].AsSlice())}); err != nil {
				return fmt.Errorf("netns %q: route replace %s via node%d: %w", tb.External.Name, dst, n, err)
			}
		}
		return nil
	})
}

// buildNodes creates the node namespaces node0..node<n-1>, forwarding.
func (tb *Testbed) buildNodes(n int) error {
	for i := 0; i < n; i++ {
		nd, err := tb.create(fmt.Sprintf("node%d", i))
		if err != nil {
			return err
		}
		tb.Nodes = append(tb.Nodes, nd)
		if err = nd.Sysctl("net/ipv4/ip_forward", "1"); err != nil {
			return err
		}
	}
	tb.Node = tb.Nodes[0]
	return nil
}

// buildFabric joins the nodes and, when shared, the backend host: with
// one node a veth (the /30 link 0 of NodeCIDR), else bridge br0 in the
// fabric namespace with node n at NodeCIDR+1+n and the backend host after
// the last node. It sets NodeAddrs and NodeBackendAddr and returns the
// backend host's address.
func (tb *Testbed) buildFabric(spec Spec, fab int, shared bool) (backendAddr netip.Addr, err error) {
	nodes := len(tb.Nodes)
	if nodes == 1 {
		near, far := linkAddrs(spec.NodeCIDR, 0)
		tb.NodeAddrs = []netip.Addr{near}
		tb.NodeBackendAddr = near
		tb.Node.nodeIPs = []netip.Addr{near}
		if shared {
			if tb.Backend, err = tb.create("backend"); err != nil {
				return far, err
			}
			if err = veth(tb.Node, fmt.Sprintf("pb%s-b", spec.RunID), tb.Backend, "eth0", near, far); err != nil {
				return far, err
			}
		}
		return far, nil
	}
	backendAddr = addrAt(spec.NodeCIDR, 1+nodes)
	fabricBits := 32 - log2(fab)
	if tb.Fabric, err = tb.create("fabric"); err != nil {
		return backendAddr, err
	}
	if err = tb.Fabric.withNetlink(func(h *netlink.Handle) error {
		la := netlink.NewLinkAttrs()
		la.Name = "br0"
		if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: la}); err != nil {
			return fmt.Errorf("ip link add br0 type bridge (module bridge): %w", err)
		}
		br, err := h.LinkByName("br0")
		if err != nil {
			return err
		}
		return h.LinkSetUp(br)
	}); err != nil {
		return backendAddr, fmt.Errorf("netns %q: %w", tb.Fabric.Name, err)
	}
	for n, nd := range tb.Nodes {
		a := addrAt(spec.NodeCIDR, 1+n)
		tb.NodeAddrs = append(tb.NodeAddrs, a)
		nd.nodeIPs = []netip.Addr{a}
		if err = fabricPort(tb.Fabric, fmt.Sprintf("pb%s-f%d", spec.RunID, n), nd, "fab0", netip.PrefixFrom(a, fabricBits)); err != nil {
			return backendAddr, err
		}
	}
	tb.NodeBackendAddr = tb.NodeAddrs[0]
	if shared {
		if tb.Backend, err = tb.create("backend"); err != nil {
			return backendAddr, err
		}
		if err = fabricPort(tb.Fabric, fmt.Sprintf("pb%s-fb", spec.RunID), tb.Backend, "eth0", netip.PrefixFrom(backendAddr, fabricBits)); err != nil {
			return backendAddr, err
		}
	}
	return backendAddr, nil
}

// clientRoute is a block of client addresses (a client pod's /30 link or
// its source block) and the node it sits on.
type clientRoute struct {
	dst  netip.Prefix
	node int
}

// buildClients creates the client pods: pod i on node i mod nodes, its
// /30 link at NodeCIDR offset fab+4i, with the ClientAddresses of its
// ClientCIDR block when there are several, routes to the service and pod
// CIDRs (with the external client also NodeCIDR and Spec.ExternalVia:
// node ports, LoadBalancer and external IPs) through its node, and the
// whole ephemeral port range. It returns
// where every client address block sits.
func (tb *Testbed) buildClients(ctx context.Context, spec Spec, fab int) ([]clientRoute, error) {
	var routes []clientRoute
	for i := 0; i < spec.ClientPods; i++ {
		if err := ctx.Err(); err != nil {
			return routes, err
		}
		c, err := tb.create(fmt.Sprintf("client%d", i))
		if err != nil {
			return routes, err
		}
		n := i % len(tb.Nodes)
		tb.Clients = append(tb.Clients, c)
		tb.ClientNode = append(tb.ClientNode, n)
		nodeC := addrAt(spec.NodeCIDR, fab+4*i+1)
		cli := nodeC.Next()
		if err = veth(tb.Nodes[n], fmt.Sprintf("pb%s-c%d", spec.RunID, i), c, "eth0", nodeC, cli); err != nil {
			return routes, err
		}
		srcs := []netip.Addr{cli}
		routes = append(routes, clientRoute{netip.PrefixFrom(nodeC, 30).Masked(), n})
		var block netip.Prefix
		if spec.ClientAddresses > 1 {
			block = ClientBlock(spec.ClientCIDR, i, spec.ClientAddresses)
			srcs = srcs[:0]
			for k := 0; k < spec.ClientAddresses; k++ {
				srcs = append(srcs, addrAt(block, k))
			}
			routes = append(routes, clientRoute{block, n})
		}
		if err = c.withNetlink(func(h *netlink.Handle) error {
			eth, err := h.LinkByName("eth0")
			if err != nil {
				return err
			}
			if spec.ClientAddresses > 1 {
				for _, a := range srcs {
					if err := h.AddrAdd(eth, &netlink.Addr{IPNet: ipnet(netip.PrefixFrom(a, 32))}); err != nil {
						return fmt.Errorf("ip addr add %s/32 dev eth0: %w", a, err)
					}
				}
			}
			dsts := []netip.Prefix{spec.ServiceCIDR, spec.PodCIDR}
			if spec.ExternalCIDR.IsValid() {
				// Node addresses (node ports) and LoadBalancer and
				// external IPs, as a pod's default route would take them.
				dsts = append(append(dsts, spec.NodeCIDR), spec.ExternalVia...)
			} else if spec.ClientNodeRoutes {
				dsts = append(dsts, spec.NodeCIDR) // the nodes' primary IPs
			}
			for _, dst := range dsts {
				if err := h.RouteAdd(&netlink.Route{Dst: ipnet(dst), Gw: net.IP(nodeC.AsSlice())}); err != nil {
					return fmt.Errorf("route %s: %w", dst, err)
				}
			}
			return nil
		}); err != nil {
			return routes, fmt.Errorf("netns %q: %w", c.Name, err)
		}
		if block.IsValid() {
			if err = tb.Nodes[n].withNetlink(func(h *netlink.Handle) error {
				return h.RouteAdd(&netlink.Route{Dst: ipnet(block), Gw: net.IP(cli.AsSlice())})
			}); err != nil {
				return routes, fmt.Errorf("netns %q: route %s via %s: %w", tb.Nodes[n].Name, block, cli, err)
			}
		}
		// Many short connections: the whole ephemeral range.
		if err = c.Sysctl("net/ipv4/ip_local_port_range", "1024 65535"); err != nil {
			return routes, err
		}
		tb.ClientAddrs = append(tb.ClientAddrs, cli)
		tb.ClientSources = append(tb.ClientSources, srcs)
	}
	return routes, nil
}

// routeOtherNodesClients routes, on every node, the clients of the other
// nodes through those nodes (replies from pods on another node).
func (tb *Testbed) routeOtherNodesClients(routes []clientRoute) error {
	if len(tb.Nodes) < 2 {
		return nil
	}
	for n, nd := range tb.Nodes {
		if err := nd.withNetlink(func(h *netlink.Handle) error {
			for _, r := range routes {
				if r.node == n {
					continue
				}
				if err := h.RouteAdd(&netlink.Route{Dst: ipnet(r.dst), Gw: net.IP(tb.NodeAddrs[r.node].AsSlice())}); err != nil {
					return fmt.Errorf("route %s via node%d: %w", r.dst, r.node, err)
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("netns %q: %w", nd.Name, err)
		}
	}
	return nil
}

// routeBackend makes the shared backend host answer the whole pod CIDR
// (AnyIP) and route every client block back through the client's node,
// and gives every node its routes to the backend host at backendAddr.
func (tb *Testbed) routeBackend(spec Spec, routes []clientRoute, backendAddr netip.Addr) error {
	if err := tb.Backend.withNetlink(func(h *netlink.Handle) error {
		if err := anyIP(h, spec.PodCIDR); err != nil {
			return err
		}
		for _, r := range routes {
			if err := h.RouteAdd(&netlink.Route{Dst: ipnet(r.dst), Gw: net.IP(tb.NodeAddrs[r.node].AsSlice())}); err != nil {
				return fmt.Errorf("route %s via node%d: %w", r.dst, r.node, err)
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("netns %q: %w", tb.Backend.Name, err)
	}
	for _, nd := range tb.Nodes {
		if err := nd.withNetlink(func(h *netlink.Handle) error {
			return nodeRoutes(h, spec, backendAddr)
		}); err != nil {
			return fmt.Errorf("netns %q: %w", nd.Name, err)
		}
	}
	return nil
}

// buildPods creates one namespace per isolated pod address: pod k on node
// k mod nodes, "eth0" with the pod address /32 and routes to back (node
// and client addresses; with the external client also its block and
// Spec.ExternalVia) via 169.254.1.1 (held on the node's lo), the node
// side "pb<id>-p<k>" with a /32 route to the pod; the other nodes route the pod via
// its node's fabric address. It records the build time and memory.
func (tb *Testbed) buildPods(ctx context.Context, spec Spec, nodes int, back []netip.Prefix) error {
	mem0 := memAvailable()
	t0 := time.Now()
	handles := make([]*netlink.Handle, nodes)
	for n, nd := range tb.Nodes {
		h, err := nd.Netlink()
		if err != nil {
			return fmt.Errorf("netlink handle in %q: %w", nd.Name, err)
		}
		defer h.Close()
		handles[n] = h
		// The pods' gateway is a local address of the node (on lo): with
		// arp_ignore 0 the node answers ARP for it on every pod veth.
		lo, err := h.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := h.AddrAdd(lo, &netlink.Addr{IPNet: ipnet(netip.PrefixFrom(podGateway, 32))}); err != nil {
			return fmt.Errorf("netns %q: ip addr add %s/32 dev lo: %w", nd.Name, podGateway, err)
		}
	}
	for k, ip := range spec.IsolatedPods {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := k % nodes
		if k < len(spec.PodNodes) {
			n = spec.PodNodes[k]
		}
		name := NetnsName(spec.RunID, fmt.Sprintf("pod%d", k))
		tb.names = append(tb.names, name)
		pod, err := CreateNetns(name)
		if err != nil {
			return err
		}
		tb.Pods = append(tb.Pods, pod)
		tb.PodAddrs = append(tb.PodAddrs, ip)
		tb.PodNode = append(tb.PodNode, n)
		host := fmt.Sprintf("pb%s-p%d", spec.RunID, k)
		h := handles[n]
		la := netlink.NewLinkAttrs()
		la.Name = host
		if err := h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "eth0", PeerNamespace: netlink.NsFd(pod.handle)}); err != nil {
			return fmt.Errorf("netns %q: ip link add %s type veth peer eth0 netns %s: %w", tb.Nodes[n].Name, host, name, err)
		}
		hl, err := h.LinkByName(host)
		if err != nil {
			return err
		}
		if err := h.LinkSetUp(hl); err != nil {
			return err
		}
		if err := h.RouteAdd(&netlink.Route{LinkIndex: hl.Attrs().Index, Dst: ipnet(netip.PrefixFrom(ip, 32)), Scope: netlink.SCOPE_LINK}); err != nil {
			return fmt.Errorf("netns %q: route %s dev %s: %w", tb.Nodes[n].Name, ip, host, err)
		}
		for m, hm := range handles {
			if m == n {
				continue
			}
			if err := hm.RouteAdd(&netlink.Route{Dst: ipnet(netip.PrefixFrom(ip, 32)), Gw: net.IP(tb.NodeAddrs[n].AsSlice())}); err != nil {
				return fmt.Errorf("netns %q: route %s via node%d: %w", tb.Nodes[m].Name, ip, n, err)
			}
		}
		if err := pod.withNetlink(func(ph *netlink.Handle) error {
			eth, err := ph.LinkByName("eth0")
			if err != nil {
				return err
			}
			if err := ph.AddrAdd(eth, &netlink.Addr{IPNet: ipnet(netip.PrefixFrom(ip, 32))}); err != nil {
				return fmt.Errorf("ip addr add %s/32 dev eth0: %w", ip, err)
			}
			if err := ph.LinkSetUp(eth); err != nil {
				return err
			}
			if err := ph.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Dst: ipnet(netip.PrefixFrom(podGateway, 32)), Scope: netlink.SCOPE_LINK}); err != nil {
				return fmt.Errorf("route %s dev eth0: %w", podGateway, err)
			}
			for _, dst := range back {
				if err := ph.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Dst: ipnet(dst), Gw: net.IP(podGateway.AsSlice())}); err != nil {
					return fmt.Errorf("route %s via %s: %w", dst, podGateway, err)
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("netns %q: %w", name, err)
		}
	}
	tb.PodBuild = time.Since(t0)
	tb.PodMemBytes = mem0 - memAvailable()
	return nil
}

// fabricPort joins ns to the fabric bridge: a veth "port" (in the fabric
// namespace, enslaved to br0) to "inner" in ns with address a.
func fabricPort(fabric *Netns, port string, ns *Netns, inner string, a netip.Prefix) error {
	if err := fabric.withNetlink(func(h *netlink.Handle) error {
		la := netlink.NewLinkAttrs()
		la.Name = port
		if err := h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: inner, PeerNamespace: netlink.NsFd(ns.handle)}); err != nil {
			return fmt.Errorf("ip link add %s type veth peer %s netns %s: %w", port, inner, ns.Name, err)
		}
		br, err := h.LinkByName("br0")
		if err != nil {
			return err
		}
		l, err := h.LinkByName(port)
		if err != nil {
			return err
		}
		if err := h.LinkSetMaster(l, br); err != nil {
			return fmt.Errorf("ip link set %s master br0: %w", port, err)
		}
		return h.LinkSetUp(l)
	}); err != nil {
		return fmt.Errorf("netns %q: %w", fabric.Name, err)
	}
	return ns.withNetlink(func(h *netlink.Handle) error {
		l, err := h.LinkByName(inner)
		if err != nil {
			return err
		}
		if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipnet(a)}); err != nil {
			return fmt.Errorf("netns %q: ip addr add %s dev %s: %w", ns.Name, a, inner, err)
		}
		return h.LinkSetUp(l)
	})
}

func log2(n int) int {
	b := 0
	for 1<<b < n {
		b++
	}
	return b
}

// memAvailable is MemAvailable of /proc/meminfo in bytes (0 if unknown).
func memAvailable() int64 {
	n, _ := MemAvailable()
	return n
}

// MemAvailable is the kernel's estimate of the memory available for
// new work without swapping (MemAvailable of /proc/meminfo,
// fs/proc/meminfo.c), bytes. Errors: /proc/meminfo unreadable or
// without the line.
func MemAvailable() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/meminfo: MemAvailable: %w", err)
			}
			return kb * 1024, nil
		}
	}
	return 0, errors.New("/proc/meminfo has no MemAvailable line")
}
