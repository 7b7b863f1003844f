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
	var noUML bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Say which proxy modes this machine can run, on the host and under user-mode-linux, and why not",
		Long: `doctor probes the kernel in a throwaway network namespace (removed
afterwards): it loads a miniature of each mode's rules and reports which
modes are available, with the reason when one is not. It then boots the
user-mode-linux guest (about 5 s) and probes the same modes there, which is
where --kernel uml runs them.`,
		Example: "  proxybench doctor\n  proxybench doctor --no-uml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			where := "host kernel " + runner.MachineInfo().Kernel
			if uml.InGuest() {
				where = "user-mode-linux guest kernel " + runner.MachineInfo().Kernel
			}
			st, err := runner.Doctor(cmd.Context())
			if err != nil {
				return badInput(err)
			}
			printStatus(os.Stdout, where, st)
			if uml.InGuest() || noUML {
				return nil
			}
			_, err = uml.Available()
			if err != nil {
				fmt.Printf("\nuser-mode-linux: not available: %v\n", err)
				return nil
			}
			exe, _ := os.Executable()
			dir, err := os.MkdirTemp("", "proxybench-doctor-")
			if err != nil {
				return &exitError{1, err}
			}
			defer os.RemoveAll(dir)
			sc := &scenarios.Scenario{Modes: modes.Names()}
			sc.SetDefaults()
			res, err := uml.Run(cmd.Context(), uml.Guest{MemoryMiB: 1024, Timeout: sc.UML.Timeout.Duration,
				Modules: append(runner.GuestModules(sc), schedulerModules()...), Argv: []string{exe, "doctor"}, WorkDir: filepath.Join(dir, "g")})
			fmt.Println()
			if err != nil {
				return &exitError{1, err}
			}
			os.Stdout.Write(guestOutput(res.Log))
			return nil
		},
	}
	cmd.Flags().BoolVar(&noUML, "no-uml", false, "probe the host kernel only")
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
