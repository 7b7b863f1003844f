//go:build linux

// Package local runs a local Kubernetes cluster of real components on this
// machine (proxybench cluster up, docs/cluster.md): etcd and kube-apiserver
// in a control-plane namespace (topology/controlplane), kube-controller-
// manager and kube-scheduler beside them, and per node a containerd and a
// kubelet inside a user namespace whose uid 0 is an unprivileged host uid,
// with the node's own network, mount and PID namespaces (kube-proxy runs
// in the node's network namespace as the host's root, as the namespace
// engine's kube-proxy rows do). Each node's network namespace is joined to the control plane
// by a veth pair; the control-plane namespace routes every node's pod CIDR
// to it, so the API server reaches the pods (pods/proxy) and pods reach
// each other across nodes.
//
// The hard rule: a kubelet writes host-global kernel tunables at start
// (vm.overcommit_memory=1, kernel.panic=10, kernel.panic_on_oops=1). It is
// started only through Node.StartKubelet, which refuses unless the user
// namespace maps uid 0 to a non-root host uid (CheckKubeletUIDMap), where
// those writes fail with EACCES and kubelet's KubeletInUserNamespace gate
// logs and skips them.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/topology/controlplane"
)

// RunLabel is the label every node carries, set to the cluster's run ID.
const RunLabel = "proxybench.io/run"

// The cluster's address plan, inside the testbed's 198.18.0.0/15: the
// ClusterIPs (ServiceCIDR), node i's pods (PodCIDR(i), a /24 of
// PodSupernet), and the control plane's own block, chosen by
// controlplane.Start outside both (198.19.254.0/24).
var (
	ServiceCIDR = netip.MustParsePrefix("198.18.0.0/16")
	PodSupernet = netip.MustParsePrefix("198.19.0.0/17")
	// NodeSupernet holds the nodes' own addresses (NodeIP): a kubelet
	// refuses a link-local node IP ("nodeIP can't be a link-local unicast
	// address"), so the 169.254 control-plane links cannot name a node.
	NodeSupernet = netip.MustParsePrefix("198.19.253.0/24")
)

// NodeIP is node i's address: 198.19.253.<i+1>, on the node's lo, the
// source of its traffic, routed to it by the control-plane namespace;
// the kubelet's --node-ip and kube-proxy's bindAddress.
func NodeIP(i int) netip.Addr {
	b := NodeSupernet.Addr().As4()
	b[3] = byte(i + 1)
	return netip.AddrFrom4(b)
}

// MaxNodes is the most nodes a cluster takes (one /24 of PodSupernet each).
const MaxNodes = 128

// PodCIDR is node i's pod range: 198.19.i.0/24.
func PodCIDR(i int) netip.Prefix {
	b := PodSupernet.Addr().As4()
	b[2] = byte(i)
	return netip.PrefixFrom(netip.AddrFrom4(b), 24)
}

// Binaries are the programs a cluster runs.
type Binaries struct {
	Etcd, APIServer, ControllerManager, Scheduler, Kubelet string
	// KubeProxy runs on every node, inside its user namespace (empty:
	// none, and no ClusterIP answers).
	KubeProxy string
	// Containerd is containerd (default "containerd", Debian's 1.6.20).
	Containerd string
	// Proxybench runs the node holders (proxybench pause); default this
	// executable.
	Proxybench string
	// Images is the tarball of make image (the agent and pause images).
	Images string
}

// Spec is what Up builds.
type Spec struct {
	RunID string
	Nodes int
	Bin   Binaries
	// SandboxImage is the pause image's reference in Images
	// (image.Ref(image.Pause, version)).
	SandboxImage string
	// ProxyMode is kube-proxy's mode (default iptables).
	ProxyMode string
	// Timeout bounds the wait for every node to be Ready (default 3 min).
	Timeout time.Duration
	// Log gets one line per step (nil: none).
	Log io.Writer
}

// Cluster is a running local cluster.
type Cluster struct {
	RunID string
	CP    *controlplane.ControlPlane
	Nodes []*Node
	// Ready is the time from Up's start to every node Ready.
	Ready time.Duration
	// ProxyMode is the mode kube-proxy runs in on every node ("" without
	// kube-proxy).
	ProxyMode string
	// kubeProxyBin is kube-proxy's binary, kubeProxies each node's
	// kube-proxy (by node index).
	kubeProxyBin string
	kubeProxies  []*topology.Process
	// stopFollow ends FollowKubeProxyConfig's loop and waits for it.
	stopFollow func()
}

// startKubeProxies starts kube-proxy on every node, in its network and
// mount namespaces as the host's root (Node.StartHostRoot says why), with
// the testbed's configuration
// (kubeproxy.Config: conntrack sizes and timeouts 0, so it writes no
// global sysctl; its listeners on the node's loopback, metrics on every
// address of the node's namespace), and publishes the configuration as a
// cluster does, in ConfigMap kube-system/kube-proxy (config.conf), which
// the cluster engine reads for the mode.
func (c *Cluster) startKubeProxies(ctx context.Context, bin, mode string) error {
	if mode == "" {
		mode = "iptables"
	}
	c.ProxyMode, c.kubeProxyBin = mode, bin
	c.kubeProxies = make([]*topology.Process, len(c.Nodes))
	var published []byte
	for i := range c.Nodes {
		cfg, err := c.startKubeProxy(i, mode)
		if err != nil {
			return err
		}
		if i == 0 {
			published = cfg
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system",
		Labels: map[string]string{RunLabel: c.RunID}}, Data: map[string]string{"config.conf": string(published)}}
	_, err := c.CP.Client.CoreV1().ConfigMaps("kube-system").Create(ctx, cm, metav1.CreateOptions{})
	return err
}

// startKubeProxy writes node i's kube-proxy configuration for mode and
// starts kube-proxy with it; it returns the configuration.
func (c *Cluster) startKubeProxy(i int, mode string) ([]byte, error) {
	n := c.Nodes[i]
	kc := filepath.Join(n.Dir, "kubeconfig")
	cfg, _, err := kubeproxy.Config(kubeproxy.ConfigSpec{Mode: mode, ClusterCIDR: PodSupernet, NodeName: n.Name,
		NodeIP: NodeIP(i), Kubeconfig: kc, MetricsAnyAddress: true})
	if err != nil {
		return nil, err
	}
	path := filepath.Join(n.Dir, "kube-proxy.yaml")
	if err := n.writeFile(path, string(cfg)); err != nil {
		return nil, err
	}
	p, err := n.StartHostRoot("kube-proxy", c.kubeProxyBin, "--config", path, "--v", "1")
	if err != nil {
		return nil, err
	}
	c.kubeProxies[i] = p
	return cfg, nil
}

// FollowKubeProxyConfig is the local cluster's stand-in for a kube-proxy
// DaemonSet rollout (it has no DaemonSet: its kube-proxies are programs):
// until ctx ends it reads ConfigMap kube-system/kube-proxy every
// interval and, when the mode in its config.conf differs from the one
// running, restarts each node's kube-proxy in turn (SIGTERM, then the new
// mode's configuration, as a rolling update replaces one pod at a time),
// so `run --engine cluster --allow-mode-switch` works on it as on a
// cluster with a DaemonSet. Only the mode is followed; the rest of each
// node's configuration stays the testbed's (Config). kube-proxy itself
// removes the other modes' rules when it starts in a mode (v1.37
// platformCleanup). Each restart is logged to log. It runs in the
// background until ctx ends or Down, which stops it (and waits for it)
// before stopping anything: a restart never races the teardown (one did:
// kube-proxy started into a node namespace Down had closed, a nil
// dereference that left the cluster's namespaces behind).
func (c *Cluster) FollowKubeProxyConfig(ctx context.Context, interval time.Duration, log io.Writer) {
	if c.kubeProxyBin == "" || c.stopFollow != nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	c.stopFollow = func() { cancel(); <-done }
	go func() {
		defer close(done)
		c.follow(ctx, interval, log)
	}()
}

// follow is FollowKubeProxyConfig's loop; it returns when ctx ends, also
// between two nodes' restarts.
func (c *Cluster) follow(ctx context.Context, interval time.Duration, log io.Writer) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
		cm, err := c.CP.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
		if err != nil {
			continue
		}
		var cfg struct {
			Mode string `json:"mode"`
		}
		if yaml.Unmarshal([]byte(cm.Data["config.conf"]), &cfg) != nil {
			continue
		}
		mode := cfg.Mode
		if mode == "" {
			mode = "iptables"
		}
		if mode == c.ProxyMode {
			continue
		}
		fmt.Fprintf(log, "cluster %s: ConfigMap kube-system/kube-proxy says mode %s (running %s): restarting kube-proxy node by node\n", c.RunID, mode, c.ProxyMode)
		for i := range c.Nodes {
			if ctx.Err() != nil {
				return
			}
			if p := c.kubeProxies[i]; p != nil {
				_ = p.Stop(10 * time.Second)
			}
			if _, err := c.startKubeProxy(i, mode); err != nil {
				fmt.Fprintf(log, "cluster %s: %s: kube-proxy in mode %s: %v\n", c.RunID, c.Nodes[i].Name, mode, err)
			}
		}
		c.ProxyMode = mode
	}
}

// Up starts a cluster of spec.Nodes nodes and waits until each is Ready.
// On error everything it started is stopped and removed; the error carries
// the failing program's log tail.
func Up(ctx context.Context, spec Spec) (c *Cluster, err error) {
	t0 := time.Now()
	if spec.Nodes < 1 || spec.Nodes > MaxNodes {
		return nil, fmt.Errorf("local cluster: --nodes %d: want 1 to %d", spec.Nodes, MaxNodes)
	}
	if spec.Bin.Containerd == "" {
		spec.Bin.Containerd = "containerd"
	}
	logf := func(format string, a ...any) {
		if spec.Log != nil {
			fmt.Fprintf(spec.Log, "cluster %s: %s (%.1f s)\n", spec.RunID, fmt.Sprintf(format, a...), time.Since(t0).Seconds())
		}
	}
	c = &Cluster{RunID: spec.RunID}
	defer func() {
		if err != nil {
			_ = c.Down()
			c = nil
		}
	}()
	var nets []*topology.Netns
	for i := 0; i < spec.Nodes; i++ {
		n, err := StartNode(ctx, NodeSpec{RunID: spec.RunID, Index: i, Proxybench: spec.Bin.Proxybench})
		if err != nil {
			return c, err
		}
		c.Nodes = append(c.Nodes, n)
		nets = append(nets, n.NS)
	}
	logf("%d node holders in user namespaces", spec.Nodes)
	c.CP, err = controlplane.Start(ctx, controlplane.Spec{RunID: spec.RunID, Nodes: nets,
		Avoid: []netip.Prefix{ServiceCIDR, PodSupernet, NodeSupernet}, ServiceRange: ServiceCIDR,
		Bin: controlplane.Binaries{Etcd: spec.Bin.Etcd, APIServer: spec.Bin.APIServer}})
	if err != nil {
		return c, err
	}
	logf("API server ready")
	if err = c.route(ctx); err != nil {
		return c, err
	}
	if err = c.startControllers(spec.Bin); err != nil {
		return c, err
	}
	for i, n := range c.Nodes {
		if _, err = n.StartContainerd(ctx, spec.Bin.Containerd, PodCIDR(i), spec.SandboxImage, time.Minute); err != nil {
			return c, err
		}
		if spec.Bin.Images != "" {
			if _, err = n.ImportImages(ctx, spec.Bin.Images); err != nil {
				return c, err
			}
		}
		kc := filepath.Join(n.Dir, "kubeconfig")
		if err = c.CP.WriteKubeconfig(i, kc); err != nil {
			return c, err
		}
		if err = chownTree(kc, int(n.HostUID)); err != nil {
			return c, err
		}
		if _, err = n.RunKubelet(KubeletSpec{Binary: spec.Bin.Kubelet, Kubeconfig: kc, NodeIP: NodeIP(i),
			PodCIDR: PodCIDR(i), Labels: map[string]string{RunLabel: spec.RunID}}); err != nil {
			return c, err
		}
	}
	if spec.Bin.KubeProxy != "" {
		if err = c.startKubeProxies(ctx, spec.Bin.KubeProxy, spec.ProxyMode); err != nil {
			return c, err
		}
		logf("containerd, kubelet and kube-proxy (%s) started on every node", c.ProxyMode)
	} else {
		logf("containerd and kubelet started on every node (no kube-proxy)")
	}
	timeout := spec.Timeout
	if timeout == 0 {
		timeout = 3 * time.Minute
	}
	if err = c.WaitReady(ctx, timeout); err != nil {
		return c, err
	}
	c.Ready = time.Since(t0)
	logf("%d nodes Ready", spec.Nodes)
	return c, nil
}

// route gives each node a default route to the control plane and the
// control plane a route to each node's pods, with forwarding on in the
// control-plane namespace (a per-namespace sysctl; the host's is never
// touched).
func (c *Cluster) route(ctx context.Context) error {
	if out, err := c.CP.NS.Run(ctx, nil, "sysctl", "-qw", "net.ipv4.ip_forward=1"); err != nil {
		return fmt.Errorf("control plane: forwarding on: %w: %s", err, out)
	}
	for i, n := range c.Nodes {
		for _, dst := range []netip.Prefix{PodCIDR(i), netip.PrefixFrom(NodeIP(i), 32)} {
			if out, err := c.CP.NS.Run(ctx, nil, "ip", "route", "add", dst.String(), "via", c.CP.NodeAddr(i).String(), "dev", c.CP.LinkName(i)); err != nil {
				return fmt.Errorf("control plane: route to %s's %s: %w: %s", n.Name, dst, err, out)
			}
		}
		if out, err := n.NS.Run(ctx, nil, "ip", "addr", "add", netip.PrefixFrom(NodeIP(i), 32).String(), "dev", "lo"); err != nil {
			return fmt.Errorf("node %s: address %s: %w: %s", n.Name, NodeIP(i), err, out)
		}
		if out, err := n.NS.Run(ctx, nil, "ip", "route", "add", "default", "via", c.CP.LinkAddr(i).String(), "src", NodeIP(i).String()); err != nil {
			return fmt.Errorf("node %s: default route: %w: %s", n.Name, err, out)
		}
	}
	return nil
}

// startControllers starts kube-controller-manager and kube-scheduler in the
// control-plane namespace, listening on its loopback only.
func (c *Cluster) startControllers(bin Binaries) error {
	kc := filepath.Join(c.CP.Dir, "local.kubeconfig")
	if err := c.CP.WriteLocalKubeconfig(kc); err != nil {
		return err
	}
	if bin.ControllerManager != "" {
		if _, err := c.CP.StartProgram("kube-controller-manager", bin.ControllerManager,
			"--kubeconfig", kc, "--leader-elect=false", "--bind-address", "127.0.0.1",
			"--use-service-account-credentials=false",
			"--service-account-private-key-file", filepath.Join(c.CP.Dir, "sa.key"),
			"--service-cluster-ip-range", ServiceCIDR.String(),
			"--kube-api-qps", "200", "--kube-api-burst", "400", "--v", "1"); err != nil {
			return err
		}
	}
	if bin.Scheduler != "" {
		if _, err := c.CP.StartProgram("kube-scheduler", bin.Scheduler,
			"--kubeconfig", kc, "--leader-elect=false", "--bind-address", "127.0.0.1", "--v", "1"); err != nil {
			return err
		}
	}
	return nil
}

// WaitReady waits until every node of the cluster is registered and
// Ready, up to timeout. The error names each node that is not, with its
// Ready condition's reason, and the tail of its kubelet's log.
func (c *Cluster) WaitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		missing := map[string]string{}
		for _, n := range c.Nodes {
			missing[n.Name] = "not registered"
		}
		list, err := c.CP.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: RunLabel + "=" + c.RunID})
		if err == nil {
			for _, node := range list.Items {
				if _, ok := missing[node.Name]; !ok {
					continue
				}
				missing[node.Name] = "no Ready condition"
				for _, cond := range node.Status.Conditions {
					if cond.Type == corev1.NodeReady {
						if cond.Status == corev1.ConditionTrue {
							delete(missing, node.Name)
						} else {
							missing[node.Name] = fmt.Sprintf("Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)
						}
					}
				}
			}
		}
		if len(missing) == 0 {
			return nil
		}
		for _, n := range c.Nodes {
			for _, p := range n.procs {
				if done, werr := p.Exited(); done {
					return fmt.Errorf("%s exited (%v):\n%s", p.Name, werr, tail(filepath.Join(n.Dir, p.Name[:len(p.Name)-len(n.Name)-1]+".log"), 20))
				}
			}
		}
		if time.Now().After(deadline) {
			var errs []error
			for _, n := range c.Nodes {
				if why, ok := missing[n.Name]; ok {
					errs = append(errs, fmt.Errorf("node %s not Ready after %v: %s; kubelet log:\n%s", n.Name, timeout, why, tail(filepath.Join(n.Dir, "kubelet.log"), 15)))
				}
			}
			return errors.Join(errs...)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Down stops the control plane and every node (its programs, then its
// holder: every container goes with the node's PID namespace), and
// removes their namespaces and folders. Safe on a partly started cluster.
func (c *Cluster) Down() error {
	if c == nil {
		return nil
	}
	if c.stopFollow != nil {
		c.stopFollow()
		c.stopFollow = nil
	}
	var errs []error
	// The control plane first: it deletes its ends of the node links,
	// which a node's namespace takes along when it goes first.
	if c.CP != nil {
		errs = append(errs, c.CP.Stop())
		c.CP = nil
	}
	for i := len(c.Nodes) - 1; i >= 0; i-- {
		errs = append(errs, c.Nodes[i].Stop())
	}
	c.Nodes = nil
	return errors.Join(errs...)
}
