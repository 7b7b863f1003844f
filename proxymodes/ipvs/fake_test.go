//go:build linux

package ipvs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/ipvs"
	"golang.org/x/sys/unix"

	ipvstest "github.com/proxybench/proxybench/proxymodes/ipvs/testing"
	"github.com/proxybench/proxybench/workload"
)

// The fakes stand in for the kernel's handles.
var (
	_ Handle    = (*ipvstest.FakeHandle)(nil)
	_ Addresses = (*ipvstest.FakeAddresses)(nil)
)

// fakeNode records what runs in the namespace and keeps a miniature nat
// and filter table (chains and rules as iptables-save prints them) and
// the ipset names, so the jump check and Cleanup see what earlier runs
// did. Do never runs fn (it would touch this machine's root namespace).
type fakeNode struct {
	mu    sync.Mutex
	runs  []string            // "name args...\n<stdin>"
	rules map[string][]string // table → "-A CHAIN spec"
	chain map[string]map[string]bool
	sets  map[string]bool
	fail  string // a program name that fails
}

func newFakeNode() *fakeNode {
	return &fakeNode{rules: map[string][]string{}, chain: map[string]map[string]bool{"nat": {}, "filter": {}}, sets: map[string]bool{}}
}

// allRules lists the rules of both tables.
func (n *fakeNode) allRules() []string {
	return append(slices.Clone(n.rules["nat"]), n.rules["filter"]...)
}

// chains counts the kube-proxy chains of both tables.
func (n *fakeNode) chains() int { return len(n.chain["nat"]) + len(n.chain["filter"]) }

var builtinChains = map[string][]string{"nat": {"PREROUTING", "OUTPUT", "POSTROUTING"}, "filter": {"INPUT", "FORWARD", "OUTPUT"}}

func (n *fakeNode) Do(fn func() error) error { return nil }

func (n *fakeNode) Run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.runs = append(n.runs, strings.Join(append([]string{name}, args...), " ")+"\n"+string(stdin))
	if name == n.fail {
		return nil, errors.New(name + ": injected failure")
	}
	switch name {
	case binSave:
		table := "nat"
		if len(args) == 2 && args[0] == "-t" {
			table = args[1]
		}
		var b strings.Builder
		b.WriteString("*" + table + "\n")
		for _, c := range builtinChains[table] {
			b.WriteString(":" + c + " ACCEPT [0:0]\n")
		}
		for c := range n.chain[table] {
			b.WriteString(":" + c + " - [0:0]\n")
		}
		for _, r := range n.rules[table] {
			b.WriteString(r + "\n")
		}
		b.WriteString("COMMIT\n")
		return []byte(b.String()), nil
	case binRestore:
		table := ""
		for _, l := range strings.Split(string(stdin), "\n") {
			f := strings.Fields(l)
			switch {
			case strings.HasPrefix(l, "*"):
				table = l[1:]
			case strings.HasPrefix(l, ":"):
				c := strings.TrimPrefix(f[0], ":")
				n.chain[table][c] = true
				n.rules[table] = slices.DeleteFunc(n.rules[table], func(r string) bool { return strings.HasPrefix(r, "-A "+c+" ") })
			case strings.HasPrefix(l, "-A "):
				n.rules[table] = append(n.rules[table], l)
			case strings.HasPrefix(l, "-I "):
				n.rules[table] = append([]string{"-A " + f[1] + " " + strings.Join(f[3:], " ")}, n.rules[table]...)
			case strings.HasPrefix(l, "-D "):
				n.rules[table] = slices.DeleteFunc(n.rules[table], func(r string) bool { return r == "-A "+l[3:] })
			case strings.HasPrefix(l, "-X "):
				delete(n.chain[table], f[1])
			}
		}
	case binIPSet:
		if len(args) > 1 && args[1] == "restore" {
			for _, l := range strings.Split(string(stdin), "\n") {
				if f := strings.Fields(l); len(f) > 1 && f[0] == "create" {
					n.sets[f[1]] = true
				}
			}
		}
		if args[0] == "list" {
			var names []string
			for s := range n.sets {
				names = append(names, s)
			}
			return []byte(strings.Join(names, "\n")), nil
		}
		if args[0] == "destroy" {
			delete(n.sets, args[1])
		}
	}
	return nil, nil
}

// take returns and forgets the recorded runs.
func (n *fakeNode) take() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.runs
	n.runs = nil
	return r
}

type rig struct {
	h    *ipvstest.FakeHandle
	a    *ipvstest.FakeAddresses
	node *fakeNode
	p    *Proxier
}

func newRig(cfg Config) *rig {
	r := &rig{h: ipvstest.NewFakeHandle(), a: ipvstest.NewFakeAddresses(), node: newFakeNode()}
	r.p = NewWithHandles(cfg, r.node, r.h, r.a)
	return r
}

func (r *rig) sync(t *testing.T, svcs []workload.Service) {
	t.Helper()
	if _, err := r.p.Sync(context.Background(), svcs); err != nil {
		t.Fatal(err)
	}
}

// wantTable is the fake's dump of fixture() under testCfg.
const wantTable = `TCP 198.18.0.1:80 rr
  -> 198.19.0.1:8080 Masq 1
TCP 198.18.0.2:80 rr
  -> 198.19.0.2:8080 Masq 3
  -> 198.19.0.3:8080 Masq 1
  -> 198.19.0.5:8080 Masq 1
TCP 198.18.0.3:80 rr
UDP 198.18.0.1:53 rr
  -> 198.19.0.1:5353 Masq 1
`

func TestSyncFullFromEmpty(t *testing.T) {
	r := newRig(testCfg)
	st, err := r.p.Sync(context.Background(), fixture())
	if err != nil {
		t.Fatal(err)
	}
	if got := r.h.Dump(); got != wantTable {
		t.Errorf("IPVS table:\n%s\nwant:\n%s", got, wantTable)
	}
	addrs, _ := r.a.List()
	if want := []netip.Addr{netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2"), netip.MustParseAddr("198.18.0.3")}; !slices.Equal(addrs, want) {
		t.Errorf("kube-ipvs0 addresses %v, want %v", addrs, want)
	}
	// 4 virtual + 5 real + 3 addresses + 7 set members (4 in
	// KUBE-CLUSTER-IP, 3 in KUBE-IPVS-IPS) + 19 rules + 9 jumps.
	if st.Kind != "full" || st.Objects != 47 || st.Bytes <= 0 || st.Wall <= 0 {
		t.Errorf("stats %+v", st)
	}
	for _, ph := range []string{"render", "addresses", "ipvs", "ipset", "iptables"} {
		if _, ok := st.Phases[ph]; !ok {
			t.Errorf("phase %q missing from %v", ph, st.Phases)
		}
	}
	runs := r.node.take()
	if len(runs) != 4 || !strings.HasPrefix(runs[0], "ipset -exist restore\ncreate KUBE-LOOP-BACK hash:ip,port,ip") ||
		!strings.Contains(runs[0], "\ncreate KUBE-NODE-PORT-TCP bitmap:port range 0-65535\nflush KUBE-NODE-PORT-TCP\n") ||
		!strings.Contains(runs[0], "add KUBE-CLUSTER-IP 198.18.0.1,udp:53\n") || !strings.Contains(runs[0], "add KUBE-IPVS-IPS 198.18.0.3\n") ||
		!strings.HasPrefix(runs[1], binSave+" -t nat") || !strings.HasPrefix(runs[2], binSave+" -t filter") ||
		!strings.HasPrefix(runs[3], binRestore+" -w 5 --noflush\n*nat\n") || strings.Count(runs[3], "\n-I ") != 9 {
		t.Errorf("runs:\n%s", strings.Join(runs, "\n---\n"))
	}
	// kube-proxy's jumps, each first of its chain in its order.
	if got := r.node.rules["filter"]; len(got) < 5 || got[0] != `-A OUTPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-OUT-FILTER` ||
		got[1] != `-A INPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER` ||
		got[3] != `-A INPUT -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL` {
		t.Errorf("filter rules %q", got)
	}
	// The second full sync finds the jumps in place and sends nothing else.
	r.p.ForceFullSync()
	r.h.ResetCalls()
	st, err = r.p.Sync(context.Background(), fixture())
	if err != nil {
		t.Fatal(err)
	}
	runs = r.node.take()
	if st.Kind != "full" || strings.Count(runs[len(runs)-1], "\n-I ") != 0 {
		t.Errorf("second full sync: %+v, runs %q", st, runs)
	}
	c := r.h.Calls()
	if c["GetDestinations"] != 4 || c["NewService"]+c["UpdateService"]+c["NewDestination"]+c["UpdateDestination"]+c["DelDestination"]+c["DelService"] != 0 {
		t.Errorf("full sync of an unchanged table: calls %v, want only reads", c)
	}
}

// TestSyncIncrementalTouchesOneRealServer: at 100 services, replacing one
// endpoint of one service sends one delete and one add of a real server,
// reads only that service's real servers, and runs nothing.
func TestSyncIncrementalTouchesOneRealServer(t *testing.T) {
	r := newRig(testCfg)
	svcs := genServices(100, 3)
	r.sync(t, svcs)
	r.node.take()
	r.h.ResetCalls()
	added := r.a.Added
	svcs[42].Endpoints[1].IP = netip.MustParseAddr("198.19.100.1")
	st, err := r.p.Sync(context.Background(), svcs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"GetServices": 1, "GetDestinations": 1, "NewDestination": 1, "DelDestination": 1}
	if c := r.h.Calls(); !mapsEqual(c, want) {
		t.Errorf("calls %v, want %v", c, want)
	}
	if st.Kind != "incremental" || st.Objects != 2 || st.Bytes != 2*(16+4+serviceAttrLen(&ipvs.Service{SchedName: "rr"})+destAttrLen) {
		t.Errorf("stats %+v", st)
	}
	if runs := r.node.take(); len(runs) != 0 || r.a.Added != added || r.a.Deleted != 0 {
		t.Errorf("incremental sync ran %q, added %d deleted %d addresses", runs, r.a.Added-added, r.a.Deleted)
	}
	// Changing a weight updates that real server in place.
	r.h.ResetCalls()
	svcs[7].Endpoints[0].Weight = 5
	r.sync(t, svcs)
	if c := r.h.Calls(); c["UpdateDestination"] != 1 || c["NewDestination"]+c["DelDestination"] != 0 {
		t.Errorf("weight change: calls %v", c)
	}
	// Nothing changed: one dump, nothing sent.
	r.h.ResetCalls()
	st, _ = r.p.Sync(context.Background(), svcs)
	if c := r.h.Calls(); !mapsEqual(c, map[string]int{"GetServices": 1}) || st.Objects != 0 {
		t.Errorf("no-op sync: calls %v, %+v", c, st)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestSyncRemovesStaleExceptExcluded: virtual servers a sync does not want
// are deleted (with their addresses and ipset entries), except those in
// excludeCIDRs.
func TestSyncRemovesStaleExceptExcluded(t *testing.T) {
	cfg := testCfg
	cfg.ExcludeCIDRs = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	r := newRig(cfg)
	foreign := &ipvs.Service{Address: net.ParseIP("10.1.2.3").To4(), Protocol: unix.IPPROTO_TCP, Port: 443, SchedName: "wlc", AddressFamily: unix.AF_INET}
	other := &ipvs.Service{Address: net.ParseIP("198.18.200.1").To4(), Protocol: unix.IPPROTO_TCP, Port: 80, SchedName: "rr", AddressFamily: unix.AF_INET}
	for _, s := range []*ipvs.Service{foreign, other} {
		if err := r.h.NewService(s); err != nil {
			t.Fatal(err)
		}
	}
	svcs := genServices(100, 2)
	r.sync(t, svcs)
	if err := r.h.DelService(other); !errors.Is(err, unix.ESRCH) {
		t.Errorf("virtual server outside excludeCIDRs survived the sync (delete: %v)", err)
	}
	r.node.take()
	st, err := r.p.Sync(context.Background(), svcs[:60])
	if err != nil {
		t.Fatal(err)
	}
	if c := r.h.Calls(); c["DelService"] != 42 || c["DelDestination"] != 0 {
		t.Errorf("shrink to 60: calls %v, want 40 (+1 by the first sync, +1 by the check)", c)
	}
	if r.a.Deleted != 40 || st.Objects != 40+40+40+40 {
		t.Errorf("shrink to 60: %d addresses deleted, %d objects", r.a.Deleted, st.Objects)
	}
	runs := r.node.take()
	if len(runs) != 1 || strings.Count(runs[0], "\ndel KUBE-CLUSTER-IP ") != 40 || strings.Count(runs[0], "\ndel KUBE-IPVS-IPS ") != 40 {
		t.Errorf("runs %q", runs)
	}
	if got := r.h.Dump(); !strings.Contains(got, "TCP 10.1.2.3:443 wlc\n") {
		t.Errorf("excluded virtual server removed:\n%s", got)
	}
	if err := r.p.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := r.h.Dump(); got != "TCP 10.1.2.3:443 wlc\n" {
		t.Errorf("after Cleanup:\n%s", got)
	}
	if _, err := r.a.List(); !errors.Is(err, unix.ENODEV) {
		t.Errorf("kube-ipvs0 after Cleanup: %v", err)
	}
	if len(r.node.allRules()) != 0 || r.node.chains() != 0 || len(r.node.sets) != 0 {
		t.Errorf("after Cleanup: rules %q chains %v sets %v", r.node.allRules(), r.node.chain, r.node.sets)
	}
	// A Sync after Cleanup is full and programs everything again: 19
	// rules, 9 jumps, 11 chains, 17 sets.
	st, err = r.p.Sync(context.Background(), svcs)
	if err != nil || st.Kind != "full" || len(r.node.allRules()) != 28 || r.node.chains() != 11 || len(r.node.sets) != len(SetNames) {
		t.Errorf("sync after Cleanup: %+v %v rules %q", st, err, r.node.allRules())
	}
}

// TestSyncFailureForcesFull: an IPVS error mid-sync fails the Sync; the
// next is full and converges.
func TestSyncFailureForcesFull(t *testing.T) {
	r := newRig(testCfg)
	svcs := genServices(50, 3)
	r.sync(t, svcs)
	svcs = genServices(60, 3)
	r.h.FailAfter(5, unix.ENOMEM)
	if _, err := r.p.Sync(context.Background(), svcs); !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("err = %v, want ENOMEM", err)
	}
	st, err := r.p.Sync(context.Background(), svcs)
	if err != nil || st.Kind != "full" {
		t.Fatalf("after failure: %+v %v", st, err)
	}
	want := newRig(testCfg)
	want.sync(t, svcs)
	if got := r.h.Dump(); got != want.h.Dump() {
		t.Errorf("table after recovery differs from a fresh sync")
	}
	// iptables is restored again after a failed sync.
	r.node.fail = binRestore
	r.p.ForceFullSync()
	if _, err := r.p.Sync(context.Background(), svcs); err == nil {
		t.Fatal("restore failure not reported")
	}
	r.node.fail = ""
	st, err = r.p.Sync(context.Background(), svcs)
	runs := r.node.take()
	if err != nil || st.Kind != "full" || !strings.HasPrefix(runs[len(runs)-1], binRestore) {
		t.Errorf("after restore failure: %+v %v", st, err)
	}
}

// TestSyncConfigChanges: timeouts reach SetConfig; a scheduler or
// affinity change updates every virtual server in place.
func TestSyncConfigChanges(t *testing.T) {
	cfg := testCfg
	cfg.TCPTimeout, cfg.UDPTimeout = 900*time.Second, 30*time.Second
	r := newRig(cfg)
	r.sync(t, fixture())
	if c := r.h.Config(); c.TimeoutTCP != 900*time.Second || c.TimeoutUDP != 30*time.Second || c.TimeoutTCPFin != 0 {
		t.Errorf("timeouts %+v", c)
	}
	cfg.Scheduler, cfg.SessionAffinity, cfg.AffinityTimeout = "sh", true, 60*time.Second
	p := NewWithHandles(cfg, r.node, r.h, r.a)
	r.h.ResetCalls()
	if _, err := p.Sync(context.Background(), fixture()); err != nil {
		t.Fatal(err)
	}
	if c := r.h.Calls(); c["UpdateService"] != 4 || c["NewService"]+c["DelService"] != 0 {
		t.Errorf("calls %v", c)
	}
	if got := r.h.Dump(); !strings.Contains(got, "TCP 198.18.0.2:80 sh persistent 60\n") {
		t.Errorf("table:\n%s", got)
	}
}

// TestFakeHandleRejectsLikeKernel pins the kernel's errors the fake
// reproduces (ip_vs_ctl.c).
func TestFakeHandleRejectsLikeKernel(t *testing.T) {
	f := ipvstest.NewFakeHandle()
	s := &ipvs.Service{Address: net.ParseIP("198.18.0.1").To4(), Protocol: unix.IPPROTO_TCP, Port: 80, SchedName: "rr", AddressFamily: unix.AF_INET}
	d := &ipvs.Destination{Address: net.ParseIP("198.19.0.1").To4(), Port: 8080, Weight: 1}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"dest without service", f.NewDestination(s, d), unix.ESRCH},
		{"delete missing service", f.DelService(s), unix.ESRCH},
		{"update missing service", f.UpdateService(s), unix.ESRCH},
		{"unknown scheduler", f.NewService(&ipvs.Service{Address: s.Address, Protocol: s.Protocol, Port: 81, SchedName: "nope"}), unix.ENOENT},
		{"add service", f.NewService(s), nil},
		{"add service twice", f.NewService(s), unix.EEXIST},
		{"delete missing dest", f.DelDestination(s, d), unix.ENOENT},
		{"update missing dest", f.UpdateDestination(s, d), unix.ENOENT},
		{"add dest", f.NewDestination(s, d), nil},
		{"add dest twice", f.NewDestination(s, d), unix.EEXIST},
		{"negative weight", f.NewDestination(s, &ipvs.Destination{Address: net.ParseIP("198.19.0.2").To4(), Port: 1, Weight: -1}), unix.EINVAL},
		{"delete service", f.DelService(s), nil},
		{"dest gone with service", f.DelDestination(s, d), unix.ESRCH},
	} {
		if !errors.Is(tc.err, tc.want) || (tc.want == nil) != (tc.err == nil) {
			t.Errorf("%s: err %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	a := ipvstest.NewFakeAddresses()
	x := []netip.Addr{netip.MustParseAddr("198.18.0.1")}
	if _, err := a.Add(x); !errors.Is(err, unix.ENODEV) {
		t.Errorf("add without link: %v", err)
	}
	_ = a.EnsureLink()
	if _, err := a.Add(x); err != nil {
		t.Error(err)
	}
	if _, err := a.Add(x); !errors.Is(err, unix.EEXIST) {
		t.Errorf("add twice: %v", err)
	}
	if _, err := a.Del([]netip.Addr{netip.MustParseAddr("198.18.0.2")}); !errors.Is(err, unix.EADDRNOTAVAIL) {
		t.Errorf("delete missing: %v", err)
	}
}

// TestPlanReadsKernelState: Plan diffs against what the kernel holds, not
// what the proxier believes: a real server deleted behind its back comes
// back on a full sync.
func TestPlanReadsKernelState(t *testing.T) {
	r := newRig(testCfg)
	r.sync(t, fixture())
	s := &ipvs.Service{Address: net.ParseIP("198.18.0.2").To4(), Protocol: unix.IPPROTO_TCP, Port: 80, SchedName: "rr", AddressFamily: unix.AF_INET}
	if err := r.h.DelDestination(s, &ipvs.Destination{Address: net.ParseIP("198.19.0.3").To4(), Port: 8080}); err != nil {
		t.Fatal(err)
	}
	r.p.ForceFullSync()
	r.sync(t, fixture())
	if got := r.h.Dump(); got != wantTable {
		t.Errorf("after full resync:\n%s", got)
	}
}

func BenchmarkFakeFullSync(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		svcs := genServices(n, 3)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				r := newRig(testCfg)
				if _, err := r.p.Sync(context.Background(), svcs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestResyncRepairsOutOfBand: a real server and a kube-ipvs0 address
// deleted behind the proxier's back stay deleted through an incremental
// Sync with nothing changed (it reads back only changed services), and
// the Sync after Resync reads every virtual server's real servers and the
// addresses, re-adds both and nothing else, and is not full; the Sync
// after that reads nothing again (kube-proxy's IPVS proxier reads every
// real server on each sync: pkg/proxy/ipvs/proxier.go syncEndpoint).
func TestResyncRepairsOutOfBand(t *testing.T) {
	r := newRig(testCfg)
	svcs := genServices(20, 3)
	r.sync(t, svcs)
	want := r.h.Dump()
	rs, err := Render(testCfg, svcs)
	if err != nil {
		t.Fatal(err)
	}
	v := &rs.Virtual[7]
	if err := r.h.DelDestination(toService(v), toDest(v.Reals[1])); err != nil {
		t.Fatal(err)
	}
	if _, err := r.a.Del([]netip.Addr{v.Address}); err != nil {
		t.Fatal(err)
	}
	deleted := r.h.Dump()
	r.sync(t, svcs)
	if got := r.h.Dump(); got != deleted {
		t.Fatalf("incremental sync changed the table:\n%s", got)
	}
	r.node.take()
	r.h.ResetCalls()
	r.p.Resync()
	st, err := r.p.Sync(context.Background(), svcs)
	if err != nil {
		t.Fatal(err)
	}
	if c := r.h.Calls(); !mapsEqual(c, map[string]int{"GetServices": 1, "GetDestinations": len(rs.Virtual), "NewDestination": 1}) {
		t.Errorf("resync calls %v", c)
	}
	if got := r.h.Dump(); got != want {
		t.Errorf("after Resync:\n%s\nwant:\n%s", got, want)
	}
	if addrs, _ := r.a.List(); !slices.Contains(addrs, v.Address) {
		t.Errorf("kube-ipvs0 lacks %s after Resync: %v", v.Address, addrs)
	}
	if st.Kind != "incremental" || st.Objects != 2 {
		t.Errorf("resync stats %+v, want incremental with 2 objects (a real server, an address)", st)
	}
	if runs := r.node.take(); len(runs) != 0 {
		t.Errorf("resync ran %q, want no ipset or iptables", runs)
	}
	r.h.ResetCalls()
	r.sync(t, svcs)
	if c := r.h.Calls(); !mapsEqual(c, map[string]int{"GetServices": 1}) {
		t.Errorf("sync after the resync: calls %v, want one dump", c)
	}
}

// TestBatchMessageBytes: the batched requests have the size moby/ipvs's
// would (opBytes, used for SyncStats.Bytes with per-object handles).
func TestBatchMessageBytes(t *testing.T) {
	rs, err := Render(Config{Scheduler: "lblcr", SessionAffinity: true, AffinityTimeout: time.Hour}, fixture())
	if err != nil {
		t.Fatal(err)
	}
	v := &rs.Virtual[1]
	s := toService(v)
	for _, op := range []Op{{Kind: OpNewService, Service: s}, {Kind: OpDelService, Service: s}, {Kind: OpNewDestination, Service: s, Dest: toDest(v.Reals[0])}} {
		b := appendIPVSMsg(nil, 0x20, op)
		if len(b) != opBytes(op) || int(nativeU32(b)) != len(b) {
			t.Errorf("%s: %d bytes, header says %d, opBytes %d", op.Kind, len(b), nativeU32(b), opBytes(op))
		}
	}
	if b := appendAddrMsg(nil, unix.RTM_NEWADDR, 7, netip.MustParseAddr("198.18.0.1")); len(b) != addrMsgLen || addrMsgLen != ipvstest.AddrMsgLen {
		t.Errorf("address request %d bytes, want %d (fake: %d)", len(b), addrMsgLen, ipvstest.AddrMsgLen)
	}
}

func nativeU32(b []byte) uint32 { return binary.NativeEndian.Uint32(b) }
