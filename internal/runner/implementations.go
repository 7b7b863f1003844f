//go:build linux

package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/scenarios"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/topology/controlplane"
	"github.com/proxybench/proxybench/workload"
)

// kubeBinary is one kube-proxy binary of a run, with its version.
type kubeBinary struct{ Path, Version string }

// KubeBinEnv names the environment variable that, when set, is the one
// folder kube-proxy, kube-apiserver and etcd are looked for in
// (KubeBinPlaces). The tests set it (testenv.RequireKube), and a run in
// a user-mode-linux guest gets the absolute folder the host found.
const KubeBinEnv = "PROXYBENCH_KUBE_BIN"

// KubeBinPlace is a folder where kube-proxy, kube-apiserver and etcd are
// looked for: Dir, absolute, and Why it is looked in ("beside
// proxybench", for the error).
type KubeBinPlace struct{ Dir, Why string }

// KubeBinPlaces are the folders where the default kube-proxy,
// kube-apiserver and etcd are looked for, in order: $PROXYBENCH_KUBE_BIN
// alone when it is set; else the folder of the running proxybench
// executable (os.Executable, symlinks resolved: a checkout's
// bin/proxybench finds the bin/ that `make kube` filled, run from any
// folder), then bin/ in the current folder (`go run ./cmd/proxybench`, or
// a copy of proxybench kept elsewhere and run from the checkout). The
// folders need not exist. FindKubeBin picks one.
func KubeBinPlaces() []KubeBinPlace {
	exe, err := os.Executable()
	if err != nil {
		exe = ""
	}
	cwd, err := os.Getwd()
	if err != nil {
		cwd = ""
	}
	return kubeBinPlaces(os.Getenv(KubeBinEnv), exe, cwd)
}

// kubeBinPlaces is KubeBinPlaces for environment value env, executable
// exe and current folder cwd ("" when unknown).
func kubeBinPlaces(env, exe, cwd string) []KubeBinPlace {
	if env != "" {
		if !filepath.IsAbs(env) && cwd != "" {
			env = filepath.Join(cwd, env)
		}
		return []KubeBinPlace{{filepath.Clean(env), "$" + KubeBinEnv}}
	}
	var out []KubeBinPlace
	if exe != "" {
		if r, err := filepath.EvalSymlinks(exe); err == nil {
			exe = r
		}
		out = append(out, KubeBinPlace{filepath.Dir(exe), "beside proxybench"})
	}
	if cwd != "" {
		if d := filepath.Join(cwd, "bin"); !slices.ContainsFunc(out, func(p KubeBinPlace) bool { return p.Dir == d }) {
			out = append(out, KubeBinPlace{d, "bin/ of the current folder"})
		}
	}
	return out
}

// FindKubeBin returns the first folder of KubeBinPlaces holding each of
// names ("kube-apiserver", "etcd", ...) as an executable file, absolute.
// When none does, the error says what each folder lacks, in one line:
// "/opt/pb (beside proxybench) lacks etcd, kube-apiserver; /tmp/bin (bin/
// of the current folder) does not exist".
func FindKubeBin(names ...string) (string, error) {
	return findKubeBin(KubeBinPlaces(), names)
}

func findKubeBin(places []KubeBinPlace, names []string) (string, error) {
	var why []string
	for _, p := range places {
		if st, err := os.Stat(p.Dir); err != nil || !st.IsDir() {
			why = append(why, fmt.Sprintf("%s (%s) does not exist", p.Dir, p.Why))
			continue
		}
		var lacks []string
		for _, n := range names {
			if !isExecutable(filepath.Join(p.Dir, n)) {
				lacks = append(lacks, n)
			}
		}
		if len(lacks) == 0 {
			return p.Dir, nil
		}
		why = append(why, fmt.Sprintf("%s (%s) lacks %s", p.Dir, p.Why, strings.Join(lacks, ", ")))
	}
	if len(why) == 0 {
		return "", errors.New("no folder to look in (neither the executable's folder nor the current folder is known)")
	}
	return "", errors.New(strings.Join(why, "; "))
}

// isExecutable says whether p (symlinks followed) is a file with an
// execute bit.
func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// kubeBinFix is the fix of a missing kube-proxy, kube-apiserver or etcd.
const kubeBinFix = "run make kube in the checkout (it builds kube-proxy, kube-apiserver and etcd into its bin/, where its bin/proxybench finds them from any folder), or set " + KubeBinEnv + " to the folder holding them"

// kubeBinNames are the programs sc's kube-proxy rows take from the
// folder FindKubeBin finds: the control plane's, and kube-proxy when
// kubeProxy.binaries names none.
func kubeBinNames(sc *scenarios.Scenario) []string {
	names := []string{"kube-apiserver", "etcd"}
	if len(sc.KubeProxy.Binaries) == 0 {
		names = append([]string{"kube-proxy"}, names...)
	}
	return names
}

// ResolveKubeProxy finds a kube-proxy binary named in kubeProxy.binaries
// or --kube-proxy. An absolute path is taken as is. A relative one is
// tried in the current folder first, then in each of KubeBinPlaces:
// relative to the folder holding that bin/ (the checkout, for
// "bin/kube-proxy-v1.36.3"), then its base name inside it. The first
// existing one is returned; when none exists path is p made absolute and
// looked lists every place tried, for the error.
func ResolveKubeProxy(p string) (path string, looked []string) {
	abs, err := filepath.Abs(p)
	if err != nil {
		abs = p
	}
	if filepath.IsAbs(p) {
		return p, nil
	}
	cands := []string{abs}
	for _, pl := range KubeBinPlaces() {
		cands = append(cands, filepath.Join(filepath.Dir(pl.Dir), p), filepath.Join(pl.Dir, filepath.Base(p)))
	}
	for _, c := range cands {
		if slices.Contains(looked, c) {
			continue
		}
		looked = append(looked, c)
		if _, err := os.Stat(c); err == nil {
			return c, nil
		}
	}
	return abs, looked
}

// Checked is what Preflight found for a scenario's kube-proxy rows:
// each kube-proxy binary with its version, checked in every mode it runs
// (its --version and --help, kube-proxy's dry run of the mode's
// configuration), and the control plane's binaries. Pass it to Run in
// Options.Checked so that a run checks them once.
type Checked struct {
	// KubeBin is the folder kube-apiserver and etcd (and the default
	// kube-proxy) were found in, absolute (FindKubeBin); "" when no row
	// runs kube-proxy.
	KubeBin     string
	kubeProxies []kubeBinary
	bin         controlplane.Binaries
	// alerts are the scenario's rules (monitoring, alerts:), checked by
	// promtool; Warnings what the CLI prints before the run (a metric
	// name a rule reads that no row exports).
	alerts   *alertRules
	Warnings []string
	// modes are the modes whose kube-proxy rows were checked; scenario is
	// the rest of the scenario checked (its JSON without the modes).
	modes    []string
	scenario []byte
}

// scenarioKey is sc as JSON without its modes: what a Checked was made
// for, modes apart (Execute runs a subset of them per kernel).
func scenarioKey(sc *scenarios.Scenario) []byte {
	s := *sc
	s.Modes = nil
	b, err := json.Marshal(&s)
	if err != nil {
		return nil
	}
	return b
}

// covers says whether c holds the check of sc's kube-proxy rows: made
// for the same scenario, with every mode sc runs with kube-proxy checked.
func (c *Checked) covers(sc *scenarios.Scenario) bool {
	if c == nil || c.scenario == nil || string(c.scenario) != string(scenarioKey(sc)) {
		return false
	}
	for _, m := range sc.Modes {
		if sc.KubeProxyRuns(m) && !slices.Contains(c.modes, m) {
			return false
		}
	}
	return true
}

// kubeProxyBinaries resolves sc's kube-proxy binaries (kubeProxy.binaries,
// default kube-proxy in the folder FindKubeBin finds) and checks, before
// anything is created, that each is kube-proxy (its --version and
// --help), that its version can run every mode sc gives it
// (kubeproxy.CheckModeVersion) and accepts the configuration of each mode
// (kubeproxy.DryRun), that the scenario sets no testbed-owned config
// field, and that the control plane's binaries exist (FindKubeBin).
// Every failure is an *InputError.
func kubeProxyBinaries(ctx context.Context, sc *scenarios.Scenario) (*Checked, error) {
	c := &Checked{modes: slices.Clone(sc.Modes), scenario: scenarioKey(sc)}
	if k := sc.ServiceTypesKubeScenario(); k != nil && !sc.UsesKubeProxy() {
		// The serviceTypes phase's kube-proxy cells (rows stay builtin).
		sc = k
	}
	if !sc.UsesKubeProxy() {
		return c, nil
	}
	for _, m := range sc.Modes {
		if sc.KubeProxyRuns(m) {
			if _, err := kubeproxy.PassFromScenario(sc, m); err != nil {
				return nil, &InputError{Field: "kubeProxy.config", Msg: err.Error()}
			}
		}
	}
	paths := sc.KubeProxy.Binaries
	field := "kubeProxy.binaries"
	if len(paths) == 0 {
		// The default kube-proxy comes from the control plane's folder.
		dir, err := FindKubeBin(kubeBinNames(sc)...)
		if err != nil {
			return nil, &InputError{Field: "implementation", Msg: "kube-proxy rows run kube-proxy (kubeProxy.binaries names none) with a control plane (kube-apiserver, etcd), and no folder looked in holds all three: " + err.Error(),
				Fix: kubeBinFix + ", or name a kube-proxy in kubeProxy.binaries (--kube-proxy)"}
		}
		paths = []string{filepath.Join(dir, "kube-proxy")}
		field = "kube-proxy"
	}
	for i, p := range paths {
		f := field
		if field == "kubeProxy.binaries" {
			f = fmt.Sprintf("%s[%d]", field, i)
		}
		abs, looked := ResolveKubeProxy(p)
		if len(looked) > 0 {
			return nil, &InputError{Field: f, Msg: fmt.Sprintf("%s does not exist (looked for %s)", p, strings.Join(looked, ", ")),
				Fix: "give the path of a kube-proxy binary, absolute or relative to this folder or to the checkout holding proxybench's bin/ (make kube builds bin/kube-proxy)"}
		}
		v, err := kubeproxy.Version(ctx, abs)
		if err != nil {
			return nil, &InputError{Field: f, Msg: err.Error()}
		}
		for _, m := range sc.Modes {
			if !sc.KubeProxyRuns(m) {
				continue
			}
			if err := kubeproxy.CheckModeVersion(m, v, sc.KubeProxy.Config); err != nil {
				return nil, &InputError{Field: f, Msg: fmt.Sprintf("%s (%s) cannot run mode %s: %v", p, v, m, err)}
			}
			// kube-proxy's own check of the configuration (feature
			// gates, its validation), without starting it.
			var ce *kubeproxy.ConfigError
			if err := kubeproxy.DryRun(ctx, abs, m, sc); errors.As(err, &ce) {
				return nil, &InputError{Field: ce.Field, Msg: fmt.Sprintf("kube-proxy %s (%s) refuses it in mode %s: %s", v, p, m, ce.Reason), Fix: "correct or remove that kubeProxy.config field for this kube-proxy version (its --help lists the feature gates it knows)"}
			} else if err != nil {
				return nil, &InputError{Field: f, Msg: err.Error(), Fix: "check that " + p + " is a kube-proxy binary that runs on this machine"}
			}
		}
		if j := slices.IndexFunc(c.kubeProxies, func(k kubeBinary) bool { return k.Version == v }); j >= 0 {
			return nil, &InputError{Field: f, Msg: fmt.Sprintf("%s and %s both report %s, so their rows would have one name", c.kubeProxies[j].Path, abs, v), Fix: "run binaries of different versions, or one of them"}
		}
		c.kubeProxies = append(c.kubeProxies, kubeBinary{Path: abs, Version: v})
	}
	dir, err := FindKubeBin(kubeBinNames(sc)...)
	if err != nil {
		return nil, &InputError{Field: "implementation", Msg: "kube-proxy needs a control plane, and no folder looked in holds kube-apiserver and etcd: " + err.Error(), Fix: kubeBinFix}
	}
	c.KubeBin = dir
	c.bin = controlplane.Binaries{Etcd: filepath.Join(dir, "etcd"), APIServer: filepath.Join(dir, "kube-apiserver")}
	return c, nil
}

// rows returns the rows mode m runs as in sc: builtin (m itself) and, for
// implementation kube-proxy, one kube-proxy variant per binary
// (kubeproxy.Variant), named "nftables (kube-proxy)", or with the version
// when there are several binaries. dataPlane is each variant's sync.full
// probe; dir the folder beside the result that keeps their logs; where
// where the run executes (kubeproxy.VariantSpec.Guest); nodes the
// testbed's nodes when there are several (kubeproxy.VariantSpec.Nodes:
// one kube-proxy per node, one control plane). With
// failure.syncErrors, each kube-proxy row gets its wrappers of
// kubeProxyWrapped, unarmed, in its folder's syncerrors/ (written here),
// first on its kube-proxy's PATH from its start: the churn phase arms
// them (apiApplier).
func rows(sc *scenarios.Scenario, m proxymodes.Mode, kbs []kubeBinary, bin controlplane.Binaries, dir string,
	dataPlane func(ctx context.Context, services []workload.Service) (time.Time, int, error), where Where, mon *kubeproxy.Monitor, nodes []*topology.Netns) ([]proxymodes.Mode, error) {
	var out []proxymodes.Mode
	for _, impl := range sc.Implementations(m.Name) {
		if impl == scenarios.ImplBuiltin {
			out = append(out, m)
			continue
		}
		for _, kb := range kbs {
			label := kubeproxy.RowLabel(m.Name, kb.Version, len(kbs) > 1)
			rd := filepath.Join(dir, rowDir(label))
			first := ""
			if sc.Failure.SyncErrors.Set() && sc.Churn.Rate > 0 {
				w, err := writeSyncErrorWrappers(filepath.Join(rd, "syncerrors"), kubeProxyWrapped, true)
				if err != nil {
					return nil, fmt.Errorf("failure.syncErrors: wrappers for %s: %w", label, err)
				}
				first = w.dir
			}
			out = append(out, kubeproxy.Variant(m, kubeproxy.VariantSpec{Binary: kb.Path, Version: kb.Version, Label: label,
				Dir: rd, Bin: bin, DataPlane: dataPlane, Guest: where == WhereGuest, Monitor: mon, PathFirst: first, Nodes: nodes}))
		}
	}
	return out, nil
}

// rowDir is a row's folder name: "nftables (kube-proxy v1.36.3)" →
// "nftables-kube-proxy-v1.36.3".
func rowDir(label string) string {
	r := strings.NewReplacer(" (", "-", ")", "", " ", "-")
	return r.Replace(label)
}

// probedTargets are the ServicePorts the data-plane probes of a
// kube-proxy sync.full wait for: 16 spread evenly over the render order,
// the first and the last included (all of them when there are fewer).
func probedTargets(services []workload.Service) []workload.Target {
	flat := workload.FlatTargets(services)
	const n = 16
	if len(flat) <= n {
		return flat
	}
	var out []workload.Target
	for i := 0; i < n; i++ {
		out = append(out, flat[i*(len(flat)-1)/(n-1)])
	}
	return out
}

// dataPlaneProbe returns a probe that waits until every probed service
// (probedTargets) answers from one of its ready endpoints, dialled from
// the client pods by 4 probe workers, each connection with a 100 ms
// timeout; it returns when the last of them first answered. Services
// without a ready endpoint are not probed. Afterwards it removes the
// untranslated conntrack entries its failed connections left in the
// nodes (env.forgetUntranslated), so the phases after it never meet them.
func dataPlaneProbe(e *env) func(ctx context.Context, services []workload.Service) (time.Time, int, error) {
	return func(ctx context.Context, services []workload.Service) (time.Time, int, error) {
		var targets []workload.Target
		for _, t := range probedTargets(services) {
			if len(services[t.Service].ReadyEndpoints()) > 0 {
				targets = append(targets, t)
			}
		}
		if len(targets) == 0 {
			return time.Now(), 0, nil
		}
		const workers = 4
		pool, err := e.probes(workers)
		if err != nil {
			return time.Time{}, 0, fmt.Errorf("data-plane probes: %w", err)
		}
		defer pool.Close()
		answered := make([]time.Time, len(targets))
		pool.Each(func(w int) {
			for {
				pending := false
				for i := w; i < len(targets); i += workers {
					if !answered[i].IsZero() {
						continue
					}
					if ctx.Err() != nil {
						return
					}
					pending = true
					t := targets[i]
					s := &services[t.Service]
					landed, _, err := e.dial(s.ClusterIP, s.Ports[t.Port].Port, 100*time.Millisecond)
					if err == nil && s.HasReadyEndpoint(landed.Addr()) {
						answered[i] = time.Now()
					} else if err != nil {
						time.Sleep(5 * time.Millisecond)
					}
				}
				if !pending {
					return
				}
			}
		})
		// The probes that failed while the node had no rules for their
		// service may have left untranslated conntrack entries there
		// (dropUntranslated): a later connection reusing one of their
		// 4-tuples would be refused or time out.
		if e.forgetUntranslated != nil {
			dsts := make([]netip.AddrPort, 0, len(targets))
			for _, t := range targets {
				s := &services[t.Service]
				dsts = append(dsts, netip.AddrPortFrom(s.ClusterIP, s.Ports[t.Port].Port))
			}
			if _, err := e.forgetUntranslated(dsts); err != nil {
				return time.Time{}, len(targets), fmt.Errorf("data-plane probes: remove the untranslated conntrack entries of failed probes: %w", err)
			}
		}
		if err := ctx.Err(); err != nil {
			return time.Time{}, len(targets), err
		}
		last := answered[0]
		for _, a := range answered {
			if a.After(last) {
				last = a
			}
		}
		return last, len(targets), nil
	}
}
