//go:build linux

package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/proxybench/proxybench/internal/uml"
)

// GuestCommand is one run of this same binary inside a user-mode-linux
// guest (see RunCommandInUML).
type GuestCommand struct {
	// RunID names the guest's host work folder (uml.WorkDirPattern), so
	// `proxybench cleanup --run <id>` removes a guest whose proxybench was
	// killed.
	RunID string
	// Kernel is the guest kernel (nil: uml.Default).
	Kernel *uml.Kernel
	// Args are this binary's arguments, e.g. {"dump", "/abs/scenario.yaml",
	// "--mode", "ipvs", "--implementation", "kube-proxy", "--kernel",
	// "host"}. Paths must be absolute host paths (the guest's root is the
	// host's filesystem, read-only); GuestMount is writable.
	Args []string
	// Modules are loaded first in a modular kernel (GuestModules(sc) for a
	// scenario's modes).
	Modules []string
	// MemoryMiB (default 3072: etcd, kube-apiserver and kube-proxy fit)
	// and Timeout (default 15 min) size the guest.
	MemoryMiB int
	Timeout   time.Duration
	// Console receives the guest's console (its stderr included) as it
	// comes; nil drops it.
	Console io.Writer
}

// GuestOutput is what a GuestCommand left.
type GuestOutput struct {
	// Stdout is the command's standard output, exactly (kept apart from
	// the console, which carries kernel messages).
	Stdout []byte
	// ExitCode is the command's exit code in the guest.
	ExitCode int
	// Guest is the guest run: boot time, release, console log.
	Guest *uml.Result
}

// RunCommandInUML boots a guest and runs this binary with c.Args inside
// it, its stdout going to a file in the guest's work folder that is read
// back: for a subcommand that needs a kernel feature the host lacks (IP_VS
// here), e.g. `proxybench dump --mode ipvs --implementation kube-proxy`
// re-running itself with --kernel host --guest in the guest (the
// command is told by its arguments that it runs there). Inside the guest
// bin/ (kube-proxy, kube-apiserver, etcd) is where it is on the host. A non-zero exit code is not an error (read
// ExitCode); a guest that cannot boot, crashes or times out is.
func RunCommandInUML(ctx context.Context, c GuestCommand) (*GuestOutput, error) {
	if c.MemoryMiB <= 0 {
		c.MemoryMiB = 3072
	}
	if c.Timeout <= 0 {
		c.Timeout = 15 * time.Minute
	}
	if c.RunID == "" {
		return nil, fmt.Errorf("runner: RunCommandInUML needs a run ID")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	wd, err := uml.NewWorkDir(c.RunID)
	if err != nil {
		return nil, err
	}
	defer wd.Remove()
	dir := wd.Path
	// The init script runs Argv with stderr joined to stdout (the
	// console): a shell wrapper sends only stdout to the file.
	wrapper := filepath.Join(dir, "cmd.sh")
	script := "#!/bin/sh\nexec " + shellWords(append([]string{exe}, c.Args...)) + " > " + filepath.Join(uml.GuestMount, "stdout") + "\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		return nil, err
	}
	res, err := uml.Run(ctx, uml.Guest{Kernel: c.Kernel, MemoryMiB: c.MemoryMiB, Timeout: c.Timeout, Modules: c.Modules,
		Argv: []string{"/bin/sh", filepath.Join(uml.GuestMount, "cmd.sh")}, WorkDir: dir, Console: c.Console})
	out := &GuestOutput{Guest: res}
	if res != nil {
		out.ExitCode = res.ExitCode
	}
	if b, rerr := os.ReadFile(filepath.Join(dir, "stdout")); rerr == nil {
		out.Stdout = b
	}
	return out, err
}

// shellWords quotes each word for sh.
func shellWords(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
