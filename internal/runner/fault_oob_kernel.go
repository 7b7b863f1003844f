//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	"github.com/proxybench/proxybench/internal/lib/xtables"
	"github.com/proxybench/proxybench/proxymodes/leftovers"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
)

// nodeOOB makes the out-of-band phase's changes in a node namespace with
// the kernel's own tools, as an administrator or another program on the
// node would: iptables-restore --noflush and iptables -S (both back
// ends: the one whose KUBE-SERVICES jumps to the service is the row's),
// nft, ipvsadm. It is the phase's oobKernel on a real testbed.
type nodeOOB struct{ ns *topology.Netns }

// lockTries bounds how often a tool that found the xtables lock held
// (exit 4 after its -w 5 s wait: /run/xtables.lock is shared by every
// network namespace of the machine, so by other runs' proxies too) is
// run again: about a minute in all.
const lockTries = 12

// run runs a tool in the node namespace, again while it finds the
// xtables lock held (lockTries); its error carries the tool's output.
func (k nodeOOB) run(ctx context.Context, stdin []byte, name string, args ...string) (string, error) {
	for try := 1; ; try++ {
		out, err := k.ns.Run(ctx, stdin, name, args...)
		if err == nil {
			return string(out), nil
		}
		if try < lockTries && ctx.Err() == nil && strings.Contains(string(out), "xtables lock") {
			continue
		}
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
}

// iptablesSaved is what make saved of an iptables service chain: the
// back end, the jump from KUBE-SERVICES (its -A line) and the chain's
// own -A lines (iptables -S).
type iptablesSaved struct {
	backend, chain, jump string
	rules                []string
}

// ipvsSaved is the real server make deleted.
type ipvsSaved struct{ real netip.AddrPort }

// nftSaved is the service-ips element make deleted and its verdict.
type nftSaved struct{ key, verdict string }

// serviceJump finds the KUBE-SERVICES rule of vip in the iptables lines
// of iptables -S KUBE-SERVICES: its -A line and the KUBE-SVC chain it
// jumps to ("" when none).
func serviceJump(lines string, vip netip.AddrPort) (rule, chain string) {
	dst := "-d " + vip.Addr().String() + "/32 "
	port := fmt.Sprintf("--dport %d ", vip.Port())
	for _, l := range strings.Split(lines, "\n") {
		if !strings.HasPrefix(l, "-A KUBE-SERVICES ") || !strings.Contains(l, dst) || !strings.Contains(l+" ", port) {
			continue
		}
		if i := strings.Index(l, "-j KUBE-SVC-"); i >= 0 {
			return l, strings.Fields(l[i+3:])[0]
		}
	}
	return "", ""
}

// natSave reads the nat table of back end b with iptables-save, which
// takes no xtables lock: polling with iptables -S -w would hold the
// machine-wide lock many times a second, and kube-proxy's canary check
// (iptables -w 5 -S) reads a lock it could not get within 5 s as the
// canary deleted (its ChainExists wraps the exit status that
// isResourceError looks for, k8s.io/kubernetes v1.37.2
// pkg/util/iptables), forcing a full sync the change did not cause.
func (k nodeOOB) natSave(ctx context.Context, b string) (string, error) {
	return k.run(ctx, nil, xtables.Binary(b, "save"), "-t", "nat")
}

// chainRules are the -A lines of chain in iptables-save output.
func chainRules(save, chain string) []string {
	var out []string
	for _, l := range strings.Split(save, "\n") {
		if strings.HasPrefix(l, "-A "+chain+" ") {
			out = append(out, l)
		}
	}
	return out
}

// findChain finds vip's service chain in either back end.
func (k nodeOOB) findChain(ctx context.Context, vip netip.AddrPort) (*iptablesSaved, error) {
	var errs []error
	for _, b := range leftovers.Backends {
		out, err := k.natSave(ctx, b)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		jump, chain := serviceJump(out, vip)
		if chain == "" {
			continue
		}
		return &iptablesSaved{backend: b, chain: chain, jump: jump, rules: chainRules(out, chain)}, nil
	}
	return nil, errors.Join(append(errs, fmt.Errorf("no KUBE-SERVICES rule jumps to a KUBE-SVC chain for %s in either iptables back end", vip))...)
}

func (k nodeOOB) restore(ctx context.Context, backend, table string, lines []string) error {
	in := "*" + table + "\n" + strings.Join(lines, "\n") + "\nCOMMIT\n"
	_, err := k.run(ctx, []byte(in), xtables.Binary(backend, "restore"), xtables.RestoreArgs("--noflush")...)
	return err
}

// nftElementRE matches a service-ips element in `nft get element`'s
// output: "198.18.0.5 . tcp . 80 : goto service-…".
var nftElementRE = regexp.MustCompile(`(\d+\.\d+\.\d+\.\d+ \. [a-z]+ \. \d+) : (goto|jump) ("[^"]+"|[^\s,}]+)`)

func nftKey(vip netip.AddrPort, proto string) string {
	return fmt.Sprintf("%s . %s . %d", vip.Addr(), strings.ToLower(proto), vip.Port())
}

// nftElement reads vip's element of service-ips: its verdict, "" when
// the map has no such element.
func (k nodeOOB) nftElement(ctx context.Context, key string) (string, error) {
	out, err := k.run(ctx, nil, "nft", "get", "element", "ip", "kube-proxy", "service-ips", "{ "+key+" }")
	if err != nil {
		if strings.Contains(err.Error(), "No such file or directory") || strings.Contains(err.Error(), "element does not exist") {
			return "", nil
		}
		return "", err
	}
	m := nftElementRE.FindStringSubmatch(out)
	if m == nil {
		return "", nil
	}
	return m[2] + " " + m[3], nil
}

// ipvsRealServers lists the real servers of virtual server vip (TCP),
// ok false when there is no such virtual server.
func (k nodeOOB) ipvsRealServers(ctx context.Context, vip netip.AddrPort) (reals []netip.AddrPort, ok bool, err error) {
	out, err := k.ns.Run(ctx, nil, "ipvsadm", "-Ln", "-t", vip.String())
	if err != nil {
		// ipvsadm says so on stderr, which Netns.Run puts in its error.
		if noVirtualServer(string(out) + err.Error()) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("ipvsadm -Ln -t %s: %w: %s", vip, err, strings.TrimSpace(string(out)))
	}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == "->" {
			if ap, perr := netip.ParseAddrPort(f[1]); perr == nil {
				reals = append(reals, ap)
			}
		}
	}
	return reals, true, nil
}

// noVirtualServer reports whether ipvsadm's output (stdout and stderr)
// says the virtual server asked for does not exist ("No such service",
// ipvsadm.c's error text for ESRCH).
func noVirtualServer(out string) bool {
	return strings.Contains(out, "No such service") || strings.Contains(out, "does not exist")
}

func (k nodeOOB) make(ctx context.Context, t *oobTarget) error {
	switch t.change.Name {
	case scenarios.OOBServiceChain, scenarios.OOBCanary:
		s, err := k.findChain(ctx, t.vip)
		if err != nil {
			return err
		}
		t.saved, t.object = s, fmt.Sprintf("%s nat %s (%d rules) and its KUBE-SERVICES jump", xtables.Binary(s.backend, ""), s.chain, len(s.rules))
		lines := []string{"-D" + strings.TrimPrefix(s.jump, "-A"), "-F " + s.chain, "-X " + s.chain}
		if err := k.restore(ctx, s.backend, "nat", lines); err != nil {
			return err
		}
		if t.change.Name == scenarios.OOBCanary {
			t.object += ", mangle KUBE-PROXY-CANARY"
			return k.restore(ctx, s.backend, "mangle", []string{"-F KUBE-PROXY-CANARY", "-X KUBE-PROXY-CANARY"})
		}
		return nil
	case scenarios.OOBMapElement:
		key := nftKey(t.vip, t.proto)
		v, err := k.nftElement(ctx, key)
		if err != nil {
			return err
		}
		if v == "" {
			return fmt.Errorf("nft: service-ips of table ip kube-proxy has no element %s", key)
		}
		t.saved, t.object = nftSaved{key: key, verdict: v}, "service-ips element "+key+" : "+v
		_, err = k.run(ctx, nil, "nft", "delete", "element", "ip", "kube-proxy", "service-ips", "{ "+key+" }")
		return err
	case scenarios.OOBRealServer:
		reals, ok, err := k.ipvsRealServers(ctx, t.vip)
		if err != nil {
			return err
		}
		if !ok || len(reals) == 0 {
			return fmt.Errorf("ipvs: virtual server %s has no real server", t.vip)
		}
		t.saved, t.endpoint = ipvsSaved{real: reals[0]}, reals[0]
		t.object = fmt.Sprintf("real server %s of TCP %s", reals[0], t.vip)
		_, err = k.run(ctx, nil, "ipvsadm", "-d", "-t", t.vip.String(), "-r", reals[0].String())
		return err
	case scenarios.OOBVirtualServer, scenarios.OOBExcludedVirtualServer:
		add := []netip.AddrPort{t.added}
		t.object = "virtual server TCP " + t.added.String()
		if t.change.Name == scenarios.OOBExcludedVirtualServer {
			add = append(add, t.witness)
			t.object += " (excluded), witness TCP " + t.witness.String() + " (service CIDR)"
		}
		for _, a := range add {
			if _, err := k.run(ctx, nil, "ipvsadm", "-A", "-t", a.String(), "-s", "rr"); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("out-of-band change %q has no kernel side", t.change.Name)
}

func (k nodeOOB) repaired(ctx context.Context, t *oobTarget) (bool, error) {
	switch t.change.Name {
	case scenarios.OOBServiceChain, scenarios.OOBCanary:
		s := t.saved.(*iptablesSaved)
		out, err := k.natSave(ctx, s.backend)
		if err != nil {
			return false, err
		}
		if _, chain := serviceJump(out, t.vip); chain != s.chain {
			return false, nil
		}
		return len(chainRules(out, s.chain)) > 0, nil
	case scenarios.OOBMapElement:
		v, err := k.nftElement(ctx, t.saved.(nftSaved).key)
		return v != "", err
	case scenarios.OOBRealServer:
		reals, _, err := k.ipvsRealServers(ctx, t.vip)
		for _, r := range reals {
			if r == t.saved.(ipvsSaved).real {
				return true, err
			}
		}
		return false, err
	case scenarios.OOBVirtualServer:
		_, ok, err := k.ipvsRealServers(ctx, t.added)
		return !ok, err
	case scenarios.OOBExcludedVirtualServer:
		_, ok, err := k.ipvsRealServers(ctx, t.witness)
		return !ok, err
	}
	return false, fmt.Errorf("out-of-band change %q has no kernel side", t.change.Name)
}

func (k nodeOOB) present(ctx context.Context, t *oobTarget) (bool, error) {
	_, ok, err := k.ipvsRealServers(ctx, t.added)
	return ok, err
}

func (k nodeOOB) putBack(ctx context.Context, t *oobTarget) error {
	switch t.change.Name {
	case scenarios.OOBServiceChain, scenarios.OOBCanary:
		s := t.saved.(*iptablesSaved)
		lines := append([]string{":" + s.chain + " - [0:0]"}, s.rules...)
		lines = append(lines, s.jump)
		err := k.restore(ctx, s.backend, "nat", lines)
		if t.change.Name == scenarios.OOBCanary {
			err = errors.Join(err, k.restore(ctx, s.backend, "mangle", []string{":KUBE-PROXY-CANARY - [0:0]"}))
		}
		return err
	case scenarios.OOBMapElement:
		s := t.saved.(nftSaved)
		_, err := k.run(ctx, nil, "nft", "add", "element", "ip", "kube-proxy", "service-ips", "{ "+s.key+" : "+s.verdict+" }")
		return err
	case scenarios.OOBRealServer:
		_, err := k.run(ctx, nil, "ipvsadm", "-a", "-t", t.vip.String(), "-r", t.saved.(ipvsSaved).real.String(), "-m")
		return err
	case scenarios.OOBVirtualServer, scenarios.OOBExcludedVirtualServer:
		var errs []error
		for _, a := range []netip.AddrPort{t.added, t.witness} {
			if !a.IsValid() {
				continue
			}
			if _, ok, err := k.ipvsRealServers(ctx, a); err != nil || !ok {
				errs = append(errs, err)
				continue
			}
			_, err := k.run(ctx, nil, "ipvsadm", "-D", "-t", a.String())
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}
	return nil
}
