//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/proxybench/proxybench/topology"
)

// DefaultHostUID is the host uid the first node's user namespace maps its
// uid 0 to; node i maps 0..IDCount-1 onto DefaultHostUID+i*IDCount.
const DefaultHostUID = 100000

// IDCount is the size of each node's uid and gid range (65536, as
// /etc/subuid gives a rootless user): the agent image's user 65532 fits.
const IDCount = 65536

// Node is one node of the local cluster: a holder process (the node's
// PID 1) in new user, mount, network, PID, UTS and IPC namespaces, whose
// uid 0 is the unprivileged host uid HostUID, and the programs started
// inside those namespaces (containerd, kubelet, kube-proxy) with nsenter.
// Its network namespace is attached as pb-<runid>-node<i>, so it shows,
// and is removed, as every testbed namespace is.
type Node struct {
	Index   int
	Name    string // the API node name (scenarios.NodeName)
	RunID   string
	HostUID uint32
	// Dir is the node's host folder (owned by HostUID): var/lib (its
	// /var/lib: containerd's and kubelet's state), var/log, the programs'
	// configurations and logs, containerd.sock.
	Dir    string
	NS     *topology.Netns
	holder *topology.Process
	procs  []*topology.Process
}

// holderScript is the node's PID 1: inside its new namespaces it makes
// every mount private, gives the node its own /run (tmpfs: containerd's
// state and shim sockets, pod network namespaces, the xtables lock),
// /var/lib and /var/log (bind mounts of the node's folder), a /proc of
// its PID namespace and its host name, brings lo up, says it is ready,
// then becomes `proxybench pause` (waits for SIGTERM, reaps orphans).
// $1 is the node folder, $2 the host name, $3 proxybench.
const holderScript = `set -eu
mount --make-rprivate /
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /run/netns /run/containerd
mount --bind "$1/var/lib" /var/lib
mount --bind "$1/var/log" /var/log
mount -t proc proc /proc
hostname "$2"
ip link set lo up
echo ok > "$1/holder.ready"
exec "$3" pause
`

// NodeSpec is what StartNode builds.
type NodeSpec struct {
	RunID string
	Index int
	// HostUID is the host uid of the node's uid 0 (default
	// DefaultHostUID+Index*IDCount); 0 is refused.
	HostUID uint32
	// Proxybench is the proxybench binary (its pause subcommand is the
	// holder); default os.Executable.
	Proxybench string
	// Detach starts the holder in a session of its own without a
	// parent-death signal, so the node outlives this process (cluster up).
	Detach bool
}

// StartNode creates node spec.Index's folder and holder and attaches its
// network namespace. On error what it created is removed.
func StartNode(ctx context.Context, spec NodeSpec) (n *Node, err error) {
	uid := spec.HostUID
	if uid == 0 {
		uid = DefaultHostUID + uint32(spec.Index)*IDCount
	}
	pb := spec.Proxybench
	if pb == "" {
		if pb, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	n = &Node{Index: spec.Index, Name: NodeName(spec.Index), RunID: spec.RunID, HostUID: uid}
	defer func() {
		if err != nil {
			_ = n.Stop()
			n = nil
		}
	}()
	nsName := topology.NetnsName(spec.RunID, fmt.Sprintf("node%d", spec.Index))
	if n.Dir, err = os.MkdirTemp("", topology.Prefix+spec.RunID+fmt.Sprintf("-node%d-", spec.Index)); err != nil {
		return n, err
	}
	for _, d := range []string{"var/lib", "var/log", "cni"} {
		if err = os.MkdirAll(filepath.Join(n.Dir, d), 0o755); err != nil {
			return n, err
		}
	}
	if err = chownTree(n.Dir, int(uid)); err != nil {
		return n, err
	}
	// The folder's parent (os.TempDir, 1777) lets the node's uid in.
	cmd := exec.Command("/bin/sh", "-c", holderScript, "holder", n.Dir, n.Name, pb)
	log, err := os.OpenFile(filepath.Join(n.Dir, "holder.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return n, err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), topology.ChildEnv+"="+spec.RunID)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWNET |
			syscall.CLONE_NEWPID | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(uid), Size: IDCount}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(uid), Size: IDCount}},
		GidMappingsEnableSetgroups: true,
		// uid and gid 0 of the namespace, and no supplementary group: the
		// host's group 0 would otherwise stay in the list.
		Credential: &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}},
	}
	if spec.Detach {
		cmd.SysProcAttr.Setsid = true
	} else {
		cmd.SysProcAttr.Setpgid = true
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if n.holder, err = topology.StartPlain(spec.RunID, "holder "+n.Name, cmd); err != nil {
		return n, err
	}
	if err = waitFile(ctx, filepath.Join(n.Dir, "holder.ready"), n.holder, 30*time.Second); err != nil {
		return n, fmt.Errorf("node %s: holder: %w:\n%s", n.Name, err, tail(filepath.Join(n.Dir, "holder.log"), 10))
	}
	// The guard, at the first moment it can be read: the rest of the node
	// runs in this namespace.
	if err = CheckKubeletUserNS(n.holder.Pid()); err != nil {
		return n, err
	}
	if out, err := exec.CommandContext(ctx, "ip", "netns", "attach", nsName, strconv.Itoa(n.holder.Pid())).CombinedOutput(); err != nil {
		return n, fmt.Errorf("node %s: ip netns attach %s %d: %w: %s", n.Name, nsName, n.holder.Pid(), err, out)
	}
	if n.NS, err = topology.OpenNetns(nsName); err != nil {
		return n, err
	}
	return n, nil
}

// NodeName is node i's API name: scenarios.NodeName, "node-<i>".
func NodeName(i int) string { return "node-" + strconv.Itoa(i) }

// Holder is the node's PID 1 as seen from the host.
func (n *Node) Holder() int { return n.holder.Pid() }

// nsenterArgs are the nsenter arguments that run a program in every
// namespace of the holder, as the namespace's uid and gid 0 (nsenter then
// drops supplementary groups).
func (n *Node) nsenterArgs() []string {
	return []string{"--target", strconv.Itoa(n.holder.Pid()), "--user", "--mount", "--net", "--pid", "--uts", "--ipc", "--"}
}

// Command returns a command running name with args inside the node, as its
// root (host uid HostUID).
func (n *Node) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "nsenter", append(n.nsenterArgs(), append([]string{name}, args...)...)...)
	cmd.Env = append(os.Environ(), topology.ChildEnv+"="+n.RunID)
	return cmd
}

// Run runs name inside the node and returns its combined output.
func (n *Node) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := n.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("node %s: %s %s: %w: %s", n.Name, name, strings.Join(args, " "), err, out)
	}
	return out, nil
}

// Start starts a long-lived program inside the node, its output appended
// to Dir/<label>.log. A kubelet is started only through StartKubelet.
func (n *Node) Start(label, name string, args ...string) (*topology.Process, error) {
	if isKubelet(name) {
		return nil, fmt.Errorf("node %s: start a kubelet with StartKubelet (the user-namespace guard)", n.Name)
	}
	return n.start(label, n.nsenterArgs(), name, args...)
}

// StartHostRoot starts a long-lived program in the node's network,
// mount, UTS and IPC namespaces but not its user namespace: it keeps the
// host root's capabilities there. kube-proxy runs so: iptables-nft and
// nft send a ruleset as one netlink batch, and for 1k Services that
// batch exceeds the socket buffer a process of a user namespace may have
// ("sendmsg() failed: Message too long": raising it, SO_SNDBUFFORCE,
// needs CAP_NET_ADMIN in the initial user namespace, and net.core.wmem_max
// is global). As in the namespace engine's kube-proxy rows, it writes only
// its node's own network sysctls (conntrack sizes and timeouts are 0). A
// kubelet is refused here.
func (n *Node) StartHostRoot(label, name string, args ...string) (*topology.Process, error) {
	if isKubelet(name) {
		return nil, fmt.Errorf("node %s: a kubelet runs only inside the node's user namespace (StartKubelet)", n.Name)
	}
	return n.start(label, []string{"--target", strconv.Itoa(n.holder.Pid()), "--mount", "--net", "--uts", "--ipc", "--"}, name, args...)
}

// isKubelet tells a kubelet binary by its name.
func isKubelet(name string) bool {
	b := filepath.Base(name)
	return b == "kubelet" || strings.HasPrefix(b, "kubelet-")
}

func (n *Node) start(label string, nsenter []string, name string, args ...string) (*topology.Process, error) {
	log, err := os.OpenFile(filepath.Join(n.Dir, label+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command("nsenter", append(nsenter, append([]string{name}, args...)...)...)
	cmd.Stdout, cmd.Stderr = log, log
	p, err := topology.StartProcess(n.NS, n.RunID, label+" "+n.Name, cmd)
	if err != nil {
		return nil, err
	}
	n.procs = append(n.procs, p)
	return p, nil
}

// StartKubelet starts kubelet (binary with args) inside the node, after
// the guard: CheckKubeletUserNS of the holder, whose user namespace the
// kubelet joins. A node whose namespace maps uid 0 to host uid 0 never
// gets a kubelet. After the start, the kubelet's own uid_map is checked as
// well, and the kubelet is killed at once when it fails.
func (n *Node) StartKubelet(binary string, args ...string) (*topology.Process, error) {
	if n.holder == nil {
		return nil, fmt.Errorf("node %s: no holder: refusing to start a kubelet outside a user namespace", n.Name)
	}
	if err := CheckKubeletUserNS(n.holder.Pid()); err != nil {
		return nil, fmt.Errorf("node %s: refusing to start kubelet: %w", n.Name, err)
	}
	p, err := n.start("kubelet", n.nsenterArgs(), binary, args...)
	if err != nil {
		return nil, err
	}
	// nsenter forks the kubelet (--pid); check the child once it is there.
	for i := 0; i < 100; i++ {
		kids := children(p.Pid())
		if len(kids) > 0 {
			if err := CheckKubeletUserNS(kids[0]); err != nil {
				_ = p.Kill()
				return nil, fmt.Errorf("node %s: kubelet killed: %w", n.Name, err)
			}
			return p, nil
		}
		if done, _ := p.Exited(); done {
			return nil, fmt.Errorf("node %s: kubelet exited at once:\n%s", n.Name, tail(filepath.Join(n.Dir, "kubelet.log"), 20))
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = p.Kill()
	return nil, fmt.Errorf("node %s: kubelet did not appear under nsenter %d within 2 s", n.Name, p.Pid())
}

// children lists the child processes of pid (/proc/pid/task/*/children).
func children(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(b)) {
			if k, err := strconv.Atoi(f); err == nil {
				out = append(out, k)
			}
		}
	}
	return out
}

// Stop stops the node's programs (last started first: SIGTERM, SIGKILL
// after 5 s), then its holder, whose exit ends every process left in the
// node's PID namespace (and so its containers), deletes the attached
// namespace name and removes Dir. Safe on a partly started node.
func (n *Node) Stop() error {
	if n == nil {
		return nil
	}
	var errs []error
	for i := len(n.procs) - 1; i >= 0; i-- {
		errs = append(errs, n.procs[i].Stop(5*time.Second))
	}
	n.procs = nil
	if n.holder != nil {
		// PID 1 of the namespace: SIGKILL ends it and, with it, every
		// process of the namespace (the kernel's zap_pid_ns_processes).
		errs = append(errs, n.holder.Kill())
		n.holder = nil
	}
	if n.NS != nil {
		n.NS.Close()
		n.NS = nil
	}
	errs = append(errs, topology.DeleteNetns(topology.NetnsName(n.RunID, fmt.Sprintf("node%d", n.Index))))
	if n.Dir != "" {
		errs = append(errs, os.RemoveAll(n.Dir))
		n.Dir = ""
	}
	return errors.Join(errs...)
}

// chownTree gives dir and everything in it to uid (and the gid of the same
// number).
func chownTree(dir string, uid int) error {
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}

// waitFile waits until path exists, p exits, or timeout passes.
func waitFile(ctx context.Context, path string, p *topology.Process, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if done, err := p.Exited(); done {
			return fmt.Errorf("exited (%v)", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tail returns the last n lines of file path.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
