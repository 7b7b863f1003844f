//go:build linux

package local

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/proxybench/proxybench/internal/image"
	"github.com/proxybench/proxybench/topology"
)

// containerdConfig is containerd 1.6's configuration (version 2) for a node
// in a user namespace, as rootless containerd runs: no cgroups (the host's
// cgroup v1 hierarchies are not delegated to the node's uid; runc's
// rootless cgroup manager would only warn), no OOM score below its own,
// no AppArmor, no hugetlb; the native snapshotter (copies, no overlay
// mounts); CNI plugins from Debian's /usr/lib/cni with the node's own
// configuration folder. %[1]s is the node folder, %[2]s the sandbox (pause)
// image.
const containerdConfig = `version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.overlayfs", "io.containerd.internal.v1.tracing",
  "io.containerd.internal.v1.opt"]

[grpc]
  address = "%[1]s/containerd.sock"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%[2]s"
  disable_cgroup = true
  disable_apparmor = true
  restrict_oom_score_adj = true
  disable_hugetlb_controller = true
  enable_unprivileged_ports = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "%[1]s/cni"
`

// cniConfig is the node's pod network (CNI 1.0.0): a bridge cni0 that is
// the pods' gateway, host-local addresses from the node's pod CIDR, a
// default route through the bridge; the loopback plugin brings each
// pod's lo up (containerd calls it itself). %[1]s is the pod CIDR.
const cniConfig = `{
  "cniVersion": "1.0.0",
  "name": "proxybench",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "%[1]s"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
`

// StartContainerd writes the node's containerd and CNI configurations
// (pod addresses from podCIDR, sandboxImage the pause image), starts
// containerd inside the node and waits until `ctr version` answers on
// its socket (up to timeout).
func (n *Node) StartContainerd(ctx context.Context, bin string, podCIDR netip.Prefix, sandboxImage string, timeout time.Duration) (*topology.Process, error) {
	cfg := filepath.Join(n.Dir, "containerd.toml")
	if err := n.writeFile(cfg, fmt.Sprintf(containerdConfig, n.Dir, sandboxImage)); err != nil {
		return nil, err
	}
	if err := n.writeFile(filepath.Join(n.Dir, "cni", "10-proxybench.conflist"), fmt.Sprintf(cniConfig, podCIDR)); err != nil {
		return nil, err
	}
	p, err := n.Start("containerd", bin, "--config", cfg, "--log-level", "warn")
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	for {
		if _, err := n.Ctr(ctx, "version"); err == nil {
			return p, nil
		}
		if done, werr := p.Exited(); done {
			return nil, fmt.Errorf("node %s: containerd exited (%v):\n%s", n.Name, werr, tail(filepath.Join(n.Dir, "containerd.log"), 20))
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("node %s: containerd not answering after %v:\n%s", n.Name, timeout, tail(filepath.Join(n.Dir, "containerd.log"), 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Socket is the node's containerd socket (a host path too).
func (n *Node) Socket() string { return filepath.Join(n.Dir, "containerd.sock") }

// Ctr runs ctr against the node's containerd, in the CRI's namespace
// k8s.io, inside the node.
func (n *Node) Ctr(ctx context.Context, args ...string) ([]byte, error) {
	return n.Run(ctx, "ctr", append([]string{"--address", n.Socket(), "--namespace", "k8s.io"}, args...)...)
}

// ImportImages imports the OCI tarball tar (make image: the agent and the
// pause image) into the node's containerd, unpacked for the native
// snapshotter the CRI uses. It returns ctr's listing of what it imported.
func (n *Node) ImportImages(ctx context.Context, tar string) (string, error) {
	// The node's root is an unprivileged host uid: give it a copy it can
	// read whatever the tarball's own mode.
	local := filepath.Join(n.Dir, "images.tar")
	b, err := os.ReadFile(tar)
	if err != nil {
		return "", fmt.Errorf("images %s: %w (make image builds it)", tar, err)
	}
	if err := n.writeFile(local, string(b)); err != nil {
		return "", err
	}
	out, err := n.Ctr(ctx, "images", "import", "--snapshotter", "native", local)
	if err != nil {
		return "", err
	}
	_ = os.Remove(local)
	return strings.TrimSpace(string(out)), nil
}

// writeFile writes data to path, owned by the node's uid.
func (n *Node) writeFile(path, data string) error {
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		return err
	}
	return os.Lchown(path, int(n.HostUID), int(n.HostUID))
}

// ImageTag returns the tag of the pause image in the OCI tarball tar
// (make image: proxybench.local/pause:<tag>, the agent image beside it
// with the same tag), so a cluster uses the images it imports whatever
// version the running proxybench reports. Errors: a tarball that does
// not read, or holds no pause image.
func ImageTag(tar string) (string, error) {
	dir, err := os.MkdirTemp("", "pb-image-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	imgs, err := image.Read(tar, dir)
	if err != nil {
		return "", err
	}
	prefix := image.Ref(image.Pause, "")
	for ref := range imgs {
		if tag, ok := strings.CutPrefix(ref, prefix); ok && tag != "" {
			return tag, nil
		}
	}
	return "", fmt.Errorf("images %s: no %s<tag> image (make image writes one)", tar, prefix)
}
