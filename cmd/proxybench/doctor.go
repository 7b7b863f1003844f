package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/proxybench/proxybench/internal/runner"
	"github.com/proxybench/proxybench/internal/uml"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/scenarios"
)

func newDoctorCmd() *cobra.Command {
	// inGuest: this doctor runs inside a guest the host's doctor booted
	// (hidden --guest, which that doctor passes).
	var noUML, inGuest bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Say which proxy modes each kernel here can run (the host, every user-mode-linux kernel), and why not",
		Long: `doctor probes the kernel in a throwaway network namespace (removed
afterwards): it loads a miniature of each mode's rules and reports which
modes are available, with the reason when one is not. It then lists every
user-mode-linux kernel it finds (built by make kernels under
$PROXYBENCH_CACHE/kernels, and Debian's user-mode-linux package), with what
each one's configuration supports, and boots each (about 2 s for a kernel
make kernels built, 20 s for Debian's, which loads modules) to probe the
same modes there, which is where --kernel uml:<version> runs them. It says
which folder kube-proxy rows take kube-proxy, kube-apiserver and etcd from
($PROXYBENCH_KUBE_BIN, else beside proxybench, else ./bin; see run --help),
and whether lookup.kernel (BPF) can be measured on each kernel, or why not.`,
		Example: "  proxybench doctor\n  proxybench doctor --no-uml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			where := "host kernel " + runner.MachineInfo().Kernel
			if inGuest {
				where = "user-mode-linux guest kernel " + runner.MachineInfo().Kernel
			}
			st, err := runner.Doctor(cmd.Context())
			if err != nil {
				return badInput(err)
			}
			printStatus(os.Stdout, where, st)
			// Where kube-proxy rows would take their binaries from.
			if dir, err := runner.FindKubeBin("kube-proxy", "kube-apiserver", "etcd"); err != nil {
				fmt.Printf("\nkube-proxy rows: kube-proxy, kube-apiserver and etcd not found: %v (make kube builds them into bin/)\n", err)
			} else {
				fmt.Printf("\nkube-proxy rows: kube-proxy, kube-apiserver and etcd from %s\n", dir)
			}
			fmt.Printf("lookup.kernel (the node kernel's time per SYN, by BPF): %s\n", runner.DoctorKernelTime())
			if inGuest {
				return nil
			}
			kernels := runner.DoctorKernels()
			if len(kernels) == 0 {
				_, err := uml.Default()
				fmt.Printf("\nuser-mode-linux: no kernel found: %v; make kernels builds uml:6.12 and uml:6.1\n", err)
				return nil
			}
			def, _ := uml.Default()
			exe, _ := os.Executable()
			for _, ks := range kernels {
				k := ks.Kernel
				tag := ""
				if def != nil && def.Path == k.Path {
					tag = ", default for --kernel uml"
				}
				fmt.Printf("\nuser-mode-linux kernel %s (%s%s): %s\n  %s\n", k.Name, k.Release, tag, k.Source, k.Path)
				if k.BuildSeconds > 0 {
					fmt.Printf("  built in %d s\n", k.BuildSeconds)
				}
				if ks.Unusable != "" {
					fmt.Printf("  cannot be used: %s\n", ks.Unusable)
				}
				printStatus(os.Stdout, "  from its configuration (--showconfig)", ks.Modes)
				if noUML || ks.Unusable != "" {
					continue
				}
				// Boot it and probe for real, as a run would.
				dir, err := os.MkdirTemp("", "proxybench-doctor-")
				if err != nil {
					return &exitError{1, err}
				}
				sc := &scenarios.Scenario{Modes: modes.Names()}
				sc.SetDefaults()
				res, err := uml.Run(cmd.Context(), uml.Guest{Kernel: k, MemoryMiB: 1024, Timeout: sc.UML.Timeout.Duration,
					Modules: append(runner.GuestModules(sc), schedulerModules()...), Argv: []string{exe, "doctor", "--no-uml", "--guest"}, WorkDir: filepath.Join(dir, "g")})
				os.RemoveAll(dir)
				if err != nil {
					fmt.Printf("  boot failed: %v\n", err)
					continue
				}
				fmt.Printf("  booted: init after %.2f s, program after %.2f s, halted after %.2f s\n", res.Init.Seconds(), res.Boot.Seconds(), res.Elapsed.Seconds())
				for _, l := range strings.Split(strings.TrimRight(string(guestOutput(res.Log)), "\n"), "\n") {
					fmt.Println("  " + l)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&noUML, "no-uml", false, "do not boot the user-mode-linux kernels (list them with what their configuration supports)")
	cmd.Flags().BoolVar(&inGuest, "guest", false, "this doctor runs inside a user-mode-linux guest the host's doctor booted")
	_ = cmd.Flags().MarkHidden("guest")
	return cmd
}

func printStatus(w io.Writer, where string, st []runner.ModeStatus) {
	fmt.Fprintf(w, "%s:\n", where)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  MODE\tAVAILABLE\tWHY")
	for _, s := range st {
		fmt.Fprintf(tw, "  %s\t%v\t%s\n", s.Mode, s.Available, s.Reason)
	}
	tw.Flush()
}

// guestOutput keeps the program's part of a guest console log: the lines
// after the guest's "uml: modules loaded" line, without the halt messages.
func guestOutput(log []byte) []byte {
	var b strings.Builder
	started := false
	for _, l := range strings.Split(string(log), "\n") {
		switch {
		case !started:
			started = strings.HasPrefix(l, "uml: modules loaded")
		case strings.Contains(l, "Halting.") || strings.Contains(l, "System halted") || strings.Contains(l, "wtmp record"):
		default:
			b.WriteString(l + "\n")
		}
	}
	return []byte(b.String())
}

// schedulerModules are the kernel modules of every IPVS scheduler, so the
// guest's doctor can list each as available.
func schedulerModules() []string {
	var out []string
	for _, s := range scenarios.IPVSSchedulers {
		out = append(out, "ip_vs_"+s)
	}
	return out
}
