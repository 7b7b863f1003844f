//go:build linux

package iptables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	goipt "github.com/coreos/go-iptables/iptables"

	"github.com/proxybench/proxybench/internal/lib/xtables"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/conntrack"
	"github.com/proxybench/proxybench/workload"
)

// Namespace is the node namespace a Proxier programs (proxymodes.Node:
// Do runs a function, and programs it starts, inside the namespace; Run
// executes a program there). *topology.Netns satisfies it.
type Namespace = proxymodes.Node

// jumpRule is one rule from a built-in chain into a kube-proxy chain.
type jumpRule struct {
	table, src, dst string
	args            []string // the rule spec, ending "-j dst"
}

// jumpRules are the rules kube-proxy ensures (prepends) on every full sync
// (iptablesJumpChains and iptablesKubeletJumpChains of
// pkg/proxy/iptables/proxier.go), in its order.
var jumpRules = func() []jumpRule {
	newCT := []string{"-m", "conntrack", "--ctstate", "NEW"}
	mk := func(table, dst, src, comment string, extra []string) jumpRule {
		args := append([]string{}, extra...)
		if comment != "" {
			args = append(args, "-m", "comment", "--comment", comment)
		}
		return jumpRule{table: table, src: src, dst: dst, args: append(args, "-j", dst)}
	}
	return []jumpRule{
		mk("filter", chainExternalServices, "INPUT", "kubernetes externally-visible service portals", newCT),
		mk("filter", chainExternalServices, "FORWARD", "kubernetes externally-visible service portals", newCT),
		mk("filter", chainNodePorts, "INPUT", "kubernetes health check service ports", nil),
		mk("filter", chainServices, "FORWARD", "kubernetes service portals", newCT),
		mk("filter", chainServices, "OUTPUT", "kubernetes service portals", newCT),
		mk("filter", chainForward, "FORWARD", "kubernetes forwarding rules", nil),
		mk("filter", chainProxyFirewall, "INPUT", "kubernetes load balancer firewall", newCT),
		mk("filter", chainProxyFirewall, "OUTPUT", "kubernetes load balancer firewall", newCT),
		mk("filter", chainProxyFirewall, "FORWARD", "kubernetes load balancer firewall", newCT),
		mk("nat", chainServices, "OUTPUT", "kubernetes service portals", nil),
		mk("nat", chainServices, "PREROUTING", "kubernetes service portals", nil),
		mk("nat", chainPostrouting, "POSTROUTING", "kubernetes postrouting rules", nil),
		mk("filter", chainFirewall, "INPUT", "", nil),
		mk("filter", chainFirewall, "OUTPUT", "", nil),
	}
}()

// iptablesCmd is the part of go-iptables the Proxier uses; tests fake it.
type iptablesCmd interface {
	NewChain(table, chain string) error
	Exists(table, chain string, rulespec ...string) (bool, error)
	Insert(table, chain string, pos int, rulespec ...string) error
	DeleteIfExists(table, chain string, rulespec ...string) error
}

// Proxier programs one namespace in kube-proxy's iptables layout.
// It is safe for concurrent use; calls are serialised.
type Proxier struct {
	cfg Config
	ns  Namespace

	// newCmd opens the iptables command of a back end (go-iptables) by
	// its name (openIPTables: looked up on PATH).
	newCmd func(name string) (iptablesCmd, error)

	mu      sync.Mutex
	cmd     iptablesCmd
	ensured bool     // jump rules known to be in place
	written []string // KUBE-SVC/KUBE-SEP chains in the kernel after the last Sync
	// applied holds each port's fingerprint as of the last successful
	// Sync; nil forces the next Sync to be full.
	applied map[string]uint64
}

// ResolveTools drops the go-iptables handle, so the next Sync looks the
// iptables tool up on PATH again (proxymodes.ToolResolver); iptables-restore
// is looked up at every Sync.
func (p *Proxier) ResolveTools() {
	p.mu.Lock()
	p.cmd = nil
	p.mu.Unlock()
}

// ForceFullSync makes the next Sync rewrite every chain (kube-proxy forces
// one every syncPeriod).
func (p *Proxier) ForceFullSync() {
	p.mu.Lock()
	p.applied = nil
	p.mu.Unlock()
}

// New returns a Proxier for cfg that programs ns. Nothing runs until Sync;
// an invalid cfg makes Sync fail.
func New(cfg Config, ns Namespace) *Proxier {
	cfg.NodeName = proxymodes.NodeNameOf(ns, cfg.NodeName)
	return &Proxier{cfg: cfg, ns: ns, newCmd: openIPTables}
}

// openIPTables opens go-iptables on the iptables tool name as found on
// PATH (exec.LookPath): kube-proxy runs its iptables tools by name through
// PATH too (k8s.io/utils/exec), so a wrapper put first on PATH, as
// failure.syncErrors does, is the program that runs, as it is for
// iptables-restore (run by name, Namespace.Run).
func openIPTables(name string) (iptablesCmd, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, err
	}
	return goipt.New(goipt.Path(path), goipt.Timeout(5)) // kube-proxy: -w 5
}

var (
	_ proxymodes.Proxier      = (*Proxier)(nil)
	_ proxymodes.ToolResolver = (*Proxier)(nil)
)

// Mode returns "iptables".
func (p *Proxier) Mode() string { return "iptables" }

// binary names the back end's iptables tool (xtables.Binary), its
// ip6tables twin for an IPv6 proxier.
func (p *Proxier) binary(tool string) string {
	if p.cfg.IPv6 {
		return xtables.Binary6(p.cfg.Backend, tool)
	}
	return xtables.Binary(p.cfg.Backend, tool)
}

// Info returns {"backend": "legacy"|"nft", "iptables": "<iptables
// --version output>"}.
func (p *Proxier) Info() map[string]string {
	info := map[string]string{"backend": p.cfg.Backend}
	out, err := p.ns.Run(context.Background(), nil, p.binary(""), "--version")
	if err != nil {
		info["iptables"] = "unknown: " + err.Error()
	} else {
		info["iptables"] = strings.TrimSpace(string(out))
	}
	return info
}

func (p *Proxier) command() (iptablesCmd, error) {
	if p.cmd != nil {
		return p.cmd, nil
	}
	c, err := p.newCmd(p.binary(""))
	if err != nil {
		return nil, fmt.Errorf("iptables: open %q: %w", p.binary(""), err)
	}
	p.cmd = c
	return c, nil
}

// ensureJumps creates the kube-proxy chains the built-in chains jump to
// and prepends the jump rules where missing, as kube-proxy's full sync
// does (EnsureChain + EnsureRule(Prepend)). It runs inside ns.
func (p *Proxier) ensureJumps() error {
	c, err := p.command()
	if err != nil {
		return err
	}
	return p.ns.Do(func() error {
		created := map[string]bool{}
		for _, j := range jumpRules {
			key := j.table + "/" + j.dst
			if _, done := created[key]; !done {
				err := c.NewChain(j.table, j.dst)
				switch {
				case err == nil:
					created[key] = true
				case isExists(err):
					created[key] = false
				default:
					return fmt.Errorf("iptables: create chain %s/%s: %w", j.table, j.dst, err)
				}
			}
			// A chain just created has no rule jumping to it yet.
			if !created[key] {
				ok, err := c.Exists(j.table, j.src, j.args...)
				if err != nil {
					return fmt.Errorf("iptables: check %s/%s -> %s: %w", j.table, j.src, j.dst, err)
				}
				if ok {
					continue
				}
			}
			if err := c.Insert(j.table, j.src, 1, j.args...); err != nil {
				return fmt.Errorf("iptables: insert %s/%s -> %s: %w", j.table, j.src, j.dst, err)
			}
		}
		return nil
	})
}

// isExists reports an "iptables -N" failure because the chain exists
// (exit status 1). go-iptables' *iptables.Error and the fake's error of
// proxymodes/iptables/testing carry the status.
func isExists(err error) bool {
	var e interface{ ExitStatus() int }
	return errors.As(err, &e) && e.ExitStatus() == 1
}

// Sync programs services in kube-proxy's layout (see Render): it ensures
// the jump rules from the built-in chains (nat PREROUTING/OUTPUT ->
// KUBE-SERVICES, POSTROUTING -> KUBE-POSTROUTING, filter
// INPUT/FORWARD/OUTPUT jumps) with iptables when they may be missing, then
// runs exactly one iptables-<backend>-restore --noflush. The first Sync
// after New, Cleanup, a failure or ForceFullSync is full (Kind "full"):
// every chain is declared and rewritten. Later Syncs are partial, as
// kube-proxy ≥ 1.28's (Kind "incremental"): KUBE-SERVICES and the fixed
// chains are rewritten whole, but only the KUBE-SVC/KUBE-SEP chains of
// service ports whose rules changed are declared and written. Either way
// the chains no longer wanted are flushed and deleted in the same restore.
// SyncStats: Objects = rules written, Bytes = restore input size, Phases
// "render", "ensure", "restore".
func (p *Proxier) Sync(ctx context.Context, services []workload.Service) (proxymodes.SyncStats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	start, cpu := time.Now(), proxymodes.StartSyncCPU(p.ns)
	defer cpu.Stop() // the proxy's own CPU only: this thread and its programs
	st := proxymodes.SyncStats{Kind: "full", Phases: map[string]time.Duration{}}
	finish := func() {
		st.Wall = time.Since(start)
		st.CPU = cpu.Elapsed()
	}
	if err := p.cfg.Validate(); err != nil {
		return st, err
	}

	t := time.Now()
	pl, err := newPlan(p.cfg, services)
	if err != nil {
		finish()
		return st, err
	}
	current := pl.chains()
	stale := staleChains(p.written, current)
	fps := pl.fingerprints()
	var unchanged []bool
	if p.applied != nil {
		st.Kind = "incremental"
		unchanged = make([]bool, len(pl.ports))
		for i := range pl.ports {
			old, ok := p.applied[pl.ports[i].name]
			unchanged[i] = ok && old == fps[pl.ports[i].name]
		}
	}
	rs := pl.write(stale, unchanged)
	st.Phases["render"] = time.Since(t)
	st.Objects = rs.NatRules + rs.FilterRules
	st.Bytes = len(rs.Data)

	t = time.Now()
	if !p.ensured {
		if err := p.ensureJumps(); err != nil {
			finish()
			return st, err
		}
		// kube-proxy (iptables.localhostNodePorts, default true) sets
		// route_localnet in its node so 127.0.0.1:<nodePort> is routed
		// (pkg/proxy/iptables NewProxier); only through the node's own
		// Sysctl, never a fake node's Do.
		if sy, ok := p.ns.(proxymodes.Sysctler); ok && !p.cfg.IPv6 && hasNodePorts(services) {
			if err := sy.Sysctl("net/ipv4/conf/all/route_localnet", "1"); err != nil {
				finish()
				return st, fmt.Errorf("iptables: %w", err)
			}
		}
		p.ensured = true
	}
	st.Phases["ensure"] = time.Since(t)

	t = time.Now()
	_, err = p.ns.Run(ctx, rs.Data, p.binary("restore"), xtables.RestoreArgs("--noflush")...)
	st.Phases["restore"] = time.Since(t)
	if err == nil && !p.cfg.NoConntrackCleanup {
		conntrack.AfterSync(p.ns, services).Into(&st)
	}
	finish()
	if err != nil {
		// The kernel may or may not hold the new chains; remember both
		// sets so the next Sync deletes whatever is unwanted (declaring a
		// chain before "-X" makes the delete safe either way). Re-ensure
		// the jumps too, as kube-proxy forces a full sync after a failure.
		p.written = append(p.written, current...)
		p.ensured = false
		p.applied = nil
		return st, fmt.Errorf("iptables: sync %d services: %w", len(services), err)
	}
	p.written = current
	p.applied = fps
	return st, nil
}

// staleChains returns the chains of prev that are not in current.
func staleChains(prev, current []string) []string {
	if len(prev) == 0 {
		return nil
	}
	want := make(map[string]struct{}, len(current))
	for _, c := range current {
		want[c] = struct{}{}
	}
	var out []string
	seen := make(map[string]struct{})
	for _, c := range prev {
		if _, ok := want[c]; ok {
			continue
		}
		if _, ok := seen[c]; ok {
			continue
		}
		seen[c] = struct{}{}
		out = append(out, c)
	}
	return out
}

// Cleanup removes what the Proxier (or any kube-proxy) programmed in the
// namespace, as kube-proxy's CleanupLeftovers: it deletes the jump rules
// from the built-in chains, then flushes and deletes every KUBE-* chain of
// the filter and nat tables in one iptables-restore --noflush. Other rules
// and chains are left alone.
func (p *Proxier) Cleanup(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.cfg.Validate(); err != nil {
		return err
	}
	c, err := p.command()
	if err != nil {
		return err
	}
	p.ensured = false
	err = p.ns.Do(func() error {
		for _, j := range jumpRules {
			// DeleteIfExists fails when the chain itself is missing;
			// then there is no rule to delete.
			if err := c.DeleteIfExists(j.table, j.src, j.args...); err != nil && !isNotExist(err) {
				return fmt.Errorf("iptables: delete %s/%s -> %s: %w", j.table, j.src, j.dst, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	out, err := p.ns.Run(ctx, nil, p.binary("save"))
	if err != nil {
		return fmt.Errorf("iptables: cleanup: %w", err)
	}
	data := cleanupInput(out)
	if data != nil {
		if _, err := p.ns.Run(ctx, data, p.binary("restore"), xtables.RestoreArgs("--noflush")...); err != nil {
			return fmt.Errorf("iptables: cleanup: %w", err)
		}
	}
	p.written = nil
	p.applied = nil
	return nil
}

func isNotExist(err error) bool {
	var e *goipt.Error
	return errors.As(err, &e) && e.IsNotExist()
}

// cleanupInput turns iptables-save output into restore input that flushes
// and deletes every KUBE-* chain of the filter and nat tables, or nil when
// there is none.
func cleanupInput(save []byte) []byte {
	var out bytes.Buffer
	table := ""
	var chains []string
	flush := func() {
		if len(chains) == 0 {
			return
		}
		out.WriteString("*" + table + "\n")
		for _, c := range chains {
			out.WriteString(":" + c + " - [0:0]\n")
		}
		for _, c := range chains {
			out.WriteString("-X " + c + "\n")
		}
		out.WriteString("COMMIT\n")
		chains = chains[:0]
	}
	for _, line := range strings.Split(string(save), "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			flush()
			table = line[1:]
		case strings.HasPrefix(line, ":KUBE-") && (table == "nat" || table == "filter"):
			name, _, _ := strings.Cut(line[1:], " ")
			chains = append(chains, name)
		}
	}
	flush()
	if out.Len() == 0 {
		return nil
	}
	return out.Bytes()
}

// hasNodePorts reports whether any service has node ports.
func hasNodePorts(services []workload.Service) bool {
	for i := range services {
		if services[i].HasNodePorts() {
			return true
		}
	}
	return false
}
