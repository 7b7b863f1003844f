//go:build linux

package kubeproxy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/proxybench/proxybench/proxymodes"
)

// UseIPTablesBackend makes every kube-proxy p starts run iptables back
// end be ("legacy" or "nft", through its PATH: Spec.IPTablesBackend),
// in nftables mode too: a node has one iptables alternative whatever
// kube-proxy's mode, and kube-proxy's nftables mode runs iptables at
// start to clean up the iptables and ipvs modes' rules. Call it before
// the first Sync.
func (p *Proxier) UseIPTablesBackend(be string) { p.spec.IPTablesBackend = be }

// SwitchMode is the seeds' mode switch over a running control plane (the
// ConfigMap edited, `kubectl rollout restart daemonset kube-proxy`): it
// stops the running kube-proxy (SIGTERM, SIGKILL after 5 s; its rules
// stay, a rollout does not flush) and starts a new one with mode and
// pass (PassFromScenario of that mode) over the same control plane and
// API objects, and returns when its first IPv4 sync is done, as Resume
// (Start: the new process's fork; Wall: from Start to that sync seen
// done; phases "kube-proxy.metric" and "kube-proxy.syncEnd"). stopped is
// when the old process had exited. What the new kube-proxy removes of
// the old mode at start is its own (platformCleanup). The old process
// is in the record's Earlier as "mode switch to <mode>".
func (p *Proxier) SwitchMode(ctx context.Context, mode string, pass map[string]any) (stopped time.Time, st proxymodes.SyncStats, err error) {
	if _, _, err := Config(ConfigSpec{Mode: mode, Pass: pass}); err != nil {
		return time.Time{}, st, err
	}
	return p.restart(ctx, mode, pass, "mode switch to "+mode)
}

// restart stops the running kube-proxy (its rules stay) and starts a new
// one with mode and pass over the same control plane and API objects,
// returning when its first IPv4 sync is done (Resume); stopped is when
// the old process had exited, which the record's Earlier keeps as why.
func (p *Proxier) restart(ctx context.Context, mode string, pass map[string]any, why string) (stopped time.Time, st proxymodes.SyncStats, err error) {
	if err := p.Halt(ctx, false); err != nil {
		return time.Time{}, st, err
	}
	stopped = time.Now()
	p.earlier[len(p.earlier)-1].Why = why
	s := &p.halted.Spec
	s.Config.Mode, s.Config.Pass, s.IPTablesBackend = mode, pass, p.spec.IPTablesBackend
	p.spec.Mode, p.spec.Pass = mode, pass
	p.minSync = 0 // the new process logs its own
	st, err = p.Resume(ctx)
	return stopped, st, err
}

// HaltCleanup is the seeds' recovery step: it stops kube-proxy (its
// rules stay) and runs `kube-proxy --cleanup` with its configuration
// (and PATH) in the node namespace, which in v1.37 removes every mode's
// rules (platformCleanup with cleanupAndExit: the iptables, ipvs and
// nftables CleanupLeftovers). It returns how long the cleanup took and
// its own failure (cleanupErr: kube-proxy exits 1 when one step failed,
// e.g. after IPVS mode), apart from err (kube-proxy could not be
// stopped). Resume starts kube-proxy again.
func (p *Proxier) HaltCleanup(ctx context.Context) (took time.Duration, cleanupErr, err error) {
	if err := p.Halt(ctx, false); err != nil {
		return 0, nil, err
	}
	p.earlier[len(p.earlier)-1].Why = "halt for kube-proxy --cleanup"
	if p.halted == nil {
		return 0, nil, errors.New("kubeproxy: no halted kube-proxy to clean up after")
	}
	t0 := time.Now()
	out, cerr := p.cleanupCommand(ctx, p.halted)
	took = time.Since(t0)
	if cerr != nil {
		cleanupErr = fmt.Errorf("kube-proxy --cleanup: %w (its output's last lines: %s)", cerr, lastLines(out, 3))
	}
	return took, cleanupErr, nil
}

// lastLines is the last n non-empty lines of b, " | "-joined.
func lastLines(b []byte, n int) string {
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}
