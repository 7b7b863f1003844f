package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/proxybench/proxybench/internal/image"
)

// DefaultImageTar is where make image writes the images.
const DefaultImageTar = "bin/proxybench-image.tar"

// newImageCmd is `image build` and `image push`: the agent and pause
// images of the cluster engine (internal/image, docs/cluster.md).
func newImageCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Build or push the cluster engine's agent and pause images (no Docker daemon)",
	}
	var binary, out, tag string
	build := &cobra.Command{
		Use:   "build",
		Short: "Write the agent and pause images (one static proxybench binary) as an OCI layout tarball",
		Long: `build puts a static proxybench binary (CGO_ENABLED=0) into two images,
` + image.Ref(image.Agent, "TAG") + ` (entrypoint proxybench agent) and
` + image.Ref(image.Pause, "TAG") + ` (entrypoint proxybench pause; a kubelet's sandbox
image), which share their one layer, and writes both as an OCI image layout
packed in a tar file: ctr -n k8s.io images import FILE reads it. make image
builds the binary and runs this.`,
		Example: "  CGO_ENABLED=0 go build -o bin/proxybench-static ./cmd/proxybench\n  bin/proxybench image build --binary bin/proxybench-static --output " + DefaultImageTar,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if binary == "" {
				self, err := os.Executable()
				if err != nil {
					return err
				}
				binary = self
			}
			b, err := image.Build(image.Spec{Binary: binary, Tag: tag})
			if err != nil {
				return badInput(fmt.Errorf("--binary %s: %w", binary, err))
			}
			if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
				return badInput(fmt.Errorf("--output %s: %w", out, err))
			}
			if err := image.WriteTar(b, out); err != nil {
				return err
			}
			ad, _ := b.Agent.Digest()
			pd, _ := b.Pause.Digest()
			fmt.Printf("%s\t%s\n%s\t%s\nwritten to %s\n", b.AgentRef, ad, b.PauseRef, pd, out)
			return nil
		},
	}
	build.Flags().StringVar(&binary, "binary", "", "the static proxybench binary to put in the images (default: this executable, which must be static)")
	build.Flags().StringVar(&out, "output", DefaultImageTar, "the tarball to write")
	build.Flags().StringVar(&tag, "tag", version, "the images' tag")

	var from, pause string
	push := &cobra.Command{
		Use:   "push REF",
		Short: "Push the agent image (and with --pause the pause image) from the tarball to a registry",
		Long: `push reads the tarball image build wrote and pushes its agent image to REF
(registry/repository:tag), with the credentials of ~/.docker/config.json
($DOCKER_CONFIG) when it has some for the registry; --pause REF2 pushes the
pause image too. The cluster engine then takes --image REF.`,
		Example: "  proxybench image push registry.example:5000/proxybench:v1 --pause registry.example:5000/pause:v1",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := os.MkdirTemp("", "proxybench-image-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			imgs, err := image.Read(from, dir)
			if err != nil {
				return badInput(fmt.Errorf("--image %s: %w; fix: run make image (or proxybench image build)", from, err))
			}
			agent, pauseImg, err := image.Roles(imgs)
			if err != nil {
				return badInput(fmt.Errorf("--image %s: %w", from, err))
			}
			if err := image.Push(args[0], agent); err != nil {
				return err
			}
			fmt.Printf("pushed %s\n", args[0])
			if pause != "" {
				if err := image.Push(pause, pauseImg); err != nil {
					return err
				}
				fmt.Printf("pushed %s\n", pause)
			}
			return nil
		},
	}
	push.Flags().StringVar(&from, "image", DefaultImageTar, "the tarball image build wrote")
	push.Flags().StringVar(&pause, "pause", "", "also push the pause image to this reference")
	cmd.AddCommand(build, push)
	return cmd
}

// newPauseCmd is the hidden `pause`: the pause image's entrypoint, a pod
// sandbox's first process. It waits for SIGTERM or SIGINT and exits 0,
// reaping any child that is re-parented to it meanwhile (it is PID 1 of
// the pod when the pod shares its PID namespace).
func newPauseCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "pause",
		Short:  "Wait for SIGTERM (the pause image's entrypoint)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			sig := make(chan os.Signal, 4)
			signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
			for s := range sig {
				if s != syscall.SIGCHLD {
					return nil
				}
				for {
					var ws syscall.WaitStatus
					if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
						break
					}
				}
			}
			return nil
		},
	}
}
