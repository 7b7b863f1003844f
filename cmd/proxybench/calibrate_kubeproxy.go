package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/sim"
)

// calibrateKubeProxy is `calibrate --implementation kube-proxy`: real
// kube-proxy rows (--modes, default iptables,nftables) at each of sizes
// on one node with churn (its own sync metrics), and one run at the
// smallest size on --nodes nodes (the watch delivery, and the contention
// of kube-proxies sharing this machine: sim.SharedStretch); or the results of
// --from. The fit (sim.FitKubeProxy) is stored under
// implementations["kube-proxy"] of --output: an existing file keeps its
// builtin costs; a new one starts from the shipped default's, and says
// so.
func calibrateKubeProxy(cmd *cobra.Command, f *calibrateFlags, sizes []int) error {
	if !cmd.Flags().Changed("modes") {
		f.modes = "iptables,nftables"
	}
	var modes []string
	for _, m := range strings.Split(f.modes, ",") {
		if m == scenarios.BaselineMode {
			continue
		}
		if !contains(scenarios.KubeProxyModes, m) {
			return badInput(fmt.Errorf("--modes: kube-proxy has no mode %q (it has %s); fix: --modes iptables,nftables", m, strings.Join(scenarios.KubeProxyModes, ",")))
		}
		modes = append(modes, m)
	}
	if f.nodes < 2 || f.nodes > 64 {
		return badInput(fmt.Errorf("--nodes %d: the watch delivery needs 2..64 nodes; fix: --nodes 3", f.nodes))
	}
	base, err := calibrationBase(f.output)
	if err != nil {
		return badInput(err)
	}
	var results []*reports.Result
	var sources []sim.KubeProxySource
	if f.from != "" {
		for _, p := range strings.Split(f.from, ",") {
			r, err := reports.Read(p)
			if err != nil {
				return badInput(fmt.Errorf("--from: %w", err))
			}
			results = append(results, r)
			sources = append(sources, sim.KubeProxySource{Path: p})
		}
	} else {
		if os.Geteuid() != 0 {
			return badInput(fmt.Errorf("calibrate needs root: it runs real scenarios (network namespaces); fix: run it as root, or fit saved results with --from"))
		}
		dir, removeDir, err := calibrationDir(f.keep)
		if err != nil {
			return &exitError{1, err}
		}
		defer removeDir()
		runs := make([][2]int, 0, len(sizes)+1) // services, nodes
		for _, n := range sizes {
			runs = append(runs, [2]int{n, 1})
		}
		runs = append(runs, [2]int{sizes[0], f.nodes})
		for _, rn := range runs {
			load0 := loadAverage()
			key := rn[0]
			if rn[1] > 1 {
				key = rn[0]*1000 + rn[1]
			}
			r, err := realRun(cmd.Context(), dir, kubeProxyCalibrationScenario(rn[0], rn[1], modes, f), key, "")
			if err != nil {
				return &exitError{1, fmt.Errorf("calibrate kube-proxy at %d services on %d node(s): %w", rn[0], rn[1], err)}
			}
			results = append(results, r)
			sources = append(sources, sim.KubeProxySource{Path: fmt.Sprintf("calibrate-kube-proxy-%d-%dn", rn[0], rn[1]), Load: load0 + " → " + loadAverage()})
		}
	}
	ic, err := sim.FitKubeProxy(results, sources)
	if err != nil {
		return &exitError{1, err}
	}
	if base.Implementations == nil {
		base.Implementations = map[string]*sim.ImplementationCost{}
	}
	base.Implementations[scenarios.ImplKubeProxy] = ic
	base.Source, base.Default = f.output, false
	if err := base.Write(f.output); err != nil {
		return &exitError{1, fmt.Errorf("write calibration: %w", err)}
	}
	fmt.Printf("kube-proxy %s on %s, kernel %s (%s), sizes %v\n", ic.Version, ic.Machine, ic.Kernel, ic.KernelWhere, ic.Sizes)
	fmt.Printf("watch delivery: node-0 %.1f ms, other nodes +%.1f ms (mean, %d nodes)\n", ic.DeliveryNs/1e6, ic.WatchDelayNs/1e6, ic.WatchNodes)
	for _, m := range modes {
		if mc := ic.Modes[m]; mc != nil {
			fmt.Printf("%-9s full sync at %v: %s; partial: %s; CPU/wall %.2f, spread %.0f%%\n", m, ic.Sizes, fitAt(mc.Full, ic.Sizes), fitAt(mc.Incremental, ic.Sizes), mc.CPUPerWall, 100*mc.SyncCV)
		}
	}
	fmt.Printf("calibration: %s (implementations.kube-proxy; builtin's costs from %s)\n", f.output, base.Measured.UTC().Format(time.RFC3339))
	return nil
}

// calibrationBase is the calibration kube-proxy's costs are added to:
// path when it exists (its builtin costs kept), else the shipped default.
func calibrationBase(path string) (*sim.Calibration, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "calibrate: %s does not exist: its builtin costs are the shipped default's (run calibrate without --implementation to measure them)\n", path)
		return sim.DefaultCalibration()
	}
	return sim.LoadCalibration(path)
}

func fitAt(fit sim.Fit, sizes []int) string {
	var out []string
	for _, n := range sizes {
		out = append(out, time.Duration(fit.At(float64(n))).Round(time.Millisecond).String())
	}
	return strings.Join(out, " / ")
}

// loadAverage is /proc/loadavg's 1-minute figure ("" when unreadable).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	if _, err := strconv.ParseFloat(f[0], 64); err != nil {
		return ""
	}
	return f[0]
}

// kubeProxyCalibrationScenario is the YAML of one real kube-proxy run of
// calibrate --implementation kube-proxy: n services × 3 endpoints, the
// modes as kube-proxy rows, 30 s of churn at 10 changes/s (endpoints
// added, removed, turned unready: partial syncs) at minSyncPeriod 1 s on
// one node; on several nodes the same churn, and the nodes phase's watch
// delivery (node-0's syncs against the one-node ones give the contention
// of kube-proxies sharing this machine's CPUs).
func kubeProxyCalibrationScenario(n, nodes int, modes []string, f *calibrateFlags) string {
	churn := `churn:
  rate: 10
  duration: 30s
  arrival: poisson
  mix: {endpointAdd: 1, endpointRemove: 1, readinessFlip: 1, serviceCreate: 0, serviceDelete: 0}
  grace: 20s
  probes: 4
`
	topo := ""
	positions := "[first, last]"
	if nodes > 1 {
		topo = fmt.Sprintf("topology:\n  nodes: %d\n  clientPods: %d\n", nodes, nodes)
		positions = "[first]"
	}
	return fmt.Sprintf(`name: calibrate-kube-proxy-%d-%dn
description: proxybench calibrate --implementation kube-proxy at %d services on %d node(s)
seed: 2
repetitions: 1
modes: [%s]
implementation: [kube-proxy]
kernel: %s
services:
  count: %d
  endpoints:
    count: 3
%straffic:
  connections: 100
  concurrency: 4
  positions: %s
%siptables:
  backend: %s
  minSyncPeriod: 1s
  syncPeriod: 30s
nftables:
  minSyncPeriod: 1s
  syncPeriod: 30s
`, n, nodes, n, nodes, strings.Join(modes, ", "), f.kernel, n, topo, positions, churn, f.backend)
}
