package main

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/proxybench/proxybench/internal/runner"
)

func newDoctorCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Say which proxy modes this machine can run, and why not",
		Long: `doctor probes the kernel in a throwaway network namespace (removed
afterwards): it loads a miniature of each mode's rules and reports which
modes are available, with the reason when one is not.`,
		Example: "  proxybench doctor",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "MODE\tAVAILABLE\tWHY")
			for _, s := range runner.Doctor(cmd.Context()) {
				fmt.Fprintf(tw, "%s\t%v\t%s\n", s.Mode, s.Available, s.Reason)
			}
			return tw.Flush()
		},
	}
}
