//go:build linux

package local

import (
	"fmt"
	"net/netip"
	"path/filepath"

	"github.com/proxybench/proxybench/topology"
)

// kubeletConfig is the node's KubeletConfiguration (kubelet.config.k8s.io
// v1beta1) for a kubelet in a user namespace on a cgroup v1 host, as
// rootless Kubernetes runs one:
//   - featureGates KubeletInUserNamespace: the kernel tunables it cannot
//     write (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops), the
//     OOM watcher's /dev/kmsg and rlimits are logged and skipped
//     (pkg/kubelet/cm/container_manager_linux.go, pkg/kubelet/kubelet.go);
//   - protectKernelDefaults false: a kubelet that finds the host's values
//     would otherwise refuse to start;
//   - failCgroupV1 false: kubelet 1.35+ otherwise refuses cgroup v1;
//   - no QoS cgroups and no node-allocatable enforcement (the cgroup v1
//     hierarchies are not the node's to write; containerd runs with
//     disable_cgroup);
//   - no local-storage isolation, no swap check, eviction thresholds off;
//   - anonymous, always-allowed access to its port inside the node's
//     namespace (the control plane is the only other party there).
//
// %[1]s is containerd's socket, %[2]s the node address, %[3]s the pod CIDR.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
featureGates:
  KubeletInUserNamespace: true
protectKernelDefaults: false
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
localStorageCapacityIsolation: false
containerRuntimeEndpoint: unix://%[1]s
address: %[2]s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
podCIDR: %[3]s
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
evictionHard:
  memory.available: "0%%"
  nodefs.available: "0%%"
  imagefs.available: "0%%"
  nodefs.inodesFree: "0%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
resolvConf: ""
registerNode: true
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
`

// KubeletSpec is what RunKubelet starts.
type KubeletSpec struct {
	Binary string
	// Kubeconfig is the host path of a kubeconfig naming the API server as
	// the node reaches it (controlplane.WriteKubeconfig).
	Kubeconfig string
	NodeIP     netip.Addr
	PodCIDR    netip.Prefix
	// Labels are added to the node (--node-labels).
	Labels map[string]string
}

// RunKubelet writes the node's kubelet configuration and starts the
// kubelet through StartKubelet (the user-namespace guard).
func (n *Node) RunKubelet(spec KubeletSpec) (*topology.Process, error) {
	cfg := filepath.Join(n.Dir, "kubelet.yaml")
	if err := n.writeFile(cfg, fmt.Sprintf(kubeletConfig, n.Socket(), spec.NodeIP, spec.PodCIDR)); err != nil {
		return nil, err
	}
	labels := ""
	for k, v := range spec.Labels {
		if labels != "" {
			labels += ","
		}
		labels += k + "=" + v
	}
	args := []string{"--config", cfg, "--kubeconfig", spec.Kubeconfig,
		"--hostname-override", n.Name, "--node-ip", spec.NodeIP.String(), "--v", "2"}
	if labels != "" {
		args = append(args, "--node-labels", labels)
	}
	return n.StartKubelet(spec.Binary, args...)
}
