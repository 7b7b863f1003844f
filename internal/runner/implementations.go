//go:build linux

package runner

import (
	"context"
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
	"github.com/proxybench/proxybench/topology/controlplane"
	"github.com/proxybench/proxybench/workload"
)

// kubeBinary is one kube-proxy binary of a run, with its version.
type kubeBinary struct{ Path, Version string }

// KubeBinDir is where the kube-proxy, kube-apiserver and etcd binaries
// are looked for by default: $PROXYBENCH_KUBE_BIN when set (as the tests'
// testenv.RequireKube), else bin/ beside proxybench's own binary
// (bin/proxybench), else ./bin.
func KubeBinDir() string {
	if d := os.Getenv("PROXYBENCH_KUBE_BIN"); d != "" {
		return d
	}
	if exe, err := os.Executable(); err == nil {
		d := filepath.Dir(exe)
		if _, err := os.Stat(filepath.Join(d, "kube-proxy")); err == nil {
			return d
		}
	}
	return "bin"
}

// ResolveKubeProxy finds a kube-proxy binary named in kubeProxy.binaries
// or --kube-proxy. An absolute path is taken as is. A relative one is
// tried in the current folder first, then where the default
// bin/kube-proxy is found (KubeBinDir): relative to the folder holding
// that bin/ (the checkout, for "bin/kube-proxy-v1.36.3"), then its base
// name inside KubeBinDir. The first existing one is returned; when none
// exists path is p made absolute and looked lists every place tried, for
// the error.
func ResolveKubeProxy(p string) (path string, looked []string) {
	abs, err := filepath.Abs(p)
	if err != nil {
		abs = p
	}
	if filepath.IsAbs(p) {
		return p, nil
	}
	dir, _ := filepath.Abs(KubeBinDir())
	for _, c := range []string{abs, filepath.Join(filepath.Dir(dir), p), filepath.Join(dir, filepath.Base(p))} {
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

// kubeProxyBinaries resolves sc's kube-proxy binaries (kubeProxy.binaries,
// default bin/kube-proxy) and checks, before anything is created, that
// each is kube-proxy (its --version and --help), that its version can run
// every mode sc gives it (kubeproxy.CheckModeVersion) and accepts the
// configuration of each mode (kubeproxy.DryRun), that the scenario
// sets no testbed-owned config field, and that the control plane's
// binaries exist. Every failure is an *InputError.
func kubeProxyBinaries(ctx context.Context, sc *scenarios.Scenario) ([]kubeBinary, controlplane.Binaries, error) {
	dir := KubeBinDir()
	bin := controlplane.Binaries{Etcd: filepath.Join(dir, "etcd"), APIServer: filepath.Join(dir, "kube-apiserver")}
	if !sc.UsesKubeProxy() {
		return nil, bin, nil
	}
	paths := sc.KubeProxy.Binaries
	field := "kubeProxy.binaries"
	if len(paths) == 0 {
		paths = []string{filepath.Join(dir, "kube-proxy")}
		field = "kube-proxy"
	}
	for _, m := range sc.Modes {
		if sc.KubeProxyRuns(m) {
			if _, err := kubeproxy.PassFromScenario(sc, m); err != nil {
				return nil, bin, &InputError{Field: "kubeProxy.config", Msg: err.Error()}
			}
		}
	}
	var out []kubeBinary
	for i, p := range paths {
		f := field
		if field == "kubeProxy.binaries" {
			f = fmt.Sprintf("%s[%d]", field, i)
		}
		abs, looked := ResolveKubeProxy(p)
		if len(looked) > 0 {
			return nil, bin, &InputError{Field: f, Msg: fmt.Sprintf("%s does not exist (looked for %s)", p, strings.Join(looked, ", ")),
				Fix: "give the path of a kube-proxy binary, absolute or relative to this folder or to the checkout holding proxybench's bin/ (make kube builds bin/kube-proxy)"}
		}
		v, err := kubeproxy.Version(ctx, abs)
		if err != nil {
			return nil, bin, &InputError{Field: f, Msg: err.Error()}
		}
		for _, m := range sc.Modes {
			if !sc.KubeProxyRuns(m) {
				continue
			}
			if err := kubeproxy.CheckModeVersion(m, v, sc.KubeProxy.Config); err != nil {
				return nil, bin, &InputError{Field: f, Msg: fmt.Sprintf("%s (%s) cannot run mode %s: %v", p, v, m, err)}
			}
			// kube-proxy's own check of the configuration (feature
			// gates, its validation), without starting it.
			var ce *kubeproxy.ConfigError
			if err := kubeproxy.DryRun(ctx, abs, m, sc); errors.As(err, &ce) {
				return nil, bin, &InputError{Field: ce.Field, Msg: fmt.Sprintf("kube-proxy %s (%s) refuses it in mode %s: %s", v, p, m, ce.Reason), Fix: "correct or remove that kubeProxy.config field for this kube-proxy version (its --help lists the feature gates it knows)"}
			} else if err != nil {
				return nil, bin, &InputError{Field: f, Msg: err.Error(), Fix: "check that " + p + " is a kube-proxy binary that runs on this machine"}
			}
		}
		if j := slices.IndexFunc(out, func(k kubeBinary) bool { return k.Version == v }); j >= 0 {
			return nil, bin, &InputError{Field: f, Msg: fmt.Sprintf("%s and %s both report %s, so their rows would have one name", out[j].Path, abs, v), Fix: "run binaries of different versions, or one of them"}
		}
		out = append(out, kubeBinary{Path: abs, Version: v})
	}
	for _, b := range []string{bin.Etcd, bin.APIServer} {
		if st, err := os.Stat(b); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return nil, bin, &InputError{Field: "implementation", Msg: "kube-proxy needs a control plane, and " + b + " is missing or not executable", Fix: "run make kube (builds kube-proxy, kube-apiserver and etcd into bin/)"}
		}
	}
	return out, bin, nil
}

// rows returns the rows mode m runs as in sc: builtin (m itself) and, for
// implementation kube-proxy, one kube-proxy variant per binary
// (kubeproxy.Variant), named "nftables (kube-proxy)", or with the version
// when there are several binaries. dataPlane is each variant's sync.full
// probe; dir the folder beside the result that keeps their logs.
func rows(sc *scenarios.Scenario, m proxymodes.Mode, kbs []kubeBinary, bin controlplane.Binaries, dir string,
	dataPlane func(ctx context.Context, services []workload.Service) (time.Time, int, error)) []proxymodes.Mode {
	var out []proxymodes.Mode
	for _, impl := range sc.Implementations(m.Name) {
		if impl == scenarios.ImplBuiltin {
			out = append(out, m)
			continue
		}
		for _, kb := range kbs {
			label := kubeproxy.RowLabel(m.Name, kb.Version, len(kbs) > 1)
			out = append(out, kubeproxy.Variant(m, kubeproxy.VariantSpec{Binary: kb.Path, Version: kb.Version, Label: label,
				Dir: filepath.Join(dir, rowDir(label)), Bin: bin, DataPlane: dataPlane}))
		}
	}
	return out
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
