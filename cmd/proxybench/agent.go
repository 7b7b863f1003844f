package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/proxybench/proxybench/cluster/agent"
)

// newAgentCmd is `agent`: what the cluster engine's agent pods run
// (cluster/agent, docs/cluster.md). It serves the agent's HTTP API on
// --port in its own network namespace (the pod's) until SIGTERM; its
// node, pod and address come from the downward API's NODE_NAME,
// POD_NAME and POD_IP.
func newAgentCmd() *cobra.Command {
	port := agent.Port
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Serve the cluster engine's agent (lookup traffic and probes from this pod) over HTTP",
		Long: `agent is the entrypoint of the agent image: run in a pod by proxybench run
--engine cluster, it drives lookup traffic and probes against the services
it is sent, from the pod's own network namespace, with no privileges, and
serves the raw samples on --port, which the operator reads through the API
server (pods/proxy). It runs until SIGTERM or SIGINT.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			l, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
			if err != nil {
				return badInput(fmt.Errorf("--port %d: %w", port, err))
			}
			s := agent.New(ctx, agent.Health{Node: os.Getenv("NODE_NAME"), Pod: os.Getenv("POD_NAME"), PodIP: os.Getenv("POD_IP"), Version: version}, nil)
			fmt.Fprintf(os.Stderr, "agent %s on node %s serving on %s\n", os.Getenv("POD_NAME"), os.Getenv("NODE_NAME"), l.Addr())
			err = s.Serve(ctx, l)
			s.Wait()
			return err
		},
	}
	cmd.Flags().IntVar(&port, "port", port, "the HTTP port to serve on")
	return cmd
}

// newEchoCmd is `echo`: what the cluster engine's backend pool pods run,
// the namespace engine's echo server (agent.Echo) in the
// pod's own network namespace: it answers every TCP connection on each
// of --ports with the address it was reached on, so the agents see which
// endpoint a connection landed on.
func newEchoCmd() *cobra.Command {
	var ports string
	cmd := &cobra.Command{
		Use:   "echo",
		Short: "Answer TCP connections with the address they reached (the cluster engine's backend pods)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ps, err := parsePorts(ports)
			if err != nil {
				return badInput(err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			fmt.Fprintf(os.Stderr, "echo on ports %s\n", ports)
			return agent.Echo(ctx, ps)
		},
	}
	cmd.Flags().StringVar(&ports, "ports", "80", "comma-separated TCP ports to answer on")
	return cmd
}

// parsePorts parses a comma-separated list of TCP ports (1-65535).
func parsePorts(s string) ([]uint16, error) {
	var out []uint16
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 16)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("--ports %q: %q is not a port (1-65535); fix: --ports 80,8080", s, f)
		}
		out = append(out, uint16(n))
	}
	return out, nil
}
