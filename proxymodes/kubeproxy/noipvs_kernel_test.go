package kubeproxy_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/topology"
)

// TestKernelIPVSModeWithoutIPVS runs kube-proxy with mode: ipvs on a
// kernel without IP_VS (this host), each version found beside the default
// kube-proxy (bin/kube-proxy, bin/kube-proxy-v1.36.*), and records what it
// does: falls back to iptables (the seeds' claim, and what builtin's
// `fallback: iptables` reproduces), exits, or runs programming nothing.
// Its log, its exit and the node's iptables and links are read back.
func TestKernelIPVSModeWithoutIPVS(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := os.Stat("/proc/net/ip_vs"); err == nil {
		testenv.Skip(t, "this kernel has IP_VS: the case is a kernel without it")
	}
	bins := testenv.RequireKube(t)
	versions := []string{bins.KubeProxy}
	more, _ := filepath.Glob(filepath.Join(filepath.Dir(bins.KubeProxy), "kube-proxy-v1.36.*"))
	versions = append(versions, more...)
	for _, bin := range versions {
		t.Run(filepath.Base(bin), func(t *testing.T) {
			ctx := context.Background()
			runID := topology.NewRunID()
			b, err := startWith(t, ctx, runID, "ipvs", bin, services(3), t.TempDir())
			if b != nil && b.tb != nil {
				defer b.close()
			}
			if err != nil {
				t.Fatal(err)
			}
			// kube-proxy either exits or gets healthy (its first sync) well
			// within a minute here.
			deadline := time.Now().Add(60 * time.Second)
			exited := false
			for time.Now().Before(deadline) {
				if done, _ := b.kp.Proc.Exited(); done {
					exited = true
					break
				}
				if err := b.kp.WaitHealthy(ctx, 2*time.Second); err == nil {
					break
				}
			}
			log, _ := os.ReadFile(b.kp.LogPath)
			var said []string
			for _, l := range strings.Split(string(log), "\n") {
				if strings.Contains(strings.ToLower(l), "ipvs") && !strings.Contains(l, "flags.go") || strings.Contains(l, "Proxier") {
					said = append(said, l)
				}
			}
			rules, _ := b.tb.Node.Run(ctx, nil, "iptables-save")
			kubeChains := strings.Count(string(rules), "\n:KUBE-")
			svcRules := strings.Count(string(rules), "-A KUBE-SERVICES")
			dummy := false
			if h, err := b.tb.Node.Netlink(); err == nil {
				_, lerr := h.LinkByName("kube-ipvs0")
				dummy = lerr == nil
				h.Close()
			}
			answers := everyAnswers(b.tb, services(3), 5*time.Second) == nil
			outcome := "runs"
			switch {
			case exited:
				outcome = "exits"
			case strings.Contains(string(log), "Using iptables Proxier"):
				outcome = "falls back to iptables"
			}
			t.Logf("OUTCOME %s, mode ipvs without IP_VS: %s; ClusterIPs answer: %v; iptables: %d KUBE- chains, %d KUBE-SERVICES rules; kube-ipvs0: %v",
				b.kp.Version, outcome, answers, kubeChains, svcRules, dummy)
			for _, l := range said {
				t.Logf("  log: %s", l)
			}
			if outcome == "runs" && answers {
				t.Errorf("kube-proxy %s in mode ipvs answers ClusterIPs on a kernel without IP_VS, yet did not log a fallback", b.kp.Version)
			}
			if exited {
				_, werr := b.kp.Proc.Exited()
				t.Logf("  exit: %v", werr)
				if !strings.Contains(strings.Join(said, "\n"), "IPVS") {
					t.Errorf("kube-proxy %s exited without a log line naming IPVS:\n%s", b.kp.Version, b.kp.LogTail(10))
				}
			}
		})
	}
}
