package cluster

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/proxybench/proxybench/reports"
)

// KubeProxyConfigKey is the ConfigMap key holding the
// KubeProxyConfiguration (kubeadm's kube-system/kube-proxy ConfigMap).
const KubeProxyConfigKey = "config.conf"

// DefaultMode is kube-proxy's mode on Linux when its configuration says
// none (KubeProxyConfiguration.mode "": iptables).
const DefaultMode = "iptables"

// KubeProxy reads kube-system/kube-proxy: the ConfigMap's configuration
// (its mode; "" is DefaultMode) and the DaemonSet's image (its tag is
// the version). A cluster without them (another service proxy) gives
// Absent saying so; any other failure is an error.
func (c *Cluster) KubeProxy(ctx context.Context) (reports.ClusterKubeProxy, error) {
	var kp reports.ClusterKubeProxy
	cm, err := c.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		kp.Absent = "no ConfigMap kube-system/kube-proxy (the cluster runs another service proxy, or kube-proxy configured otherwise)"
		return kp, nil
	case err != nil:
		return kp, c.refusal("read ConfigMap kube-system/kube-proxy", err)
	}
	kp.Config = cm.Data[KubeProxyConfigKey]
	if kp.Config == "" {
		kp.Absent = "ConfigMap kube-system/kube-proxy has no " + KubeProxyConfigKey
	} else {
		mode, err := ModeOf(kp.Config)
		if err != nil {
			kp.Absent = err.Error()
		}
		kp.Mode = mode
	}
	ds, err := c.Client.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return kp, c.refusal("read DaemonSet kube-system/kube-proxy", err)
	default:
		for _, ct := range ds.Spec.Template.Spec.Containers {
			if ct.Name == "kube-proxy" || len(ds.Spec.Template.Spec.Containers) == 1 {
				kp.Image = ct.Image
				if i := strings.LastIndex(ct.Image, ":"); i > strings.LastIndex(ct.Image, "/") {
					kp.Version = ct.Image[i+1:]
				}
			}
		}
	}
	return kp, nil
}

// ModeOf is the mode of a KubeProxyConfiguration (YAML or JSON): its
// mode, DefaultMode when empty. A configuration that does not parse is
// an error.
func ModeOf(config string) (string, error) {
	var cfg kubeproxyv1alpha1.KubeProxyConfiguration
	if err := yaml.Unmarshal([]byte(config), &cfg); err != nil {
		return "", fmt.Errorf("kube-proxy configuration does not parse: %w", err)
	}
	if cfg.Mode == "" {
		return DefaultMode, nil
	}
	return string(cfg.Mode), nil
}

// Facts fills each node's facts (Node.status.nodeInfo) into nodes, the
// nodes with an agent.
func (c *Cluster) Facts(ctx context.Context, nodes []reports.ClusterNode) error {
	for i := range nodes {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, nodes[i].Name, metav1.GetOptions{})
		if err != nil {
			return c.refusal("read node "+nodes[i].Name, err)
		}
		ni := n.Status.NodeInfo
		nodes[i].Kernel, nodes[i].OSImage, nodes[i].ContainerRuntime, nodes[i].Kubelet = ni.KernelVersion, ni.OSImage, ni.ContainerRuntimeVersion, ni.KubeletVersion
	}
	return nil
}
