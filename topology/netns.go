//go:build linux

package topology

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/proxybench/proxybench/internal/lib/cpuacct"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Netns is one named network namespace of the testbed (/run/netns/<Name>).
// Its methods never switch the namespace of a long-lived goroutine: Do runs
// a function on a locked, throwaway OS thread.
type Netns struct {
	Name   string
	handle netns.NsHandle
	// cpu is the CPU time (ns) of the Do bodies run in the namespace:
	// the entered thread's own and that of the children reaped meanwhile.
	cpu *atomic.Int64
	// nodeIPs are a node namespace's primary addresses (NodeIPs), set by
	// the testbed as it builds the fabric (and its IPv6 twins).
	nodeIPs []netip.Addr
}

// NodeIPs returns a node namespace's primary addresses: its address on
// the fabric (Testbed.NodeAddrs: the Node object's InternalIP, the node IP
// kube-proxy rows are given), then with an IPv6 plan its IPv6 twin; nil
// for any other namespace (proxymodes.NodeIPer).
func (n *Netns) NodeIPs() []netip.Addr { return n.nodeIPs }

// CPU is the CPU time spent so far in the namespace by Do (and so Run):
// each body's thread time plus the CPU of the children reaped while it
// ran (the programs Run executes; a child another namespace's Do reaps at
// the same moment is counted there too). The difference across a sync is
// the CPU the proxy spent in the namespace's programs and netlink calls.
func (n *Netns) CPU() time.Duration {
	if n.cpu == nil {
		return 0
	}
	return time.Duration(n.cpu.Load())
}

// OpenNetns opens an existing named namespace (/run/netns/name).
func OpenNetns(name string) (*Netns, error) {
	h, err := netns.GetFromName(name)
	if err != nil {
		return nil, fmt.Errorf("open netns %q: %w", name, err)
	}
	return &Netns{Name: name, handle: h, cpu: new(atomic.Int64)}, nil
}

// Handle returns the namespace's file descriptor handle.
func (n *Netns) Handle() netns.NsHandle { return n.handle }

// Netlink returns a netlink handle bound to the namespace, for the route
// and netfilter (conntrack) families only, so it works on kernels without
// xfrm; the caller closes it. Equivalent to `ip -n <Name> ...`.
func (n *Netns) Netlink() (*netlink.Handle, error) {
	return netlink.NewHandleAt(n.handle, unix.NETLINK_ROUTE, unix.NETLINK_NETFILTER)
}

// startNS is this process's namespace at start (a handle kept for the
// process's life), where leave returns the main thread.
var startNS, _ = netns.Get()

// leave returns the calling thread to startNS if it is the process's main
// thread: the Go runtime ends a locked thread when its goroutine ends,
// except the main thread, which it parks forever instead; left inside a
// namespace, it would hold that namespace (and keep its run live for
// Cleanup) for the rest of the process. Other threads are left alone: they
// end with their goroutine.
func leave() {
	if unix.Gettid() == unix.Getpid() && startNS.IsOpen() {
		_ = netns.Set(startNS)
	}
}

// enter locks the calling goroutine to its OS thread and switches that
// thread into ns. The thread is never unlocked: it exits with the
// goroutine, so a namespace never leaks into other goroutines. This is the
// one place the testbed pins a thread to a namespace (Do; package nspool
// keeps such threads as workers).
func enter(ns *Netns) error {
	runtime.LockOSThread()
	if err := netns.Set(ns.handle); err != nil {
		return fmt.Errorf("enter netns %q: %w", ns.Name, err)
	}
	return nil
}

// Do runs fn on a locked OS thread switched into the namespace. The thread
// is discarded afterwards (never returned to the Go scheduler), so a failed
// switch back cannot leak the namespace into other goroutines. Sockets
// created inside fn stay in the namespace after fn returns.
func (n *Netns) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		// The thread exits with this goroutine (enter never unlocks it);
		// the main thread goes back first (leave).
		if err := enter(n); err != nil {
			leave()
			errc <- err
			return
		}
		t0, c0 := cpuacct.Thread(), cpuacct.Children()
		err := fn()
		if n.cpu != nil {
			n.cpu.Add(int64(cpuacct.Thread() - t0 + cpuacct.Children() - c0))
		}
		leave()
		errc <- err
	}()
	return <-errc
}

// Run executes a program inside the namespace with stdin, like
// `ip netns exec <Name> name args...` but without a new mount namespace.
// It returns stdout; on failure the error holds stderr. The child is
// waited for, so its CPU time counts in RUSAGE_CHILDREN. It carries the
// namespace's run ID in ChildEnv (so it never makes its run look live to
// LiveRuns: its owner, this process, does) and is killed if this process
// dies first (Pdeathsig), so a kill -9'd run leaves no program running in
// its namespaces, and Cleanup right after it finds the run dead.
func (n *Netns) Run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	var out, errb bytes.Buffer
	err := n.Do(func() error {
		cmd := exec.CommandContext(ctx, name, args...)
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
		cmd.Stdout, cmd.Stderr = &out, &errb
		// A testbed child of the namespace's run (ChildEnv): it dies with
		// this thread, which waits for it, so only when this process is
		// killed; and Cleanup kills it if it is still there.
		cmd.Env = append(os.Environ(), ChildEnv+"="+RunIDOf(n.Name))
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		return cmd.Run()
	})
	if err != nil {
		return out.Bytes(), fmt.Errorf("%s in netns %q: %w: %s", name, n.Name, err, bytes.TrimSpace(errb.Bytes()))
	}
	return out.Bytes(), nil
}

// Close releases the namespace handle (the namespace itself stays).
func (n *Netns) Close() error { return n.handle.Close() }

// netnsDir is where named namespaces are bind-mounted (iproute2's
// NETNS_RUN_DIR).
const netnsDir = "/run/netns"

// sharedNetnsDir makes netnsDir a shared mount point, as `ip netns add`
// does (iproute2 ip/ipnetns.c, netns_add): mark it MS_SHARED|MS_REC, and
// when that fails with EINVAL (not a mount point) bind-mount it on itself
// first. vishvananda/netns.NewNamed skips this, so a namespace it mounted
// on the plain folder was hidden once some later `ip netns` command put
// its self-bind mount on top: invisible in /run/netns, and impossible for
// `proxybench cleanup` to unmount (pb-e52b29-kube, left this way).
func sharedNetnsDir() error {
	if err := os.MkdirAll(netnsDir, 0o755); err != nil {
		return err
	}
	err := unix.Mount("", netnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if err == nil || !errors.Is(err, unix.EINVAL) {
		return err
	}
	if err := unix.Mount(netnsDir, netnsDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind-mount %s on itself: %w", netnsDir, err)
	}
	return unix.Mount("", netnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
}

// CreateNetns creates the named namespace /run/netns/name (equivalent to
// `ip netns add name`) without switching any long-lived thread into it,
// with lo up. On error nothing is left: a namespace made before a later
// step failed is deleted again (its callers returned on the error, and
// so left it: pb-<id>-probe of a doctor probe, a scratch sync's, a
// test's).
func CreateNetns(name string) (*Netns, error) {
	if err := sharedNetnsDir(); err != nil {
		return nil, fmt.Errorf("create netns %q: %w", name, err)
	}
	var h netns.NsHandle
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// NewNamed unshares this thread into the new namespace; the thread
		// is discarded when the goroutine ends (no UnlockOSThread); the
		// main thread goes back first (leave).
		var err error
		h, err = netns.NewNamed(name)
		if err != nil {
			err = fmt.Errorf("create netns %q: %w", name, err)
		}
		leave()
		errc <- err
	}()
	if err := <-errc; err != nil {
		return nil, err
	}
	n := &Netns{Name: name, handle: h, cpu: new(atomic.Int64)}
	if err := setUp(n); err != nil {
		_ = n.Close()
		return nil, errors.Join(err, DeleteNetns(name))
	}
	return n, nil
}

// setUp readies a new namespace: every one starts with lo down; bring it
// up. A variable so a test can make it fail (TestKernelCreateNetnsFails).
var setUp = func(n *Netns) error {
	nl, err := n.Netlink()
	if err != nil {
		return fmt.Errorf("netns %q: %w", n.Name, err)
	}
	defer nl.Close()
	lo, err := nl.LinkByName("lo")
	if err == nil {
		err = nl.LinkSetUp(lo)
	}
	if err != nil {
		return fmt.Errorf("netns %q: bring lo up: %w", n.Name, err)
	}
	return nil
}

// DeleteNetns removes the named namespace (equivalent to `ip netns del
// name`). The kernel frees it, and every link inside, once no process or
// open handle holds it. Deleting a missing namespace is not an error.
func DeleteNetns(name string) error {
	err := netns.DeleteNamed(name)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete netns %q: %w", name, err)
	}
	return nil
}

// NodeName is the API name (scenarios.NodeName, "node-1") of a node
// namespace pb-<runID>-node<i>, "" for any other namespace.
func (n *Netns) NodeName() string {
	i := strings.LastIndex(n.Name, "-node")
	if i < 0 {
		return ""
	}
	k, err := strconv.Atoi(n.Name[i+len("-node"):])
	if err != nil || k < 0 {
		return ""
	}
	return scenarios.NodeName(k)
}
