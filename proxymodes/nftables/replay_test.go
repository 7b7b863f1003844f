//go:build linux

package nftables

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/proxybench/proxybench/internal/testenv"
	nftablestest "github.com/proxybench/proxybench/proxymodes/nftables/testing"
	"github.com/proxybench/proxybench/workload"
)

// fakeNamespace runs Do's function here (the fake table needs no
// namespace) and runs no program.
type fakeNamespace struct{}

func (fakeNamespace) Do(fn func() error) error { return fn() }
func (fakeNamespace) Run(context.Context, []byte, string, ...string) ([]byte, error) {
	return nil, errors.New("fake namespace runs no program")
}

// TestFakeTableIsTheModes: the shared fake programs the mode's table.
func TestFakeTableIsTheModes(t *testing.T) {
	if nftablestest.Family != Family || nftablestest.Table != Table {
		t.Errorf("nftables/testing fakes table %s %s, the mode programs %s %s", nftablestest.Family, nftablestest.Table, Family, Table)
	}
}

// TestKernelReplayFake runs one sequence on a Proxier over the fake of
// proxymodes/nftables/testing and on a Proxier over a real namespace: a
// full sync, incremental syncs (endpoints gone, a weight changed, services
// removed), transactions nft rejects (a rule in a missing chain, creating
// an existing chain, deleting a missing map), and Cleanup. After every
// step it compares whether the step failed and the table's Snapshot (sets,
// maps with every element, chains with their rule count and comments).
// It runs for both layouts: services without session affinity (service
// chains that DNAT themselves) and with ClientIP affinity (endpoint chains
// and their affinity sets).
func TestKernelReplayFake(t *testing.T) {
	testenv.RequireKernel(t, "nft")
	aff := testCfg
	aff.AffinityTimeout = time.Hour
	t.Run("None", func(t *testing.T) { replayFake(t, testCfg) })
	t.Run("ClientIP", func(t *testing.T) { replayFake(t, aff) })
}

func replayFake(t *testing.T, cfg Config) {
	ctx := context.Background()
	ns := testenv.NewNetns(t, "nftreplay")
	real := New(cfg, ns)
	fake := New(cfg, fakeNamespace{})
	fake.nft = nftablestest.NewFake()

	svcs := genServices(20, 3)
	fewerEndpoints := genServices(20, 3)
	fewerEndpoints[0].Endpoints = fewerEndpoints[0].Endpoints[:1]
	fewerEndpoints[1].Endpoints[2] = workload.Endpoint{IP: fewerEndpoints[1].Endpoints[2].IP, Ready: true, Weight: 3}
	sync := func(s []workload.Service) func(p *Proxier) error {
		return func(p *Proxier) error { _, err := p.Sync(ctx, s); return err }
	}
	tx := func(fill func(tx *knftables.Transaction)) func(p *Proxier) error {
		return func(p *Proxier) error {
			t := p.nft.NewTransaction()
			fill(t)
			return p.run(ctx, p.nft, t)
		}
	}
	chain := func(p *Proxier) string { return p.applied.ChainNames()[0] }
	steps := []struct {
		name string
		do   func(p *Proxier) error
	}{
		{"full sync", sync(svcs)},
		{"incremental: endpoints gone, a weight", sync(fewerEndpoints)},
		{"incremental: 12 services removed", sync(svcs[:8])},
		{"nothing changed", sync(svcs[:8])},
		{"rule in a missing chain", tx(func(tx *knftables.Transaction) {
			tx.Add(&knftables.Rule{Chain: "no-such-chain", Rule: "counter"})
		})},
		{"delete a missing map", tx(func(tx *knftables.Transaction) {
			tx.Delete(&knftables.Map{Name: "no-such-map"})
		})},
		{"create an existing chain", func(p *Proxier) error {
			return tx(func(tx *knftables.Transaction) { tx.Create(&knftables.Chain{Name: chain(p)}) })(p)
		}},
		{"cleanup", func(p *Proxier) error { return p.Cleanup(ctx) }},
	}
	for i, step := range steps {
		rerr, ferr := step.do(real), step.do(fake)
		if (rerr == nil) != (ferr == nil) {
			t.Errorf("step %d %s: kernel error %v, fake error %v", i, step.name, rerr, ferr)
		}
		var rs string
		if err := ns.Do(func() (err error) { rs, err = nftablestest.Snapshot(ctx, real.nft); return err }); err != nil {
			t.Fatalf("step %d %s: kernel snapshot: %v", i, step.name, err)
		}
		fs, err := nftablestest.Snapshot(ctx, fake.nft)
		if err != nil {
			t.Fatalf("step %d %s: fake snapshot: %v", i, step.name, err)
		}
		if rs != fs {
			t.Errorf("step %d %s: tables differ\nkernel:\n%.3000s\nfake:\n%.3000s", i, step.name, rs, fs)
		}
		t.Logf("step %d %s: error %v, %d bytes of snapshot", i, step.name, rerr, len(rs))
		if i == 0 && (len(rs) < 1000 || !strings.Contains(rs, "map "+MapServiceIPs+": ")) {
			t.Fatalf("full sync snapshot has no %s elements to compare:\n%s", MapServiceIPs, rs)
		}
	}
}
