//go:build linux

// Package uml runs a program inside a user-mode-linux guest: a Linux kernel
// as a process, booted with the host's filesystem as its read-only root
// (rootfstype=hostfs) and a writable host folder mounted at /mnt/pb. The
// kernel is one that make kernels built from Debian's linux-source-6.12 or
// -6.1 with everything every mode needs built in (see Kernels, Find and
// kconfig/proxybench.config), or Debian's user-mode-linux package (kernel
// 6.1, IP_VS and netfilter as modules loaded from the guest's own module
// tree, no nf_tables ip family).
// The guest is a child process group of ours: on timeout, error or
// cancellation it is killed and nothing of it remains; it gets SIGKILL
// when its proxybench dies (PR_SET_PDEATHSIG), and CleanupOrphans finds
// what a killed run left (its work folder, held while the run lives; a
// guest that outlived it).
package uml

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DebianBinary is Debian's user-mode-linux kernel binary.
const DebianBinary = "linux.uml"

// ModulesRoot holds the guest kernel's modules (/usr/lib/uml/modules/<release>).
const ModulesRoot = "/usr/lib/uml/modules"

// InGuestEnv is set to 1 in the environment of the program run in a guest.
const InGuestEnv = "PROXYBENCH_IN_UML"

// GuestMount is where the guest sees Guest.WorkDir (read-write).
const GuestMount = "/mnt/pb"

// BaseModules are what every mode's testbed needs in the guest: veth,
// conntrack and NAT (without nf_nat/xt_nat, iptables-restore of DNAT rules
// crawls for minutes in the guest), iptables and nftables with the matches
// and targets kube-proxy uses, ipset, and the REJECT/REDIRECT targets.
var BaseModules = []string{
	"veth", "dummy", "nf_conntrack", "nf_defrag_ipv4", "nf_nat", "nf_conntrack_netlink",
	"x_tables", "ip_tables", "iptable_nat", "iptable_filter", "iptable_mangle", "xt_nat", "xt_comment",
	"xt_statistic", "xt_mark", "xt_addrtype", "xt_MASQUERADE", "xt_conntrack", "xt_tcpudp",
	"nf_reject_ipv4", "ipt_REJECT", "xt_REDIRECT", "xt_recent", "xt_set", "xt_multiport",
	"ip_set", "ip_set_hash_ip", "ip_set_hash_ipport", "ip_set_hash_ipportip", "ip_set_hash_ipportnet", "ip_set_hash_net", "ip_set_bitmap_port",
	"nf_tables", "nft_compat", "nft_numgen", "nft_ct", "nft_masq", "nft_reject", "nft_redir",
}

// Guest describes one guest run.
type Guest struct {
	// Kernel is the kernel to boot; nil is Default() (the source-built 6.12
	// when make kernels built it, else Debian's).
	Kernel *Kernel
	// MemoryMiB is the guest's memory (mem=<n>M).
	MemoryMiB int
	// Timeout bounds the whole run, boot included; past it the guest is
	// killed and Run returns an error saying so.
	Timeout time.Duration
	// Modules are loaded with modprobe before Argv runs when the kernel is
	// Modular; a module that is built in or missing is reported in the
	// log, not fatal. A kernel with everything built in loads nothing.
	Modules []string
	// Argv is the program and its arguments, as absolute host paths (the
	// guest's root is the host's filesystem, read-only).
	Argv []string
	// Env is added to the program's environment (InGuestEnv=1 always is).
	Env []string
	// WorkDir is a host folder the guest mounts read-write at GuestMount;
	// the program writes its results there. Run creates it.
	WorkDir string
	// Console, when set, receives the guest's console output as it comes
	// (boot messages, module loading, the program's stdout and stderr).
	Console io.Writer
}

// Result is what a guest run left.
type Result struct {
	// ExitCode is the program's exit code inside the guest.
	ExitCode int
	// Log is the guest's whole console output.
	Log []byte
	// Init is the time from starting the kernel to its init script's start.
	Init time.Duration
	// Boot is the time from starting the kernel to the program's start
	// (Init plus mounts and, in a modular kernel, module loading).
	Boot time.Duration
	// Elapsed is the wall time of the whole guest run.
	Elapsed time.Duration
	// Release is the guest kernel's uname -r.
	Release string
	// Kernel is the kernel that ran.
	Kernel *Kernel
}

// Release returns the default guest kernel's release (see Default), or
// an error naming the fix when there is no user-mode-linux kernel.
func Release() (string, error) {
	k, err := Default()
	if err != nil {
		return "", err
	}
	return k.Release, nil
}

// Available returns the default guest kernel's release when a guest can
// boot here, or an error naming what is missing and the fix.
func Available() (string, error) {
	k, err := Default()
	if err != nil {
		return "", err
	}
	return k.Release, Usable(k)
}

// Usable reports whether k can boot here: the tools its init script needs
// are installed.
func Usable(k *Kernel) error {
	tools := []string{"halt", "mount"}
	if k.Modular {
		tools = append(tools, "modprobe")
	}
	for _, b := range tools {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("%s is not installed (needed inside the user-mode-linux guest); fix: run make setup", b)
		}
	}
	return nil
}

// KernelNameEnv carries the guest kernel's Name (Kernel.Name) into the
// program run in a guest.
const KernelNameEnv = "PROXYBENCH_UML_KERNEL"

// GuestKernelName is the Name of the kernel this process's guest booted
// ("" outside a guest).
func GuestKernelName() string { return os.Getenv(KernelNameEnv) }

// InGuest reports whether this process runs inside a guest started by Run.
func InGuest() bool { return os.Getenv(InGuestEnv) == "1" }

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// initScript is the guest's PID 1: mounts, module tree, modules, lo up,
// the writable work folder, the program, its exit code, halt.
func initScript(g Guest, k *Kernel) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	b.WriteString("export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/go/bin\n")
	b.WriteString("mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t tmpfs tmpfs /run; mount -t tmpfs tmpfs /mnt\n")
	b.WriteString("mkdir -p /run/netns /run/tmp /run/mods/lib/modules " + GuestMount + "\n")
	fmt.Fprintf(&b, "mount -t hostfs none %s -o %s || { echo 'uml: cannot mount %s'; halt -f; }\n", GuestMount, g.WorkDir, g.WorkDir)
	b.WriteString(": > " + GuestMount + "/.init\n")
	b.WriteString("echo \"uml: kernel $(uname -r) up\"\n")
	b.WriteString("t0=$(date +%s%N)\n")
	if k.Modular {
		fmt.Fprintf(&b, "ln -s %s /run/mods/lib/modules/%s\n", filepath.Join(ModulesRoot, k.Release), k.Release)
		for _, m := range g.Modules {
			fmt.Fprintf(&b, "modprobe -d /run/mods %s 2>/dev/null || echo 'uml: module %s not loaded'\n", m, m)
		}
	}
	b.WriteString("echo \"uml: modules loaded in $(( ($(date +%s%N) - t0) / 1000000 )) ms\"\n")
	b.WriteString("ip link set lo up\n")
	// A hostname of the guest's own (the kernel's default is "(none)",
	// which kube-apiserver's identity lease rejects as a label value).
	b.WriteString("echo pb-guest > /proc/sys/kernel/hostname\n")
	b.WriteString("ulimit -n 1048576 2>/dev/null || ulimit -n 65536\n")
	b.WriteString("export TMPDIR=/run/tmp HOME=/run/tmp " + InGuestEnv + "=1 " + KernelNameEnv + "=" + shellQuote(k.Name) + "\n")
	if k.Modular {
		b.WriteString("export MODPROBE_OPTIONS='-d /run/mods'\n")
	}
	for _, e := range g.Env {
		b.WriteString("export " + shellQuote(e) + "\n")
	}
	b.WriteString("cd " + GuestMount + "\n")
	b.WriteString("echo uml: start > " + GuestMount + "/.started\n")
	var argv []string
	for _, a := range g.Argv {
		argv = append(argv, shellQuote(a))
	}
	b.WriteString(strings.Join(argv, " ") + " 2>&1\n")
	b.WriteString("echo $? > " + GuestMount + "/.exitcode\n")
	b.WriteString("sync\nhalt -f\n")
	return b.String()
}

// Run boots a guest, runs g.Argv in it and returns when the guest halts.
// It fails when the guest cannot boot, when the program never started or
// left no exit code (the guest crashed), or on timeout; in every case the
// guest's process group is killed first. A non-zero exit code of the
// program is not an error: read Result.ExitCode.
func Run(ctx context.Context, g Guest) (*Result, error) {
	k := g.Kernel
	if k == nil {
		var err error
		if k, err = Default(); err != nil {
			return nil, err
		}
	}
	if err := Usable(k); err != nil {
		return nil, err
	}
	release := k.Release
	if g.MemoryMiB <= 0 {
		g.MemoryMiB = 2048
	}
	if g.Timeout <= 0 {
		g.Timeout = 30 * time.Minute
	}
	if err := os.MkdirAll(g.WorkDir, 0o755); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(g.WorkDir)
	if err != nil {
		return nil, err
	}
	g.WorkDir = abs
	for _, f := range []string{".exitcode", ".started", ".init"} {
		_ = os.Remove(filepath.Join(g.WorkDir, f))
	}
	script := filepath.Join(g.WorkDir, ".init.sh")
	if err := os.WriteFile(script, []byte(initScript(g, k)), 0o755); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, g.Timeout)
	defer cancel()
	cmd := exec.Command(k.Path, kernelArgs(g, script)...)
	var log lockedBuffer
	var out io.Writer = &log
	if g.Console != nil {
		out = io.MultiWriter(&log, g.Console)
	}
	cmd.Stdin = nil // /dev/null: the guest's console input
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	done, err := startLocked(cmd)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", k.Path, err)
	}
	var waitErr error
	select {
	case waitErr = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		res := &Result{Log: log.Bytes(), Elapsed: time.Since(start), Release: release, Kernel: k}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return res, fmt.Errorf("user-mode-linux guest did not finish within %s and was killed (raise uml.timeout, or run fewer services); last console lines:\n%s", g.Timeout, tail(res.Log, 10))
		}
		return res, fmt.Errorf("user-mode-linux guest cancelled: %w", ctx.Err())
	}
	// UML helper processes share the group; make sure none outlives the kernel.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	res := &Result{Log: log.Bytes(), Elapsed: time.Since(start), Release: release, Kernel: k}
	if st, err := os.Stat(filepath.Join(g.WorkDir, ".init")); err == nil {
		res.Init = st.ModTime().Sub(start)
	}
	if st, err := os.Stat(filepath.Join(g.WorkDir, ".started")); err == nil {
		res.Boot = st.ModTime().Sub(start)
	} else {
		return res, fmt.Errorf("user-mode-linux guest did not start the program (exit: %v); console:\n%s", waitErr, tail(res.Log, 20))
	}
	b, err := os.ReadFile(filepath.Join(g.WorkDir, ".exitcode"))
	if err != nil {
		return res, fmt.Errorf("user-mode-linux guest stopped before the program finished (crash or out of memory; uml.memoryMiB is %d); last console lines:\n%s", g.MemoryMiB, tail(res.Log, 20))
	}
	res.ExitCode, err = strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return res, fmt.Errorf("user-mode-linux guest wrote a bad exit code %q", b)
	}
	return res, nil
}

// kernelArgs is the guest kernel's command line: memory, the host's root
// through hostfs (read-only), init, the console on fds 0 and 1, and the
// machine's identity: umid (the work folder's name, so ps shows the run
// ID) and uml_dir=WorkDir, so the umid folder (pid file, mconsole socket;
// arch/um/os-Linux/umid.c), which a killed kernel cannot remove, lives
// and goes with the work folder and not in ~/.uml. When the socket's path
// would not fit a sockaddr_un (108 bytes), ~/.uml is kept.
func kernelArgs(g Guest, script string) []string {
	args := []string{"mem=" + strconv.Itoa(g.MemoryMiB) + "M", "rootfstype=hostfs", "rootflags=/", "ro",
		"init=" + script, "con=null", "con0=fd:0,fd:1", "quiet"}
	umid := filepath.Base(g.WorkDir)
	if len(umid) > 63 { // UMID_LEN 64, with its NUL
		umid = umid[len(umid)-63:]
	}
	if len(filepath.Join(g.WorkDir, umid, "mconsole")) < 108 {
		args = append(args, "umid="+umid, "uml_dir="+g.WorkDir)
	}
	return args
}

// startLocked starts cmd from an OS thread of its own and returns the
// channel its Wait result comes on. PR_SET_PDEATHSIG fires when the
// forking thread ends, not the process (prctl(2)); the Go runtime ends a
// thread when a goroutine exits locked to it (topology.StartProcess does
// so on purpose), so a guest forked from a shared thread could be killed
// mid-run. The thread here stays locked, waiting, until the guest exits.
func startLocked(cmd *exec.Cmd) (<-chan error, error) {
	started := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the thread ends with this goroutine.
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		done <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return done, nil
}

func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.b.Bytes()...)
}
