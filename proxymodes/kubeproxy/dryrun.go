//go:build linux

package kubeproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/proxybench/proxybench/scenarios"
)

// ConfigError is a configuration kube-proxy itself refused (DryRun).
// Field is the scenario field to blame: "kubeProxy.config", or
// "kubeProxy.config.featureGates.<Name>" when kube-proxy named a feature
// gate the scenario sets.
type ConfigError struct {
	Field string
	// Reason is kube-proxy's own error, one line of at most 300
	// characters ("failed complete: unrecognized feature gate: Foo").
	Reason string
}

func (e *ConfigError) Error() string { return e.Field + ": kube-proxy refuses it: " + e.Reason }

// kubeProxyErrRE finds klog's err="..." in kube-proxy's last words
// (`"command failed" err="failed complete: unrecognized feature gate: Foo"`).
var kubeProxyErrRE = regexp.MustCompile(`err="((?:[^"\\]|\\.)*)"`)

// featureGateRE finds the gate a feature-gate error names ("unrecognized
// feature gate: Foo", "cannot set feature gate NFTablesProxyMode to false").
var featureGateRE = regexp.MustCompile(`feature gate:? ([A-Za-z0-9]+)`)

// DryRun has kube-proxy binary bin check the configuration sc gives it in
// mode, as it would at start, without starting: `bin --config FILE
// --write-config-to FILE2` in a private temporary folder (removed after),
// FILE holding the KubeProxyConfiguration Config writes (the owned fields filled with the scenario's
// clusterCIDR and placeholders of the right form). kube-proxy then loads
// the file (strictly, else leniently), sets its feature gates and runs
// its whole validation, writes its resolved configuration to FILE2
// and exits (cmd/kube-proxy/app: Complete, Validate, then Run returns at
// once for --write-config-to); it opens no socket and touches no rule or
// sysctl. This catches what only the binary knows: its feature gates
// (an unknown gate, or a GA gate locked to its value) and its own
// validation. A refusal is a *ConfigError with kube-proxy's error (one
// line, at most 300 characters); another failure (timeout, no exit
// status) is a plain error.
func DryRun(ctx context.Context, bin, mode string, sc *scenarios.Scenario) error {
	pass, err := PassFromScenario(sc, mode)
	if err != nil {
		return &ConfigError{Field: "kubeProxy.config", Reason: err.Error()}
	}
	_, _, _, cluster := sc.Prefixes()
	_, _, node, _ := sc.Prefixes()
	cfg, _, err := Config(ConfigSpec{Mode: mode, Pass: pass, ClusterCIDR: cluster, NodeName: "node-0",
		NodeIP: node.Addr().Next(), Kubeconfig: "/nonexistent/proxybench-dry-run.kubeconfig"})
	if err != nil {
		return &ConfigError{Field: "kubeProxy.config", Reason: err.Error()}
	}
	// answerTimeout (60 s): at load 57 on this 2-core machine the dry run
	// was killed at the old 20 s.
	ctx, cancel := context.WithTimeout(ctx, answerTimeout)
	defer cancel()
	// A file of our own, not /dev/stdin: a user-mode-linux guest's /dev
	// has no stdin link (kube-proxy then failed with "open /dev/stdin: no
	// such file or directory"), and kube-proxy reads --config by path.
	dir, err := os.MkdirTemp("", "proxybench-kube-proxy-dry-run-")
	if err != nil {
		return fmt.Errorf("kube-proxy dry run: %w", err)
	}
	defer os.RemoveAll(dir)
	cfgPath, outPath := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "resolved.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return fmt.Errorf("kube-proxy dry run: %w", err)
	}
	cmd := exec.CommandContext(ctx, bin, "--config", cfgPath, "--write-config-to", outPath)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	var ee *exec.ExitError
	if err == nil {
		return nil
	}
	if !errors.As(err, &ee) || ctx.Err() != nil {
		return fmt.Errorf("kube-proxy %s --write-config-to (a dry run of its configuration): %v", bin, err)
	}
	msg := ""
	if m := kubeProxyErrRE.FindAllSubmatch(out.Bytes(), -1); len(m) > 0 {
		last := m[len(m)-1][1]
		if s, uerr := strconv.Unquote(`"` + string(last) + `"`); uerr == nil {
			msg = s
		} else {
			msg = string(last)
		}
	} else if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); lines[0] != "" {
		msg = lines[len(lines)-1]
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if r := []rune(msg); len(r) > 300 {
		msg = string(r[:300]) + "..."
	}
	field := "kubeProxy.config"
	if g := featureGateRE.FindStringSubmatch(msg); g != nil {
		if gates, ok := sc.KubeProxy.Config["featureGates"].(map[string]any); ok {
			if _, ok := gates[g[1]]; ok {
				field += ".featureGates." + g[1]
			}
		}
	}
	return &ConfigError{Field: field, Reason: msg}
}
