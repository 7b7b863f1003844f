package leftovers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/proxybench/proxybench/internal/lib/xtables"
	"github.com/proxybench/proxybench/proxymodes"
)

// IPTables is one iptables back end and family in a node namespace,
// used by the modes' CleanupLeftovers (what kube-proxy's
// pkg/util/iptables calls do: DeleteRule, a save and a restore
// --noflush, FlushChain, DeleteChain), each with -w 5 as kube-proxy.
type IPTables struct {
	Node proxymodes.Node
	// Cmd is the tool's name without -save/-restore: "iptables-legacy",
	// "ip6tables-nft".
	Cmd string
}

// Families are the IPTables of back end be: IPv4 and IPv6, as kube-proxy
// cleans up both (utiliptables.NewBestEffort).
func Families(node proxymodes.Node, be string) []IPTables {
	return []IPTables{{node, "iptables-" + be}, {node, "ip6tables-" + be}}
}

// notFound reports whether an iptables or ipset error is about a rule,
// chain or set that is not there (kube-proxy's IsNotFoundError: nothing
// to remove).
func notFound(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	for _, m := range []string{"does a matching rule exist", "No chain/target/match by that name", "does not exist", "No such file or directory", "doesn't exist"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// DeleteRule deletes one rule (`-t table -D chain spec...`); a rule or
// chain that is not there is no error.
func (t IPTables) DeleteRule(ctx context.Context, table, chain string, spec ...string) error {
	args := append([]string{"-w", "5", "-t", table, "-D", chain}, spec...)
	if _, err := t.Node.Run(ctx, nil, t.Cmd, args...); err != nil && !notFound(err) {
		return err
	}
	return nil
}

// Usable says whether the family works in the namespace (its save runs):
// kube-proxy's NewBestEffort skips a family whose iptables does not.
func (t IPTables) Usable(ctx context.Context) bool {
	_, err := t.Node.Run(ctx, nil, t.Cmd+"-save", "-t", "filter")
	return err == nil
}

// DropChainsInput is the restore input that flushes then deletes, in
// table, every chain of save (iptables-save -t table output) that is in
// names or that match accepts (nil: none), in the order they appear; nil
// when there is none. As kube-proxy's CleanupLeftovers writes it: ":C -
// [0:0]" lines, then "-X C" lines, one COMMIT.
func DropChainsInput(save []byte, table string, names []string, match func(string) bool) []byte {
	var chains []string
	for _, l := range strings.Split(string(save), "\n") {
		if !strings.HasPrefix(l, ":") {
			continue
		}
		name, _, _ := strings.Cut(l[1:], " ")
		for _, n := range names {
			if n == name {
				chains = append(chains, name)
				name = ""
				break
			}
		}
		if name != "" && match != nil && match(name) {
			chains = append(chains, name)
		}
	}
	if len(chains) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("*" + table + "\n")
	for _, c := range chains {
		b.WriteString(":" + c + " - [0:0]\n")
	}
	for _, c := range chains {
		b.WriteString("-X " + c + "\n")
	}
	b.WriteString("COMMIT\n")
	return b.Bytes()
}

// DropChains flushes and deletes, in one restore --noflush, the chains
// of table that are in names or that match accepts (DropChainsInput).
// The restore is atomic: a chain still referenced from elsewhere fails
// it, and then no chain of the table is removed (iptables-restore
// commits a table whole or not at all).
func (t IPTables) DropChains(ctx context.Context, table string, names []string, match func(string) bool) error {
	save, err := t.Node.Run(ctx, nil, t.Cmd+"-save", "-t", table)
	if err != nil {
		return err
	}
	in := DropChainsInput(save, table, names, match)
	if in == nil {
		return nil
	}
	if _, err := t.Node.Run(ctx, in, t.Cmd+"-restore", xtables.RestoreArgs("--noflush")...); err != nil {
		return fmt.Errorf("%s-restore of table %s: %w", t.Cmd, table, err)
	}
	return nil
}

// FlushChain and DeleteChain are `-F` and `-X` of one chain; a chain that
// is not there is no error.
func (t IPTables) FlushChain(ctx context.Context, table, chain string) error {
	return t.chainOp(ctx, "-F", table, chain)
}

func (t IPTables) DeleteChain(ctx context.Context, table, chain string) error {
	return t.chainOp(ctx, "-X", table, chain)
}

func (t IPTables) chainOp(ctx context.Context, op, table, chain string) error {
	if _, err := t.Node.Run(ctx, nil, t.Cmd, "-w", "5", "-t", table, op, chain); err != nil && !notFound(err) {
		return err
	}
	return nil
}

// DestroySet destroys an ipset; a set that is not there is no error.
func DestroySet(ctx context.Context, node proxymodes.Node, name string) error {
	if _, err := node.Run(ctx, nil, "ipset", "destroy", name); err != nil && !notFound(err) {
		return err
	}
	return nil
}

// DeleteNFTTable deletes nft table family name; a table that is not
// there is no error.
func DeleteNFTTable(ctx context.Context, node proxymodes.Node, family, name string) error {
	if _, err := node.Run(ctx, nil, "nft", "delete", "table", family, name); err != nil && !notFound(err) {
		return err
	}
	return nil
}

// Errors joins the errors of a best-effort cleanup (every step runs;
// kube-proxy logs each failure and reports that one happened).
type Errors struct{ errs []error }

// Add keeps err (nil is ignored).
func (e *Errors) Add(err error) {
	if err != nil {
		e.errs = append(e.errs, err)
	}
}

// Err is every kept error, joined; nil when none.
func (e *Errors) Err() error { return errors.Join(e.errs...) }

// ResetInput is iptables-restore input (without --noflush: each table
// listed is replaced whole) that holds save's tables without any KUBE-*
// chain and without the rules of other chains that jump to one; nil when
// save has none.
func ResetInput(save []byte) []byte {
	var b bytes.Buffer
	found := false
	for _, l := range strings.Split(string(save), "\n") {
		switch {
		case strings.HasPrefix(l, "#"), l == "":
			continue
		case strings.HasPrefix(l, ":KUBE-"):
			found = true
			continue
		case strings.HasPrefix(l, "-A "):
			f := strings.Fields(l)
			if strings.HasPrefix(f[1], "KUBE-") || strings.HasPrefix(jumpTarget(f), "KUBE-") {
				found = true
				continue
			}
		}
		b.WriteString(l + "\n")
	}
	if !found {
		return nil
	}
	return b.Bytes()
}

// Reset removes every proxy object Read finds from node, whoever wrote
// it (a clean node before a mode switch): every KUBE-* chain and every
// jump into one, in each table of both back ends and families (the
// table's save, filtered, restored whole); the nft tables named
// kube-proxy; the IPVS table and kube-ipvs0 (when the kernel has IP_VS);
// every KUBE-* ipset.
func Reset(ctx context.Context, node proxymodes.Node) error {
	var errs Errors
	for _, be := range Backends {
		for _, t := range Families(node, be) {
			save, err := node.Run(ctx, nil, t.Cmd+"-save")
			if err != nil {
				continue // the family does not run here
			}
			if in := ResetInput(save); in != nil {
				if _, err := node.Run(ctx, in, t.Cmd+"-restore", xtables.RestoreWait...); err != nil {
					errs.Add(fmt.Errorf("%s-restore: %w", t.Cmd, err))
				}
			}
		}
	}
	for _, fam := range []string{"ip", "ip6"} {
		errs.Add(DeleteNFTTable(ctx, node, fam, "kube-proxy"))
	}
	inv, err := Read(ctx, node)
	if err != nil {
		errs.Add(err)
	}
	if slices.ContainsFunc(inv, func(o Object) bool { return o.Kind == KindVirtual }) {
		if _, err := node.Run(ctx, nil, "ipvsadm", "-C"); err != nil {
			errs.Add(err)
		}
	}
	for _, o := range inv {
		switch o.Kind {
		case KindDevice:
			if _, err := node.Run(ctx, nil, "ip", "link", "del", o.Name); err != nil {
				errs.Add(err)
			}
		}
	}
	for _, o := range inv {
		if o.Kind == KindIPSet {
			errs.Add(DestroySet(ctx, node, o.Name))
		}
	}
	return errs.Err()
}
