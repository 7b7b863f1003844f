package modes_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/iptables"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/proxymodes/nftables"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/workload"
)

// noNode fails every kernel call: building a proxier and rendering must
// not need one.
type noNode struct{ t *testing.T }

func (n noNode) Do(func() error) error {
	n.t.Error("a kernel call (Do) while rendering")
	return nil
}

func (n noNode) Run(context.Context, []byte, string, ...string) ([]byte, error) {
	n.t.Error("a kernel call (Run) while rendering")
	return nil, nil
}

const base = `services:
  count: 40
  portsPerService: 2
  endpoints:
    count: 3
modes: [none, iptables, ipvs, nftables, userspace]
`

// settings are scenarios whose settings change the rules: ClientIP
// session affinity, IPVS excludeCIDRs, timeouts and scheduler, the nft
// back end of iptables.
var settings = map[string]string{
	"defaults": base,
	"affinity": strings.Replace(base, "services:\n", "services:\n  sessionAffinity: ClientIP\n  sessionAffinityTimeout: 10m\n", 1),
	"ipvs": base + `ipvs:
  scheduler: wrr
  excludeCIDRs: [198.18.200.0/24]
  tcpTimeout: 15m
  tcpFinTimeout: 30s
  udpTimeout: 45s
`,
	"nft-backend": base + "iptables:\n  backend: nft\n",
	// Named ServicePorts of two protocols on one port (a DNS-like
	// service).
	"dns-ports": `services:
  count: 5
  ports:
  - {name: dns-tcp, port: 53, protocol: TCP, targetPort: 5353}
  - {name: dns, port: 53, protocol: UDP, targetPort: 5353}
modes: [none, iptables, ipvs, nftables, userspace]
`,
}

func load(t *testing.T, name string) (*scenarios.Scenario, []workload.Service) {
	t.Helper()
	sc, err := modes.Catalog().Parse([]byte(settings[name]), name+".yaml")
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := workload.Services(sc)
	if err != nil {
		t.Fatal(err)
	}
	return sc, svcs
}

// TestSimRendersWhatTheRunPrograms: for every mode and every setting that
// changes rules, the sim's rendering (Mode.Render) equals what the real
// run's proxier (Mode.New) programs on a full sync (its Rendering, from
// its own Config): same rules, object and byte counts, scheduler and
// affinity.
func TestSimRendersWhatTheRunPrograms(t *testing.T) {
	for name := range settings {
		sc, svcs := load(t, name)
		for _, m := range modes.All {
			if !slices.Contains(sc.Modes, m.Name) {
				continue
			}
			sim, err := m.Render(sc, svcs)
			if err != nil {
				t.Fatalf("%s/%s: Render: %v", name, m.Name, err)
			}
			p, err := m.New(sc, noNode{t})
			if err != nil {
				t.Fatalf("%s/%s: New: %v", name, m.Name, err)
			}
			r, ok := p.(proxymodes.Renderer)
			if !ok {
				t.Fatalf("%s/%s: the proxier does not render (proxymodes.Renderer)", name, m.Name)
			}
			real, err := r.Rendering(svcs)
			if err != nil {
				t.Fatalf("%s/%s: proxier Rendering: %v", name, m.Name, err)
			}
			if !bytes.Equal(sim.Rules, real.Rules) {
				t.Errorf("%s/%s: the sim renders other rules than the run programs:\n sim %.300q\nreal %.300q", name, m.Name, sim.Rules, real.Rules)
			}
			if sim.Objects != real.Objects || sim.Bytes != real.Bytes || sim.Scheduler != real.Scheduler || sim.AffinityTimeout != real.AffinityTimeout {
				t.Errorf("%s/%s: sim %d objects %d bytes scheduler %q affinity %s; run %d objects %d bytes scheduler %q affinity %s",
					name, m.Name, sim.Objects, sim.Bytes, sim.Scheduler, sim.AffinityTimeout, real.Objects, real.Bytes, real.Scheduler, real.AffinityTimeout)
			}
		}
	}
}

// TestSettingsReachTheRules: each setting the sim used to drop changes
// the rendering of the modes it concerns, so the comparison above covers
// them (it would pass vacuously if both sides ignored a setting).
func TestSettingsReachTheRules(t *testing.T) {
	render := func(setting, mode string) *proxymodes.Rendering {
		sc, svcs := load(t, setting)
		m, err := modes.Lookup(mode)
		if err != nil {
			t.Fatal(err)
		}
		r, err := m.Render(sc, svcs)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	checks := []struct {
		setting, mode, want string
	}{
		{"affinity", "iptables", "--rcheck --seconds 600"},
		{"affinity", "nftables", "timeout 600s"},
		{"affinity", "ipvs", "persistent 600"},
		{"ipvs", "ipvs", "excludeCIDRs [198.18.200.0/24]"},
		{"ipvs", "ipvs", "timeouts tcp 15m0s tcpfin 30s udp 45s"},
		{"ipvs", "ipvs", " wrr "},
		{"nft-backend", "iptables", ""},
	}
	for _, c := range checks {
		r, d := render(c.setting, c.mode), render("defaults", c.mode)
		if c.want != "" && !bytes.Contains(r.Rules, []byte(c.want)) {
			t.Errorf("%s/%s: rules lack %q", c.setting, c.mode, c.want)
		}
		if c.want != "" && bytes.Equal(r.Rules, d.Rules) {
			t.Errorf("%s/%s: the setting does not change the rules", c.setting, c.mode)
		}
	}
	for _, mode := range []string{"iptables", "nftables", "ipvs", "userspace"} {
		if r := render("affinity", mode); r.AffinityTimeout.Minutes() != 10 {
			t.Errorf("affinity/%s: AffinityTimeout %s, want 10m (the sim pins clients with it)", mode, r.AffinityTimeout)
		}
	}
	if b := render("nft-backend", "iptables").Info["backend"]; b != "nft" {
		t.Errorf("nft backend: Info backend %q", b)
	}
}

// TestEveryModeIsComplete: the list holds each name once, and every mode
// gives what the runner, the sim and doctor ask of it.
func TestEveryModeIsComplete(t *testing.T) {
	names := modes.Names()
	for i, n := range names {
		if slices.Index(names, n) != i {
			t.Errorf("mode %s listed twice", n)
		}
	}
	for _, m := range modes.All {
		if m.Name == "" || m.New == nil || m.Render == nil || m.Probe == nil {
			t.Errorf("mode %q lacks a name, New, Render or Probe", m.Name)
		}
		if m.Sim.Lookup == "" || (m.Sim.Lookup != proxymodes.LookupDirect && m.Sim.Choice == "") {
			t.Errorf("mode %s has no sim model: %+v", m.Name, m.Sim)
		}
		if !m.Direct && m.SyncPeriods == nil {
			t.Errorf("mode %s programs rules but has no sync periods", m.Name)
		}
		if _, err := modes.Lookup(m.Name); err != nil {
			t.Error(err)
		}
	}
	if _, err := modes.Lookup("iptable"); err == nil || !strings.Contains(err.Error(), "iptables") {
		t.Errorf("Lookup(iptable) = %v, want an error listing the modes", err)
	}
}

// TestShippedScenariosNameKnownModes: every embedded scenario validates
// against this build's catalog.
func TestShippedScenariosNameKnownModes(t *testing.T) {
	for _, n := range scenarios.Names() {
		if _, err := modes.Catalog().Load(n); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	if _, err := modes.Catalog().Parse([]byte("services:\n  count: 1\nmodes: [none, iptable]\n"), "m.yaml"); err == nil || !strings.Contains(err.Error(), `did you mean "iptables"`) {
		t.Errorf("an unknown mode: %v", err)
	}
}

// TestSyncPeriodsPerMode: each mode's churn runs with its own
// KubeProxyConfiguration block (no silent fallback to iptables').
func TestSyncPeriodsPerMode(t *testing.T) {
	sc, err := modes.Catalog().Parse([]byte(base+"iptables:\n  minSyncPeriod: 1s\nipvs:\n  minSyncPeriod: 2s\nnftables:\n  minSyncPeriod: 3s\n"), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"iptables": 1, "ipvs": 2, "nftables": 3, "userspace": 1}
	for _, m := range modes.All {
		v, _, err := m.ChurnSyncPeriods(sc)
		if m.Direct {
			if err == nil {
				t.Errorf("%s: churn sync periods without a sync loop", m.Name)
			}
			continue
		}
		if err != nil || len(v) != 1 || v[0].Seconds() != want[m.Name] {
			t.Errorf("%s: minSyncPeriod %v, %v; want %gs", m.Name, v, err, want[m.Name])
		}
	}
}

// TestChainNamesPerServicePort: each named ServicePort of a multi-port
// service gets its own chains, named as kube-proxy names them: the
// iptables KUBE-SVC hash over "ns/name:port" + protocol, the nftables
// "service-<hash>-ns/name/protocol/port" chain, one IPVS virtual server
// per (protocol, port), and a userspace portal per port.
func TestChainNamesPerServicePort(t *testing.T) {
	sc, svcs := load(t, "dns-ports")
	if got := svcs[0].PortName(svcs[0].Ports[1]); got != "pb/svc-00000:dns" {
		t.Fatalf("PortName = %q, want pb/svc-00000:dns", got)
	}
	render := func(mode string) string {
		m, err := modes.Lookup(mode)
		if err != nil {
			t.Fatal(err)
		}
		r, err := m.Render(sc, svcs)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		return string(r.Rules)
	}
	ipt, nft, vs, us := render("iptables"), render("nftables"), render("ipvs"), render("userspace")
	for _, c := range []struct{ name, proto string }{{"dns-tcp", "tcp"}, {"dns", "udp"}} {
		svc := iptables.ServiceChainName("pb/svc-00000:"+c.name, c.proto)
		if !strings.Contains(ipt, ":"+svc+" ") || !strings.Contains(ipt, "-m "+c.proto+" -p "+c.proto+" -d 198.18.0.1 --dport 53 -j "+svc) {
			t.Errorf("iptables: no %s chain %s jumped to for 53/%s:\n%.2000s", c.name, svc, c.proto, ipt)
		}
		sep := iptables.EndpointChainName("pb/svc-00000:"+c.name, c.proto, "198.19.0.1:5353")
		if !strings.Contains(ipt, ":"+sep+" ") {
			t.Errorf("iptables: no endpoint chain %s for %s", sep, c.name)
		}
		if n := nftables.ServiceChainName("pb", "svc-00000", c.proto, c.name); !strings.Contains(nft, n) {
			t.Errorf("nftables: no chain %s", n)
		}
		if !strings.Contains(us, `--comment "pb/svc-00000:`+c.name+`" -p `+c.proto+" -m "+c.proto+" -d 198.18.0.1/32 --dport 53 -j REDIRECT") {
			t.Errorf("userspace: no %s portal for 53/%s:\n%.1000s", c.name, c.proto, us)
		}
		if !strings.Contains(vs, strings.ToUpper(c.proto)+" 198.18.0.1:53 ") {
			t.Errorf("ipvs: no virtual server %s 198.18.0.1:53:\n%.1000s", strings.ToUpper(c.proto), vs)
		}
	}
	if a, b := iptables.ServiceChainName("pb/svc-00000:dns-tcp", "tcp"), iptables.ServiceChainName("pb/svc-00000:dns", "udp"); a == b {
		t.Errorf("both ports hash to %s", a)
	}
}
