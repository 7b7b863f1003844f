//go:build linux

package runner

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// fakeOOB is a node kernel whose proxy repairs each change after
// repairAfter[change] polls (0: never), and removes an excluded virtual
// server when removesExcluded. While a deletion stands, connections to
// its service fail (broken).
type fakeOOB struct {
	repairAfter     map[string]int
	removesExcluded bool
	failMake        string

	mu       sync.Mutex
	polls    map[string]int
	broken   map[netip.AddrPort]bool
	putBacks []string
	made     []string
}

func (f *fakeOOB) make(_ context.Context, t *oobTarget) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.change.Name == f.failMake {
		return errors.New("iptables-legacy: exit status 4")
	}
	f.made = append(f.made, t.change.Name)
	t.object, t.saved = "fake "+t.change.Name, t.change.Name
	if t.change.Name == scenarios.OOBRealServer {
		t.endpoint = netip.AddrPortFrom(t.svc.Endpoints[0].IP, t.svc.Ports[0].TargetPort)
	}
	if t.change.Name != scenarios.OOBVirtualServer && t.change.Name != scenarios.OOBExcludedVirtualServer {
		f.broken[t.vip] = true
	}
	return nil
}

func (f *fakeOOB) repaired(_ context.Context, t *oobTarget) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.polls[t.change.Name]++
	n := f.repairAfter[t.change.Name]
	if n > 0 && f.polls[t.change.Name] >= n {
		delete(f.broken, t.vip)
		return true, nil
	}
	return false, nil
}

func (f *fakeOOB) present(context.Context, *oobTarget) (bool, error) { return !f.removesExcluded, nil }

func (f *fakeOOB) putBack(_ context.Context, t *oobTarget) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.putBacks = append(f.putBacks, t.change.Name)
	delete(f.broken, t.vip)
	return nil
}

func oobScenario(t *testing.T, modes, extra string) (*scenarios.Scenario, []workload.Service) {
	t.Helper()
	sc, err := scenarios.Parse([]byte("seed: 3\nmodes: ["+modes+"]\nservices: {count: 12, endpoints: {count: 3}}\ntraffic: {timeout: 50ms}\n"+extra), "oob.yaml")
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := workload.Services(sc)
	if err != nil {
		t.Fatal(err)
	}
	return sc, svcs
}

func oobEnv(k *fakeOOB) *env {
	return &env{
		probes: func(n int) (workerPool, error) { return fakePool{n}, nil },
		dial: func(dst netip.Addr, port uint16, _ time.Duration) (netip.AddrPort, time.Time, error) {
			t0 := time.Now()
			k.mu.Lock()
			broken := k.broken[netip.AddrPortFrom(dst, port)]
			k.mu.Unlock()
			if broken {
				return netip.AddrPort{}, t0, errors.New("i/o timeout")
			}
			return netip.MustParseAddrPort("198.19.0.2:8080"), t0, nil
		},
		oob: k,
	}
}

// TestOutOfBandOnFakes: each change the row has is made on a service of
// its own; one repaired after some polls has its repair time and the
// data plane's (the first good probe after the failed ones); one never
// repaired is put back at the timeout; a change that cannot be made is
// recorded and the next goes on; the canary is a kube-proxy row's only.
func TestOutOfBandOnFakes(t *testing.T) {
	sc, svcs := oobScenario(t, "iptables", "implementation: [builtin, kube-proxy]\nfaults:\n  outOfBand: {timeout: 1s, poll: 20ms}\n")
	k := &fakeOOB{repairAfter: map[string]int{scenarios.OOBCanary: 5}, polls: map[string]int{}, broken: map[netip.AddrPort]bool{}}
	run := oobRun{spec: sc.Faults.OutOfBand, sc: sc, e: oobEnv(k), k: k, mode: "iptables", impl: scenarios.ImplKubeProxy, services: svcs, prog: &recProgress{}}
	got, err := outOfBand(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Change != scenarios.OOBServiceChain || got[1].Change != scenarios.OOBCanary || got[0].Service == got[1].Service {
		t.Fatalf("changes %+v: want serviceChain then canary, on two services", got)
	}
	chain, canary := got[0], got[1]
	// Polls: up to 50 in the 1 s timeout; 17 at load 33, so only "more
	// than one" is asserted (no timed assertion).
	if chain.Repaired || !chain.PutBack || chain.Polls < 2 || chain.Failed == 0 || chain.ProbeNs != 0 {
		t.Errorf("serviceChain never repaired: %+v; want put back at the timeout after several polls, its probes failing", chain)
	}
	if !canary.Repaired || canary.RepairNs < int64(60*time.Millisecond) || canary.RepairNs > int64(500*time.Millisecond) || canary.PutBack || canary.Polls != 5 {
		t.Errorf("canary repaired at the 5th poll: %+v", canary)
	}
	if canary.Failed == 0 || canary.ProbeNs < canary.RepairNs-int64(40*time.Millisecond) {
		t.Errorf("canary's data plane: %d failed, back at %v (repair %v)", canary.Failed, time.Duration(canary.ProbeNs), time.Duration(canary.RepairNs))
	}

	// builtin: no canary; a failed change is recorded and the next one runs.
	sc2, svcs2 := oobScenario(t, "ipvs", "ipvs: {excludeCIDRs: [198.19.250.0/24]}\nfaults:\n  outOfBand: {timeout: 1s, poll: 20ms}\n")
	k2 := &fakeOOB{repairAfter: map[string]int{scenarios.OOBRealServer: 2, scenarios.OOBExcludedVirtualServer: 3}, failMake: scenarios.OOBVirtualServer,
		polls: map[string]int{}, broken: map[netip.AddrPort]bool{}, removesExcluded: true}
	run2 := oobRun{spec: sc2.Faults.OutOfBand, sc: sc2, e: oobEnv(k2), k: k2, mode: "ipvs", impl: scenarios.ImplBuiltin, services: svcs2, prog: &recProgress{}}
	got2, err := outOfBand(context.Background(), run2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got2) != 3 || got2[1].Err == "" || got2[1].Polls != 0 || !got2[0].Repaired {
		t.Fatalf("%+v: want realServer repaired, virtualServer not made, then excludedVirtualServer", got2)
	}
	ex := got2[2]
	if ex.LeftAlone == nil || *ex.LeftAlone || !ex.Repaired {
		t.Errorf("excluded: %+v; want its witness removed and the excluded server removed too (not left alone)", ex)
	}
	if strings.Join(k2.putBacks, ",") != scenarios.OOBVirtualServer+","+scenarios.OOBExcludedVirtualServer {
		t.Errorf("put back %v: want what the failed change may have added, then the excluded change's servers, removed by the phase", k2.putBacks)
	}
	mr := &reports.ModeResult{OutOfBand: &reports.OutOfBandResult{Changes: got2, Syncs: 3, Resyncs: 2, Config: "x"}}
	secs := reports.OutOfBandReport("ipvs", mr)
	if len(secs) != 1 || len(secs[0].Rows) != 3 || secs[0].Rows[2].Fail == "" || secs[0].Rows[0].Fail != "" {
		t.Errorf("report %+v: want 3 rows, the excluded one failing", secs)
	}
	if notes := strings.Join(secs[0].Notes, "\n"); !strings.Contains(notes, "3 syncs (0 full, 2 reading every real server back)") {
		t.Errorf("notes %q: want the syncs and read-back syncs counted", notes)
	}
}

// TestUnusedServiceAddr: the highest address of the service CIDR no
// service holds, below the broadcast address.
func TestUnusedServiceAddr(t *testing.T) {
	p := netip.MustParsePrefix("198.18.0.0/16")
	svcs := []workload.Service{{ClusterIP: netip.MustParseAddr("198.18.255.254")}}
	got, err := unusedServiceAddr(p, svcs, 80)
	if err != nil || got != netip.MustParseAddrPort("198.18.255.253:80") {
		t.Errorf("got %v %v, want 198.18.255.253:80", got, err)
	}
}

// fakeRenamer renames slices on a fake API.
type fakeRenamer struct {
	*fakeKubeProxy
	mu       sync.Mutex
	renames  map[string]int
	restored int
}

func (f *fakeRenamer) RenameSlice(_ context.Context, s workload.Service, _ time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renames[s.Name]++
	return nil
}

func (f *fakeRenamer) RestoreSliceNames(context.Context, []workload.Service) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.restored = len(f.renames)
	return nil
}

// TestSliceChurnOnFakes: the slice churn is a soak whose changes are
// EndpointSlice renames through the API (none timed on the data plane,
// none syncing the proxier), with the proxy's process sampled and the
// stream written.
func TestSliceChurnOnFakes(t *testing.T) {
	sc, svcs := phaseScenario(t, ", timeout: 200ms", "implementation: [kube-proxy]\nfaults:\n  sliceChurn: {duration: 400ms, interval: 100ms, rate: 200, churn: 50, idle: 1, quiet: 1}\n")
	f := &fakeRenamer{fakeKubeProxy: &fakeKubeProxy{fakeAPI: newFakeAPI()}, renames: map[string]int{}}
	if _, err := f.Sync(context.Background(), svcs); err != nil {
		t.Fatal(err)
	}
	e := newFakeEnv(f.fakeProxier)
	var fl faults
	path := filepath.Join(t.TempDir(), "slicechurn", "kp.jsonl")
	sr, err := soakPhase(context.Background(), soakRun{sc: sc, e: &e.env, services: svcs, ap: &sliceApplier{api: f}, proc: f, spec: sc.Faults.SliceChurn,
		next: sliceChurnNext(svcs), path: path, header: reports.SoakHeader{Row: "fake (kube-proxy)"}, prog: &recProgress{}, faults: &fl})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range f.renames {
		total += n
	}
	v := reports.SoakVerdicts(sr)
	if total < 5 || total != v.Changes || v.Observed != 0 || sr.End.Unobserved != 0 || v.Lost != 0 || f.syncs != 1 || len(fl) != 0 {
		t.Errorf("%d renames, %d changes, %d observed, %d unobserved, %d lost, %d syncs, faults %v", total, v.Changes, v.Observed, sr.End.Unobserved, v.Lost, f.syncs, fl)
	}
	if back, err := reports.ReadSoakStream(path); err != nil || len(back.Samples) != len(sr.Samples) || back.Header.Spec != *sc.Faults.SliceChurn {
		t.Errorf("stream: %v, %+v", err, back)
	}
	secs := reports.SliceChurnReport("fake (kube-proxy)", &reports.ModeResult{SliceChurn: sr})
	if len(secs) != 2 || secs[0].Phase != reports.PhaseSliceChurn || !strings.HasPrefix(secs[0].Title, "slice churn:") {
		t.Errorf("sections %+v", secs)
	}
}

// TestServiceJumpAndNFTElement: the KUBE-SERVICES rule of a ClusterIP and
// port is found in iptables -S output (kube-proxy's and builtin's
// layout), not another port's; an nft element's verdict is read from
// `nft get element`'s output.
func TestServiceJumpAndNFTElement(t *testing.T) {
	lines := `-N KUBE-SERVICES
-A KUBE-SERVICES -d 198.18.0.5/32 -p tcp -m comment --comment "pb/svc-00004:p80 cluster IP" -m tcp --dport 80 -j KUBE-SVC-AAAA
-A KUBE-SERVICES -d 198.18.0.5/32 -p tcp -m comment --comment "pb/svc-00004:p8080 cluster IP" -m tcp --dport 8080 -j KUBE-SVC-BBBB
-A KUBE-SERVICES -d 198.18.0.50/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-CCCC
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`
	for vip, want := range map[string]string{"198.18.0.5:80": "KUBE-SVC-AAAA", "198.18.0.5:8080": "KUBE-SVC-BBBB", "198.18.0.50:80": "KUBE-SVC-CCCC", "198.18.0.6:80": ""} {
		rule, chain := serviceJump(lines, netip.MustParseAddrPort(vip))
		if chain != want || (want != "" && !strings.HasSuffix(rule, "-j "+want)) {
			t.Errorf("%s: %q %q, want %s", vip, rule, chain, want)
		}
	}
	out := "table ip kube-proxy {\n\tmap service-ips {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n\t\telements = { 198.18.1.245 . tcp . 80 : goto service-UTFNERLI-pb/svc-00500/tcp/p80 }\n\t}\n}\n"
	m := nftElementRE.FindStringSubmatch(out)
	if m == nil || m[1] != "198.18.1.245 . tcp . 80" || m[2]+" "+m[3] != "goto service-UTFNERLI-pb/svc-00500/tcp/p80" {
		t.Errorf("element %q", m)
	}
}

// TestOutOfBandPhaseKubeProxyRow: the phase as a Phase on a kube-proxy
// row (its Mode named by its row label, its base mode iptables) makes
// the iptables changes, the canary included, states kube-proxy's
// configuration and counts kube-proxy's syncs, never syncing the
// proxier past the one before the changes.
func TestOutOfBandPhaseKubeProxyRow(t *testing.T) {
	sc, svcs := oobScenario(t, "iptables", "implementation: [kube-proxy]\nfaults:\n  outOfBand: {timeout: 1s, poll: 20ms}\n")
	k := &fakeOOB{repairAfter: map[string]int{scenarios.OOBServiceChain: 2, scenarios.OOBCanary: 2}, polls: map[string]int{}, broken: map[netip.AddrPort]bool{}}
	f := &fakeKubeProxy{fakeAPI: newFakeAPI()}
	r := &Row{Sc: sc, O: Options{Progress: &recProgress{}}, Env: oobEnv(k), Services: svcs, Result: &reports.ModeResult{},
		Mode: proxymodes.Mode{Name: "iptables (kube-proxy)", Base: "iptables", Implementation: scenarios.ImplKubeProxy}, Proxier: f}
	if err := outOfBandPhaseV.Run(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	ob := r.Result.OutOfBand
	if ob == nil || len(ob.Changes) != 2 || ob.Changes[1].Change != scenarios.OOBCanary || !ob.Changes[0].Repaired || ob.Syncs != -1 {
		t.Fatalf("result %+v", ob)
	}
	if !strings.Contains(ob.Config, "kube-proxy iptables") || ob.SyncPeriodNs != int64(time.Hour) || f.syncs != 1 {
		t.Errorf("config %q, syncPeriod %v, %d syncs of the proxier", ob.Config, time.Duration(ob.SyncPeriodNs), f.syncs)
	}
}

// TestNoVirtualServer: ipvsadm's "No such service" arrives on stderr,
// which Netns.Run puts in its error text (a guest run read it as a
// failed read and never saw an added virtual server go).
func TestNoVirtualServer(t *testing.T) {
	if !noVirtualServer(`ipvsadm in netns "pb-978d67-node0": exit status 1: No such service`) {
		t.Error("ipvsadm's stderr not recognised")
	}
	if noVirtualServer(`ipvsadm in netns "pb-978d67-node0": exit status 2: Memory allocation problem`) {
		t.Error("another ipvsadm error taken for a missing virtual server")
	}
}
