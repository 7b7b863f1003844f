//go:build linux

package kubeproxy_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/proxybench/proxybench/internal/uml"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/ipvs"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/topology/controlplane"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/apiobjects"
	"github.com/proxybench/proxybench/workload/traffic"
)

// guestServicesEnv sets how many services TestKernelIPVSInGuest creates
// (default 12): PROXYBENCH_GUEST_SERVICES=1000 measures kube-proxy's first
// IPVS sync at 1k services (make a bigger guest: the test sizes it).
const guestServicesEnv = "PROXYBENCH_GUEST_SERVICES"

func guestServices(t *testing.T) int {
	n := 12
	if v := os.Getenv(guestServicesEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 2 {
			t.Fatalf("%s=%q: want a number >= 2", guestServicesEnv, v)
		}
	}
	return n
}

// firstAnswer polls s's ClusterIP:80 from client every few milliseconds
// until it answers from one of its endpoints, and returns when it did.
func firstAnswer(ctx context.Context, client *topology.Netns, s workload.Service) (time.Time, error) {
	for {
		var ok bool
		_ = client.Do(func() error {
			landed, _, _, err := traffic.DialEcho(s.ClusterIP, 80, 300*time.Millisecond)
			ok = err == nil && landed.Port() == 8080
			return nil
		})
		if ok {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%s %s:80 never answered: %w", s.Name, s.ClusterIP, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestKernelIPVSInGuest runs the whole of kube-proxy's IPVS mode inside a
// user-mode-linux guest (the host kernel has no IP_VS): a one-node
// testbed, etcd and kube-apiserver in the run's pb-<id>-kube namespace of
// the guest, the Services and EndpointSlices created through the API, and
// kube-proxy --proxy-mode ipvs in the node namespace. It checks that every
// ClusterIP answers from one of its endpoints through kube-proxy's virtual
// servers, that the ruleset read back (ReadIPVS) holds a virtual server
// per ClusterIP with its real servers and the ClusterIP on kube-ipvs0,
// and that kube-proxy's sync metric counted the sync; and logs where the
// time went: control plane ready, objects created, kube-proxy's first
// sync by its metric and seen from the data plane (first and last
// service answering).
//
// PROXYBENCH_SLOW=1 (make test-slow, make test-guest-kube): its guest
// control plane costs about 30 s. The default suite keeps what it checks
// first, every ClusterIP answering from an endpoint through kube-proxy's
// IPVS rules, in TestKernelGuestCleanupAfterKill (whose guest run gets
// ready only then), and the ruleset compared with builtin's in
// TestKernelFidelity/ipvs.
func TestKernelIPVSInGuest(t *testing.T) {
	testenv.RequireKernel(t, "iptables-save", "ipset", "ipvsadm")
	testenv.RequireKube(t)
	testenv.RequireSlow(t, "a control plane and kube-proxy in a guest (TestKernelGuestCleanupAfterKill checks the ClusterIPs answer in the default suite)")
	n := guestServices(t)
	// etcd, kube-apiserver, kube-proxy and the test: 3 GiB; 1k services
	// take minutes in the guest (syscalls ~25x the host's).
	o := testenv.UMLOptions{MemoryMiB: 3072, Timeout: 10*time.Minute + time.Duration(n)*600*time.Millisecond,
		Env: []string{guestServicesEnv + "=" + strconv.Itoa(n), testenv.SlowEnv + "=1"}}
	if testenv.InUMLWith(t, o, false, ipvs.KernelModules("")...) {
		return
	}
	bins := testenv.RequireKube(t)
	ctx := context.Background()
	runID := topology.NewRunID()
	dir := t.TempDir()
	svcs := services(n)
	t0 := time.Now()
	tb := echoTestbed(ctx, t, runID)
	built := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Spec{RunID: runID, Nodes: tb.Nodes,
		Avoid: []netip.Prefix{serviceCIDR, podCIDR, nodeCIDR},
		Bin:   controlplane.Binaries{Etcd: bins.Etcd, APIServer: bins.APIServer}, StartTimeout: 8 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	node := apiobjects.Node{Name: "node-0", InternalIP: tb.NodeBackendAddr}
	st, err := apiobjects.Create(ctx, cp.Client, apiobjects.Spec{ServiceCIDR: serviceCIDR, Nodes: []apiobjects.Node{node}, Services: svcs})
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "node-0.kubeconfig")
	if err := cp.WriteKubeconfig(0, kc); err != nil {
		t.Fatal(err)
	}
	// Two pollers watch the first and the last service from before
	// kube-proxy starts: the data plane's view of its first sync.
	pctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var wg sync.WaitGroup
	answered := make([]time.Time, 2)
	perr := make([]error, 2)
	for i, s := range []workload.Service{svcs[0], svcs[n-1]} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answered[i], perr[i] = firstAnswer(pctx, tb.Clients[0], s)
		}()
	}
	kpStart := time.Now()
	kp, err := kubeproxy.Start(ctx, kubeproxy.Spec{RunID: runID, Node: tb.Node, Binary: bins.KubeProxy, Dir: dir,
		Config: kubeproxy.ConfigSpec{Mode: "ipvs", ClusterCIDR: clusterCIDR, NodeName: node.Name, NodeIP: node.InternalIP, Kubeconfig: kc,
			Pass: map[string]any{"ipvs": map[string]any{"minSyncPeriod": "0s"}}}})
	if err != nil {
		cancel()
		wg.Wait()
		t.Fatal(err)
	}
	defer kp.Stop()
	defer func() {
		if t.Failed() {
			t.Logf("kube-proxy log tail:\n%s", kp.LogTail(30))
		}
	}()
	syncDur, err := kp.WaitSynced(ctx, o.Timeout)
	synced := time.Now()
	if err != nil {
		cancel()
		wg.Wait()
		t.Fatal(err)
	}
	wg.Wait()
	for _, e := range perr {
		if e != nil {
			t.Fatal(e)
		}
	}
	// Every service answers, from one of its endpoints.
	for _, s := range svcs {
		eps := map[netip.Addr]bool{}
		for _, e := range s.Endpoints {
			eps[e.IP] = true
		}
		var landed netip.AddrPort
		err := tb.Clients[0].Do(func() error {
			var err error
			landed, _, _, err = traffic.DialEcho(s.ClusterIP, 80, 2*time.Second)
			return err
		})
		if err != nil {
			t.Errorf("%s %s:80 does not answer through kube-proxy's IPVS rules: %v", s.Name, s.ClusterIP, err)
		} else if !eps[landed.Addr()] || landed.Port() != 8080 {
			t.Errorf("%s %s:80 landed on %v, not an endpoint:8080", s.Name, s.ClusterIP, landed)
		}
	}
	all := time.Now()
	rs, err := kubeproxy.ReadIPVS(ctx, tb.Node)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs[:min(n, 50)] {
		vs := fmt.Sprintf("-A -t %s:80 -s ", s.ClusterIP)
		if !strings.Contains(rs.IPVS, vs) {
			t.Errorf("ipvsadm -Sn has no virtual server %q", vs)
		}
		for _, e := range s.Endpoints {
			if real := fmt.Sprintf("-a -t %s:80 -r %s:8080 -m -w 1", s.ClusterIP, e.IP); !strings.Contains(rs.IPVS, real) {
				t.Errorf("ipvsadm -Sn has no real server %q", real)
			}
		}
		if !strings.Contains(rs.Addresses, " "+s.ClusterIP.String()+"/32") {
			t.Errorf("kube-ipvs0 lacks %s/32:\n%s", s.ClusterIP, rs.Addresses)
		}
		if !strings.Contains(rs.IPSet, "add KUBE-CLUSTER-IP "+s.ClusterIP.String()+",tcp:80") {
			t.Errorf("ipset KUBE-CLUSTER-IP lacks %s,tcp:80", s.ClusterIP)
		}
	}
	if !strings.Contains(rs.IPTables, "KUBE-CLUSTER-IP") {
		t.Errorf("iptables-save does not match on KUBE-CLUSTER-IP:\n%s", rs.IPTables)
	}
	if n <= 12 {
		t.Logf("ruleset:\n%s", rs)
	}
	m, err := kp.Scrape(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h, err := m.Histogram(kubeproxy.MetricSync, "IPv4")
	if err != nil {
		t.Fatal(err)
	}
	if h.Count < 1 || h.Sum <= 0 {
		t.Errorf("%s{IPv4}: count %d sum %v, want a sync", kubeproxy.MetricSync, h.Count, h.Sum)
	}
	u := kp.Usage()
	t.Logf("guest figures, %d services (%d endpoints each, cycling 1-3), kube-proxy %s:", n, 3, kp.Version)
	t.Logf("  testbed built %v; control plane ready %v; %d services + %d slices created in %v",
		built.Sub(t0).Round(time.Millisecond), cp.Ready.Round(time.Millisecond), st.Services, st.EndpointSlices, st.Elapsed.Round(time.Millisecond))
	t.Logf("  kube-proxy start -> first IPv4 sync seen in its metric %v; that sync took %v by %s; syncs so far %d (sum %.3f s)",
		synced.Sub(kpStart).Round(time.Millisecond), syncDur.Round(time.Millisecond), kubeproxy.MetricSync, h.Count, h.Sum)
	t.Logf("  data plane: kube-proxy start -> %s answering %v, %s answering %v; all %d answering by %v (sweep)",
		svcs[0].Name, answered[0].Sub(kpStart).Round(time.Millisecond), svcs[n-1].Name, answered[1].Sub(kpStart).Round(time.Millisecond), n, all.Sub(kpStart).Round(time.Millisecond))
	b, _ := os.ReadFile(kp.LogPath)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "ipFamily=\"IPv4\"") && (strings.Contains(l, "yncProxyRules") || strings.Contains(l, "elapsed")) {
			t.Logf("  kube-proxy: %s", l)
		}
	}
	t.Logf("  kube-proxy CPU %v (+ children %v), peak RSS %d MiB (children %d MiB, %d seen); total in guest %v",
		u.CPU, u.ChildCPU, u.PeakRSS>>20, u.ChildPeakRSS>>20, u.Children, time.Since(t0).Round(time.Millisecond))
}

// guestHelperEnv makes the test binary boot a guest that runs a testbed
// with kube-proxy in IPVS mode (TestKernelHelperRun inside), for
// TestKernelGuestCleanupAfterKill to kill.
const guestHelperEnv = "PROXYBENCH_KUBEPROXY_GUEST_HELPER"

// TestKernelGuestHelper is not a test: under guestHelperEnv=<runid> it
// boots a user-mode-linux guest in the run's work folder
// (uml.WorkDirPattern) running TestKernelHelperRun with IPVS, passes the
// guest's console to stdout (the test waits for "ready") and waits.
func TestKernelGuestHelper(t *testing.T) {
	id := os.Getenv(guestHelperEnv)
	if id == "" {
		t.Skip("helper process for TestKernelGuestCleanupAfterKill")
	}
	bins := testenv.RequireKube(t)
	wd, err := uml.NewWorkDir(id)
	if err != nil {
		t.Fatal(err)
	}
	defer wd.Remove()
	dir := wd.Path
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	_, err = uml.Run(context.Background(), uml.Guest{MemoryMiB: 3072, Timeout: 20 * time.Minute,
		Modules: append(append([]string{}, uml.BaseModules...), ipvs.KernelModules("")...),
		Argv:    []string{exe, "-test.run", "^TestKernelHelperRun$", "-test.v", "-test.timeout=20m"},
		Env:     []string{helperEnv + "=" + id + ":/run/tmp/kp:ipvs", "PROXYBENCH_KUBE_BIN=" + filepath.Dir(bins.KubeProxy)},
		WorkDir: dir, Console: os.Stdout})
	if err != nil {
		t.Fatal(err)
	}
}

// guestProcs lists the host processes of run id's guests: the
// user-mode-linux kernel and its helpers, whose command line names the
// run's work folder.
func guestProcs(id string) []string {
	var out []string
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), uml.WorkDirPattern(id)) {
			out = append(out, p.Name()+" "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// TestKernelGuestCleanupAfterKill: a run whose guest holds etcd,
// kube-apiserver and kube-proxy (IPVS) is killed with SIGKILL; cleanup
// (topology.Cleanup and uml.CleanupOrphans, as `proxybench cleanup`
// calls them) leaves the guest alone while the run lives, and afterwards
// no guest process (and so nothing that ran inside it) and no folder of
// the run remains on the host. The guest's run gets ready only once every
// ClusterIP answers from one of its endpoints through kube-proxy's IPVS
// virtual servers (TestKernelHelperRun). Slow (make test-guest-kube,
// make test-slow) with the other kube-proxy IPVS guest tests
// (TestKernelIPVSInGuest also reads the ruleset back and logs the
// timings): a control plane in the guest does not fit the default suite.
func TestKernelGuestCleanupAfterKill(t *testing.T) {
	// The guest's control plane takes 60-100 s to get ready: over the
	// default suite's budget (make test-guest-kube runs it).
	testenv.RequireSlow(t, "a guest with a control plane takes 60-100 s to get ready")
	testenv.RequireKernel(t, "ipset", "ipvsadm")
	testenv.RequireKube(t)
	testenv.RequireGuest(t)
	runID := topology.NewRunID()
	cmd := startReadyHelper(t, "TestKernelGuestHelper", guestHelperEnv+"="+runID, "-test.timeout=25m")
	live := guestProcs(runID)
	if len(live) == 0 {
		t.Fatalf("no guest process of run %s while it runs", runID)
	}
	// A live run's guest is never touched.
	if _, _, err := topology.Cleanup(runID); err != nil {
		t.Fatal(err)
	}
	if c, err := uml.CleanupOrphans(runID, nil); err != nil || len(c.Killed)+len(c.Removed) > 0 || len(c.Kept) != 1 {
		t.Fatalf("cleanup of a live run killed %v, removed %v and kept %v (%v), want one kept guest", c.Killed, c.Removed, c.Kept, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if _, _, err := topology.Cleanup(runID); err != nil {
		t.Fatal(err)
	}
	// The guest dies with its run (PR_SET_PDEATHSIG) or is killed here;
	// give the kernel's helper threads a moment to go.
	var left []string
	for range 50 {
		c, err := uml.CleanupOrphans(runID, nil)
		t.Logf("cleanup: killed %v, removed %v (%v)", c.Killed, c.Removed, err)
		if left = guestProcs(runID); len(left) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("guest processes of run %s left after kill -9 and cleanup: %v", runID, left)
	}
	if dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), uml.WorkDirPattern(runID)+"*")); len(dirs) > 0 {
		t.Errorf("guest folders left: %v", dirs)
	}
	if left := topology.ChildProcesses(runID); len(left) > 0 {
		t.Errorf("host processes of run %s left: %v", runID, left)
	}
	t.Logf("guest of run %s (%d host processes while live) gone after kill -9 and cleanup", runID, len(live))
}

// TestKernelIPVSProxierInGuest (PROXYBENCH_SLOW=1) drives kube-proxy's IPVS mode through
// Proxier (what a run's "ipvs (kube-proxy)" row uses) inside a
// user-mode-linux guest: the first Sync starts the control plane and
// kube-proxy and returns after its first sync with every ClusterIP
// answering; a second Sync moves one service to a new endpoint through
// the API and returns after kube-proxy programmed it (the real server
// changed in ipvsadm -Sn, the service answers from the new endpoint).
func TestKernelIPVSProxierInGuest(t *testing.T) {
	testenv.RequireKernel(t, "iptables-save", "ipset", "ipvsadm")
	testenv.RequireKube(t)
	// Two to three minutes on this machine: out of make test (10 min
	// budget); make test-guest-kube runs it.
	testenv.RequireSlow(t, "a second control plane and kube-proxy in a guest")
	if testenv.InUMLWith(t, testenv.UMLOptions{MemoryMiB: 3072, Timeout: 12 * time.Minute, Env: []string{testenv.SlowEnv + "=1"}}, false, ipvs.KernelModules("")...) {
		return
	}
	bins := testenv.RequireKube(t)
	ctx := context.Background()
	runID := topology.NewRunID()
	svcs := services(6)
	tb := echoTestbed(ctx, t, runID)
	p, err := kubeproxy.NewProxier(kubeproxy.ProxierSpec{Mode: "ipvs", Node: tb.Node, NodeIP: tb.NodeBackendAddr,
		ClusterCIDR: clusterCIDR, ServiceCIDR: serviceCIDR, Avoid: []netip.Prefix{serviceCIDR, podCIDR, nodeCIDR},
		Pass: map[string]any{"ipvs": map[string]any{"minSyncPeriod": "0s"}}, KubeProxy: bins.KubeProxy,
		Bin: controlplane.Binaries{Etcd: bins.Etcd, APIServer: bins.APIServer}, Dir: t.TempDir(), Guest: true}) // in the guest (InUMLWith)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Cleanup(ctx)
	if p.Mode() != "ipvs (kube-proxy)" {
		t.Errorf("Mode() = %q, want the row name \"ipvs (kube-proxy)\"", p.Mode())
	}
	full, err := p.Sync(ctx, svcs)
	if err != nil {
		t.Fatal(err)
	}
	if full.Kind != "full" || full.Phases["kube-proxy.metric"] <= 0 {
		t.Errorf("first Sync: kind %q, kube-proxy.metric %v; want full with kube-proxy's own sync time", full.Kind, full.Phases["kube-proxy.metric"])
	}
	// Right after the first Sync returns, every service answers (the
	// sync was waited for, not just /healthz).
	for _, s := range svcs {
		if err := tb.Clients[0].Do(func() error {
			_, _, _, err := traffic.DialEcho(s.ClusterIP, 80, 2*time.Second)
			return err
		}); err != nil {
			t.Errorf("after the first Sync, %s %s:80 does not answer: %v", s.Name, s.ClusterIP, err)
		}
	}
	// Move svc 0 to a fresh endpoint.
	moved := append([]workload.Service(nil), svcs...)
	newEP := netip.MustParseAddr("198.19.100.1")
	moved[0].Endpoints = []workload.Endpoint{{IP: newEP, Ready: true, Weight: 1}}
	inc, err := p.Sync(ctx, moved)
	if err != nil {
		t.Fatal(err)
	}
	if inc.Kind != "incremental" || inc.Phases["kube-proxy"] <= 0 {
		t.Errorf("second Sync: kind %q, kube-proxy %v; want incremental with kube-proxy's sync time", inc.Kind, inc.Phases["kube-proxy"])
	}
	rs, err := kubeproxy.ReadIPVS(ctx, tb.Node)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("-a -t %s:80 -r %s:8080 -m -w 1", moved[0].ClusterIP, newEP); !strings.Contains(rs.IPVS, want) {
		t.Errorf("after the second Sync ipvsadm -Sn lacks %q:\n%s", want, rs.IPVS)
	}
	var landed netip.AddrPort
	if err := tb.Clients[0].Do(func() error {
		var err error
		landed, _, _, err = traffic.DialEcho(moved[0].ClusterIP, 80, 2*time.Second)
		return err
	}); err != nil || landed.Addr() != newEP {
		t.Errorf("after the second Sync %s lands on %v (%v), want %s", moved[0].ClusterIP, landed, err, newEP)
	}
	t.Logf("full: wall %v, phases %v; incremental: wall %v, phases %v; info %v", full.Wall, full.Phases, inc.Wall, inc.Phases, p.Info())
}

// TestKernelIPVSFirstSyncBoundInGuest (PROXYBENCH_SLOW=1): kube-proxy's
// IPVS mode in a guest with a first-sync bound it cannot meet (400
// services: 802 ipset entries, one ipset process each, which alone take
// longer than the 6 s bound in a guest). The first Sync returns a
// *proxymodes.Unfinished instead of hanging or failing; the record keeps
// the setup, marks the sync unfinished with its bound, and holds progress
// readings taken while it ran and at the bound: counts read (not -1),
// what the API objects call for, never more than that, never shrinking,
// and not everything done yet. Cleanup then stops kube-proxy.
func TestKernelIPVSFirstSyncBoundInGuest(t *testing.T) {
	testenv.RequireKernel(t, "iptables-save", "ipset", "ipvsadm")
	testenv.RequireKube(t)
	testenv.RequireSlow(t, "a control plane and kube-proxy in a guest")
	if testenv.InUMLWith(t, testenv.UMLOptions{MemoryMiB: 3072, Timeout: 12 * time.Minute, Env: []string{testenv.SlowEnv + "=1"}}, false, ipvs.KernelModules("")...) {
		return
	}
	bins := testenv.RequireKube(t)
	ctx := context.Background()
	runID := topology.NewRunID()
	svcs := services(400)
	tb := echoTestbed(ctx, t, runID)
	const bound = 6 * time.Second
	p, err := kubeproxy.NewProxier(kubeproxy.ProxierSpec{Mode: "ipvs", Node: tb.Node, NodeIP: tb.NodeBackendAddr,
		ClusterCIDR: clusterCIDR, ServiceCIDR: serviceCIDR, Avoid: []netip.Prefix{serviceCIDR, podCIDR, nodeCIDR},
		Pass: map[string]any{"ipvs": map[string]any{"minSyncPeriod": "0s"}}, KubeProxy: bins.KubeProxy,
		Bin: controlplane.Binaries{Etcd: bins.Etcd, APIServer: bins.APIServer}, Dir: t.TempDir(),
		FirstSyncTimeout: bound, ProgressEvery: 2 * time.Second, Guest: true}) // in the guest (InUMLWith)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	st, err := p.Sync(ctx, svcs)
	var u *proxymodes.Unfinished
	if !errors.As(err, &u) {
		p.Cleanup(ctx)
		t.Fatalf("first Sync with a %v bound: stats %+v, err %v; want a *proxymodes.Unfinished", bound, st, err)
	}
	if !strings.Contains(u.Msg, "not finished after 6s") || u.Stats.Phases["setup.api"] <= 0 {
		t.Errorf("Unfinished %q, phases %v: want the bound named and the setup kept", u.Msg, u.Stats.Phases)
	}
	rec := p.KubeProxyRecord(ctx)
	if rec == nil || rec.Unfinished == nil || rec.Unfinished.BoundNs != int64(bound) || rec.FirstSyncNs != 0 || rec.APIObjects < 800 {
		t.Fatalf("record %+v: want it marked unfinished after %v, no first-sync time, the 800 API objects", rec, bound)
	}
	want := kubeproxy.WantIPVS(svcs)
	if len(rec.Progress) < 2 {
		t.Fatalf("%d progress readings, want at least one while it ran (every 2 s) and one at the bound: %+v", len(rec.Progress), rec.Progress)
	}
	last := rec.Progress[len(rec.Progress)-1]
	if last.VirtualServers < 0 || last.Addresses < 0 || last.IPSets == nil || last.Err != "" {
		t.Errorf("last reading %+v: counts not read", last)
	}
	if last.WantVirtualServers != want.Ports || last.WantIPVSIPs != want.IPs {
		t.Errorf("last reading wants %d virtual servers, %d ClusterIPs; the objects call for %+v", last.WantVirtualServers, last.WantIPVSIPs, want)
	}
	if last.IPSets["KUBE-CLUSTER-IP"] >= want.Ports && last.IPSets["KUBE-IPVS-IPS"] >= want.IPs {
		t.Errorf("last reading %+v: every ipset entry is there, yet the sync was not finished", last)
	}
	for i := 1; i < len(rec.Progress); i++ {
		a, b := rec.Progress[i-1], rec.Progress[i]
		if b.AtNs < a.AtNs || b.VirtualServers < a.VirtualServers || b.IPSets["KUBE-IPVS-IPS"] < a.IPSets["KUBE-IPVS-IPS"] || b.VirtualServers > want.Ports {
			t.Errorf("readings %d→%d went backwards or past what is wanted: %+v → %+v", i-1, i, a, b)
		}
	}
	if err := p.Cleanup(ctx); err != nil {
		t.Errorf("Cleanup after an unfinished first sync: %v", err)
	}
	t.Logf("unfinished after %v (Sync returned after %v): %s; %d readings", bound, time.Since(t0).Round(time.Millisecond), u.Msg, len(rec.Progress))
}
