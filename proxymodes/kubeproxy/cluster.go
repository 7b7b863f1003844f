//go:build linux

package kubeproxy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/topology/controlplane"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/apiobjects"
)

// ClusterSpec is one kube-proxy mode over a whole testbed: the control
// plane, the scenario's services in the API, kube-proxy on every node.
type ClusterSpec struct {
	RunID string
	// Nodes are the node namespaces, NodeIPs their InternalIPs.
	Nodes   []*topology.Netns
	NodeIPs []netip.Addr
	// Mode, Pass and ClusterCIDR go into every node's config (ConfigSpec).
	Mode        string
	Pass        map[string]any
	ClusterCIDR netip.Prefix
	// ServiceCIDR is the scenario's service range; Avoid every range of
	// the scenario (controlplane.Spec.Avoid).
	ServiceCIDR netip.Prefix
	Avoid       []netip.Prefix
	// KubeProxy is the kube-proxy binary (bin/kube-proxy or --kube-proxy);
	// Bin the control plane's.
	KubeProxy string
	Bin       controlplane.Binaries
	// Dir keeps each node's kube-proxy config and log (beside the result).
	Dir      string
	Services []workload.Service
	// Zones is each node's zone label (scenarios.NodeZones; nil: none).
	Zones map[string]string
}

// Cluster is a running ClusterSpec.
type Cluster struct {
	CP      *controlplane.ControlPlane
	Proxies []*Proxy
	// Objects is what creating the API objects took.
	Objects apiobjects.Stats
	// Setup is the wall time of StartCluster (control plane, objects,
	// kube-proxy processes up and healthy), reported apart from figures.
	Setup time.Duration
	// FirstSync is, per node, the wall time from the API objects being
	// created to kube-proxy's first IPv4 sync done (Proxy.WaitSynced).
	FirstSync []time.Duration
}

// StartCluster starts the control plane, creates the Nodes, Services and
// EndpointSlices, then starts kube-proxy on every node and waits until
// each has finished its first sync. On error everything started is stopped.
func StartCluster(ctx context.Context, spec ClusterSpec) (c *Cluster, err error) {
	t0 := time.Now()
	if len(spec.NodeIPs) != len(spec.Nodes) {
		return nil, fmt.Errorf("kubeproxy: %d nodes but %d node IPs", len(spec.Nodes), len(spec.NodeIPs))
	}
	ver, err := Version(ctx, spec.KubeProxy)
	if err != nil {
		return nil, err
	}
	c = &Cluster{}
	defer func() {
		if err != nil {
			_ = c.Stop()
			c = nil
		}
	}()
	c.CP, err = controlplane.Start(ctx, controlplane.Spec{RunID: spec.RunID, Nodes: spec.Nodes, Avoid: spec.Avoid, Bin: spec.Bin})
	if err != nil {
		return c, err
	}
	nodes := make([]apiobjects.Node, len(spec.Nodes))
	for i := range nodes {
		nodes[i] = apiobjects.Node{Name: NodeName(i), InternalIP: spec.NodeIPs[i]}
	}
	c.Objects, err = apiobjects.Create(ctx, c.CP.Client, apiobjects.Spec{ServiceCIDR: spec.ServiceCIDR, Nodes: nodes, Services: spec.Services, Zones: spec.Zones})
	if err != nil {
		return c, err
	}
	created := time.Now()
	for i, n := range spec.Nodes {
		kc := filepath.Join(spec.Dir, nodes[i].Name+".kubeconfig")
		if err = c.CP.WriteKubeconfig(i, kc); err != nil {
			return c, err
		}
		p, err := Start(ctx, Spec{RunID: spec.RunID, Node: n, Binary: spec.KubeProxy, Version: ver, Dir: spec.Dir,
			Config: ConfigSpec{Mode: spec.Mode, Pass: spec.Pass, ClusterCIDR: spec.ClusterCIDR, NodeName: nodes[i].Name, NodeIP: spec.NodeIPs[i], Kubeconfig: kc}})
		if err != nil {
			return c, err
		}
		c.Proxies = append(c.Proxies, p)
	}
	for _, p := range c.Proxies {
		if _, err = p.WaitSynced(ctx, 10*time.Minute); err != nil {
			return c, err
		}
		c.FirstSync = append(c.FirstSync, time.Since(created))
	}
	c.Setup = time.Since(t0)
	return c, nil
}

// NodeName is the Node object (and hostnameOverride) of node i.
func NodeName(i int) string { return fmt.Sprintf("node-%d", i) }

// Stop stops every kube-proxy, then the control plane.
func (c *Cluster) Stop() error {
	if c == nil {
		return nil
	}
	var errs []error
	for _, p := range c.Proxies {
		errs = append(errs, p.Stop())
	}
	c.Proxies = nil
	errs = append(errs, c.CP.Stop())
	return errors.Join(errs...)
}
