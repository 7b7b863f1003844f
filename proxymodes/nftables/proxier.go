//go:build linux

package nftables

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/conntrack"
	"github.com/proxybench/proxybench/workload"
)

// Namespace is the node namespace a Proxier programs (proxymodes.Node:
// Do runs a function, and programs it starts, inside the namespace; Run
// executes a program there). *topology.Netns satisfies it.
type Namespace = proxymodes.Node

// Proxier programs one namespace in kube-proxy's nftables layout through
// knftables (which runs "nft -f -"; knftables does not expose its
// executor, so every call is made inside Namespace.Do). It is safe for
// concurrent use; calls are serialised.
type Proxier struct {
	cfg Config
	ns  Namespace

	mu      sync.Mutex
	nft     knftables.Interface // opened inside ns on first use
	applied *Ruleset            // what the last successful Sync programmed; nil: next Sync is full
}

// New returns a Proxier for cfg that programs ns: cfg.NodeName and, when
// unset, cfg.NodeIPs come from ns when it knows them (a node namespace:
// proxymodes.NodeNamer, proxymodes.NodeIPer). Nothing runs until Sync; an
// invalid cfg makes Sync fail.
func New(cfg Config, ns Namespace) *Proxier {
	cfg.NodeName = proxymodes.NodeNameOf(ns, cfg.NodeName)
	if cfg.NodeIPs == nil {
		cfg.NodeIPs = proxymodes.NodeIPsOf(ns, cfg.familyName())
	}
	return &Proxier{cfg: cfg, ns: ns}
}

var (
	_ proxymodes.Proxier    = (*Proxier)(nil)
	_ proxymodes.FullSyncer = (*Proxier)(nil)
)

// Mode returns "nftables".
func (p *Proxier) Mode() string { return "nftables" }

// Info returns {"backend": "knftables", "nft": "<nft --version output>",
// "table": "ip kube-proxy"}.
func (p *Proxier) Info() map[string]string {
	info := map[string]string{"backend": "knftables", "table": string(p.cfg.TableFamily()) + " " + Table}
	out, err := p.ns.Run(context.Background(), nil, "nft", "--version")
	if err != nil {
		info["nft"] = "unknown: " + err.Error()
	} else {
		info["nft"] = strings.TrimSpace(string(out))
	}
	return info
}

// ForceFullSync makes the next Sync full (kube-proxy does so every
// syncPeriod).
func (p *Proxier) ForceFullSync() {
	p.mu.Lock()
	p.applied = nil
	p.mu.Unlock()
}

// ResolveTools drops the knftables handle, so the next Sync makes a new one
// and knftables.New looks nft up on PATH again (proxymodes.ToolResolver).
func (p *Proxier) ResolveTools() {
	p.mu.Lock()
	p.nft = nil
	p.mu.Unlock()
}

// open returns the knftables Interface, creating it inside ns (knftables.New
// runs "nft --version" and "nft --check").
func (p *Proxier) open() (knftables.Interface, error) {
	if p.nft != nil {
		return p.nft, nil
	}
	err := p.ns.Do(func() error {
		nft, err := knftables.New(p.cfg.TableFamily(), Table)
		if err != nil {
			return err
		}
		p.nft = nft
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("nftables: open table %s %s: %w", p.cfg.TableFamily(), Table, err)
	}
	return p.nft, nil
}

// run sends tx in one "nft -f -" inside ns, unless it is empty.
func (p *Proxier) run(ctx context.Context, nft knftables.Interface, tx *knftables.Transaction) error {
	if tx.NumOperations() == 0 {
		return nil
	}
	return p.ns.Do(func() error { return nft.Run(ctx, tx) })
}

// Sync programs services in kube-proxy's nftables layout (see Render).
//
// A full sync (the first, after ForceFullSync, Cleanup or a failed Sync)
// sends two transactions: "chains" recreates table ip kube-proxy empty and
// adds its sets, maps, chains and rules (in several transactions when
// Config.ChainsPerTransaction is set); "elements" then adds every map and
// set element, so SyncStats.Phases show where the time goes (at scale
// almost all of it is the kernel adding rules, see the package benchmarks).
// Between the two, ClusterIPs are not dispatched (as when the table is
// being recreated). An incremental sync sends one transaction, as
// kube-proxy's partial sync: new chains and their rules, changed chains
// flushed and refilled, map elements added and deleted, stale chains
// flushed and deleted (phase "transaction"); nothing when nothing changed.
//
// SyncStats: Kind "full" or "incremental", Objects = chains + rules +
// elements sent, Bytes = nft input length, Phases "render" plus the above.
// A failed Sync makes the next one full.
func (p *Proxier) Sync(ctx context.Context, services []workload.Service) (proxymodes.SyncStats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	start, cpu := time.Now(), proxymodes.StartSyncCPU(p.ns)
	defer cpu.Stop() // the proxy's own CPU only: this thread and its programs
	st := proxymodes.SyncStats{Kind: "full", Phases: map[string]time.Duration{}}
	var txs []*knftables.Transaction
	finish := func() {
		st.Wall = time.Since(start)
		st.CPU = cpu.Elapsed()
		for _, tx := range txs {
			st.Bytes += len(tx.String())
		}
	}

	old := p.applied
	p.applied = nil // until this Sync succeeds
	t := time.Now()
	rs, err := Render(p.cfg, services)
	st.Phases["render"] = time.Since(t)
	if err != nil {
		finish()
		return st, err
	}
	nft, err := p.open()
	if err != nil {
		finish()
		return st, err
	}
	if old == nil {
		chains := rs.FullChainsSplit(nft.NewTransaction, p.cfg.ChainsPerTransaction)
		elems := nft.NewTransaction()
		rs.FullElements(elems)
		txs = append(chains, elems)
		c := rs.Counts()
		st.Objects = c.Objects()
		t = time.Now()
		for _, tx := range chains {
			if err = p.run(ctx, nft, tx); err != nil {
				break
			}
		}
		st.Phases["chains"] = time.Since(t)
		if err == nil {
			t = time.Now()
			err = p.run(ctx, nft, elems)
			st.Phases["elements"] = time.Since(t)
		}
	} else {
		st.Kind = "incremental"
		d := rs.DiffFrom(old)
		tx := nft.NewTransaction()
		st.Objects = d.Chains(tx) + d.Elements(tx) + d.Deletes(tx)
		txs = []*knftables.Transaction{tx}
		t = time.Now()
		err = p.run(ctx, nft, tx)
		st.Phases["transaction"] = time.Since(t)
	}
	if err == nil && !p.cfg.NoConntrackCleanup {
		conntrack.AfterSync(p.ns, services).Into(&st)
	}
	finish()
	if err != nil {
		return st, fmt.Errorf("nftables: %s sync of %d services: %w", st.Kind, len(services), err)
	}
	p.applied = rs
	return st, nil
}

// Cleanup deletes table ip kube-proxy (as kube-proxy's CleanupLeftovers);
// a missing table is not an error. The next Sync is full.
func (p *Proxier) Cleanup(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.applied = nil
	nft, err := p.open()
	if err != nil {
		return err
	}
	tx := nft.NewTransaction()
	tx.Add(&knftables.Table{})
	tx.Delete(&knftables.Table{})
	if err := p.run(ctx, nft, tx); err != nil {
		return fmt.Errorf("nftables: cleanup: delete table %s %s: %w", p.cfg.TableFamily(), Table, err)
	}
	return nil
}
