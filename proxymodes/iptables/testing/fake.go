//go:build linux

// Package testing holds a kernel-faithful fake of what the iptables mode
// programs: FakeKernel, a namespace's filter and nat tables behind
// iptables-restore/-save (a proxymodes.Node), and FakeCmd, go-iptables
// over it. Any test may use them; they are not in the production binary.
// TestKernelReplayFake in proxymodes/iptables replays one operation
// sequence on FakeKernel and on a real namespace and compares the outcome.
// Import it as
//
//	iptablestest "github.com/proxybench/proxybench/proxymodes/iptables/testing"
package testing

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// FakeKernel is a stateful stand-in for a namespace's iptables (filter and
// nat): restores apply all-or-nothing per table and reject what the kernel
// rejects (a rule in or a jump to a missing chain, deleting a chain that is
// missing, referenced or not empty). Not safe for concurrent use.
type FakeKernel struct {
	// Tables holds table -> chain -> rules (each rule's arguments after
	// "-A CHAIN" as iptables-save prints them: joined by spaces, the
	// --comment value in double quotes).
	Tables map[string]map[string][]string
	// Runs records every command run, in order.
	Runs []Run
}

// Run is one command FakeKernel ran.
type Run struct {
	Name  string
	Args  []string
	Stdin string
}

var builtins = map[string][]string{
	"filter": {"INPUT", "FORWARD", "OUTPUT"},
	"nat":    {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
}

var targets = map[string]bool{"ACCEPT": true, "DROP": true, "REJECT": true, "RETURN": true, "DNAT": true, "MARK": true, "MASQUERADE": true}

// NewFakeKernel returns a namespace with empty built-in chains.
func NewFakeKernel() *FakeKernel {
	k := &FakeKernel{Tables: map[string]map[string][]string{}}
	for t, cs := range builtins {
		k.Tables[t] = map[string][]string{}
		for _, c := range cs {
			k.Tables[t][c] = nil
		}
	}
	return k
}

// Do runs fn (a fake namespace has nothing to enter).
func (k *FakeKernel) Do(fn func() error) error { return fn() }

// Run runs "<x>-restore -w 5 --noflush" (kube-proxy's
// invocation; stdin applied, see Restore), "<x>-save" (Save's text) and
// "<x> --version"; anything else is an error.
func (k *FakeKernel) Run(_ context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	k.Runs = append(k.Runs, Run{name, args, string(stdin)})
	switch {
	case strings.HasSuffix(name, "-restore"):
		// kube-proxy's invocation: wait at most 5 s for the xtables lock.
		if strings.Join(args, " ") != "-w 5 --noflush" {
			return nil, fmt.Errorf("fake: restore without -w 5 --noflush: %q", args)
		}
		return nil, k.Restore(string(stdin))
	case strings.HasSuffix(name, "-save"):
		return []byte(k.Save()), nil
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

func (k *FakeKernel) checkTarget(tb map[string][]string, args []string) error {
	if t := targetOf(args); !targets[t] {
		if _, ok := tb[t]; !ok {
			return fmt.Errorf("jump to missing chain %q", t)
		}
	}
	return nil
}

// Restore applies iptables-restore --noflush input: each table between
// "*table" and "COMMIT" all or nothing, as the kernel replaces a table in
// one IPT_SO_SET_REPLACE. It understands ":CHAIN" (create or flush), "-A",
// "-X" and rejects the rest.
func (k *FakeKernel) Restore(data string) error {
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
			old, ok := k.Tables[name]
			if !ok {
				return fail("unknown table")
			}
			cur = map[string][]string{}
			for c, r := range old {
				cur[c] = append([]string(nil), r...)
			}
		case line == "COMMIT":
			k.Tables[name] = cur
			cur = nil
		case cur == nil:
			return fail("outside a table")
		case strings.HasPrefix(line, ":"):
			c, _, _ := strings.Cut(line[1:], " ")
			cur[c] = nil // create or flush
		case strings.HasPrefix(line, "-A "):
			args := Tokenize(line)
			if _, ok := cur[args[1]]; !ok {
				return fail("no chain %q", args[1])
			}
			if err := k.checkTarget(cur, args[2:]); err != nil {
				return fail("%v", err)
			}
			cur[args[1]] = append(cur[args[1]], canonical(args[2:]))
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
					if targetOf(Tokenize(r)) == c {
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

// Save prints the filter and nat tables as iptables-save does (sorted
// chains, no counters, no comment lines).
func (k *FakeKernel) Save() string {
	var b strings.Builder
	for _, t := range []string{"filter", "nat"} {
		b.WriteString("*" + t + "\n")
		var chains []string
		for c := range k.Tables[t] {
			chains = append(chains, c)
		}
		sort.Strings(chains)
		for _, c := range chains {
			b.WriteString(":" + c + " - [0:0]\n")
		}
		for _, c := range chains {
			for _, r := range k.Tables[t][c] {
				b.WriteString("-A " + c + " " + r + "\n")
			}
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// Chains returns the table's chains whose names start with prefix, sorted.
func (k *FakeKernel) Chains(table, prefix string) []string {
	var out []string
	for c := range k.Tables[table] {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

// ExitError is what FakeCmd returns for a failed command: like
// go-iptables' *iptables.Error it carries the command's exit status
// (1: "iptables: Chain already exists." for -N of an existing chain).
type ExitError struct {
	Status int
	Msg    string
}

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d: %s", e.Status, e.Msg) }

// ExitStatus is the command's exit status, as go-iptables' Error.ExitStatus.
func (e *ExitError) ExitStatus() int { return e.Status }

// FakeCmd is go-iptables (NewChain, Exists, Insert, DeleteIfExists) over a
// FakeKernel; Path is the binary it stands for.
type FakeCmd struct {
	K    *FakeKernel
	Path string
}

// NewChain creates chain (exit status 1 if it exists).
func (f *FakeCmd) NewChain(table, chain string) error {
	if _, ok := f.K.Tables[table][chain]; ok {
		return &ExitError{Status: 1, Msg: "iptables: Chain already exists."}
	}
	f.K.Tables[table][chain] = nil
	return nil
}

// Exists reports whether the rule is in chain (an error without chain).
func (f *FakeCmd) Exists(table, chain string, spec ...string) (bool, error) {
	rules, ok := f.K.Tables[table][chain]
	if !ok {
		return false, fmt.Errorf("no chain %q", chain)
	}
	s := canonical(spec)
	for _, r := range rules {
		if r == s {
			return true, nil
		}
	}
	return false, nil
}

// Insert puts the rule first in chain (pos is not used: the proxier
// inserts at 1), rejecting what the kernel rejects.
func (f *FakeCmd) Insert(table, chain string, pos int, spec ...string) error {
	tb := f.K.Tables[table]
	if _, ok := tb[chain]; !ok {
		return fmt.Errorf("no chain %q", chain)
	}
	if err := f.K.checkTarget(tb, spec); err != nil {
		return err
	}
	tb[chain] = append([]string{canonical(spec)}, tb[chain]...)
	return nil
}

// DeleteIfExists removes the rule from chain if it is there.
func (f *FakeCmd) DeleteIfExists(table, chain string, spec ...string) error {
	tb := f.K.Tables[table]
	s := canonical(spec)
	for i, r := range tb[chain] {
		if r == s {
			tb[chain] = append(tb[chain][:i:i], tb[chain][i+1:]...)
			return nil
		}
	}
	return nil
}

// canonical joins a rule's arguments as iptables-save prints them: the
// value of --comment always in double quotes.
func canonical(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if i > 0 && args[i-1] == "--comment" {
			a = `"` + a + `"`
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// Tokenize splits a restore line into arguments, honouring double quotes.
func Tokenize(line string) []string {
	var out []string
	var cur strings.Builder
	inQ, have := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '"':
			inQ = !inQ
			have = true
		case c == ' ' && !inQ:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(c)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}
