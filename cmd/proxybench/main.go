// Command proxybench measures Kubernetes Service proxy modes on real network
// namespaces: rule-sync time, lookup latency and scheduler fairness.
//
// Exit codes: 0 success, 1 a run failed or a gate failed (or compare
// --fail-on-regression found a regression), 2 bad
// input or an unusable machine (nothing was created).
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func badInput(err error) error { return &exitError{2, err} }

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "proxybench",
		Short: "Measure Kubernetes Service proxy modes (iptables, none, ...) on real network namespaces",
		Long: `proxybench builds a fake node, client pods and a backend host out of network
namespaces, installs each proxy mode's rules for N services, drives TCP
connections through the ClusterIPs and reports rule-sync time, lookup
latency per service position and fairness across endpoints.`,
		Example:       "  proxybench run scenarios/10k-services.yaml\n  proxybench run 1k-services --modes none,iptables --output results/1k.json",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newRunCmd(), newValidateCmd(), newCleanupCmd(), newDoctorCmd(), newVersionCmd(), newReportCmd(), newCompareCmd(),
		newSimCmd(), newCalibrateCmd(), newDumpCmd(), newGuestRunCmd(), newImageCmd(), newPauseCmd(), newAgentCmd(), newEchoCmd(), newRBACCmd(), newClusterCmd())
	return root
}

func main() {
	err := newRoot().Execute()
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, "proxybench:", err)
	var ee *exitError
	if errors.As(err, &ee) {
		os.Exit(ee.code)
	}
	// Cobra's own flag and argument errors are bad input too.
	os.Exit(2)
}
