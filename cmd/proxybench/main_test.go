//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
)

var bin string

// fakeDir holds the stand-in programs of fakeKubeProxy, removed after the
// tests (in /tmp, not t.TempDir: reachable by uid 65534).
var fakeDir string

// TestMain gives the tests their proxybench binary: this test binary
// itself, linked (or copied) as <tmp>/proxybench, which runs main() when
// started under that name (also inside a guest, where a run reruns
// os.Executable()). That saves a go build of the whole command per test
// process (about 10 s a build on a busy 2-core machine; helper tests that
// rerun this binary paid it again).
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "proxybench" {
		main()
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "proxybench-bin")
	if err != nil {
		panic(err)
	}
	_ = os.Chmod(dir, 0o755) // readable by the unprivileged user of TestBadInput
	bin = filepath.Join(dir, "proxybench")
	if err := linkSelf(bin); err != nil {
		panic(err)
	}
	if fakeDir, err = os.MkdirTemp("", "pb-fake-kube-proxy"); err != nil {
		panic(err)
	}
	_ = os.Chmod(fakeDir, 0o755)
	code := m.Run()
	os.RemoveAll(dir)
	os.RemoveAll(fakeDir)
	os.Exit(code)
}

// linkSelf makes path this test binary: a hard link, or a copy where
// that fails (another file system), mode 0755.
func linkSelf(path string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if os.Link(self, path) == nil {
		return os.Chmod(path, 0o755)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o755)
}

// run executes the binary and returns stdout, stderr and the exit code.
func run(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	return runCmd(t, exec.Command(bin, args...), env)
}

func runCmd(t *testing.T, cmd *exec.Cmd, env []string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(os.Environ(), env...)
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(filepath.Dir(p), 0o755)
	return p
}

// TestBadInput: each kind of bad input gets one line naming the field or
// the cause and the fix, exit code 2, and creates nothing.
func TestBadInput(t *testing.T) {
	const kp = "services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\n"
	const topo = "topology: {pods: isolated, nodes: 3, zones: [zone-a, zone-a, zone-b]}\n"
	cases := []struct {
		name  string
		yaml  string   // scenario body; empty: use args as given
		args  []string // extra args
		env   []string
		asUID bool // run as an unprivileged user
		root  bool // needs root: the check comes after run's root check
		lines int  // when not 0, the error's number of lines
		kube  bool // needs the real kube-proxy (bin/, testenv.RequireKube)
		want  []string
	}{
		{name: "malformed YAML", yaml: "services: [1,\n", want: []string{":1:", "YAML"}},
		{name: "unknown field", yaml: "services:\n  count: 10\n  endpionts:\n    count: 3\n", want: []string{":3:", "services.endpionts", `"endpoints"`}},
		{name: "invalid CIDR", yaml: "network:\n  serviceCIDR: 198.18.0.0/40\n", want: []string{"network.serviceCIDR", "fix:"}},
		{name: "endpoints do not fit", yaml: "services:\n  count: 2000\n  endpoints:\n    count: 3\nnetwork:\n  podCIDR: 198.19.0.0/20\n", want: []string{"podCIDR", "fix:"}},
		{name: "services do not fit", yaml: "services:\n  count: 300\nnetwork:\n  serviceCIDR: 198.18.0.0/24\n", want: []string{"services.count", "fix:"}},
		{name: "overlapping CIDRs", yaml: "network:\n  serviceCIDR: 198.19.0.0/16\n", want: []string{"overlap", "fix:"}},
		{name: "missing iptables binary", args: []string{"1k-services"}, env: []string{"PATH=/nonexistent"}, root: true, want: []string{"iptables-legacy", "make setup"}},
		{name: "not root", args: []string{"1k-services"}, asUID: true, want: []string{"root", "fix:"}},
		{name: "unknown scenario", args: []string{"no-such-scenario"}, want: []string{"no-such-scenario", "10k-services"}},
		{name: "bad flag override", args: []string{"1k-services", "--modes", "none,bogus"}, want: []string{"modes", "bogus"}},
		{name: "output in /proc", args: []string{"1k-services", "--output", "/proc/x.json"}, root: true, want: []string{"--output /proc/x.json", "cannot create a file in /proc", "fix:"}},
		{name: "output folder missing", args: []string{"1k-services", "--output", "/nonexistent-pb/dir/x.json"}, root: true, want: []string{"folder /nonexistent-pb/dir does not exist", "mkdir -p"}},
		{name: "output is a folder", args: []string{"1k-services", "--output", "/tmp"}, root: true, want: []string{"is a directory", "fix:"}},
		{name: "junit folder missing", args: []string{"1k-services", "--junit", "/nonexistent-pb/j.xml"}, root: true, want: []string{"--junit", "does not exist"}},
		{name: "SCTP port", yaml: "services:\n  count: 10\n  ports:\n  - {name: a, port: 53, protocol: SCTP}\n", want: []string{":4:", "services.ports[0].protocol", "SCTP", "fix:"}},
		{name: "duplicate port names", yaml: "services:\n  count: 10\n  ports:\n  - {name: dns, port: 53}\n  - {name: dns, port: 53, protocol: UDP}\n", want: []string{":5:", "services.ports[1].name", "fix:"}},
		{name: "concurrency 0", yaml: "services:\n  count: 10\ntraffic:\n  connections: 100\n  concurrency: 0\n", want: []string{":5:", "traffic.concurrency", "0 is out of range"}},
		{name: "fractional count", yaml: "services:\n  count: 10.5\n", want: []string{":2:", "services.count", "10.5"}},
		{name: "empty file", yaml: "\n", want: []string{"is empty", "fix:"}},
		{name: "sim.sharedCores out of range", yaml: "services: {count: 10}\nmodes: [iptables]\nimplementation: [builtin, kube-proxy]\nengine: sim\nsim: {sharedCores: -1}\n", want: []string{"sim.sharedCores", "out of range", "fix:"}},
		{name: "kube-proxy phase not yet", yaml: "services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\ntopology: {nodes: 2}\nsweep: {services: [5, 10]}\n", want: []string{"sweep.services", "not yet with implementation kube-proxy on several nodes", "fix:"}},
		{name: "kube-proxy without kube-proxy mode", yaml: "services: {count: 10}\nmodes: [none, userspace]\nimplementation: [builtin, kube-proxy]\n", want: []string{"implementation", "no mode of modes runs with it"}},
		{name: "--kube-proxy without implementation", args: []string{"1k-services", "--kube-proxy", "/bin/true"}, want: []string{"--kube-proxy", "--implementation builtin,kube-proxy"}},
		{name: "kube-proxy owned field", yaml: "services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\nkubeProxy:\n  config:\n    clusterCIDR: 10.0.0.0/8\n", want: []string{":6:", "kubeProxy.config.clusterCIDR: is set by the testbed", "fix: remove it"}},
		{name: "kube-proxy config misspelt", yaml: "services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\nkubeProxy:\n  config:\n    iptables:\n      minSyncPerod: 1s\n", want: []string{":7:", "kubeProxy.config.iptables.minSyncPerod", `rename it to "minSyncPeriod"`}},
		{name: "kube-proxy config bad duration", yaml: "services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\nkubeProxy:\n  config:\n    iptables:\n      minSyncPeriod: banana\n", want: []string{":7:", "kubeProxy.config.iptables.minSyncPeriod", "want a duration", "fix:"}},
		{name: "not a kube-proxy", yaml: kp, args: []string{"--kube-proxy", "/bin/true"}, root: true, want: []string{"--kube-proxy: /bin/true is not kube-proxy", "`true --version` printed", "more lines, not \"Kubernetes vX.Y.Z\"", "fix:"}, lines: 1},
		{name: "kube-proxy --version fails", yaml: kp, args: []string{"--kube-proxy", "/bin/false"}, root: true, want: []string{"--kube-proxy: /bin/false is not kube-proxy", "failed (exit status 1)", "fix:"}},
		{name: "another Kubernetes program", yaml: kp, args: []string{"--kube-proxy", fakeProgram("v1.37.2", "kube-apiserver")}, root: true, want: []string{"is not kube-proxy: it reports v1.37.2, but its --help does not mention kube-proxy", "fix:"}},
		{name: "kube-proxy missing", yaml: kp + "kubeProxy:\n  binaries:\n  - /nonexistent-pb/kube-proxy\n", root: true, want: []string{":6:", "kubeProxy.binaries[0]: /nonexistent-pb/kube-proxy does not exist", "fix:"}},
		{name: "kube-proxy not executable", yaml: kp, args: []string{"--kube-proxy", notExecutable()}, root: true, want: []string{"--kube-proxy:", "is not executable (mode -rw-r--r--)", "fix: chmod +x"}},
		{name: "kube-proxy is a folder", yaml: kp, args: []string{"--kube-proxy", "/tmp"}, root: true, want: []string{"--kube-proxy: /tmp is a folder", "fix:"}},
		{name: "--kube-proxy empty", yaml: kp, args: []string{"--kube-proxy", ""}, want: []string{`--kube-proxy "": entry 1 is empty`, "fix:"}},
		{name: "--kube-proxy twice", yaml: kp, args: []string{"--kube-proxy", "/bin/true,/bin/true"}, want: []string{`"/bin/true" is given twice`, "fix:"}},
		{name: "--implementation unknown", yaml: kp, args: []string{"--implementation", "foo"}, want: []string{`--implementation "foo": unknown value "foo"`, "fix: --implementation builtin, kube-proxy or builtin,kube-proxy"}},
		{name: "kube-proxy binaries empty list", yaml: kp + "kubeProxy:\n  binaries: []\n", want: []string{":5:", "kubeProxy.binaries: is an empty list", "fix:"}},
		{name: "kube-proxy binaries listed twice", yaml: kp + "kubeProxy:\n  binaries: [/bin/true, /bin/true]\n", want: []string{":5:", "kubeProxy.binaries[1]", "listed twice", "fix:"}},
		{name: "two kube-proxies of one version", yaml: kp, args: []string{"--kube-proxy", fakeKubeProxy("v1.37.9") + "," + fakeKubeProxy("v1.37.9")}, root: true, want: []string{"--kube-proxy:", "both report v1.37.9", "fix:"}},
		{name: "kube-proxy only, userspace", yaml: "services: {count: 10}\nmodes: [userspace]\nimplementation: [kube-proxy]\n", want: []string{":3:", "implementation: lists kube-proxy, but no mode of modes runs with it", "fix:"}},
		{name: "kube-proxy only, none", yaml: "services: {count: 10}\nmodes: [none]\nimplementation: [kube-proxy]\n", want: []string{":3:", "no mode of modes runs with it", "fix:"}},
		{name: "kube-proxy only, mode narrowed out", yaml: "services: {count: 10}\nmodes: [iptables, nftables]\nimplementation: [kube-proxy]\nkubeProxy:\n  modes: [nftables]\n", want: []string{":2:", "modes[0]: mode iptables is not in kubeProxy.modes", "fix:"}},
		{name: "kubeProxy.modes not in modes", yaml: "services: {count: 10}\nmodes: [iptables, nftables]\nimplementation: [builtin, kube-proxy]\nkubeProxy:\n  modes: [ipvs]\n", want: []string{":5:", `kubeProxy.modes[0]: mode "ipvs" is not in modes`, "fix:"}, lines: 1},
		{name: "kubeProxy.verbosity too high", yaml: kp + "kubeProxy:\n  verbosity: 11\n", want: []string{":5:", "kubeProxy.verbosity: 11 is out of range", "fix: use 0..10"}},
		{name: "kubeProxy.verbosity negative", yaml: kp + "kubeProxy:\n  verbosity: -1\n", want: []string{":5:", "kubeProxy.verbosity: -1 is out of range"}},
		{name: "kube-proxy owned nested field", yaml: kp + "kubeProxy:\n  config:\n    conntrack:\n      tcpBeLiberal: true\n      maxPerCore: 0\n", want: []string{":8:", "kubeProxy.config.conntrack.maxPerCore: is set by the testbed", "fix:"}},
		{name: "kube-proxy config negative period", yaml: kp + "kubeProxy:\n  config:\n    iptables: {minSyncPeriod: -1s}\n", want: []string{":6:", "kubeProxy.config.iptables.minSyncPeriod: -1s is negative", "fix:"}},
		{name: "kube-proxy unknown feature gate", yaml: kp + "kubeProxy:\n  config:\n    featureGates:\n      NoSuchGate: true\n", root: true, kube: true, want: []string{":7:", "kubeProxy.config.featureGates.NoSuchGate: kube-proxy v", "refuses it in mode iptables: failed complete: unrecognized feature gate: NoSuchGate", "fix:"}, lines: 1},
		{name: "kube-proxy config unknown scheduler", yaml: "services: {count: 10}\nmodes: [ipvs]\nimplementation: [kube-proxy]\nkubeProxy:\n  config:\n    ipvs:\n      scheduler: fifo\n", want: []string{":7:", `kubeProxy.config.ipvs.scheduler: no IPVS scheduler "fifo"`, "fix:"}},
		{name: "alerts: bad expression", yaml: kp + "alerts: " + writeFile(t, "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up ==\n") + "\n", root: true,
			want: []string{":4:", "alerts: Prometheus refuses the rules (promtool check rules):", "s.yaml:5:11: group \"g\", rule 1, \"A\": could not parse expression: 1:6: parse error: unexpected end of input", "fix:"}, lines: 1},
		{name: "--alerts: PrometheusRule with an unknown field", yaml: kp, args: []string{"--alerts", writeFile(t, "kind: PrometheusRule\nspec:\n  groups:\n  - name: g\n    rules:\n    - alert: A\n      expr: up == 0\n      forr: 5m\n")}, root: true,
			want: []string{"--alerts: Prometheus refuses the rules", "s.yaml:8: yaml: unmarshal errors: field forr not found in type rulefmt.RuleNode", "fix:"}, lines: 1},
		{name: "--alerts: no such file", yaml: kp, args: []string{"--alerts", "/nonexistent-pb/rules.yaml"}, root: true, want: []string{"--alerts: /nonexistent-pb/rules.yaml: no such file", "fix:"}},
		{name: "--alerts: not a rule file", yaml: kp, args: []string{"--alerts", writeFile(t, "apiVersion: v1\nkind: ConfigMap\n")}, root: true, want: []string{"--alerts:", "s.yaml:2: kind \"ConfigMap\"", "fix:"}},
		{name: "alerts without a kube-proxy row", yaml: "services: {count: 10}\nalerts: seeds\n", want: []string{":2:", "alerts: the rules are evaluated over kube-proxy's metrics, and no row runs kube-proxy", "fix:"}},
		{name: "monitoring.timeScale 0", yaml: kp + "monitoring:\n  prometheus: true\n  timeScale: 0\n", want: []string{":6:", "monitoring.timeScale: 0: want 0.01 to 10", "fix:"}},
		{name: "soak shorter than two intervals", yaml: "services: {count: 10}\nmodes: [iptables]\nsoak:\n  duration: 15s\n  interval: 10s\n", want: []string{":4:", "soak.duration: 15s is shorter than two intervals of 10s", "fix:"}, lines: 1},
		{name: "soak interval 0", yaml: "services: {count: 10}\nmodes: [iptables]\nsoak:\n  interval: 0s\n", want: []string{":4:", "soak.interval: 0s is not positive", "fix:"}, lines: 1},
		{name: "soak rate out of range", yaml: "services: {count: 10}\nmodes: [iptables]\nsoak:\n  rate: 0\n  churn: 2000\n", want: []string{":4:", "soak.rate: 0 is not in (0, 5000]", ":5:", "soak.churn: 2000 is not in [0, 1000]", "fix:"}, lines: 2},
		{name: "an IPVS fault on iptables", yaml: "services: {count: 10}\nmodes: [iptables]\nfaults:\n  outOfBand:\n    iptables: [realServer]\n", want: []string{":5:", "faults.outOfBand.iptables[0]: realServer", "is a change of mode ipvs", "fix:"}, lines: 1},
		{name: "slice churn on a builtin row", yaml: "services: {count: 10}\nmodes: [iptables]\nfaults:\n  sliceChurn: {duration: 1m}\n", want: []string{":4:", "faults.sliceChurn: mode iptables runs a builtin row", "fix:"}, lines: 1},
		{name: "soak in the sim", yaml: "services: {count: 10}\nmodes: [iptables]\nengine: sim\nsoak: {duration: 1m}\n", want: []string{":4:", "soak: the sim engine does not model the soak phase", "fix:"}, lines: 1},
		{name: "--duration without a soak", args: []string{"1k-services", "--duration", "10m"}, want: []string{"--duration 10m0s: the scenario has no soak block", "fix:"}, lines: 1},
		{name: "--duration too short", yaml: "services: {count: 10}\nmodes: [iptables]\nsoak: {interval: 10s}\n", args: []string{"--duration", "5s"}, want: []string{"soak.duration: 5s is shorter than two intervals", "fix:"}, lines: 1},
		{name: "traffic.nodePorts without node ports", yaml: "services: {count: 10}\nmodes: [none, iptables]\ntraffic:\n  nodePorts: true\n", want: []string{":4:", "traffic.nodePorts: no service has node ports to dial", "fix: set services.type"}, lines: 1},
		{name: "traffic.nodePorts on builtin userspace", yaml: "services: {count: 10, type: NodePort}\nmodes: [none, iptables, userspace]\ntraffic: {nodePorts: true}\n", want: []string{":3:", "traffic.nodePorts: builtin userspace programs no node ports", "fix: remove userspace from modes"}, lines: 1},
		{name: "trafficDistribution on builtin userspace", yaml: topo + "modes: [iptables, userspace]\nservices: {count: 1, trafficDistribution: PreferSameZone}\n", want: []string{":3:", "services.trafficDistribution: builtin userspace does not narrow its endpoints by the EndpointSlice hints", "fix: remove userspace from modes"}, lines: 1},
		{name: "trafficDistribution without zones", yaml: "topology: {pods: isolated, nodes: 2}\nservices: {count: 1, trafficDistribution: PreferClose}\n", want: []string{":2:", "services.trafficDistribution: PreferClose is decided from zone hints", "fix: set topology.zones"}, lines: 1},
		{name: "trafficDistribution unknown", yaml: topo + "services: {count: 1, trafficDistribution: PreferZone}\n", want: []string{":2:", `services.trafficDistribution: unknown value "PreferZone"`, "fix: use one of PreferClose, PreferSameZone, PreferSameNode"}, lines: 1},
		{name: "topology.zones for fewer nodes", yaml: "topology: {pods: isolated, nodes: 3, zones: [zone-a, zone-b]}\nservices: {count: 1}\n", want: []string{":1:", "topology.zones: 2 zones given for 3 nodes", "fix: give one zone per node"}, lines: 1},
		{name: "network.ipFamilies unknown", yaml: "services: {count: 1}\nnetwork:\n  ipFamilies: [IPv4, IPv5]\n", want: []string{":3:", `network.ipFamilies[1]: unknown value "IPv5"`, "fix:"}, lines: 1},
		{name: "network.ipv6Prefix not a /96", yaml: "services: {count: 1, ipFamilyPolicy: RequireDualStack}\nnetwork:\n  ipFamilies: [IPv4, IPv6]\n  ipv6Prefix: 2001:2::/64\n", want: []string{":4:", "network.ipv6Prefix:", "/64", "fix: write a /96"}, lines: 1},
		{name: "RequireDualStack on one family", yaml: "services: {count: 1, ipFamilyPolicy: RequireDualStack}\n", want: []string{":1:", "services.ipFamilyPolicy: RequireDualStack needs a dual-stack cluster", "fix: set network.ipFamilies: [IPv4, IPv6]"}, lines: 1},
		{name: "dual-stack mode without IPv6", yaml: "services: {count: 1, ipFamilyPolicy: RequireDualStack}\nmodes: [none, userspace]\nnetwork: {ipFamilies: [IPv4, IPv6]}\n", want: []string{":2:", "modes: builtin userspace has no IPv6 rendering", "fix: remove userspace from modes"}, lines: 1},
		{name: "kube-proxy too old for nftables", yaml: "services: {count: 10}\nmodes: [nftables]\nimplementation: [builtin, kube-proxy]\n", args: []string{"--kube-proxy", fakeKubeProxy("v1.28.4")}, root: true, want: []string{"v1.28.4", "cannot run mode nftables", "v1.29", "fix:"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.root {
				testenv.RequireRoot(t)
			}
			env := c.env
			if c.kube {
				kb := testenv.RequireKube(t)
				env = append(env, "PROXYBENCH_KUBE_BIN="+filepath.Dir(kb.KubeProxy))
			}
			// Other tests build testbeds at the same time: look only for
			// this run's ID.
			runID := topology.NewRunID()
			args := c.args
			if c.yaml != "" {
				args = append([]string{writeFile(t, c.yaml)}, args...)
			}
			cmd := exec.Command(bin, append([]string{"run", "--quiet", "--run-id", runID}, args...)...)
			// An empty working directory: a result file (results/ by
			// default) would appear in it.
			cwd, err := os.MkdirTemp("", "pb-badinput-cwd")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(cwd)
			_ = os.Chmod(cwd, 0o755)
			cmd.Dir = cwd
			if c.asUID {
				if os.Geteuid() != 0 {
					// Already unprivileged: the plain call is the case.
				} else {
					cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
				}
			}
			start := time.Now()
			_, stderr, code := runCmd(t, cmd, env)
			if code != 2 {
				t.Fatalf("exit %d, want 2; stderr: %s", code, stderr)
			}
			t.Logf("exit 2 after %s", time.Since(start).Round(time.Millisecond))
			msg := strings.TrimSpace(stderr)
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
			if n := strings.Count(msg, "\n") + 1; c.lines != 0 && n != c.lines {
				t.Errorf("error of %d lines, want %d: %q", n, c.lines, msg)
			}
			// One line per problem, each short: no program output dumped.
			for _, l := range strings.Split(msg, "\n") {
				if len(l) > 600 {
					t.Errorf("error line of %d bytes: %q", len(l), l)
				}
			}
			assertNoNamespaces(t, runID)
			if ps := topology.ChildProcesses(runID); len(ps) > 0 {
				t.Errorf("bad input left processes of run %s: %v", runID, ps)
			}
			if left, _ := filepath.Glob(filepath.Join(os.TempDir(), "pb-"+runID+"-*")); len(left) > 0 {
				t.Errorf("bad input created %v", left)
			}
			if ents, _ := os.ReadDir(cwd); len(ents) > 0 {
				t.Errorf("bad input created %s in the working directory", ents[0].Name())
			}
			for _, p := range []string{"/proc/x.json", "/nonexistent-pb"} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("bad input created %s", p)
				}
			}
			if !c.asUID {
				// validate agrees with run.
				if _, verr, vcode := run(t, env, append([]string{"validate"}, args...)...); vcode != 2 || strings.TrimSpace(verr) != msg {
					t.Errorf("validate exit %d, %q; want 2, %q", vcode, verr, msg)
				}
			}
		})
	}
}

// TestKernelSeriesDebianLacks: --kernel uml:9.9 (a series Debian 12 has
// no linux-source package for) exits 2 in validate and run, naming the
// series that can be built and the --kernel that works instead of an
// apt-get install of a package that does not exist, and creates nothing.
// Root: validate makes the kernel choice as root only (TestBadInput's
// exact comparison of the two does not hold here: run may first note an
// earlier run's leftovers).
func TestKernelSeriesDebianLacks(t *testing.T) {
	testenv.RequireRoot(t)
	for _, verb := range []string{"validate", "run"} {
		runID := topology.NewRunID()
		args := []string{verb, "1k-services", "--kernel", "uml:9.9"}
		if verb == "run" {
			args = append(args, "--quiet", "--run-id", runID, "--output", filepath.Join(t.TempDir(), "r.json"))
		}
		_, stderr, code := run(t, nil, args...)
		if code != 2 {
			t.Errorf("%s: exit %d, want 2; stderr %q", verb, code, stderr)
		}
		for _, w := range []string{"kernel: kernel uml:9.9: Debian 12 has no linux-source-9.9", "(from linux-source-6.12, linux-source-6.1)", "fix: --kernel uml:6.12 or --kernel uml:6.1"} {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr %q does not say %q", verb, stderr, w)
			}
		}
		if strings.Contains(stderr, "install linux-source-9.9") {
			t.Errorf("%s: stderr %q suggests a package Debian does not have", verb, stderr)
		}
		assertNoNamespaces(t, runID)
	}
}

// TestKubeProxyNodesLimit: more nodes with kube-proxy than this machine's
// free memory holds at the scenario's size is refused by validate, exit
// 2, one line at the field naming the limit and the figures it used, and
// nothing is created (the limit moves with MemAvailable, so run's line is
// not compared with validate's word for word as in TestBadInput). The
// limit printed is the one scenarios.MaxKubeProxyNodes computes from
// MemAvailable, read just before and after validate (the two readings
// bracket it), and the fix names the same number. At 30000 services 64
// nodes never fit (30000 × 3 endpoints are past 64 × any memory here); at
// 10000 they fit only on a machine with over 25 GiB free, where validate
// must accept them.
func TestKubeProxyNodesLimit(t *testing.T) {
	holds := regexp.MustCompile(`it holds at most (\d+) \(MemAvailable ([0-9.]+) GiB`)
	fix := regexp.MustCompile(`fix: use topology.nodes: (\d+) or fewer`)
	for _, c := range []struct{ services, nodes int }{
		{30000, 64},
		{10000, 64},
	} {
		t.Run(fmt.Sprint(c.services), func(t *testing.T) {
			p := writeFile(t, fmt.Sprintf("services:\n  count: %d\n  endpoints: {count: 1}\nmodes: [iptables]\nimplementation: [kube-proxy]\ntopology: {nodes: %d}\n", c.services, c.nodes))
			before, err := topology.MemAvailable()
			if err != nil {
				t.Fatal(err)
			}
			_, stderr, code := run(t, nil, "validate", p)
			after, err := topology.MemAvailable()
			if err != nil {
				t.Fatal(err)
			}
			lo := scenarios.MaxKubeProxyNodes(c.services, min(before, after))
			hi := scenarios.MaxKubeProxyNodes(c.services, max(before, after))
			msg := strings.TrimSpace(stderr)
			if lo >= c.nodes {
				if code != 0 {
					t.Fatalf("limit %d..%d holds %d nodes, but validate exit %d: %q", lo, hi, c.nodes, code, msg)
				}
				return
			}
			if hi >= c.nodes {
				t.Skipf("MemAvailable moved across the limit during validate (%d..%d nodes)", lo, hi)
			}
			if code != 2 || strings.Count(msg, "\n") != 0 {
				t.Fatalf("exit %d, want 2 and one line: %q", code, msg)
			}
			for _, w := range []string{":6:", fmt.Sprintf("topology.nodes: %d nodes with kube-proxy at %d services do not fit this machine: it holds at most", c.nodes, c.services), "control plane's", "per kube-proxy"} {
				if !strings.Contains(msg, w) {
					t.Errorf("%q does not say %q", msg, w)
				}
			}
			m, f := holds.FindStringSubmatch(msg), fix.FindStringSubmatch(msg)
			if m == nil || f == nil {
				t.Fatalf("%q names no limit and fix", msg)
			}
			limit, _ := strconv.Atoi(m[1])
			fixed, _ := strconv.Atoi(f[1])
			// The limit is the one computed from the MemAvailable printed
			// (to 0.05 GiB), and that is what this machine had: the two
			// readings around validate, give or take 256 MiB of other
			// jobs' allocations between them and validate's own.
			gib, _ := strconv.ParseFloat(m[2], 64)
			printed := int64(gib * (1 << 30))
			if plo, phi := scenarios.MaxKubeProxyNodes(c.services, printed-(1<<30)/20), scenarios.MaxKubeProxyNodes(c.services, printed+(1<<30)/20); limit < plo || limit > phi {
				t.Errorf("limit %d, want scenarios.MaxKubeProxyNodes(%d, %.1f GiB) = %d..%d", limit, c.services, gib, plo, phi)
			}
			if slack := int64(256 << 20); printed < min(before, after)-slack || printed > max(before, after)+slack {
				t.Errorf("MemAvailable %.1f GiB printed, read %.2f..%.2f GiB around validate", gib, float64(min(before, after))/(1<<30), float64(max(before, after))/(1<<30))
			}
			if fixed != max(limit, 1) {
				t.Errorf("fix names %d nodes, the limit is %d", fixed, limit)
			}
		})
	}
}

// TestAlertsWarning: a rule reading a metric no row exports (the seeds'
// ServiceEndpointsDown: kube-state-metrics' kube_endpoint_address_available)
// is a warning naming it, at its line, before anything is built; the
// scenario is still valid.
func TestAlertsWarning(t *testing.T) {
	testenv.RequireTool(t, "promtool", "prometheus")
	kb := testenv.RequireKube(t)
	env := []string{"PROXYBENCH_KUBE_BIN=" + filepath.Dir(kb.KubeProxy)}
	sc := writeFile(t, "services: {count: 10}\nmodes: [iptables]\nimplementation: [builtin, kube-proxy]\n")
	out, stderr, code := run(t, env, "validate", sc, "--alerts", "scenarios/alerts/seeds.yaml", "--alerts-time-scale", "0.2")
	if code != 0 {
		t.Fatalf("validate exit %d: %s", code, stderr)
	}
	want := "warning: alerts: scenarios/alerts/seeds.yaml:36: ServiceEndpointsDown reads kube_endpoint_address_available, which no row exports"
	if !strings.Contains(stderr, want) || strings.Count(stderr, "warning:") != 1 {
		t.Errorf("stderr %q, want one warning: %q", stderr, want)
	}
	for _, w := range []string{"alerts: scenarios/alerts/seeds.yaml", "timeScale: 0.2", "interval: 5s"} {
		if !strings.Contains(out, w) {
			t.Errorf("validate's scenario lacks %q:\n%s", w, out)
		}
	}
}

// TestRunEndToEnd runs a small scenario for real (both modes) and checks
// the result, that the testbed is gone, and that the root namespace is
// unchanged.
func TestRunEndToEnd(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore")
	rootBefore := testenv.RootSnapshot(t)
	out := filepath.Join(t.TempDir(), "r.json")
	stdout, stderr, code := run(t, nil, "run", "1k-services", "--modes", "none,iptables", "--services", "300", "--seed", "5", "--output", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "lookup.latency") || !strings.Contains(stdout, "| iptables | legacy |") {
		t.Errorf("summary lacks tables:\n%s", stdout)
	}
	r, err := reports.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Scenario.Services.Count != 300 || r.Scenario.Seed != 5 || len(r.Modes) != 2 {
		t.Fatalf("overrides not applied or modes missing: %+v", r.Scenario)
	}
	ipt := r.Modes[1]
	// kube-proxy's layout: 11 nat rules per service with 3 endpoints, + 5 fixed.
	if ipt.Mode != "iptables" || len(ipt.SyncFull) != 3 || ipt.SyncFull[0].Objects < 300*11+5 {
		t.Errorf("iptables sync: %+v", ipt.SyncFull)
	}
	for _, m := range r.Modes {
		for _, p := range m.Lookup {
			if p.Errors != 0 || p.Misses != 0 || p.Latency.Count != 3*2000 || len(p.SamplesNs) != p.Latency.Count {
				t.Errorf("%s %s: errors %d misses %d n %d: %v", m.Mode, p.Position, p.Errors, p.Misses, p.Latency.Count, p.ErrorText)
			}
		}
		if m.Fairness.Services != 3 || m.Fairness.PValue < 1e-6 {
			t.Errorf("%s fairness: %+v", m.Mode, m.Fairness)
		}
	}
	b, _ := json.Marshal(r.Machine)
	if r.Machine.Kernel == "" || r.Modes[1].Info["backend"] != "legacy" {
		t.Errorf("machine/back end not recorded: %s %v", b, r.Modes[1].Info)
	}
	if left, _ := topology.Leftovers(); containsRun(left, r.RunID) {
		t.Errorf("run %s left namespaces: %v", r.RunID, left)
	}
	testenv.CompareRoot(t, rootBefore, testenv.RootSnapshot(t))
}

func containsRun(names []string, runID string) bool {
	for _, n := range names {
		if strings.HasPrefix(n, topology.Prefix+runID+"-") {
			return true
		}
	}
	return false
}

// startRun starts a long run and waits until its testbed exists; it
// returns the run ID (given with --run-id, so that other tests' testbeds
// do not confuse it).
func startRun(t *testing.T, extra ...string) (*exec.Cmd, string) {
	t.Helper()
	runID := topology.NewRunID()
	args := append([]string{"run", "10k-services", "--modes", "iptables", "--quiet", "--run-id", runID, "--output", filepath.Join(t.TempDir(), "r.json")}, extra...)
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for the testbed (no deadline: a loaded machine is only slower);
	// a run that ends first is a failure.
	for {
		now, _ := topology.Leftovers()
		if countRun(now, runID) >= 3 {
			time.Sleep(300 * time.Millisecond) // into the sync
			return cmd, runID
		}
		if exited(cmd.Process.Pid) {
			cmd.Wait()
			t.Fatalf("run ended before building its testbed: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exited reports whether process pid has ended (a zombie not yet waited
// for, or gone).
func exited(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
	return len(f) == 0 || f[0] == "Z" || f[0] == "X"
}

// awaitChild waits until process pid has a child (a program it runs in a
// namespace, e.g. iptables-restore) and returns its PID; 0 if pid ends
// first.
func awaitChild(pid int) int {
	for !exited(pid) {
		procs, _ := os.ReadDir("/proc")
		for _, p := range procs {
			st, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
			if err != nil || p.Name()[0] < '0' || p.Name()[0] > '9' {
				continue
			}
			f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
			if len(f) > 1 && f[1] == strconv.Itoa(pid) {
				c, _ := strconv.Atoi(p.Name())
				return c
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	return 0
}

func countRun(names []string, runID string) int {
	c := 0
	for _, n := range names {
		if strings.HasPrefix(n, topology.Prefix+runID+"-") {
			c++
		}
	}
	return c
}

// TestSignalTearsDown: SIGINT mid-run removes the testbed and exits 130.
func TestSignalTearsDown(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore")
	cmd, id := startRun(t)
	_ = cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("exit after SIGINT: %v, want 130", err)
	}
	if left, _ := topology.Leftovers(); countRun(left, id) != 0 {
		t.Errorf("SIGINT left namespaces of run %s: %v", id, left)
	}
}

// TestCleanupAfterKill: a run killed with SIGKILL while it runs a program
// in a namespace (iptables-restore of its sync) leaves its namespaces;
// proxybench cleanup right away removes them all (the program, orphaned,
// does not make the run look live).
func TestCleanupAfterKill(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore")
	cmd, id := startRun(t)
	if awaitChild(cmd.Process.Pid) == 0 {
		cmd.Wait()
		t.Fatalf("run %s ended before running a program in its namespaces", id)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if left, _ := topology.Leftovers(); countRun(left, id) < 3 {
		t.Fatalf("expected the killed run %s's namespaces, found %v", id, left)
	}
	// --run keeps this test from removing other packages' test namespaces;
	// without it cleanup removes every run's leftovers (same code path).
	stdout, stderr, code := run(t, nil, "cleanup", "--run", id)
	if code != 0 || strings.Count(stdout, "removed netns") < 3 {
		t.Fatalf("cleanup exit %d: %s %s\nprocesses in run %s's namespaces: %s", code, stdout, stderr, id, holders(id))
	}
	if left, _ := topology.Leftovers(); countRun(left, id) != 0 {
		t.Errorf("cleanup left %v", left)
	}
}

// TestKernelHostWithoutIPVS: asking for ipvs on a host kernel without
// IP_VS is bad input naming the mode, the missing feature and the fix;
// with `fallback: iptables` it runs as iptables, recorded, never silently.
func TestKernelHostWithoutIPVS(t *testing.T) {
	testenv.RequireKernel(t, "iptables-legacy-restore", "ipset")
	if _, err := os.Stat("/proc/net/ip_vs"); err == nil {
		t.Skip("this host kernel has IP_VS: nothing to fall back from")
	}
	body := "services: {count: 50}\nmodes: [none, ipvs]\nrepetitions: 1\ntraffic: {connections: 50, positions: [first]}\n"
	_, stderr, code := run(t, nil, "run", "--quiet", "--kernel", "host", writeFile(t, body))
	if code != 2 || !strings.Contains(stderr, "ipvs") || !strings.Contains(stderr, "IP_VS") || !strings.Contains(stderr, "--kernel uml") {
		t.Errorf("exit %d, stderr %q: want exit 2 naming ipvs, IP_VS and --kernel uml", code, stderr)
	}
	out := filepath.Join(t.TempDir(), "r.json")
	_, stderr, code = run(t, nil, "run", "--quiet", "--kernel", "host", "--output", out, writeFile(t, body+"fallback: iptables\n"))
	if code != 0 {
		t.Fatalf("fallback run: exit %d: %s", code, stderr)
	}
	r, err := reports.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range r.Modes {
		got = append(got, m.Mode+"<-"+m.FellBackFrom)
	}
	if strings.Join(got, " ") != "none<- iptables<-ipvs" || !strings.Contains(r.Machine.KernelWhy, "fallback") {
		t.Errorf("modes %v, kernelWhy %q: want none and iptables marked as fallen back from ipvs", got, r.Machine.KernelWhy)
	}
	// kube-proxy does not fall back (v1.26+ exits): a kube-proxy row for
	// ipvs under fallback is refused before anything is built.
	kbin := "PROXYBENCH_KUBE_BIN=" + filepath.Dir(testenv.RequireKube(t).KubeProxy)
	_, stderr, code = run(t, []string{kbin}, "run", "--quiet", "--kernel", "host", writeFile(t, body+"fallback: iptables\nimplementation: [builtin, kube-proxy]\n"))
	if code != 2 || !strings.Contains(stderr, "fallback") || !strings.Contains(stderr, "111806") {
		t.Errorf("kube-proxy row under fallback: exit %d, stderr %q: want exit 2 at fallback naming kubernetes PR#111806", code, stderr)
	}
}

// assertNoNamespaces fails when a namespace of runID exists.
func assertNoNamespaces(t *testing.T, runID string) {
	t.Helper()
	if all, _ := topology.Leftovers(); containsRun(all, runID) {
		t.Errorf("bad input created namespaces of run %s: %v", runID, all)
	}
}

// holders describes the processes that have a thread inside, or a file
// descriptor on, a namespace of run id (for failure messages).
func holders(id string) string {
	inos := map[string]string{}
	left, _ := topology.Leftovers()
	for _, n := range left {
		if st, err := os.Stat(filepath.Join("/run/netns", n)); err == nil && strings.HasPrefix(n, topology.Prefix+id+"-") {
			inos[fmt.Sprintf("net:[%d]", st.Sys().(*syscall.Stat_t).Ino)] = n
		}
	}
	var out []string
	links, _ := filepath.Glob("/proc/[0-9]*/task/*/ns/net")
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, l := range append(links, fds...) {
		target, _ := os.Readlink(l)
		if n, ok := inos[target]; ok {
			pid := strings.Split(l, "/")[2]
			comm, _ := os.ReadFile("/proc/" + pid + "/comm")
			st, _ := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(l)), "stat"))
			env, _ := os.ReadFile("/proc/" + pid + "/environ")
			out = append(out, fmt.Sprintf("%s (%s) %s -> %s; stat %s; %s set: %v", pid, bytes.TrimSpace(comm), l, n,
				bytes.TrimSpace(st), topology.ChildEnv, bytes.Contains(env, []byte(topology.ChildEnv+"="))))
		}
	}
	return strings.Join(out, "\n")
}

// TestCleanupBadRunID: an empty or malformed --run (an unset shell variable,
// a namespace name) is refused with exit 2 instead of cleaning up every run.
func TestCleanupBadRunID(t *testing.T) {
	for _, id := range []string{"", "zz", "3FA9C1", "pb-3fa9c1", "3fa9c1-node0"} {
		_, stderr, code := run(t, nil, "cleanup", "--run", id)
		if code != 2 || !strings.Contains(stderr, "not a run ID") || !strings.Contains(stderr, "fix:") {
			t.Errorf("cleanup --run %q: exit %d, stderr %q; want exit 2 naming the run ID and a fix", id, code, stderr)
		}
	}
}

// fakeKubeProxy writes a script that answers --version as kube-proxy
// version would (and --help naming kube-proxy), and returns its path.
// fakeProgram is fakeKubeProxy for another program: its --version says
// "Kubernetes <version>", its --help names prog.
func fakeProgram(version, prog string) string {
	p := fakeKubeProxy(version)
	script := "#!/bin/sh\ncase \"$1\" in --version) echo 'Kubernetes " + version + "';; *) echo 'Usage: " + prog + " [flags]';; esac\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		panic(err)
	}
	return p
}

// notExecutable is a file of mode 0644 named kube-proxy.
func notExecutable() string {
	p := fakeKubeProxy("v1.37.2")
	if err := os.Chmod(p, 0o644); err != nil {
		panic(err)
	}
	return p
}

func fakeKubeProxy(version string) string {
	dir, err := os.MkdirTemp(fakeDir, "kube-proxy")
	if err != nil {
		panic(err)
	}
	p := filepath.Join(dir, "kube-proxy")
	script := "#!/bin/sh\ncase \"$1\" in --version) echo 'Kubernetes " + version + "';; *) echo 'The Kubernetes network proxy runs on each node. Usage: kube-proxy [flags]';; esac\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		panic(err)
	}
	_ = os.Chmod(dir, 0o755)
	return p
}

// TestValidateAsRun: validate refuses what run refuses before anything is
// built: a phase the sim does not model, and (as root, where the kernel
// choice is made) a kube-proxy ipvs row under fallback on a host without
// IP_VS; exit 2 naming the field.
func TestValidateAsRun(t *testing.T) {
	cases := []struct {
		name, yaml string
		args       []string
		root       bool
		want       []string
	}{
		{"sim lifecycle", "engine: sim\nservices: {count: 10}\nlifecycle: {}\n", nil, false, []string{":3:", "lifecycle", "does not model", "engine: real"}},
		{"fallback kube-proxy", "services: {count: 10}\nmodes: [none, ipvs]\nfallback: iptables\nimplementation: [builtin, kube-proxy]\n", []string{"--kernel", "host"}, true, []string{"fallback", "111806"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var env []string
			if c.root {
				// The kernel choice probes the host in a throwaway namespace.
				testenv.RequireKernel(t, "iptables-legacy-restore")
				if _, err := os.Stat("/proc/net/ip_vs"); err == nil {
					t.Skip("this host kernel has IP_VS")
				}
				env = []string{"PROXYBENCH_KUBE_BIN=" + filepath.Dir(testenv.RequireKube(t).KubeProxy)}
			}
			for _, verb := range []string{"validate", "run"} {
				_, stderr, code := run(t, env, append([]string{verb, writeFile(t, c.yaml)}, c.args...)...)
				if code != 2 {
					t.Errorf("%s: exit %d, want 2; stderr %q", verb, code, stderr)
				}
				for _, w := range c.want {
					if !strings.Contains(stderr, w) {
						t.Errorf("%s: stderr %q does not mention %q", verb, stderr, w)
					}
				}
			}
		})
	}
}
