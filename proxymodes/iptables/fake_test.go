//go:build linux

package iptables

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// fakeKernel is a stateful stand-in for a namespace's iptables (filter and
// nat): restores apply all-or-nothing per table and reject what the kernel
// rejects (a rule in or a jump to a missing chain, deleting a chain that is
// missing, referenced or not empty).
type fakeKernel struct {
	tables map[string]map[string][]string // table -> chain -> rules ("args" joined)
	runs   []fakeRun
}

type fakeRun struct {
	name  string
	args  []string
	stdin string
}

var builtins = map[string][]string{
	"filter": {"INPUT", "FORWARD", "OUTPUT"},
	"nat":    {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
}

var targets = map[string]bool{"ACCEPT": true, "DROP": true, "REJECT": true, "RETURN": true, "DNAT": true, "MARK": true, "MASQUERADE": true}

func newFakeKernel() *fakeKernel {
	k := &fakeKernel{tables: map[string]map[string][]string{}}
	for t, cs := range builtins {
		k.tables[t] = map[string][]string{}
		for _, c := range cs {
			k.tables[t][c] = nil
		}
	}
	return k
}

func (k *fakeKernel) Do(fn func() error) error { return fn() }

func (k *fakeKernel) Run(_ context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	k.runs = append(k.runs, fakeRun{name, args, string(stdin)})
	switch {
	case strings.HasSuffix(name, "-restore"):
		// kube-proxy's invocation: wait at most 5 s for the xtables lock.
		if strings.Join(args, " ") != "-w 5 -W 100000 --noflush" {
			return nil, fmt.Errorf("fake: restore without -w 5 -W 100000 --noflush: %q", args)
		}
		return nil, k.restore(string(stdin))
	case strings.HasSuffix(name, "-save"):
		return []byte(k.save()), nil
	case len(args) == 1 && args[0] == "--version":
		return []byte("iptables v1.8.9 (fake)\n"), nil
	}
	return nil, fmt.Errorf("fake: unexpected command %s %q", name, args)
}

func targetOf(args []string) string {
	for i, a := range args {
		if a == "-j" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

func (k *fakeKernel) checkTarget(tb map[string][]string, args []string) error {
	if t := targetOf(args); !targets[t] {
		if _, ok := tb[t]; !ok {
			return fmt.Errorf("jump to missing chain %q", t)
		}
	}
	return nil
}

func (k *fakeKernel) restore(data string) error {
	var cur map[string][]string
	var name string
	for n, line := range strings.Split(data, "\n") {
		fail := func(f string, a ...any) error {
			return fmt.Errorf("fake restore line %d %q: %s", n+1, line, fmt.Sprintf(f, a...))
		}
		switch {
		case line == "":
		case strings.HasPrefix(line, "*"):
			name = line[1:]
			old, ok := k.tables[name]
			if !ok {
				return fail("unknown table")
			}
			cur = map[string][]string{}
			for c, r := range old {
				cur[c] = append([]string(nil), r...)
			}
		case line == "COMMIT":
			k.tables[name] = cur
			cur = nil
		case cur == nil:
			return fail("outside a table")
		case strings.HasPrefix(line, ":"):
			c, _, _ := strings.Cut(line[1:], " ")
			cur[c] = nil // create or flush
		case strings.HasPrefix(line, "-A "):
			args := tokenize(line)
			if _, ok := cur[args[1]]; !ok {
				return fail("no chain %q", args[1])
			}
			if err := k.checkTarget(cur, args[2:]); err != nil {
				return fail("%v", err)
			}
			cur[args[1]] = append(cur[args[1]], strings.Join(args[2:], " "))
		case strings.HasPrefix(line, "-X "):
			c := line[3:]
			rules, ok := cur[c]
			if !ok {
				return fail("no chain to delete")
			}
			if len(rules) != 0 {
				return fail("chain not empty")
			}
			for from, rs := range cur {
				for _, r := range rs {
					if targetOf(strings.Fields(r)) == c {
						return fail("chain referenced from %s", from)
					}
				}
			}
			delete(cur, c)
		default:
			return fail("unsupported")
		}
	}
	if cur != nil {
		return errors.New("fake restore: missing COMMIT")
	}
	return nil
}

func (k *fakeKernel) save() string {
	var b strings.Builder
	for _, t := range []string{"filter", "nat"} {
		b.WriteString("*" + t + "\n")
		var chains []string
		for c := range k.tables[t] {
			chains = append(chains, c)
		}
		sort.Strings(chains)
		for _, c := range chains {
			b.WriteString(":" + c + " - [0:0]\n")
		}
		for _, c := range chains {
			for _, r := range k.tables[t][c] {
				b.WriteString("-A " + c + " " + r + "\n")
			}
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// chains returns the table's chains whose names start with prefix.
func (k *fakeKernel) chains(table, prefix string) []string {
	var out []string
	for c := range k.tables[table] {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

// fakeCmd is go-iptables over a fakeKernel.
type fakeCmd struct {
	k    *fakeKernel
	path string
}

func (f *fakeCmd) NewChain(table, chain string) error {
	if _, ok := f.k.tables[table][chain]; ok {
		return errChainExists
	}
	f.k.tables[table][chain] = nil
	return nil
}

func (f *fakeCmd) Exists(table, chain string, spec ...string) (bool, error) {
	rules, ok := f.k.tables[table][chain]
	if !ok {
		return false, fmt.Errorf("no chain %q", chain)
	}
	s := strings.Join(spec, " ")
	for _, r := range rules {
		if r == s {
			return true, nil
		}
	}
	return false, nil
}

func (f *fakeCmd) Insert(table, chain string, pos int, spec ...string) error {
	tb := f.k.tables[table]
	if _, ok := tb[chain]; !ok {
		return fmt.Errorf("no chain %q", chain)
	}
	if err := f.k.checkTarget(tb, spec); err != nil {
		return err
	}
	tb[chain] = append([]string{strings.Join(spec, " ")}, tb[chain]...)
	return nil
}

func (f *fakeCmd) DeleteIfExists(table, chain string, spec ...string) error {
	tb := f.k.tables[table]
	s := strings.Join(spec, " ")
	for i, r := range tb[chain] {
		if r == s {
			tb[chain] = append(tb[chain][:i:i], tb[chain][i+1:]...)
			return nil
		}
	}
	return nil
}

func newFakeProxier(backend string) (*Proxier, *fakeKernel, *[]string) {
	k := newFakeKernel()
	var paths []string
	p := New(Config{Backend: backend, ClusterCIDR: testCfg.ClusterCIDR}, k)
	p.newCmd = func(path string) (iptablesCmd, error) {
		paths = append(paths, path)
		return &fakeCmd{k: k, path: path}, nil
	}
	return p, k, &paths
}

func TestSyncFake(t *testing.T) {
	for _, backend := range []string{BackendLegacy, BackendNft} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			p, k, paths := newFakeProxier(backend)
			svcs := genServices(20, 3)
			st, err := p.Sync(ctx, svcs)
			if err != nil {
				t.Fatal(err)
			}
			if len(k.runs) != 1 || k.runs[0].name != "iptables-"+backend+"-restore" || strings.Join(k.runs[0].args, " ") != "-w 5 -W 100000 --noflush" {
				t.Fatalf("runs = %+v, want one iptables-%s-restore -w 5 -W 100000 --noflush", k.runs, backend)
			}
			if len(*paths) != 1 || (*paths)[0] != "/usr/sbin/iptables-"+backend {
				t.Errorf("go-iptables paths %q, want /usr/sbin/iptables-%s", *paths, backend)
			}
			if st.Kind != "full" || st.Objects != natRulesFormula(20, 3)+4 || st.Bytes != len(k.runs[0].stdin) || st.Wall <= 0 {
				t.Errorf("stats %+v", st)
			}
			for _, ph := range []string{"render", "ensure", "restore"} {
				if _, ok := st.Phases[ph]; !ok {
					t.Errorf("phase %q missing", ph)
				}
			}
			// Jump rules from the built-in chains are in place.
			if got := k.tables["nat"]["PREROUTING"]; len(got) != 1 || !strings.Contains(got[0], "kubernetes service portals") {
				t.Errorf("nat PREROUTING = %q", got)
			}
			if got := k.tables["filter"]["FORWARD"]; len(got) != 4 {
				t.Errorf("filter FORWARD = %q, want 4 jumps", got)
			}
			if n := len(k.chains("nat", "KUBE-SVC-")) + len(k.chains("nat", "KUBE-SEP-")); n != 20*4 {
				t.Errorf("%d KUBE-SVC/SEP chains, want 80", n)
			}
			// The same services again: still one restore per Sync, jumps not duplicated.
			if _, err := p.Sync(ctx, svcs); err != nil {
				t.Fatal(err)
			}
			if len(k.runs) != 2 || len(k.tables["nat"]["PREROUTING"]) != 1 {
				t.Errorf("second sync: %d runs, PREROUTING %q", len(k.runs), k.tables["nat"]["PREROUTING"])
			}
			// Fewer services: the stale chains are flushed and deleted.
			if _, err := p.Sync(ctx, svcs[:5]); err != nil {
				t.Fatal(err)
			}
			last := k.runs[len(k.runs)-1].stdin
			if got := strings.Count(last, "\n-X KUBE-"); got != 15*4 {
				t.Errorf("third sync deletes %d chains, want 60", got)
			}
			if n := len(k.chains("nat", "KUBE-SVC-")) + len(k.chains("nat", "KUBE-SEP-")); n != 5*4 {
				t.Errorf("after shrinking: %d KUBE-SVC/SEP chains, want 20", n)
			}
			// Endpoints change: the old endpoint chain goes.
			svcs2 := genServices(5, 3)
			svcs2[0].Endpoints = svcs2[0].Endpoints[:1]
			if _, err := p.Sync(ctx, svcs2); err != nil {
				t.Fatal(err)
			}
			if n := len(k.chains("nat", "KUBE-SEP-")); n != 13 {
				t.Errorf("after dropping 2 endpoints: %d KUBE-SEP chains, want 13", n)
			}
			info := p.Info()
			if info["backend"] != backend || !strings.Contains(info["iptables"], "v1.8.9") {
				t.Errorf("Info() = %v", info)
			}
			// Cleanup leaves the tables as they were.
			if err := p.Cleanup(ctx); err != nil {
				t.Fatal(err)
			}
			if got, want := k.save(), newFakeKernel().save(); got != want {
				t.Errorf("after Cleanup:\n%s\nwant\n%s", got, want)
			}
		})
	}
}

func TestSyncFakeFailure(t *testing.T) {
	ctx := context.Background()
	p, k, _ := newFakeProxier(BackendLegacy)
	if _, err := p.Sync(ctx, genServices(10, 2)); err != nil {
		t.Fatal(err)
	}
	// A restore that fails (a user chain jumps to a KUBE-SEP chain, so it
	// cannot be deleted) must not lose track of the chains.
	sep := k.chains("nat", "KUBE-SEP-")[0]
	k.tables["nat"]["USER"] = []string{"-j " + sep}
	if _, err := p.Sync(ctx, nil); err == nil {
		t.Fatal("sync deleting a referenced chain: want an error")
	}
	delete(k.tables["nat"], "USER")
	if _, err := p.Sync(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(k.chains("nat", "KUBE-SEP-")) + len(k.chains("nat", "KUBE-SVC-")); n != 0 {
		t.Errorf("%d service chains left after the retry", n)
	}
	if _, err := New(Config{Backend: "bpf"}, k).Sync(ctx, nil); err == nil {
		t.Errorf("backend bpf: want an error")
	}
}
