package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/proxybench/proxybench/internal/runner"
)

// newGuestRunCmd is the hidden `guest-run PLAN.json`: the entry a
// user-mode-linux guest boots on (runner.RunInUML writes the plan). It
// runs the plan with the runner's own entry (runner.RunGuest), which
// writes the result where the plan says; it prints the guest run's
// progress as plain lines (the console is streamed to the host's
// stderr) and no report: the host writes the result and the summary.
// Exit 0 (the result is whole), 2 (bad input, nothing created), 130
// (interrupted) or 1.
func newGuestRunCmd() *cobra.Command {
	return &cobra.Command{
		Use:    runner.GuestRunCommand + " PLAN.json",
		Short:  "Run a guest plan inside a user-mode-linux guest (used by run --kernel uml)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := runner.ReadGuestPlan(args[0])
			if err != nil {
				return badInput(err)
			}
			ctx, stderr, stop := runSignals(cmd.Context())
			defer stop()
			_, err = runner.RunGuest(ctx, p, &progress{w: stderr})
			switch {
			case err == nil:
				return nil
			case runner.IsInput(err):
				return badInput(err)
			case ctx.Err() != nil:
				return &exitError{130, fmt.Errorf("%v: %w", context.Cause(ctx), err)}
			}
			return &exitError{1, err}
		},
	}
}
