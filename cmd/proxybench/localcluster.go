package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/proxybench/proxybench/cluster"
	"github.com/proxybench/proxybench/cluster/local"
	"github.com/proxybench/proxybench/internal/image"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/topology/controlplane"
)

// clusterState is what `cluster up`'s daemon writes to its state folder
// (state.json) once the cluster is Ready, or failed.
type clusterState struct {
	RunID      string  `json:"runID"`
	Pid        int     `json:"pid"`
	Nodes      int     `json:"nodes"`
	ReadyS     float64 `json:"readySeconds,omitempty"`
	Kubeconfig string  `json:"kubeconfig,omitempty"`
	Netns      string  `json:"netns,omitempty"`
	Error      string  `json:"error,omitempty"`
}

// clusterStateDir is the state folder of local cluster id: a scratch
// folder of its run (proxybench cleanup removes it with the run).
func clusterStateDir(id string) string {
	return filepath.Join(os.TempDir(), topology.Prefix+id+"-cluster")
}

// newClusterCmd is `cluster up` and `cluster down`: a local cluster of
// real components (cluster/local, docs/cluster.md).
func newClusterCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Start or stop a local Kubernetes cluster of real components (kubelets in user namespaces)",
	}
	var nodes int
	var runID, binDir, images, tag string
	var timeout time.Duration
	var foreground bool
	up := &cobra.Command{
		Use:   "up",
		Short: "Start a local cluster: control plane, controller manager, scheduler, and per node containerd and a kubelet",
		Long: `up starts etcd, kube-apiserver, kube-controller-manager and kube-scheduler in a
control-plane network namespace (nothing listens in the root namespace), and per
node containerd and a kubelet in a user namespace whose uid 0 is an unprivileged
host uid (100000+65536i), with its own network, mount and PID namespaces. The
agent and pause images (make image) are imported into each node's containerd.
It returns once every node is Ready, leaving a daemon (proxybench cluster up
--foreground) that holds the cluster until proxybench cluster down.`,
		Example: "  make kube kube-cluster build image\n  sudo bin/proxybench cluster up --nodes 3\n  sudo bin/proxybench cluster down",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if nodes < 1 || nodes > local.MaxNodes {
				return badInput(fmt.Errorf("--nodes %d: want 1 to %d (fix: e.g. --nodes 3)", nodes, local.MaxNodes))
			}
			if runID == "" {
				runID = topology.NewRunID()
			} else if topology.RunIDOf("pb-"+runID+"-x") != runID {
				return badInput(fmt.Errorf("--run %q: not a run ID (6 hex digits, e.g. 3fa9c1) (fix: omit it for a new one)", runID))
			}
			bin, err := clusterBinaries(binDir, images)
			if err != nil {
				return badInput(err)
			}
			if tag == "" {
				if tag, err = local.ImageTag(bin.Images); err != nil {
					return badInput(fmt.Errorf("--images %s: %w (fix: make image, or give --tag)", bin.Images, err))
				}
			}
			if foreground {
				return clusterForeground(cmd.Context(), runID, nodes, bin, tag, timeout)
			}
			return clusterSpawn(runID, nodes, binDir, images, tag, timeout)
		},
	}
	up.Flags().IntVar(&nodes, "nodes", 3, "nodes (1-128)")
	up.Flags().StringVar(&runID, "run", "", "the run ID every object and process carries (default a new one)")
	up.Flags().StringVar(&binDir, "bin", "", "the folder of etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kube-proxy (default this program's folder)")
	up.Flags().StringVar(&images, "images", "", "the image tarball (default proxybench-image.tar beside this program: make image)")
	up.Flags().StringVar(&tag, "tag", "", "the images' tag (default the pause image's tag in --images)")
	up.Flags().DurationVar(&timeout, "timeout", 3*time.Minute, "how long every node may take to be Ready")
	up.Flags().BoolVar(&foreground, "foreground", false, "run the cluster in this process until SIGTERM or SIGINT (what up leaves running)")
	_ = up.Flags().MarkHidden("foreground")

	var downRun string
	down := &cobra.Command{
		Use:   "down",
		Short: "Stop a local cluster and remove everything it created",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return clusterDown(downRun)
		},
	}
	down.Flags().StringVar(&downRun, "run", "", "the cluster's run ID (default the only one running)")
	cmd.AddCommand(up, down)
	return cmd
}

// clusterBinaries finds the cluster's programs in dir (default this
// executable's folder) and the image tarball.
func clusterBinaries(dir, images string) (local.Binaries, error) {
	self, err := os.Executable()
	if err != nil {
		return local.Binaries{}, err
	}
	if dir == "" {
		dir = filepath.Dir(self)
	}
	if images == "" {
		images = filepath.Join(filepath.Dir(self), filepath.Base(DefaultImageTar))
	}
	b := local.Binaries{Etcd: filepath.Join(dir, "etcd"), APIServer: filepath.Join(dir, "kube-apiserver"),
		ControllerManager: filepath.Join(dir, "kube-controller-manager"), Scheduler: filepath.Join(dir, "kube-scheduler"),
		Kubelet: filepath.Join(dir, "kubelet"), KubeProxy: filepath.Join(dir, "kube-proxy"), Proxybench: self, Images: images}
	var missing []string
	for _, f := range []string{b.Etcd, b.APIServer, b.ControllerManager, b.Scheduler, b.Kubelet, b.KubeProxy} {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return b, fmt.Errorf("--bin %s: missing %s (fix: make kube kube-cluster, or give --bin)", dir, strings.Join(missing, ", "))
	}
	if _, err := os.Stat(images); err != nil {
		return b, fmt.Errorf("--images %s: %v (fix: make image, or give --images)", images, err)
	}
	for _, tool := range []string{"containerd", "ctr", "runc", "nsenter", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			return b, fmt.Errorf("%s not found (fix: apt-get install containerd runc containernetworking-plugins iproute2, or make setup)", tool)
		}
	}
	return b, nil
}

// clusterSpawn starts `cluster up --foreground` in a session of its own
// (its output in the state folder's daemon.log) and waits until it
// writes state.json: Ready (printed, exit 0) or failed (exit 1).
func clusterSpawn(runID string, nodes int, binDir, images, tag string, timeout time.Duration) error {
	dir := clusterStateDir(runID)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return badInput(fmt.Errorf("--run %s: %w (fix: another cluster has this run ID; omit --run)", runID, err))
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(dir, "daemon.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	args := []string{"cluster", "up", "--foreground", "--nodes", strconv.Itoa(nodes), "--run", runID,
		"--tag", tag, "--timeout", timeout.String()}
	if binDir != "" {
		args = append(args, "--bin", binDir)
	}
	if images != "" {
		args = append(args, "--images", images)
	}
	d := exec.Command(self, args...)
	d.Stdout, d.Stderr, d.Dir = log, log, "/"
	d.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := d.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- d.Wait() }()
	fmt.Fprintf(os.Stderr, "cluster %s: starting %d nodes (daemon pid %d, log %s)\n", runID, nodes, d.Process.Pid, log.Name())
	deadline := time.Now().Add(timeout + time.Minute)
	for {
		if st, err := readClusterState(runID); err == nil {
			if st.Error != "" {
				<-exited
				return fmt.Errorf("cluster %s: %s", runID, st.Error)
			}
			fmt.Printf("cluster %s: %d nodes Ready in %.1f s\nkubeconfig: %s (the API server listens in network namespace %s only)\n",
				runID, st.Nodes, st.ReadyS, st.Kubeconfig, st.Netns)
			fmt.Printf("  proxybench run 1k-services --engine cluster --kubeconfig %s --image %s --image-pull-policy Never\n", st.Kubeconfig, image.Ref(image.Agent, tag))
			fmt.Printf("  ip netns exec %s kubectl --kubeconfig %s get nodes\n", st.Netns, st.Kubeconfig)
			fmt.Printf("  proxybench cluster down --run %s\n", runID)
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("cluster %s: the daemon exited (%v) before the cluster was Ready:\n%s", runID, err, tailFile(log.Name(), 20))
		case <-time.After(250 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = d.Process.Signal(syscall.SIGTERM)
			<-exited
			return fmt.Errorf("cluster %s: not Ready after %v:\n%s", runID, timeout+time.Minute, tailFile(log.Name(), 20))
		}
	}
}

// clusterForeground runs the cluster in this process: Up, then the
// kubeconfig and state.json, then Down on SIGTERM or SIGINT.
func clusterForeground(ctx context.Context, runID string, nodes int, bin local.Binaries, tag string, timeout time.Duration) error {
	dir := clusterStateDir(runID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	st := clusterState{RunID: runID, Pid: os.Getpid(), Nodes: nodes}
	c, err := local.Up(ctx, local.Spec{RunID: runID, Nodes: nodes, Bin: bin, SandboxImage: image.Ref(image.Pause, tag),
		Timeout: timeout, Log: os.Stderr})
	if err != nil {
		st.Error = err.Error()
		_ = writeClusterState(st)
		return err
	}
	st.ReadyS = c.Ready.Seconds()
	st.Kubeconfig = filepath.Join(dir, "kubeconfig")
	st.Netns = c.CP.NS.Name
	err = cluster.NetnsKubeconfig(st.Kubeconfig, fmt.Sprintf("https://127.0.0.1:%d", controlplane.SecurePort), c.CP.Token, c.CP.NS.Name)
	if err == nil {
		err = writeClusterState(st)
	}
	if err != nil {
		return errors.Join(err, c.Down())
	}
	fmt.Fprintf(os.Stderr, "cluster %s: Ready; waiting for SIGTERM (proxybench cluster down --run %s)\n", runID, runID)
	c.FollowKubeProxyConfig(ctx, time.Second, os.Stderr)
	<-ctx.Done()
	fmt.Fprintf(os.Stderr, "cluster %s: stopping\n", runID)
	err = c.Down()
	_ = os.Remove(filepath.Join(dir, "state.json"))
	_ = os.Remove(st.Kubeconfig)
	return err
}

func writeClusterState(st clusterState) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	p := filepath.Join(clusterStateDir(st.RunID), "state.json")
	if err := os.WriteFile(p+".tmp", b, 0o600); err != nil {
		return err
	}
	return os.Rename(p+".tmp", p)
}

func readClusterState(id string) (clusterState, error) {
	var st clusterState
	b, err := os.ReadFile(filepath.Join(clusterStateDir(id), "state.json"))
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

// clusterDown stops the daemon of cluster id (SIGTERM: it stops every
// node and the control plane; SIGKILL after 2 min), then removes whatever
// of the run is left (topology.Cleanup) and the state folder.
func clusterDown(id string) error {
	if id == "" {
		m, _ := filepath.Glob(filepath.Join(os.TempDir(), topology.Prefix+"*-cluster"))
		switch len(m) {
		case 0:
			return badInput(errors.New("no local cluster is running (fix: proxybench cluster up)"))
		case 1:
			id = strings.TrimSuffix(strings.TrimPrefix(filepath.Base(m[0]), topology.Prefix), "-cluster")
		default:
			return badInput(fmt.Errorf("%d local clusters run (%s) (fix: give --run ID)", len(m), strings.Join(m, ", ")))
		}
	} else if topology.RunIDOf("pb-"+id+"-x") != id {
		return badInput(fmt.Errorf("--run %q: not a run ID (6 hex digits, e.g. 3fa9c1) (fix: the ID cluster up printed)", id))
	}
	dir := clusterStateDir(id)
	if st, err := readClusterState(id); err == nil && st.Pid > 0 {
		if p, err := os.FindProcess(st.Pid); err == nil && p.Signal(syscall.SIGTERM) == nil {
			deadline := time.Now().Add(2 * time.Minute)
			for p.Signal(syscall.Signal(0)) == nil && time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond)
			}
			if p.Signal(syscall.Signal(0)) == nil {
				_ = p.Signal(syscall.SIGKILL)
				time.Sleep(time.Second)
			}
		}
	}
	done, skipped, err := topology.Cleanup(id)
	for _, d := range done {
		fmt.Fprintf(os.Stderr, "removed %s\n", d)
	}
	if len(skipped) > 0 {
		err = errors.Join(err, fmt.Errorf("cluster %s: still in use: %s", id, strings.Join(skipped, ", ")))
	}
	err = errors.Join(err, os.RemoveAll(dir))
	if err == nil {
		fmt.Printf("cluster %s: down\n", id)
	}
	return err
}

// tailFile returns the last n lines of path.
func tailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
