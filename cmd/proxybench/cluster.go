package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/proxybench/proxybench/cluster"
	"github.com/proxybench/proxybench/internal/image"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
)

// clusterFlags are run's and cleanup's flags of the cluster engine
// (cluster.Options).
type clusterFlags struct {
	kubeconfig, context, image, pull string
	qps                              float32
	burst                            int
	agentTimeout                     time.Duration
	nodes                            string
	pool                             int
	allowModeSwitch                  bool
	switchWait, programWait          time.Duration
}

func addClusterFlags(cmd *cobra.Command, f *clusterFlags, all bool) {
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "with --engine cluster: the kubeconfig (default $KUBECONFIG, then ~/.kube/config)")
	cmd.Flags().StringVar(&f.context, "context", "", "with --engine cluster: the kubeconfig context (default its current context)")
	cmd.Flags().Float32Var(&f.qps, "qps", cluster.DefaultQPS, "with --engine cluster: client-go's requests per second to the API server")
	cmd.Flags().IntVar(&f.burst, "burst", cluster.DefaultBurst, "with --engine cluster: client-go's burst above --qps")
	if !all {
		return
	}
	cmd.Flags().StringVar(&f.image, "image", "", "with --engine cluster: the agent image (default "+image.Ref(image.Agent, version)+", from make image)")
	cmd.Flags().StringVar(&f.pull, "image-pull-policy", "IfNotPresent", "with --engine cluster: the pods' imagePullPolicy")
	cmd.Flags().DurationVar(&f.agentTimeout, "agent-timeout", cluster.DefaultAgentTimeout, "with --engine cluster: how long to wait for the pool and an agent on every node to be Ready")
	cmd.Flags().StringVar(&f.nodes, "nodes", "", "with --engine cluster: pin agents to these nodes (comma-separated) instead of a DaemonSet on every node")
	cmd.Flags().IntVar(&f.pool, "pool", 0, "with --engine cluster: backend pods (default twice the endpoints per service)")
	cmd.Flags().BoolVar(&f.allowModeSwitch, "allow-mode-switch", false, "with --engine cluster: measure each kube-proxy mode of the scenario by switching the cluster's kube-proxy (ConfigMap kube-system/kube-proxy edited, DaemonSet rolled), restoring the original at the end, on SIGINT and on failure")
	cmd.Flags().DurationVar(&f.programWait, "program-wait", cluster.DefaultProgramWait, "with --engine cluster: how long to wait, before the lookups, for the first and last service to answer from every node (kube-proxy programming them)")
	cmd.Flags().DurationVar(&f.switchWait, "switch-wait", cluster.DefaultSwitchWait, "with --allow-mode-switch: how long to wait for every node's kube-proxy to report a new mode")
}

func (f *clusterFlags) options(runID string) cluster.Options {
	o := cluster.Options{Kubeconfig: f.kubeconfig, Context: f.context, QPS: f.qps, Burst: f.burst, Image: f.image,
		PullPolicy: f.pull, RunID: runID, PoolSize: f.pool, AgentTimeout: f.agentTimeout, Version: version, Log: os.Stderr,
		AllowModeSwitch: f.allowModeSwitch, SwitchWait: f.switchWait, ProgramWait: f.programWait}
	if o.Image == "" {
		o.Image = image.Ref(image.Agent, version)
	}
	if f.nodes != "" {
		o.Nodes = splitList(f.nodes)
	}
	return o
}

// runCluster is run --engine cluster: cluster.Execute, the result saved
// and summarised as the real engine's is; an unusable cluster exits 2.
func runCluster(cmd *cobra.Command, sc *scenarios.Scenario, cf *clusterFlags, out string, def bool, junit string, runID string) error {
	ctx, _, stop := runSignals(cmd.Context())
	defer stop()
	if runID == "" {
		runID = topology.NewRunID()
	}
	// cluster.Execute prints "cluster run <id>" once the kubeconfig, the
	// API server and the RBAC passed, before it creates anything.
	res, err := cluster.Execute(ctx, sc, cf.options(runID), nil)
	switch {
	case err == nil:
		return finish(res, sc, out, def, junit, "")
	case cluster.IsUnusable(err):
		return badInput(err)
	case len(res.Modes) == 0:
		return &exitError{1, err}
	}
	code := 1
	if ctx.Err() != nil {
		code = 130
	}
	return savePartial(res, out, def, code, err.Error())
}

// cleanupCluster is cleanup --engine cluster: cluster.Cleanup by label.
func cleanupCluster(cf *clusterFlags, runID string) error {
	o := cf.options(runID)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := cluster.Connect(ctx, o, nil)
	if err != nil {
		return badInput(err)
	}
	deleted, err := cluster.Cleanup(ctx, c.Client, runID, cluster.DefaultCleanupWait)
	for _, n := range deleted {
		fmt.Println("deleted namespace", n, "and the run's objects in it")
	}
	if err != nil {
		return &exitError{1, err}
	}
	if len(deleted) == 0 {
		fmt.Println("nothing to clean up on", c.Host)
	}
	return nil
}

// newRBACCmd is `rbac`: the least ClusterRole and kube-system Role of a
// cluster-engine run, bound to a user, group or service account.
func newRBACCmd() *cobra.Command {
	var user, group, sa string
	cmd := &cobra.Command{
		Use:   "rbac",
		Short: "Print the least ClusterRole and Role run --engine cluster needs (kubectl apply -f -)",
		Long: `rbac prints, as YAML, the ClusterRole (the run's namespace and its objects:
pods, the pods/proxy the agents' samples are read through, services,
endpointslices, deployments, daemonsets; reading nodes) and the kube-system
Role (reading the kube-proxy ConfigMap and DaemonSet) that run --engine
cluster checks for before it creates anything, each bound to the subject.`,
		Example: "  proxybench rbac --user alice | kubectl apply -f -\n  proxybench rbac --service-account ci/proxybench",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name := "", ""
			n := 0
			for _, c := range []struct{ k, v string }{{"User", user}, {"Group", group}, {"ServiceAccount", sa}} {
				if c.v != "" {
					kind, name = c.k, c.v
					n++
				}
			}
			if n != 1 {
				return badInput(errors.New("give exactly one of --user, --group, --service-account; fix: e.g. proxybench rbac --user alice"))
			}
			y, err := cluster.RBACManifest(kind, name)
			if err != nil {
				return badInput(err)
			}
			fmt.Print(y)
			return nil
		},
	}
	cmd.Flags().StringVar(&user, "user", "", "bind to this user")
	cmd.Flags().StringVar(&group, "group", "", "bind to this group")
	cmd.Flags().StringVar(&sa, "service-account", "", "bind to this service account (namespace/name)")
	return cmd
}

// clusterIgnored names the run flags the cluster engine does not take.
func clusterIgnored(cmd *cobra.Command) error {
	for _, fl := range []string{"kernel", "implementation", "kube-proxy", "count"} {
		if f := cmd.Flags().Lookup(fl); f != nil && f.Changed {
			return badInput(fmt.Errorf("--%s: not with --engine cluster (it measures the mode and kube-proxy the cluster runs, on its kernels); fix: drop --%s", fl, fl))
		}
	}
	return nil
}
