package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/internal/lib/xtables"
)

// RootSnapshot captures the host root namespace's iptables and ip6tables
// (both back ends), nftables ruleset, IPv4 and IPv6 routes and rules,
// links, addresses and net sysctls (IPv4's and IPv6's) as text, for a
// before/after comparison: the testbed must never change any of them.
func RootSnapshot(t testing.TB) map[string]string {
	t.Helper()
	snap := map[string]string{}
	run := func(key string, name string, args ...string) {
		if _, err := exec.LookPath(name); err != nil {
			return
		}
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v: %s", name, args, err, out)
		}
		var keep []string
		for _, l := range strings.Split(string(out), "\n") {
			// Comment lines of *-save carry timestamps; counters change with traffic.
			if strings.HasPrefix(l, "#") {
				continue
			}
			keep = append(keep, l)
		}
		snap[key] = strings.Join(keep, "\n")
	}
	for _, be := range []string{"legacy", "nft"} {
		run(xtables.Binary(be, ""), xtables.Binary(be, "save"))
		run(xtables.Binary6(be, ""), xtables.Binary6(be, "save"))
	}
	run("nft", "nft", "list", "ruleset")
	run("routes", "ip", "route", "show", "table", "all")
	run("rules", "ip", "rule", "show")
	if _, err := os.Stat("/proc/sys/net/ipv6"); err == nil {
		// `ip route` and `ip rule` show IPv4 only.
		run("routes6", "ip", "-6", "route", "show", "table", "all")
		run("rules6", "ip", "-6", "rule", "show")
	}
	run("links", "ip", "-o", "link", "show")
	run("addrs", "ip", "-o", "addr", "show")
	// Every net.* sysctl of the root namespace that a testbed could touch.
	for _, dir := range []string{"/proc/sys/net/ipv4", "/proc/sys/net/ipv4/conf/all", "/proc/sys/net/ipv4/conf/default", "/proc/sys/net/core", "/proc/sys/net/netfilter",
		"/proc/sys/net/ipv6", "/proc/sys/net/ipv6/conf/all", "/proc/sys/net/ipv6/conf/default"} {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if e.IsDir() {
				continue
			}
			p := filepath.Join(dir, e.Name())
			if strings.Contains(p, "nf_conntrack_count") || strings.HasSuffix(p, "_stat") {
				continue // live counters, not settings
			}
			if b, err := os.ReadFile(p); err == nil {
				snap[p] = string(b)
			}
		}
	}
	return snap
}

// CompareRoot fails the test for every key whose value differs from before.
func CompareRoot(t testing.TB, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("root namespace changed: %s\nbefore:\n%s\nafter:\n%s", k, v, after[k])
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("root namespace changed: %s appeared", k)
		}
	}
}

// RootListeners lists the TCP and UDP sockets listening in the root
// namespace (`ss -Hltunp`, run from this process, which lives there)
// that belong to this process or to one of pids (its testbed children):
// a testbed must never listen there. Lines as ss prints them; nil when
// there are none, or without ss.
func RootListeners(t testing.TB, pids ...int) []string {
	t.Helper()
	if _, err := exec.LookPath("ss"); err != nil {
		return nil
	}
	out, err := exec.Command("ss", "-Hltunp").CombinedOutput()
	if err != nil {
		t.Fatalf("ss -Hltunp: %v: %s", err, out)
	}
	own := append([]int{os.Getpid()}, pids...)
	var found []string
	for _, l := range strings.Split(string(out), "\n") {
		for _, p := range own {
			if strings.Contains(l, "pid="+strconv.Itoa(p)+",") {
				found = append(found, strings.TrimSpace(l))
				break
			}
		}
	}
	return found
}
